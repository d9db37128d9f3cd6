//! One connected broker: the management client, the AMQP connection (opened on first need), and
//! the operations the CLI and the TUI worker share — discover, browse safely, plan and run a
//! replay. Everything that decides uses the pure domain; this layer only fetches and moves.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};

use regex::Regex;
use tokio::sync::{OnceCell, watch};

use crate::broker::browse::{self, BrowsePage, BrowseRequest};
use crate::broker::config::Target;
use crate::broker::discover;
use crate::broker::management::{Management, ManagementError, Overview, PermissionState, WhoAmI};
use crate::broker::replay::{self, Job, Progress, Summary, TargetKey};
use crate::broker::{amqp, config};
use crate::domain::discovery::{
    self, Discovery, ExchangeInfo, QueueType as DiscoveredType, RoutingTable,
};
use crate::domain::explain::{self, Explanation};
use crate::domain::identity;
use crate::domain::message::DeadLetter;
use crate::domain::quorum::{BrokerVersion, BrowsePolicy, QueueType};
use crate::domain::replay::{self as plan, ReplayOptions, ReplayPlan};
use crate::domain::selection::Selection;

/// Why something could not be done, sorted by what the user should do about it.
#[derive(Debug, thiserror::Error)]
pub enum SessionError {
    /// The broker could not be reached or refused us (exit code 3).
    #[error("{0}")]
    Broker(String),
    /// The request cannot be carried out as asked (e.g. a refused replay).
    #[error("{0}")]
    Refused(String),
}

impl From<ManagementError> for SessionError {
    fn from(e: ManagementError) -> Self {
        SessionError::Broker(e.to_string())
    }
}

impl From<amqp::AmqpError> for SessionError {
    fn from(e: amqp::AmqpError) -> Self {
        SessionError::Broker(e.to_string())
    }
}

/// A message with its explanation and what Warren remembers of it.
#[derive(Clone, Debug)]
pub struct Explained {
    pub message: DeadLetter,
    pub explanation: Explanation,
    pub key: String,
    pub first_seen: Option<jiff::Timestamp>,
}

pub struct Session {
    pub target: Target,
    pub mgmt: Management,
    pub overview: Overview,
    pub whoami: WhoAmI,
    amqp: OnceCell<lapin::Connection>,
}

impl Session {
    /// Connects to the management API (overview and whoami); AMQP waits until needed.
    pub async fn open(target: Target) -> Result<Session, SessionError> {
        let mgmt = Management::new(&target)?;
        let (overview, whoami) = tokio::join!(mgmt.overview(), mgmt.whoami());
        Ok(Session {
            overview: overview?,
            whoami: whoami?,
            mgmt,
            target,
            amqp: OnceCell::new(),
        })
    }

    pub fn vhost(&self) -> &str {
        &self.target.vhost
    }

    /// "context/vhost", the key under which Warren remembers first-seen times.
    pub fn memory_key(&self) -> String {
        format!("{}{}", self.target.context, self.target.vhost)
    }

    /// The broker's version for the quorum rules; an unknown version gets 4.0's cautious rules.
    pub fn version(&self) -> BrokerVersion {
        BrokerVersion::parse(&self.overview.rabbitmq_version).unwrap_or(BrokerVersion::new(4, 0, 0))
    }

    /// The AMQP connection, opened on first use (cluster URLs tried in order).
    pub async fn amqp(&self) -> Result<&lapin::Connection, SessionError> {
        self.amqp.get_or_try_init(|| self.connect_amqp()).await
    }

    /// A new AMQP connection (cluster URLs tried in order).
    async fn connect_amqp(&self) -> Result<lapin::Connection, SessionError> {
        let urls: Vec<String> = self
            .target
            .amqp_urls
            .iter()
            .map(|u| u.to_string())
            .collect();
        amqp::connect(
            &urls,
            &self.target.vhost,
            &self.target.credentials.username,
            self.target.credentials.password.expose(),
            self.target.ca_file.as_deref(),
        )
        .await
        .map_err(SessionError::from)
    }

    pub async fn discover(&self) -> Result<Discovery, SessionError> {
        let patterns: &[Regex] = &self.target.settings.discovery_patterns;
        Ok(
            discover::discover_with(&self.mgmt, self.vhost(), patterns, &self.overview.features)
                .await?,
        )
    }

    /// How browsing `queue` must behave: its type and effective delivery limit decide what one
    /// browse costs on this broker version.
    pub async fn browse_policy(
        &self,
        queue: &str,
    ) -> Result<(QueueType, BrowsePolicy, Option<u64>), SessionError> {
        let info = self.mgmt.queue(self.vhost(), queue).await?;
        let settings = discovery::effective_settings(&info, info.effective_policy.as_ref());
        let limit = discovery::effective_delivery_limit(&info, &settings, &self.overview.features);
        let qt = match info.queue_type {
            DiscoveredType::Quorum => QueueType::Quorum,
            DiscoveredType::Stream => QueueType::Stream,
            _ => QueueType::Classic,
        };
        let policy = BrowsePolicy::decide_with_margin(
            self.version(),
            qt,
            limit,
            self.target.settings.browse.quorum_safety_margin,
        );
        Ok((qt, policy, info.messages))
    }

    /// Reads up to `limit` messages from the head of `queue` and leaves every one of them where
    /// it was (see `broker::browse`).
    pub async fn browse(&self, queue: &str, limit: usize) -> Result<BrowsePage, SessionError> {
        // Never below what message keys hash, so a key means the same message everywhere.
        let cap = self
            .target
            .settings
            .browse
            .body_cap_bytes
            .max(identity::HASHED_BODY);
        self.browse_with_cap(queue, limit, cap).await
    }

    /// [`Session::browse`] keeping up to `body_cap` bytes of each body (`usize::MAX` for an
    /// export, which must be lossless).
    pub async fn browse_with_cap(
        &self,
        queue: &str,
        limit: usize,
        body_cap: usize,
    ) -> Result<BrowsePage, SessionError> {
        let (qt, policy, depth) = self.browse_policy(queue).await?;
        let conn = self.amqp().await?;
        let mut req = BrowseRequest::new(queue, qt, policy);
        req.limit = limit;
        req.body_cap = body_cap;
        req.known_depth = depth;
        browse::browse(conn, &req).await.map_err(|e| match e {
            browse::BrowseError::Connection { .. } => SessionError::Broker(e.to_string()),
            other => SessionError::Refused(other.to_string()),
        })
    }

    /// Whether this session may move messages, and if not, why — in the words the user sees.
    /// `exchanges` are the exchanges a replay publishes to (`""` is the default exchange): the
    /// broker checks write permission on the exchange of a publish, not on the queues it reaches.
    pub async fn write_refusal(&self, exchanges: &[String]) -> Option<String> {
        if self.target.read_only {
            return Some(format!(
                "read-only: context '{}' {} — replay is disabled",
                self.target.context, "is opened read-only (--read-only or read_only = true)"
            ));
        }
        match self.mgmt.permissions(self.vhost()).await {
            Ok(PermissionState::NoneGranted) => Some(format!(
                "read-only: broker user '{}' has no permissions on vhost '{}'",
                self.whoami.name,
                self.vhost()
            )),
            Ok(PermissionState::Known(p)) => {
                // RabbitMQ matches permission regexes unanchored, and an empty one means '^$'
                // (nothing). An unparsable one blocks: the broker would decide, Warren refuses.
                let write = (!p.write.is_empty())
                    .then(|| Regex::new(&p.write).ok())
                    .flatten();
                // The default exchange's resource name is `amq.default`.
                let resource = |x: &String| {
                    if x.is_empty() {
                        "amq.default".to_string()
                    } else {
                        x.clone()
                    }
                };
                let blocked: Vec<String> = exchanges
                    .iter()
                    .map(resource)
                    .filter(|t| !write.as_ref().is_some_and(|re| re.is_match(t)))
                    .collect();
                (!blocked.is_empty()).then(|| {
                    format!(
                        "read-only: broker user '{}' may not publish to exchange {} on vhost '{}' (write permission '{}')",
                        self.whoami.name,
                        blocked.iter().map(|t| format!("'{t}'")).collect::<Vec<_>>().join(", "),
                        self.vhost(),
                        p.write
                    )
                })
            }
            // Without the administrator tag the permissions cannot be read: the broker itself
            // will refuse a publish it does not allow, and the message stays in the DLQ.
            _ => None,
        }
    }
}

/// Explains messages and records when Warren first saw them.
pub fn explain_all(
    messages: Vec<DeadLetter>,
    first_seen: &HashMap<String, jiff::Timestamp>,
) -> Vec<Explained> {
    messages
        .into_iter()
        .map(|m| {
            let explanation = explain::explain(&m);
            let key = identity::message_key(&m);
            let first_seen = first_seen.get(&key).copied();
            Explained {
                message: m,
                explanation,
                key,
                first_seen,
            }
        })
        .collect()
}

/// Age for the filter language: since Warren first saw it, else since its first death.
pub fn age_secs(e: &Explained, now: jiff::Timestamp) -> Option<u64> {
    let since = e.first_seen.or_else(|| {
        e.explanation
            .deaths
            .entries
            .iter()
            .filter_map(|d| d.time)
            .min()
    })?;
    u64::try_from(now.as_second() - since.as_second()).ok()
}

/// What a replay would do, decided before anything moves.
#[derive(Clone, Debug, Default)]
pub struct Preview {
    pub queue: String,
    /// Selected messages among those looked at.
    pub selected: u64,
    /// Messages looked at (the head of the queue, up to the window).
    pub examined: u64,
    pub depth: Option<u64>,
    /// Per target: description → (count, queues it reaches).
    pub targets: BTreeMap<String, TargetPreview>,
    pub removed: BTreeSet<String>,
    pub added: BTreeSet<String>,
    /// Messages that were replayed before and failed again.
    pub replayed_before: u64,
    /// Warnings with counts.
    pub warnings: BTreeMap<String, u64>,
    /// Reasons nothing may move; empty when the replay may go ahead.
    pub refusals: Vec<String>,
    /// Targets checked to exist and allowed.
    pub allowed: HashSet<TargetKey>,
    /// Selected message keys, for the audit and for a TUI replay of exactly these.
    pub keys: Vec<String>,
    /// Message ids (or keys) per target, for `--dry-run` output.
    pub plans: Vec<(String, ReplayPlan)>,
}

#[derive(Clone, Debug, Default, PartialEq)]
pub struct TargetPreview {
    pub exchange: String,
    pub routing_key: String,
    pub count: u64,
    pub reaches: Vec<String>,
    /// False when the bindings could not decide exactly (headers exchanges).
    pub exact: bool,
}

/// How to replay, as the user asked.
#[derive(Clone, Debug)]
pub struct ReplaySpec {
    pub queue: String,
    pub selection: Selection,
    pub limit: Option<u64>,
    pub rate: Option<f64>,
    pub to: Option<String>,
    pub allow_fan_out: bool,
    pub keep_attempts: bool,
    pub window: usize,
}

impl Session {
    /// Looks at the head of the DLQ (as a browse: nothing moves), plans each selected message,
    /// checks that every target exists and where it routes, and says what would happen and
    /// whether it is allowed.
    pub async fn preview(
        &self,
        spec: &ReplaySpec,
        remember: impl FnOnce(&[String]) -> HashMap<String, jiff::Timestamp>,
    ) -> Result<Preview, SessionError> {
        let window = spec.window.max(1);
        // Up to 10,000 messages are looked at: keep bodies short (the engine re-reads each
        // message whole and decides on the whole body).
        let page = self
            .browse_with_cap(&spec.queue, window, identity::HASHED_BODY)
            .await?;
        let keys: Vec<String> = page.messages.iter().map(identity::message_key).collect();
        let first_seen = remember(&keys);
        let now = jiff::Timestamp::now();
        let mut p = Preview {
            queue: spec.queue.clone(),
            examined: page.messages.len() as u64,
            depth: Some(page.queue_depth_at_start),
            ..Default::default()
        };
        let explained = explain_all(page.messages, &first_seen);
        let opts = ReplayOptions {
            keep_attempts: spec.keep_attempts,
            target_queue: spec.to.clone(),
            now,
        };
        for e in &explained {
            if spec.limit.is_some_and(|l| p.selected >= l) {
                break;
            }
            if !spec
                .selection
                .selects(&e.message, &e.explanation, &e.key, age_secs(e, now))
            {
                continue;
            }
            p.selected += 1;
            p.keys.push(e.key.clone());
            let rp = plan::plan(&e.message, &e.explanation, &opts);
            p.removed.extend(rp.removed.iter().cloned());
            p.added.extend(rp.added.iter().map(|(k, _)| k.clone()));
            if rp.replay_count > 1 {
                p.replayed_before += 1;
            }
            for w in &rp.warnings {
                *p.warnings.entry(w.to_string()).or_insert(0) += 1;
            }
            match &rp.target {
                Some(t) => {
                    let label = t.expected_queue.clone().unwrap_or_else(|| {
                        format!("exchange '{}' key '{}'", t.exchange, t.routing_key)
                    });
                    let entry = p.targets.entry(label).or_insert_with(|| TargetPreview {
                        exchange: t.exchange.clone(),
                        routing_key: t.routing_key.clone(),
                        ..Default::default()
                    });
                    entry.count += 1;
                }
                None => {
                    *p.warnings
                        .entry("no known origin: these stay unless --to names a queue".into())
                        .or_insert(0) += 1;
                }
            }
            p.plans.push((
                e.message
                    .properties
                    .message_id
                    .clone()
                    .unwrap_or_else(|| e.key.clone()),
                rp,
            ));
        }

        // Where each target routes, per the broker's bindings.
        let (exchanges, bindings) = tokio::join!(
            self.mgmt.exchanges(self.vhost()),
            self.mgmt.bindings(self.vhost())
        );
        let exchanges: Vec<ExchangeInfo> = exchanges?;
        let bindings = bindings?;
        let table = RoutingTable::new(&exchanges, &bindings);
        let conn = self.amqp().await?;
        for (label, t) in p.targets.iter_mut() {
            let routing = table.route(&t.exchange, &t.routing_key);
            t.reaches = routing.queues;
            t.exact = routing.exact;
            let mut ok = true;
            // Targets come from headers and bodies (a Spring routing key, a Sneakers queue):
            // a name AMQP cannot carry holds that target's messages, with the reason.
            let too_long = amqp::short("the exchange name", &t.exchange)
                .and(amqp::short("the routing key", &t.routing_key))
                .err();
            if let Some(e) = too_long {
                let mut shown: String = label.chars().take(60).collect();
                if shown.len() < label.len() {
                    shown.push('…');
                }
                p.refusals.push(format!(
                    "{shown} cannot be published to: {e}; its messages stay in the DLQ"
                ));
                ok = false;
            } else if t.exchange.is_empty() {
                if !queue_exists(conn, &t.routing_key).await? {
                    p.refusals.push(format!(
                        "target queue '{}' does not exist in vhost '{}'",
                        t.routing_key,
                        self.vhost()
                    ));
                    ok = false;
                }
            } else if !exchange_exists(conn, &t.exchange).await? {
                p.refusals.push(format!(
                    "target exchange '{}' does not exist in vhost '{}'",
                    t.exchange,
                    self.vhost()
                ));
                ok = false;
            }
            if t.reaches.contains(&spec.queue) {
                p.refusals.push(format!(
                    "{label} leads back into '{}' itself: replaying a DLQ into itself is refused",
                    spec.queue
                ));
                ok = false;
            }
            if t.reaches.is_empty() && ok {
                p.refusals.push(format!(
                    "{label} reaches no queue: the broker would return every message"
                ));
                ok = false;
            }
            if t.reaches.len() > 1 && !spec.allow_fan_out && spec.to.is_none() {
                p.refusals.push(format!(
                    "{label} would reach {} queues ({}): name one with --to, or allow it with --allow-fan-out",
                    t.reaches.len(),
                    t.reaches.join(", ")
                ));
                ok = false;
            }
            if ok {
                p.allowed
                    .insert((t.exchange.clone(), t.routing_key.clone()));
            }
        }
        let skipped = explained
            .iter()
            .filter(|e| {
                e.explanation.skipped
                    && spec
                        .selection
                        .selects(&e.message, &e.explanation, &e.key, age_secs(e, now))
            })
            .count();
        if skipped > 0 && spec.to.is_none() {
            p.refusals.push(format!(
                "{skipped} message(s) come from a MassTransit _skipped queue: no consumer on that endpoint handles their type, so replaying them there skips them again. Deploy the consumer first, or send them to the endpoint that has it with --to"
            ));
        }
        if spec.queue.contains("parking") {
            *p.warnings
                .entry("this is a parking lot: messages that could not be decoded fail identically until the reading code changes; replaying before that deploy is churn".into())
                .or_insert(0) += 1;
        }
        if p.selected == 0 {
            p.refusals
                .push("no message matches the selection at the head of the queue".into());
        }
        Ok(p)
    }

    /// Runs a replay that `preview` allowed. The caller checked read-only and wrote the audit.
    pub async fn replay(
        &self,
        spec: &ReplaySpec,
        preview: &Preview,
        ages: HashMap<String, u64>,
        cancel: watch::Receiver<bool>,
        on_progress: impl FnMut(&Progress),
    ) -> Result<Summary, SessionError> {
        if self.target.read_only {
            return Err(SessionError::Refused(
                "read-only: replay is disabled".into(),
            ));
        }
        let (_, quorum, _) = self.browse_policy(&spec.queue).await?;
        let job = Job {
            dlq: spec.queue.clone(),
            selection: spec.selection.clone(),
            limit: spec.limit,
            rate: spec.rate,
            window: spec.window,
            keep_attempts: spec.keep_attempts,
            to: spec.to.clone(),
            allowed_targets: preview.allowed.clone(),
            ages,
            quorum,
        };
        let conn = self.amqp().await?;
        // Publishing gets a connection of its own for the run (see `replay::run_split`).
        let publisher = self.connect_amqp().await?;
        let result = replay::run_split(conn, &publisher, &job, cancel, on_progress).await;
        let _ = publisher.close(200, "replay done".into()).await;
        result.map_err(|e| SessionError::Broker(e.to_string()))
    }
}

/// Passive declare on a throwaway channel: a missing queue closes the channel it was asked on.
async fn queue_exists(conn: &lapin::Connection, name: &str) -> Result<bool, SessionError> {
    let ch = conn
        .create_channel()
        .await
        .map_err(|e| SessionError::Broker(e.to_string()))?;
    let r = ch
        .queue_declare(
            amqp::short("the queue name", name)
                .map_err(|e| SessionError::Refused(e.to_string()))?,
            lapin::options::QueueDeclareOptions {
                passive: true,
                ..Default::default()
            },
            lapin::types::FieldTable::default(),
        )
        .await;
    let _ = ch.close(200, "checked".into()).await;
    settle_check(r.map(|_| ()))
}

async fn exchange_exists(conn: &lapin::Connection, name: &str) -> Result<bool, SessionError> {
    let ch = conn
        .create_channel()
        .await
        .map_err(|e| SessionError::Broker(e.to_string()))?;
    let r = ch
        .exchange_declare(
            amqp::short("the exchange name", name)
                .map_err(|e| SessionError::Refused(e.to_string()))?,
            lapin::ExchangeKind::Direct,
            lapin::options::ExchangeDeclareOptions {
                passive: true,
                ..Default::default()
            },
            lapin::types::FieldTable::default(),
        )
        .await;
    let _ = ch.close(200, "checked".into()).await;
    settle_check(r)
}

fn settle_check(r: lapin::Result<()>) -> Result<bool, SessionError> {
    match r {
        Ok(()) => Ok(true),
        Err(e) => match amqp::soft_error_code(&e) {
            Some((404, _)) => Ok(false),
            Some((code, text)) => Err(SessionError::Broker(format!(
                "checking the replay target failed: {text} ({code})"
            ))),
            None => Err(SessionError::Broker(format!(
                "lost the connection while checking the replay target: {e}"
            ))),
        },
    }
}

/// Resolves the command-line overrides and configuration into a target.
pub fn target(overrides: &config::Overrides) -> Result<Target, config::ConfigError> {
    config::load(overrides).map(|(_, t)| t)
}
