//! `warren demo`: a vhost full of REAL dead letters, so a newcomer sees every kind of failure
//! Warren explains within a minute of installing it.
//!
//! Part of the topology makes the broker dead-letter messages itself (a retry ladder through a
//! TTL wait queue, plain rejections, queue and per-message TTL expiry, max-length overflow, a
//! quorum queue's delivery limit, a dead-letter exchange set by policy); the rest imitates what
//! MassTransit, Spring and NServiceBus publish to their error queues, with the exact header names
//! they use. One message is hostile (terminal escapes, a bidi override, non-UTF-8 bytes, a binary
//! body) so the terminal-safe display is visible.
//!
//! Running it again gives the same result: the vhost is deleted and rebuilt — but only a vhost
//! that is named `warren-demo…` or carries the demo's marker — and [`build`] returns only when
//! every queue holds the number of messages it should.

use std::fmt;
use std::time::{Duration, Instant};

use jiff::{SignedDuration, Timestamp};
use lapin::options::{
    BasicGetOptions, BasicPublishOptions, BasicRejectOptions, ConfirmSelectOptions,
    ExchangeBindOptions, ExchangeDeclareOptions, QueueBindOptions, QueueDeclareOptions,
};
use lapin::types::{AMQPValue, FieldTable, LongString, ShortString};
use lapin::{Channel, Confirmation, Connection, ExchangeKind};
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};
use url::Url;

use crate::broker::amqp::{self, AmqpError, ConvertError, properties_to_amqp, soft_error_code};
use crate::broker::config::Target;
use crate::broker::management::{self, Management, ManagementError};
use crate::domain::fingerprint::fnv1a64;
use crate::domain::message::Properties;
use crate::domain::sanitize;
use crate::domain::value::{HeaderValue, Table};

/// The vhost `warren demo` builds when none is named.
pub const DEFAULT_VHOST: &str = "warren-demo";
/// The vhost description the demo writes; a vhost carrying it may be replaced by the next run.
pub const VHOST_MARKER: &str = "created by warren demo";
/// The vhost tag the demo writes, for the same purpose.
pub const VHOST_TAG: &str = "warren-demo";
/// How long the broker gets to finish dead-lettering before [`build`] gives up.
pub const SETTLE_TIMEOUT: Duration = Duration::from_secs(30);
/// TTL of the retry ladder's wait queue: short, so the demo is built in a few seconds.
pub const RETRY_WAIT_TTL_MS: i32 = 200;
/// Attempts the ladder's consumer makes before the last rejection parks the message.
pub const LADDER_ATTEMPTS: usize = 3;

const ORDERS: usize = 5;
const PAYMENTS: usize = 4;
const NOTIFICATIONS: usize = 3;
const TELEMETRY: usize = 12;
const TELEMETRY_MAX_LENGTH: usize = 5;
const INVOICES: usize = 3;
const INVOICE_DELIVERY_LIMIT: i64 = 2;
const INVENTORY: usize = 3;
const NOTIFICATION_TTL_MS: i32 = 250;
const PER_MESSAGE_TTL_MS: &str = "60";

/// What a queue is for in the demo.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum QueueRole {
    /// Holds dead letters: what the demo is about.
    DeadLetter,
    /// A work queue (or a retry queue) that feeds one.
    Work,
}

/// One queue the demo built and how many messages it holds once the demo has settled.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DemoQueue {
    pub name: String,
    pub role: QueueRole,
    pub expected: u64,
    /// How its messages got there, in a few words.
    pub story: String,
}

/// What [`build`] made.
#[derive(Clone, Debug, PartialEq)]
pub struct DemoReport {
    pub vhost: String,
    pub broker_version: String,
    /// True when a previous demo vhost of the same name was deleted first.
    pub replaced_previous: bool,
    /// Dead-letter queues first, then the work queues feeding them.
    pub queues: Vec<DemoQueue>,
    pub elapsed: Duration,
}

impl DemoReport {
    pub fn dead_letter_queues(&self) -> impl Iterator<Item = &DemoQueue> {
        self.queues
            .iter()
            .filter(|q| q.role == QueueRole::DeadLetter)
    }

    /// The expected depth of one queue, if the demo built it.
    pub fn expected(&self, queue: &str) -> Option<u64> {
        self.queues
            .iter()
            .find(|q| q.name == queue)
            .map(|q| q.expected)
    }

    pub fn total_dead_letters(&self) -> u64 {
        self.dead_letter_queues().map(|q| q.expected).sum()
    }
}

impl fmt::Display for DemoReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let vhost = sanitize::one_line(&self.vhost, 80);
        writeln!(
            f,
            "Built vhost '{vhost}' on RabbitMQ {}{} in {:.1} s: {} dead letters in {} queues.",
            sanitize::one_line(&self.broker_version, 40),
            if self.replaced_previous {
                " (replacing the previous demo)"
            } else {
                ""
            },
            self.elapsed.as_secs_f64(),
            self.total_dead_letters(),
            self.dead_letter_queues().count()
        )?;
        let width = self
            .dead_letter_queues()
            .map(|q| q.name.chars().count())
            .max()
            .unwrap_or(0);
        for q in self.dead_letter_queues() {
            writeln!(
                f,
                "  {:<width$}  {:>3}  {}",
                q.name,
                q.expected,
                q.story,
                width = width
            )?;
        }
        let vhost_arg = if vhost
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c))
        {
            vhost
        } else {
            format!("'{}'", vhost.replace('\'', r"'\''"))
        };
        write!(
            f,
            "Look at them with: warren --vhost {vhost_arg}   (run `warren demo` again to start over)"
        )
    }
}

/// Why the demo could not be built.
#[derive(Debug, thiserror::Error)]
pub enum DemoError {
    #[error(
        "vhost '{vhost}' already exists and was not made by `warren demo`, so Warren will not delete it. \
         Pass another name with --vhost (the default is {DEFAULT_VHOST}); Warren only replaces vhosts named \
         {DEFAULT_VHOST}… or described as \"{VHOST_MARKER}\""
    )]
    NotADemoVhost { vhost: String },
    #[error("the vhost name is empty: pass a name with --vhost, e.g. {DEFAULT_VHOST}")]
    EmptyVhost,
    #[error(
        "context '{context}' is read-only, and `warren demo` creates a vhost and publishes to it: \
         use a context that is not read-only, or drop --read-only"
    )]
    ReadOnly { context: String },
    #[error(transparent)]
    Management(#[from] ManagementError),
    #[error(
        "RabbitMQ at {url} refused user '{user}' to {what}: `warren demo` creates and deletes its own vhost, \
         which needs a user with the administrator tag"
    )]
    NotAdministrator {
        url: String,
        user: String,
        what: String,
    },
    #[error("RabbitMQ at {url} answered {status} when asked to {what}: {reason}")]
    Http {
        url: String,
        status: u16,
        what: String,
        reason: String,
    },
    #[error("could not reach the management API at {url} to {what}: {reason}")]
    Unreachable {
        url: String,
        what: String,
        reason: String,
    },
    #[error("cannot set up the management client: {0}")]
    Setup(String),
    #[error(transparent)]
    Connect(#[from] AmqpError),
    #[error("RabbitMQ refused to {what}: {reason}")]
    Broker { what: String, reason: String },
    #[error("a demo message cannot be sent: {0}")]
    Convert(#[from] ConvertError),
    #[error(
        "the broker had not finished dead-lettering after {} s: {}. Is the broker overloaded? Run `warren demo` again",
        .waited.as_secs(), describe_pending(.pending)
    )]
    NotSettled {
        waited: Duration,
        /// (queue, messages now, messages expected)
        pending: Vec<(String, u64, u64)>,
    },
}

fn describe_pending(pending: &[(String, u64, u64)]) -> String {
    pending
        .iter()
        .map(|(q, have, want)| format!("{q} holds {have} of {want}"))
        .collect::<Vec<_>>()
        .join(", ")
}

fn broker_err(what: impl Into<String>, e: &lapin::Error) -> DemoError {
    let reason = match soft_error_code(e) {
        Some((code, text)) => format!("{} ({code})", sanitize::one_line(&text, 300)),
        None => e.to_string(),
    };
    DemoError::Broker {
        what: what.into(),
        reason,
    }
}

/// Whether an existing vhost may be replaced: never `/`; otherwise when it is named
/// `warren-demo` or `warren-demo-…`, or its description or tags carry the demo's marker.
/// `info` is the management API's `GET /api/vhosts/{name}` answer.
pub fn is_demo_vhost(name: &str, info: &Value) -> bool {
    if name == "/" {
        return false;
    }
    if name == DEFAULT_VHOST || name.starts_with(&format!("{DEFAULT_VHOST}-")) {
        return true;
    }
    let described = |v: &Value| v.get("description").and_then(Value::as_str) == Some(VHOST_MARKER);
    let tagged = |v: &Value| match v.get("tags") {
        Some(Value::Array(tags)) => tags.iter().any(|t| t.as_str() == Some(VHOST_TAG)),
        Some(Value::String(tags)) => tags.split(',').any(|t| t.trim() == VHOST_TAG),
        _ => false,
    };
    let metadata = info.get("metadata").unwrap_or(&Value::Null);
    described(info) || described(metadata) || tagged(info) || tagged(metadata)
}

/// Builds (or rebuilds) the demo in `vhost` on the target's broker and returns once every queue
/// holds what the report says. The target's own vhost is ignored.
pub async fn build(target: &Target, vhost: &str) -> Result<DemoReport, DemoError> {
    let started = Instant::now();
    if target.read_only {
        return Err(DemoError::ReadOnly {
            context: target.context.clone(),
        });
    }
    if vhost.is_empty() {
        return Err(DemoError::EmptyVhost);
    }
    let mgmt = Management::new(target)?;
    let overview = mgmt.overview().await?;
    let admin = Admin::new(target, mgmt.active_url().clone())?;

    let replaced_previous = match mgmt
        .get_json(
            &["vhosts", vhost],
            &[],
            &format!("describe vhost '{vhost}'"),
        )
        .await
    {
        Ok(info) => {
            if !is_demo_vhost(vhost, &info) {
                return Err(DemoError::NotADemoVhost {
                    vhost: sanitize::one_line(vhost, 120),
                });
            }
            admin
                .send(
                    Method::DELETE,
                    &["vhosts", vhost],
                    None,
                    &format!("delete the previous demo vhost '{vhost}'"),
                )
                .await?;
            true
        }
        Err(ManagementError::NotFound { .. }) => false,
        Err(e) => return Err(e.into()),
    };
    admin
        .send(
            Method::PUT,
            &["vhosts", vhost],
            Some(json!({"description": VHOST_MARKER, "tags": VHOST_TAG})),
            &format!("create vhost '{vhost}'"),
        )
        .await?;
    let user = target.credentials.username.as_str();
    admin
        .send(
            Method::PUT,
            &["permissions", vhost, user],
            Some(json!({"configure": ".*", "write": ".*", "read": ".*"})),
            &format!("give user '{user}' permissions on vhost '{vhost}'"),
        )
        .await?;
    // Declared before the queue it names, so the queue starts life with its dead-letter exchange
    // (a policy added later reaches the queue asynchronously).
    admin
        .send(
            Method::PUT,
            &["policies", vhost, "inventory-dead-letters"],
            Some(json!({
                "pattern": "^inventory$",
                "apply-to": "queues",
                "definition": {"dead-letter-exchange": "inventory.dlx"},
                "priority": 0
            })),
            "add the policy that gives queue 'inventory' its dead-letter exchange",
        )
        .await?;

    let conn = connect(target, vhost).await?;
    let result = populate(&conn).await;
    let _ = conn.close(200, "warren demo built".into()).await;
    let queues = result?;
    Ok(DemoReport {
        vhost: vhost.to_string(),
        broker_version: overview.rabbitmq_version,
        replaced_previous,
        queues,
        elapsed: started.elapsed(),
    })
}

/// Connects to the new vhost; a freshly created vhost can take a moment to accept connections.
async fn connect(target: &Target, vhost: &str) -> Result<Connection, DemoError> {
    let urls: Vec<String> = target.amqp_urls.iter().map(Url::to_string).collect();
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        match amqp::connect(
            &urls,
            vhost,
            &target.credentials.username,
            target.credentials.password.expose(),
            target.ca_file.as_deref(),
        )
        .await
        {
            Ok(conn) => return Ok(conn),
            Err(e) if Instant::now() >= deadline => return Err(e.into()),
            Err(_) => tokio::time::sleep(Duration::from_millis(200)).await,
        }
    }
}

// ---------------------------------------------------------------------------------------------
// The management calls Management does not offer (PUT and DELETE), kept to what the demo needs.

struct Admin {
    client: reqwest::Client,
    base: Url,
    user: String,
    password: String,
}

impl Admin {
    fn new(target: &Target, base: Url) -> Result<Admin, DemoError> {
        let mut builder = reqwest::Client::builder()
            .connect_timeout(management::CONNECT_TIMEOUT)
            .timeout(management::REQUEST_TIMEOUT)
            .user_agent(concat!("warren/", env!("CARGO_PKG_VERSION")));
        if let Some(path) = &target.ca_file {
            let pem = std::fs::read(path).map_err(|e| {
                DemoError::Setup(format!("cannot read ca_file {}: {e}", path.display()))
            })?;
            let certs = reqwest::Certificate::from_pem_bundle(&pem).map_err(|e| {
                DemoError::Setup(format!(
                    "ca_file {} holds no usable PEM certificate: {e}",
                    path.display()
                ))
            })?;
            builder = builder.tls_certs_merge(certs);
        }
        let client = builder
            .build()
            .map_err(|e| DemoError::Setup(e.to_string()))?;
        Ok(Admin {
            client,
            base,
            user: target.credentials.username.clone(),
            password: target.credentials.password.expose().to_string(),
        })
    }

    async fn send(
        &self,
        method: Method,
        segments: &[&str],
        body: Option<Value>,
        what: &str,
    ) -> Result<(), DemoError> {
        // Every segment fully percent-encoded, the same way as every other management call.
        let url = crate::broker::management::api_url(&self.base, segments);
        let shown = self.base.as_str().trim_end_matches('/').to_string();
        let mut req = self
            .client
            .request(method, url)
            .basic_auth(&self.user, Some(&self.password));
        if let Some(b) = body {
            req = req.json(&b);
        }
        let resp = req.send().await.map_err(|e| DemoError::Unreachable {
            url: shown.clone(),
            what: what.to_string(),
            reason: e.to_string(),
        })?;
        let status = resp.status();
        if status.is_success() {
            return Ok(());
        }
        let text = resp.text().await.unwrap_or_default();
        let v: Value = serde_json::from_str(&text).unwrap_or(Value::Null);
        let reason = v
            .get("reason")
            .or_else(|| v.get("error"))
            .and_then(Value::as_str)
            .unwrap_or(&text);
        let reason = sanitize::one_line(reason, 300);
        if status == StatusCode::UNAUTHORIZED || status == StatusCode::FORBIDDEN {
            return Err(DemoError::NotAdministrator {
                url: shown,
                user: self.user.clone(),
                what: what.to_string(),
            });
        }
        Err(DemoError::Http {
            url: shown,
            status: status.as_u16(),
            what: what.to_string(),
            reason,
        })
    }
}

// ---------------------------------------------------------------------------------------------
// AMQP helpers

fn name(s: &str) -> ShortString {
    // Every name passed here is one of the demo's own constants, far below 255 bytes; `from`
    // would panic on a longer one.
    ShortString::try_new(s).unwrap_or_default()
}

fn text(s: &str) -> AMQPValue {
    AMQPValue::LongString(LongString::from(s))
}

fn args(pairs: &[(&str, AMQPValue)]) -> FieldTable {
    let mut t = FieldTable::default();
    for (k, v) in pairs {
        t.insert(name(k), v.clone());
    }
    t
}

async fn queue(
    ch: &Channel,
    queue: &str,
    quorum: bool,
    extra: &[(&str, AMQPValue)],
) -> Result<(), DemoError> {
    let mut a = args(extra);
    a.insert(
        name("x-queue-type"),
        text(if quorum { "quorum" } else { "classic" }),
    );
    ch.queue_declare(
        name(queue),
        QueueDeclareOptions {
            durable: true,
            ..QueueDeclareOptions::default()
        },
        a,
    )
    .await
    .map_err(|e| broker_err(format!("declare queue '{queue}'"), &e))?;
    Ok(())
}

async fn exchange(ch: &Channel, exchange: &str, kind: ExchangeKind) -> Result<(), DemoError> {
    ch.exchange_declare(
        name(exchange),
        kind,
        ExchangeDeclareOptions {
            durable: true,
            ..ExchangeDeclareOptions::default()
        },
        FieldTable::default(),
    )
    .await
    .map_err(|e| broker_err(format!("declare exchange '{exchange}'"), &e))
}

async fn bind(ch: &Channel, queue: &str, exchange: &str, key: &str) -> Result<(), DemoError> {
    ch.queue_bind(
        name(queue),
        name(exchange),
        name(key),
        QueueBindOptions::default(),
        FieldTable::default(),
    )
    .await
    .map_err(|e| broker_err(format!("bind queue '{queue}' to exchange '{exchange}'"), &e))
}

async fn unbind(ch: &Channel, queue: &str, exchange: &str, key: &str) -> Result<(), DemoError> {
    ch.queue_unbind(
        name(queue),
        name(exchange),
        name(key),
        FieldTable::default(),
    )
    .await
    .map_err(|e| {
        broker_err(
            format!("unbind queue '{queue}' from exchange '{exchange}'"),
            &e,
        )
    })
}

/// Publishes with `mandatory` and waits for the confirm; an unroutable message is an error.
async fn publish(
    ch: &Channel,
    exchange: &str,
    key: &str,
    props: &Properties,
    headers: &Table,
    body: &[u8],
) -> Result<(), DemoError> {
    let what = || format!("accept a message for exchange '{exchange}', key '{key}'");
    let confirm = ch
        .basic_publish(
            name(exchange),
            name(key),
            BasicPublishOptions {
                mandatory: true,
                ..BasicPublishOptions::default()
            },
            body,
            properties_to_amqp(props, headers)?,
        )
        .await
        .map_err(|e| broker_err(what(), &e))?
        .await
        .map_err(|e| broker_err(what(), &e))?;
    match confirm {
        Confirmation::Ack(None) => Ok(()),
        Confirmation::Ack(Some(ret)) => Err(DemoError::Broker {
            what: what(),
            reason: format!("returned it as unroutable ({})", ret.reply_code),
        }),
        Confirmation::Nack(_) => Err(DemoError::Broker {
            what: what(),
            reason: "nacked the publish".to_string(),
        }),
        Confirmation::NotRequested => Err(DemoError::Broker {
            what: what(),
            reason: "sent no publisher confirm".to_string(),
        }),
    }
}

/// Ready messages in a queue (passive declare: no management statistics lag).
async fn depth(ch: &Channel, queue: &str) -> Result<u64, DemoError> {
    let q = ch
        .queue_declare(
            name(queue),
            QueueDeclareOptions {
                passive: true,
                ..QueueDeclareOptions::default()
            },
            FieldTable::default(),
        )
        .await
        .map_err(|e| broker_err(format!("report the depth of queue '{queue}'"), &e))?;
    Ok(u64::from(q.message_count()))
}

/// Waits until every queue holds exactly its expected number of messages.
async fn settle(
    ch: &Channel,
    expected: &[(&str, u64)],
    timeout: Duration,
) -> Result<(), DemoError> {
    let start = Instant::now();
    loop {
        let mut pending = Vec::new();
        for (q, want) in expected {
            let have = depth(ch, q).await?;
            if have != *want {
                pending.push((q.to_string(), have, *want));
            }
        }
        if pending.is_empty() {
            return Ok(());
        }
        if start.elapsed() >= timeout {
            return Err(DemoError::NotSettled {
                waited: timeout,
                pending,
            });
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
}

/// Takes `n` messages with `basic.get`, holding them all before answering, so none comes back
/// through a TTL queue and is taken twice in the same round.
async fn take(
    ch: &Channel,
    queue: &str,
    n: usize,
) -> Result<Vec<lapin::message::Delivery>, DemoError> {
    let mut out = Vec::with_capacity(n);
    let deadline = Instant::now() + SETTLE_TIMEOUT;
    while out.len() < n {
        let got = ch
            .basic_get(name(queue), BasicGetOptions { no_ack: false })
            .await
            .map_err(|e| broker_err(format!("get a message from '{queue}'"), &e))?;
        match got {
            Some(m) => out.push(m.delivery),
            None if Instant::now() >= deadline => {
                return Err(DemoError::NotSettled {
                    waited: SETTLE_TIMEOUT,
                    pending: vec![(queue.to_string(), out.len() as u64, n as u64)],
                });
            }
            None => tokio::time::sleep(Duration::from_millis(10)).await,
        }
    }
    Ok(out)
}

async fn reject_all(
    deliveries: Vec<lapin::message::Delivery>,
    requeue: bool,
    queue: &str,
) -> Result<(), DemoError> {
    for d in deliveries {
        d.reject(BasicRejectOptions { requeue })
            .await
            .map_err(|e| broker_err(format!("reject a message from '{queue}'"), &e))?;
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// Message material

/// A GUID that is the same on every run, so two demos look alike.
fn guid(seed: &str) -> String {
    let a = fnv1a64(seed.as_bytes());
    let b = fnv1a64(format!("{seed}#2").as_bytes());
    format!(
        "{:08x}-{:04x}-4{:03x}-a{:03x}-{:012x}",
        a >> 32,
        (a >> 16) & 0xffff,
        a & 0x0fff,
        (b >> 48) & 0x0fff,
        b & 0xffff_ffff_ffff
    )
}

fn s(v: &str) -> HeaderValue {
    HeaderValue::string(v)
}

fn json_body(v: &Value) -> Vec<u8> {
    serde_json::to_vec_pretty(v).unwrap_or_default()
}

fn json_props(message_id: &str, kind: Option<&str>, app: &str) -> Properties {
    Properties {
        content_type: Some("application/json".into()),
        delivery_mode: Some(2),
        message_id: Some(message_id.into()),
        kind: kind.map(str::to_string),
        app_id: Some(app.into()),
        timestamp: u64::try_from(Timestamp::now().as_second()).ok(),
        ..Properties::default()
    }
}

fn ago(minutes: i64) -> Timestamp {
    Timestamp::now()
        .checked_sub(SignedDuration::from_mins(minutes))
        .unwrap_or_else(|_| Timestamp::now())
}

/// NServiceBus's wire format for times: `yyyy-MM-dd HH:mm:ss:ffffff Z`.
fn nservicebus_time(t: Timestamp) -> String {
    let dt = jiff::tz::Offset::UTC.to_datetime(t);
    format!(
        "{:04}-{:02}-{:02} {:02}:{:02}:{:02}:{:06} Z",
        dt.year(),
        dt.month(),
        dt.day(),
        dt.hour(),
        dt.minute(),
        dt.second(),
        dt.subsec_nanosecond() / 1000
    )
}

// ---------------------------------------------------------------------------------------------
// The topology and the failures

/// Declares everything, makes the failures happen, and waits until they have all landed.
async fn populate(conn: &Connection) -> Result<Vec<DemoQueue>, DemoError> {
    let ch = conn
        .create_channel()
        .await
        .map_err(|e| broker_err("open a channel", &e))?;
    ch.confirm_select(ConfirmSelectOptions::default())
        .await
        .map_err(|e| broker_err("turn on publisher confirms", &e))?;

    declare_topology(&ch).await?;
    // Expiries first: they run on the broker's clock while the rest is built.
    expire_notifications(&ch).await?;
    overflow_telemetry(&ch).await?;
    masstransit(&ch).await?;
    spring(&ch).await?;
    nservicebus(&ch).await?;
    retry_ladder(&ch).await?;
    reject_payments(&ch).await?;
    reject_inventory(&ch).await?;
    exhaust_invoices(&ch).await?;

    let queues = expected_queues();
    let expected: Vec<(&str, u64)> = queues
        .iter()
        .map(|q| (q.name.as_str(), q.expected))
        .collect();
    settle(&ch, &expected, SETTLE_TIMEOUT).await?;
    let _ = ch.close(200, "demo built".into()).await;
    Ok(queues)
}

/// Every queue the demo builds, what it holds once settled and how that came about.
fn expected_queues() -> Vec<DemoQueue> {
    let dlq = |n: &str, count: usize, story: &str| DemoQueue {
        name: n.to_string(),
        role: QueueRole::DeadLetter,
        expected: count as u64,
        story: story.to_string(),
    };
    let work = |n: &str, count: usize, story: &str| DemoQueue {
        name: n.to_string(),
        role: QueueRole::Work,
        expected: count as u64,
        story: story.to_string(),
    };
    vec![
        dlq(
            "orders.dlq",
            ORDERS,
            "broker: rejected 3 times by orders.process, retried through orders.retry.wait (TTL)",
        ),
        dlq(
            "payments.dlq",
            PAYMENTS + 1,
            "broker: rejected by payments.process (one message is hostile: escapes, bidi, bytes)",
        ),
        dlq(
            "notifications.dlq",
            NOTIFICATIONS + 1,
            "broker: expired in notifications.email (queue TTL; one per-message TTL)",
        ),
        dlq(
            "telemetry.dlq",
            TELEMETRY - TELEMETRY_MAX_LENGTH,
            "broker: pushed out of telemetry.ingest by its max-length (drop-head)",
        ),
        dlq(
            "invoices.dlq",
            INVOICES,
            "broker: delivery limit of quorum queue invoices.process reached",
        ),
        dlq(
            "inventory.dlq",
            INVENTORY,
            "broker: rejected by inventory, dead-letter exchange set by a policy",
        ),
        dlq(
            "shipping-label_error",
            6,
            "MassTransit: 2 kinds of fault in CreateShippingLabelConsumer",
        ),
        dlq(
            "shipping-label_skipped",
            2,
            "MassTransit: no consumer for CancelShippingLabel",
        ),
        dlq(
            "inventory.reserve.group.dlq",
            4,
            "Spring Cloud Stream: republished with the exception and stack trace",
        ),
        dlq(
            "error",
            4,
            "NServiceBus: failed in endpoint Sales after delayed retries",
        ),
        work("orders.process", 0, "the ladder's work queue"),
        work("orders.retry.wait", 0, "the ladder's wait queue"),
        work("payments.process", 0, "work queue"),
        work("notifications.email", 0, "work queue with a message TTL"),
        work(
            "telemetry.ingest",
            TELEMETRY_MAX_LENGTH,
            "keeps its newest messages up to max-length",
        ),
        work("invoices.process", 0, "quorum work queue"),
        work("inventory", 0, "work queue"),
        work("shipping-label", 0, "MassTransit endpoint"),
        work("inventory.reserve.group", 0, "Spring binder group queue"),
        work("Sales", 0, "NServiceBus endpoint"),
    ]
}

async fn declare_topology(ch: &Channel) -> Result<(), DemoError> {
    use ExchangeKind::{Direct, Fanout, Topic};
    let dlx = |x: &str| ("x-dead-letter-exchange", text(x));
    let dlrk = |k: &str| ("x-dead-letter-routing-key", text(k));

    // Retry ladder: orders.process → orders.retry → orders.retry.wait (TTL) → orders → orders.process.
    exchange(ch, "orders", Topic).await?;
    exchange(ch, "orders.retry", Topic).await?;
    queue(ch, "orders.process", false, &[dlx("orders.retry")]).await?;
    queue(
        ch,
        "orders.retry.wait",
        false,
        &[
            dlx("orders"),
            ("x-message-ttl", AMQPValue::LongInt(RETRY_WAIT_TTL_MS)),
        ],
    )
    .await?;
    queue(ch, "orders.dlq", false, &[]).await?;
    bind(ch, "orders.process", "orders", "order.#").await?;
    bind(ch, "orders.retry.wait", "orders.retry", "#").await?;

    // Plain rejection through a fanout dead-letter exchange.
    exchange(ch, "payments", Direct).await?;
    exchange(ch, "payments.dlx", Fanout).await?;
    queue(ch, "payments.process", false, &[dlx("payments.dlx")]).await?;
    queue(ch, "payments.dlq", false, &[]).await?;
    bind(ch, "payments.process", "payments", "payment.capture").await?;
    bind(ch, "payments.dlq", "payments.dlx", "").await?;

    // Expiry: a queue TTL, and one message with its own shorter TTL.
    queue(
        ch,
        "notifications.email",
        false,
        &[
            dlx(""),
            dlrk("notifications.dlq"),
            ("x-message-ttl", AMQPValue::LongInt(NOTIFICATION_TTL_MS)),
        ],
    )
    .await?;
    queue(ch, "notifications.dlq", false, &[]).await?;

    // Max-length overflow.
    queue(
        ch,
        "telemetry.ingest",
        false,
        &[
            dlx(""),
            dlrk("telemetry.dlq"),
            (
                "x-max-length",
                AMQPValue::LongInt(TELEMETRY_MAX_LENGTH as i32),
            ),
            ("x-overflow", text("drop-head")),
        ],
    )
    .await?;
    queue(ch, "telemetry.dlq", false, &[]).await?;

    // A quorum queue's delivery limit, into a quorum DLQ.
    queue(ch, "invoices.dlq", true, &[]).await?;
    queue(
        ch,
        "invoices.process",
        true,
        &[
            dlx(""),
            dlrk("invoices.dlq"),
            (
                "x-delivery-limit",
                AMQPValue::LongLongInt(INVOICE_DELIVERY_LIMIT),
            ),
        ],
    )
    .await?;

    // A dead-letter exchange that only a policy sets (the policy exists already).
    exchange(ch, "inventory.dlx", Fanout).await?;
    queue(ch, "inventory", false, &[]).await?;
    queue(ch, "inventory.dlq", false, &[]).await?;
    bind(ch, "inventory.dlq", "inventory.dlx", "").await?;

    // MassTransit: endpoint exchange and queue of the same name, the message type's exchange
    // bound to it, and the framework's own _error / _skipped exchanges and queues.
    for (x, q) in [
        ("shipping-label", "shipping-label"),
        ("shipping-label_error", "shipping-label_error"),
        ("shipping-label_skipped", "shipping-label_skipped"),
    ] {
        exchange(ch, x, Fanout).await?;
        queue(ch, q, false, &[]).await?;
        bind(ch, q, x, "").await?;
    }
    exchange(ch, "Shipping.Contracts:CreateShippingLabel", Fanout).await?;
    ch.exchange_bind(
        name("shipping-label"),
        name("Shipping.Contracts:CreateShippingLabel"),
        name(""),
        ExchangeBindOptions::default(),
        FieldTable::default(),
    )
    .await
    .map_err(|e| broker_err("bind exchange 'shipping-label' to its message type", &e))?;

    // Spring Cloud Stream's binder: destination exchange, group queue, its DLQ behind `DLX`.
    exchange(ch, "inventory.reserve", Topic).await?;
    exchange(ch, "DLX", Direct).await?;
    queue(
        ch,
        "inventory.reserve.group",
        false,
        &[dlx("DLX"), dlrk("inventory.reserve.group")],
    )
    .await?;
    queue(ch, "inventory.reserve.group.dlq", false, &[]).await?;
    bind(ch, "inventory.reserve.group", "inventory.reserve", "#").await?;
    bind(
        ch,
        "inventory.reserve.group.dlq",
        "DLX",
        "inventory.reserve.group",
    )
    .await?;

    // NServiceBus, conventional routing topology: an exchange per endpoint and for `error`.
    for q in ["Sales", "error"] {
        exchange(ch, q, Fanout).await?;
        queue(ch, q, false, &[]).await?;
        bind(ch, q, q, "").await?;
    }
    Ok(())
}

/// Five orders rejected three times each, waiting in orders.retry.wait between attempts. No
/// static topology sends a rejection sometimes to the wait queue and sometimes to the DLQ (the
/// attempt count lives only in x-death, which no exchange routes on), so before the last round
/// the retry exchange is pointed at orders.dlq, and afterwards back at the wait queue. The result
/// is the shape of a real ladder: `[{rejected ×3, orders.process}, {expired ×2, orders.retry.wait}]`.
async fn retry_ladder(ch: &Channel) -> Result<(), DemoError> {
    for i in 0..ORDERS {
        let id = 10_441 + i;
        let body = json!({
            "orderId": id,
            "customerId": format!("C-{}", 2_000 + i * 37),
            "lines": [{"sku": format!("A-{}", 1_000 + i * 11), "quantity": 1 + i % 3}],
            "currency": "EUR",
            "total": 19.9 + i as f64 * 12.5
        });
        let mut h = Table::new();
        h.insert("tenant", s("eu-west"));
        publish(
            ch,
            "orders",
            "order.created",
            &json_props(&format!("order-{id}"), Some("OrderPlaced"), "orders-api"),
            &h,
            &json_body(&body),
        )
        .await?;
    }
    for attempt in 1..=LADDER_ATTEMPTS {
        let last = attempt == LADDER_ATTEMPTS;
        if last {
            bind(ch, "orders.dlq", "orders.retry", "#").await?;
            unbind(ch, "orders.retry.wait", "orders.retry", "#").await?;
        }
        let got = take(ch, "orders.process", ORDERS).await?;
        reject_all(got, false, "orders.process").await?;
        if last {
            settle(ch, &[("orders.dlq", ORDERS as u64)], SETTLE_TIMEOUT).await?;
            bind(ch, "orders.retry.wait", "orders.retry", "#").await?;
            unbind(ch, "orders.dlq", "orders.retry", "#").await?;
        }
    }
    Ok(())
}

/// Four payments rejected once, plus one hostile message.
async fn reject_payments(ch: &Channel) -> Result<(), DemoError> {
    for i in 0..PAYMENTS {
        let id = 88_210 + i * 7;
        let body = json!({
            "paymentId": format!("pay_{id}"),
            "orderId": 10_441 + i,
            "amount": 49.5 + i as f64,
            "card": {"brand": "visa", "last4": format!("{:04}", 4_242 + i)}
        });
        publish(
            ch,
            "payments",
            "payment.capture",
            &json_props(&format!("pay_{id}"), Some("CapturePayment"), "checkout"),
            &Table::new(),
            &json_body(&body),
        )
        .await?;
    }
    // Hostile: escape sequences (colour, window title, clear screen), a bidi override, bytes
    // that are not UTF-8, and a binary body. A terminal tool must show these, not obey them.
    let mut h = Table::new();
    h.insert(
        "note",
        s("\u{1b}[31mURGENT\u{1b}[0m refund approved \u{1b}]0;pwned\u{07}\u{1b}[2J\u{1b}[H"),
    );
    h.insert(
        "customer",
        s("Mallory \u{202e}fdp.exe\u{202c} (bidi override)"),
    );
    h.insert(
        "legacy-ref",
        HeaderValue::LongString(vec![
            b'r', b'e', b'f', b'-', 0xc3, 0x28, 0xff, 0xfe, 0x00, b'!',
        ]),
    );
    h.insert(
        "note\u{1b}[7m-name",
        s("a header whose name holds an escape"),
    );
    let props = Properties {
        content_type: Some("application/octet-stream".into()),
        delivery_mode: Some(2),
        message_id: Some("pay_hostile".into()),
        correlation_id: Some("corr-\u{1b}[1mbold\u{1b}[0m".into()),
        app_id: Some("checkout".into()),
        ..Properties::default()
    };
    let mut body: Vec<u8> = b"\x89PNG\r\n\x1a\n\x1b[31m".to_vec();
    body.extend((0..=255u8).rev());
    publish(ch, "payments", "payment.capture", &props, &h, &body).await?;

    let got = take(ch, "payments.process", PAYMENTS + 1).await?;
    reject_all(got, false, "payments.process").await
}

/// Three notifications the queue TTL expires, and one with a shorter per-message TTL (the
/// broker strips `expiration` and records it as `original-expiration`).
async fn expire_notifications(ch: &Channel) -> Result<(), DemoError> {
    let send = |i: usize| {
        json!({
            "to": format!("customer{}@example.com", 100 + i),
            "template": "order-confirmation",
            "orderId": 10_441 + i
        })
    };
    // First in the queue: a classic queue expires messages at its head.
    let mut props = json_props("mail-10440", Some("SendEmail"), "notifier");
    props.expiration = Some(PER_MESSAGE_TTL_MS.into());
    publish(
        ch,
        "",
        "notifications.email",
        &props,
        &Table::new(),
        &json_body(&send(0)),
    )
    .await?;
    for i in 1..=NOTIFICATIONS {
        publish(
            ch,
            "",
            "notifications.email",
            &json_props(
                &format!("mail-{}", 10_440 + i),
                Some("SendEmail"),
                "notifier",
            ),
            &Table::new(),
            &json_body(&send(i)),
        )
        .await?;
    }
    Ok(())
}

/// Twelve readings into a queue that keeps five: the seven oldest are dead-lettered (maxlen).
async fn overflow_telemetry(ch: &Channel) -> Result<(), DemoError> {
    for i in 0..TELEMETRY {
        let body =
            json!({"sensor": format!("dock-{}", i % 3), "seq": i, "celsius": 4.0 + i as f64 * 0.1});
        publish(
            ch,
            "",
            "telemetry.ingest",
            &json_props(&format!("reading-{i}"), Some("Reading"), "sensors"),
            &Table::new(),
            &json_body(&body),
        )
        .await?;
    }
    Ok(())
}

/// Three invoices a consumer keeps handing back (reject with requeue) until the quorum queue
/// gives up on them. `basic.reject` rather than `basic.nack`: on 4.3+ a nack with requeue is a
/// free return and would never reach the limit.
async fn exhaust_invoices(ch: &Channel) -> Result<(), DemoError> {
    for i in 0..INVOICES {
        let body = json!({"invoice": format!("INV-2025-{:05}", 311 + i), "orderId": 10_441 + i, "pdf": true});
        publish(
            ch,
            "",
            "invoices.process",
            &json_props(
                &format!("inv-{}", 311 + i),
                Some("RenderInvoice"),
                "billing",
            ),
            &Table::new(),
            &json_body(&body),
        )
        .await?;
    }
    let deadline = Instant::now() + SETTLE_TIMEOUT;
    while depth(ch, "invoices.dlq").await? < INVOICES as u64 {
        let got = ch
            .basic_get(name("invoices.process"), BasicGetOptions { no_ack: false })
            .await
            .map_err(|e| broker_err("get a message from 'invoices.process'", &e))?;
        match got {
            Some(m) => {
                m.delivery
                    .reject(BasicRejectOptions { requeue: true })
                    .await
                    .map_err(|e| broker_err("hand back a message to 'invoices.process'", &e))?;
            }
            None if Instant::now() >= deadline => {
                return Err(DemoError::NotSettled {
                    waited: SETTLE_TIMEOUT,
                    pending: vec![(
                        "invoices.dlq".to_string(),
                        depth(ch, "invoices.dlq").await?,
                        INVOICES as u64,
                    )],
                });
            }
            None => tokio::time::sleep(Duration::from_millis(10)).await,
        }
    }
    Ok(())
}

/// Three stock updates rejected by `inventory`, whose dead-letter exchange only a policy sets.
async fn reject_inventory(ch: &Channel) -> Result<(), DemoError> {
    for i in 0..INVENTORY {
        let body = json!({"sku": format!("A-{}", 1_042 + i), "warehouse": "AMS-1", "delta": -(i as i64) - 1});
        publish(
            ch,
            "",
            "inventory",
            &json_props(
                &format!("stock-{}", 5_001 + i),
                Some("StockAdjusted"),
                "wms",
            ),
            &Table::new(),
            &json_body(&body),
        )
        .await?;
    }
    let got = take(ch, "inventory", INVENTORY).await?;
    reject_all(got, false, "inventory").await
}

/// What MassTransit's error and skipped queues receive: the envelope as the body, the fault in
/// `MT-Fault-*` headers, the host in `MT-Host-*`.
async fn masstransit(ch: &Channel) -> Result<(), DemoError> {
    let host = |h: &mut Table| {
        h.insert("MT-Host-MachineName", s("shipping-worker-7f9c4"));
        h.insert("MT-Host-ProcessName", s("Shipping.Worker"));
        h.insert("MT-Host-ProcessId", HeaderValue::I32(1));
        h.insert("MT-Host-Assembly", s("Shipping.Worker"));
        h.insert("MT-Host-AssemblyVersion", s("1.4.2.0"));
        h.insert("MT-Host-MassTransitVersion", s("8.2.5.0"));
        h.insert("MT-Host-FrameworkVersion", s("8.0.8"));
        h.insert("MT-Host-OperatingSystemVersion", s("Unix 6.1.0.0"));
    };
    let envelope = |id: &str, kind: &str, message: Value| {
        json!({
            "messageId": id,
            "requestId": null,
            "correlationId": null,
            "conversationId": guid(&format!("conversation {id}")),
            "initiatorId": null,
            "sourceAddress": "rabbitmq://localhost/orders_api_bus_abc123",
            "destinationAddress": format!("rabbitmq://localhost/{kind}"),
            "responseAddress": null,
            "faultAddress": null,
            "messageType": [format!("urn:message:{kind}")],
            "message": message,
            "expirationTime": null,
            "sentTime": ago(12).to_string(),
            "headers": {},
            "host": {
                "machineName": "orders-api-5d8b7",
                "processName": "Orders.Api",
                "processId": 1,
                "assembly": "Orders.Api",
                "assemblyVersion": "2.3.0.0",
                "frameworkVersion": "8.0.8",
                "massTransitVersion": "8.2.5.0",
                "operatingSystemVersion": "Unix 6.1.0.0"
            }
        })
    };
    let props = |id: &str| Properties {
        content_type: Some("application/vnd.masstransit+json".into()),
        delivery_mode: Some(2),
        message_id: Some(id.to_string()),
        ..Properties::default()
    };

    // (exception type, message, consumer's line, retries, minutes ago)
    let faults: [(&str, String, u32, i64, i64); 6] = [
        (
            "Shipping.Carriers.CarrierUnavailableException",
            "Carrier DHL unavailable".into(),
            48,
            3,
            41,
        ),
        (
            "Shipping.Carriers.CarrierUnavailableException",
            "Carrier DHL unavailable".into(),
            48,
            3,
            37,
        ),
        (
            "Shipping.Carriers.CarrierUnavailableException",
            "Carrier DHL unavailable".into(),
            48,
            3,
            36,
        ),
        (
            "Shipping.Carriers.CarrierUnavailableException",
            "Carrier DHL unavailable".into(),
            48,
            3,
            22,
        ),
        (
            "System.InvalidOperationException",
            "Order 10457 has no shipping address".into(),
            31,
            0,
            19,
        ),
        (
            "System.InvalidOperationException",
            "Order 10463 has no shipping address".into(),
            31,
            0,
            8,
        ),
    ];
    for (i, (exception, message, line, retries, minutes)) in faults.iter().enumerate() {
        let id = guid(&format!("shipping-label fault {i}"));
        let order = 10_450 + i * 3;
        let body = envelope(
            &id,
            "Shipping.Contracts:CreateShippingLabel",
            json!({"orderId": order, "carrier": "DHL", "service": "express", "weightKg": 1.2 + i as f64 * 0.4}),
        );
        let mut h = Table::new();
        h.insert("MT-Reason", s("fault"));
        h.insert("MT-Fault-ExceptionType", s(exception));
        h.insert("MT-Fault-Message", s(message));
        h.insert(
            "MT-Fault-StackTrace",
            s(&format!(
                "   at Shipping.Consumers.CreateShippingLabelConsumer.Consume(ConsumeContext`1 context) in /src/Shipping.Worker/Consumers/CreateShippingLabelConsumer.cs:line {line}\n   \
                 at MassTransit.DependencyInjection.ScopeConsumerFactory`1.Send[TMessage](ConsumeContext`1 context, IPipe`1 next) in /_/src/MassTransit/DependencyInjection/DependencyInjection/ScopeConsumerFactory.cs:line 22\n   \
                 at MassTransit.Middleware.ConsumerMessageFilter`2.MassTransit.IFilter<MassTransit.ConsumeContext<TMessage>>.Send(ConsumeContext`1 context, IPipe`1 next) in /_/src/MassTransit/Middleware/ConsumerMessageFilter.cs:line 48"
            )),
        );
        h.insert("MT-Fault-Timestamp", s(&ago(*minutes).to_string()));
        h.insert(
            "MT-Fault-InputAddress",
            s("rabbitmq://localhost/shipping-label"),
        );
        h.insert(
            "MT-Fault-ConsumerType",
            s("Shipping.Consumers.CreateShippingLabelConsumer"),
        );
        h.insert(
            "MT-Fault-MessageType",
            s("urn:message:Shipping.Contracts:CreateShippingLabel"),
        );
        if *retries > 0 {
            h.insert("MT-Fault-RetryCount", HeaderValue::I32(*retries as i32));
        }
        host(&mut h);
        publish(
            ch,
            "shipping-label_error",
            "",
            &props(&id),
            &h,
            &json_body(&body),
        )
        .await?;
    }

    for i in 0..2 {
        let id = guid(&format!("shipping-label skipped {i}"));
        let body = envelope(
            &id,
            "Shipping.Contracts:CancelShippingLabel",
            json!({"orderId": 10_470 + i, "reason": "customer-cancelled"}),
        );
        let mut h = Table::new();
        h.insert("MT-Reason", s("skip"));
        host(&mut h);
        publish(
            ch,
            "shipping-label_skipped",
            "",
            &props(&id),
            &h,
            &json_body(&body),
        )
        .await?;
    }
    Ok(())
}

/// What Spring Cloud Stream's binder republishes to `<destination>.<group>.dlq`.
async fn spring(ch: &Channel) -> Result<(), DemoError> {
    let listener = "org.springframework.amqp.rabbit.support.ListenerExecutionFailedException: \
                    Listener method 'public void com.example.inventory.ReserveListener.reserve(com.example.inventory.Reservation)' threw exception";
    let frames = "\tat org.springframework.amqp.rabbit.listener.AbstractMessageListenerContainer.wrapToListenerExecutionFailedExceptionIfNeeded(AbstractMessageListenerContainer.java:1787)\n\
                  \tat org.springframework.amqp.rabbit.listener.AbstractMessageListenerContainer.doInvokeListener(AbstractMessageListenerContainer.java:1677)\n\
                  \tat org.springframework.amqp.rabbit.listener.SimpleMessageListenerContainer.doReceiveAndExecute(SimpleMessageListenerContainer.java:1023)\n";
    // (root cause type, its message, where it was thrown, routing key, retries)
    let failures: [(&str, String, &str, &str); 4] = [
        (
            "com.example.inventory.InsufficientStockException",
            "Insufficient stock for SKU A-1042: requested 3, available 0".into(),
            "\tat com.example.inventory.ReserveService.reserve(ReserveService.java:88)",
            "reserve.eu",
        ),
        (
            "com.example.inventory.InsufficientStockException",
            "Insufficient stock for SKU A-1077: requested 1, available 0".into(),
            "\tat com.example.inventory.ReserveService.reserve(ReserveService.java:88)",
            "reserve.eu",
        ),
        (
            "com.example.inventory.InsufficientStockException",
            "Insufficient stock for SKU A-1103: requested 12, available 4".into(),
            "\tat com.example.inventory.ReserveService.reserve(ReserveService.java:88)",
            "reserve.us",
        ),
        (
            "java.sql.SQLTransientConnectionException",
            "HikariPool-1 - Connection is not available, request timed out after 30000ms.".into(),
            "\tat com.zaxxer.hikari.pool.HikariPool.createTimeoutException(HikariPool.java:696)",
            "reserve.eu",
        ),
    ];
    for (i, (root, message, at, key)) in failures.iter().enumerate() {
        let trace = format!(
            "{listener}\n{frames}Caused by: {root}: {message}\n{at}\n\tat com.example.inventory.ReserveListener.reserve(ReserveListener.java:41)\n\t... 14 more\n"
        );
        let mut h = Table::new();
        h.insert("x-exception-message", s(message));
        h.insert("x-exception-stacktrace", s(&trace));
        h.insert("x-original-exchange", s("inventory.reserve"));
        h.insert("x-original-routingKey", s(key));
        h.insert("contentType", s("application/json"));
        if i < 3 {
            h.insert("retry-count", HeaderValue::I32(3));
        }
        let body = json!({"reservationId": format!("R-{}", 70_100 + i), "sku": format!("A-{}", 1_042 + i * 35), "quantity": 3});
        publish(
            ch,
            "DLX",
            "inventory.reserve.group",
            &json_props(
                &guid(&format!("reservation {i}")),
                None,
                "inventory-service",
            ),
            &h,
            &json_body(&body),
        )
        .await?;
    }
    Ok(())
}

/// What NServiceBus moves to its `error` queue after immediate and delayed retries.
async fn nservicebus(ch: &Channel) -> Result<(), DemoError> {
    let deadlock = |process: u32| {
        format!(
            "Transaction (Process ID {process}) was deadlocked on lock resources with another process and has been chosen as the deadlock victim. Rerun the transaction."
        )
    };
    // (exception type, message, stack trace's top frame, delayed retries, minutes ago)
    let failures: [(&str, String, &str, &str, i64); 4] = [
        (
            "Microsoft.Data.SqlClient.SqlException",
            deadlock(57),
            "Sales.Handlers.PlaceOrderHandler.Handle",
            "2",
            54,
        ),
        (
            "Microsoft.Data.SqlClient.SqlException",
            deadlock(61),
            "Sales.Handlers.PlaceOrderHandler.Handle",
            "2",
            47,
        ),
        (
            "Microsoft.Data.SqlClient.SqlException",
            deadlock(112),
            "Sales.Handlers.PlaceOrderHandler.Handle",
            "2",
            15,
        ),
        (
            "System.ArgumentException",
            "Unknown product code 'SKU-XL-RED' (Parameter 'ProductCode')".into(),
            "Sales.Domain.Catalog.Find",
            "0",
            6,
        ),
    ];
    for (i, (exception, message, top, retries, minutes)) in failures.iter().enumerate() {
        let id = guid(&format!("nservicebus {i}"));
        let failed = ago(*minutes);
        let sent = ago(minutes + 3);
        let mut h = Table::new();
        h.insert("NServiceBus.MessageId", s(&id));
        h.insert("NServiceBus.MessageIntent", s("Send"));
        h.insert(
            "NServiceBus.ConversationId",
            s(&guid(&format!("conversation nsb {i}"))),
        );
        h.insert("NServiceBus.CorrelationId", s(&id));
        h.insert("NServiceBus.OriginatingEndpoint", s("Website"));
        h.insert("NServiceBus.OriginatingMachine", s("WEB-01"));
        h.insert("NServiceBus.ContentType", s("application/json"));
        h.insert(
            "NServiceBus.EnclosedMessageTypes",
            s("Sales.Messages.PlaceOrder, Sales.Messages, Version=1.0.0.0, Culture=neutral, PublicKeyToken=null"),
        );
        h.insert("NServiceBus.Version", s("7.8.4"));
        h.insert("NServiceBus.TimeSent", s(&nservicebus_time(sent)));
        h.insert("NServiceBus.FailedQ", s("Sales@SALES-01"));
        h.insert("NServiceBus.ProcessingEndpoint", s("Sales"));
        h.insert("NServiceBus.ProcessingMachine", s("SALES-01"));
        h.insert("NServiceBus.TimeOfFailure", s(&nservicebus_time(failed)));
        if *retries != "0" {
            h.insert("NServiceBus.Retries", s(retries));
            h.insert(
                "NServiceBus.Retries.Timestamp",
                s(&nservicebus_time(ago(minutes + 1))),
            );
        }
        let p = "NServiceBus.ExceptionInfo.";
        h.insert(format!("{p}ExceptionType"), s(exception));
        h.insert(format!("{p}Message"), s(message));
        h.insert(
            format!("{p}Source"),
            s(if exception.contains("SqlClient") {
                "Core Microsoft SqlClient Data Provider"
            } else {
                "Sales.Domain"
            }),
        );
        h.insert(format!("{p}HelpLink"), s(""));
        h.insert(
            format!("{p}StackTrace"),
            s(&format!(
                "{exception}: {message}\n   at {top}(PlaceOrder message, IMessageHandlerContext context) in C:\\src\\Sales\\Handlers\\PlaceOrderHandler.cs:line 33\n   \
                 at NServiceBus.InvokeHandlerTerminator.Terminate(IInvokeHandlerContext context) in /_/src/NServiceBus.Core/Pipeline/Incoming/InvokeHandlerTerminator.cs:line 35\n   \
                 at NServiceBus.LoadHandlersConnector.Invoke(IIncomingLogicalMessageContext context, Func`2 stage) in /_/src/NServiceBus.Core/Pipeline/Incoming/LoadHandlersConnector.cs:line 40"
            )),
        );
        h.insert(format!("{p}Data.Message ID"), s(&id));
        let body = json!({"OrderId": guid(&format!("order nsb {i}")), "ProductCode": if i == 3 { "SKU-XL-RED" } else { "SKU-M-BLUE" }, "Quantity": 2});
        let props = Properties {
            content_type: Some("application/json".into()),
            delivery_mode: Some(2),
            message_id: Some(id.clone()),
            correlation_id: Some(id.clone()),
            kind: Some("Sales.Messages.PlaceOrder".into()),
            ..Properties::default()
        };
        publish(ch, "error", "", &props, &h, &json_body(&body)).await?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_demo_vhosts_may_be_replaced() {
        let plain = json!({"name": "orders", "description": "", "tags": []});
        assert!(!is_demo_vhost("orders", &plain));
        assert!(!is_demo_vhost("/", &json!({"description": VHOST_MARKER})));
        assert!(is_demo_vhost("warren-demo", &plain));
        assert!(is_demo_vhost("warren-demo-2", &plain));
        assert!(!is_demo_vhost("warren-demonstration", &plain));
        assert!(is_demo_vhost("mine", &json!({"description": VHOST_MARKER})));
        assert!(is_demo_vhost(
            "mine",
            &json!({"metadata": {"description": VHOST_MARKER, "tags": []}})
        ));
        assert!(is_demo_vhost("mine", &json!({"tags": ["a", VHOST_TAG]})));
        assert!(is_demo_vhost("mine", &json!({"tags": "a, warren-demo"})));
        assert!(!is_demo_vhost("mine", &json!({"tags": "warren-demo-ish"})));
    }

    #[test]
    fn guids_are_stable_and_well_formed() {
        let g = guid("x");
        assert_eq!(g, guid("x"));
        assert_ne!(g, guid("y"));
        let parts: Vec<usize> = g.split('-').map(str::len).collect();
        assert_eq!(parts, vec![8, 4, 4, 4, 12]);
        assert!(g.chars().all(|c| c == '-' || c.is_ascii_hexdigit()));
    }

    #[test]
    fn nservicebus_times_parse_back() {
        let t: Timestamp = "2025-09-28T06:50:15.123456Z"
            .parse()
            .unwrap_or(Timestamp::UNIX_EPOCH);
        let text = nservicebus_time(t);
        assert_eq!(text, "2025-09-28 06:50:15:123456 Z");
        assert_eq!(
            crate::domain::convention::parse_time(&HeaderValue::string(&text)),
            Some(t)
        );
    }

    #[test]
    fn report_lists_dead_letter_queues_first() {
        let queues = expected_queues();
        let first_work = queues
            .iter()
            .position(|q| q.role == QueueRole::Work)
            .unwrap_or(queues.len());
        assert!(
            queues
                .iter()
                .skip(first_work)
                .all(|q| q.role == QueueRole::Work)
        );
        let report = DemoReport {
            vhost: "warren-demo".into(),
            broker_version: "3.10.8".into(),
            replaced_previous: true,
            queues,
            elapsed: Duration::from_millis(2_500),
        };
        assert_eq!(report.expected("telemetry.dlq"), Some(7));
        assert_eq!(
            report.total_dead_letters(),
            5 + 5 + 4 + 7 + 3 + 3 + 6 + 2 + 4 + 4
        );
        let shown = report.to_string();
        assert!(shown.contains("43 dead letters in 10 queues"), "{shown}");
        assert!(shown.contains("warren --vhost warren-demo"), "{shown}");
    }
}
