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
//! The rooms: [`scenarios`] says what each failure is made of, as data; [`mechanics`] makes it
//! happen over AMQP; this module prepares the vhost through the management API and reports.
//!
//! Running it again gives the same result: the vhost is deleted and rebuilt — but only a vhost
//! that is named `warren-demo…` or carries the demo's marker — and [`build`] returns only when
//! every queue holds the number of messages it should.

mod mechanics;
mod scenarios;

use std::fmt;
use std::time::{Duration, Instant};

use reqwest::Method;
use serde_json::{Value, json};
use url::Url;

use crate::broker::amqp::{self, AmqpError, ConvertError, TooLong};
use crate::broker::management::{Management, ManagementError};
use crate::config::Target;
use crate::domain::sanitize;

pub use scenarios::{LADDER_ATTEMPTS, RETRY_WAIT_TTL_MS};

/// The vhost `warren demo` builds when none is named.
pub const DEFAULT_VHOST: &str = "warren-demo";
/// The vhost description the demo writes; a vhost carrying it may be replaced by the next run.
pub const VHOST_MARKER: &str = "created by warren demo";
/// The vhost tag the demo writes, for the same purpose.
pub const VHOST_TAG: &str = "warren-demo";
/// How long the broker gets to finish dead-lettering before [`build`] gives up.
pub const SETTLE_TIMEOUT: Duration = Duration::from_secs(30);

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
    /// The options that reached this broker (`--context`, `--management-url`, …; no
    /// password), so the follow-up command reaches it too.
    pub reach: Vec<String>,
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
        let vhost_arg = shell_word(&vhost);
        let reach: String = self
            .reach
            .iter()
            .map(|a| format!(" {}", shell_word(a)))
            .collect();
        write!(
            f,
            "Look at them with: warren{reach} --vhost {vhost_arg}   (run `warren demo` again to start over)"
        )
    }
}

/// `word` as one word for a POSIX shell: as it is when nothing in it is special, else quoted.
fn shell_word(word: &str) -> String {
    if !word.is_empty()
        && word
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_.:/=@".contains(c))
    {
        word.to_string()
    } else {
        format!("'{}'", word.replace('\'', r"'\''"))
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
    #[error(transparent)]
    Connect(#[from] AmqpError),
    #[error("RabbitMQ refused to {what}: {reason}")]
    Broker { what: String, reason: String },
    #[error("a demo message cannot be sent: {0}")]
    Convert(#[from] ConvertError),
    #[error("a demo name cannot be sent: {0}")]
    Name(#[from] TooLong),
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
    let replaced_previous = fresh_vhost(&mgmt, vhost).await?;

    let scenarios = scenarios::all();
    // Set before the queues they apply to are declared, so each queue starts life with its
    // policy (a policy added later reaches the queue asynchronously).
    for policy in scenarios.iter().flat_map(|s| &s.policies) {
        mgmt.put_policy(vhost, policy).await?;
    }

    let conn = connect(target, vhost).await?;
    let result = mechanics::run(&conn, &scenarios).await;
    let _ = conn.close(200, "warren demo built".into()).await;
    result?;
    Ok(DemoReport {
        vhost: vhost.to_string(),
        broker_version: overview.rabbitmq_version,
        replaced_previous,
        queues: scenarios::report(&scenarios),
        elapsed: started.elapsed(),
        reach: Vec::new(),
    })
}

/// Deletes a previous demo vhost of this name (refusing any other vhost), creates it anew with
/// the demo's marker and gives the user every permission on it. True when one was deleted.
async fn fresh_vhost(mgmt: &Management, vhost: &str) -> Result<bool, DemoError> {
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
            administer(
                mgmt,
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
    administer(
        mgmt,
        Method::PUT,
        &["vhosts", vhost],
        Some(&json!({"description": VHOST_MARKER, "tags": VHOST_TAG})),
        &format!("create vhost '{vhost}'"),
    )
    .await?;
    let user = mgmt.username();
    administer(
        mgmt,
        Method::PUT,
        &["permissions", vhost, user],
        Some(&json!({"configure": ".*", "write": ".*", "read": ".*"})),
        &format!("give user '{user}' permissions on vhost '{vhost}'"),
    )
    .await?;
    Ok(replaced_previous)
}

/// A call only an administrator may make. The overview has just answered with the same
/// credentials, so a refusal here is about the missing tag, and says why the demo needs it.
async fn administer(
    mgmt: &Management,
    method: Method,
    segments: &[&str],
    body: Option<&Value>,
    what: &str,
) -> Result<(), DemoError> {
    match mgmt.send_json(method, segments, body, what).await {
        Ok(_) => Ok(()),
        Err(
            ManagementError::MissingTag { url, user, .. }
            | ManagementError::WrongCredentials { url, user },
        ) => Err(DemoError::NotAdministrator {
            url,
            user,
            what: what.to_string(),
        }),
        Err(e) => Err(e.into()),
    }
}

/// Connects to the new vhost; a freshly created vhost can take a moment to accept connections.
async fn connect(target: &Target, vhost: &str) -> Result<lapin::Connection, DemoError> {
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
    fn report_lists_dead_letter_queues_first() {
        let queues = scenarios::report(&scenarios::all());
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
            reach: Vec::new(),
        };
        assert_eq!(report.expected("telemetry.dlq"), Some(7));
        assert_eq!(
            report.total_dead_letters(),
            5 + 5 + 4 + 7 + 3 + 3 + 6 + 2 + 4 + 4
        );
        let shown = report.to_string();
        assert!(shown.contains("43 dead letters in 10 queues"), "{shown}");
        assert!(shown.contains("warren --vhost warren-demo"), "{shown}");
        let elsewhere = DemoReport {
            reach: vec![
                "--management-url".into(),
                "http://10.0.0.5:15673/".into(),
                "--amqp-url".into(),
                "amqp://10.0.0.5:5673".into(),
            ],
            vhost: "my demo".into(),
            ..report
        };
        let shown = elsewhere.to_string();
        assert!(
            shown.contains("warren --management-url http://10.0.0.5:15673/ --amqp-url amqp://10.0.0.5:5673 --vhost 'my demo'"),
            "{shown}"
        );
    }
}
