//! One connected broker: the management client, the AMQP connection (opened on first need), and
//! the operations the CLI and the TUI worker share — discover, browse safely, plan and run a
//! replay. Everything that decides uses the pure domain; this layer only fetches and moves.
//!
//! Split by concern: opening and connections here; reads and the read ledger (`reads`), what
//! Warren remembers (`memory`), the replay plan (`preview`, `planning`) and its target checks
//! (`targets`), runs (`run`), selection (`select`), the archive stream (`archive`), write checks
//! (`write_check`) and the sessions of a scope (`sessions`).

use std::collections::{HashMap, HashSet};

use regex::Regex;
use tokio::sync::OnceCell;

use crate::broker::browse::{self, BrowsePage};
use crate::broker::discover;
use crate::broker::management::{Management, ManagementError, Overview, WhoAmI};
use crate::broker::replay;
use crate::broker::{amqp, cluster};
use crate::config;
use crate::config::Target;
use crate::domain::discovery::Discovery;
use crate::domain::features::BrokerVersion;
use crate::store::Store;

mod archive;
mod memory;
mod planning;
mod preview;
mod reads;
mod run;
mod select;
mod sessions;
mod targets;
mod write_check;

pub use memory::{Explained, Remembered, age_secs, arrival, dead_since, explain_all};
pub use planning::CHECKED_AS_MET;
pub use preview::{Preview, ReplaySpec, TargetPreview};
pub use reads::into_messages;
pub use run::Work;
pub use select::Selected;
pub use sessions::Sessions;
pub use write_check::WriteCheck;
pub(crate) use write_check::{Trial, trial_publish};

pub(crate) use targets::Rest;
use targets::queue_exists;

/// How long a discovery waits for the AMQP connection its live consumer counts use.
const COUNT_CONNECT: std::time::Duration = std::time::Duration::from_secs(3);

/// Why something could not be done, sorted by what the user should do about it
/// ([`SessionError::is_broker`]). Failures of the layers below keep their typed cause, so callers
/// can match on it and `source()` walks the chain; the text shown is the cause's own.
#[derive(Debug, thiserror::Error)]
pub enum SessionError {
    /// The management API could not be reached or refused us.
    #[error(transparent)]
    Management(#[from] ManagementError),
    /// AMQP could not be reached or refused us.
    #[error(transparent)]
    Amqp(#[from] amqp::AmqpError),
    /// A read failed: a lost connection is the broker's doing, the rest are refusals.
    #[error(transparent)]
    Browse(#[from] browse::BrowseError),
    /// A replay could not start or broke off.
    #[error(transparent)]
    Replay(#[from] replay::ReplayError),
    /// One AMQP operation on a channel failed (`what` says which).
    #[error("{what}: {source}")]
    Channel {
        what: String,
        #[source]
        source: lapin::Error,
    },
    /// The broker (or the way to it) is not as it must be, found by Warren's own checks: the
    /// two URLs reach different clusters, no AMQP URL is known.
    #[error("{0}")]
    Broker(String),
    /// The request cannot be carried out as asked (e.g. a refused replay): typed where the
    /// session knows why (read-only, an auto-delete queue), else in its words.
    #[error("{0}")]
    Refused(crate::domain::refusal::Refusal),
    /// Reading `queue` again would cost its messages deliveries: the user must say yes first
    /// (`text` says what it costs), then ask again with [`ReadConsent::ReadAgain`].
    #[error("{text}")]
    NeedsConsent { queue: String, text: String },
}

impl SessionError {
    /// Whether the broker, or the way to it, is what failed (exit code 3) rather than the request
    /// (exit code 1).
    pub fn is_broker(&self) -> bool {
        match self {
            // A mistyped name: the broker answered.
            SessionError::Management(ManagementError::NoQueue { .. }) => false,
            SessionError::Management(_)
            | SessionError::Amqp(_)
            | SessionError::Replay(_)
            | SessionError::Channel { .. }
            | SessionError::Broker(_) => true,
            SessionError::Browse(e) => matches!(e, browse::BrowseError::Connection { .. }),
            SessionError::Refused(_) | SessionError::NeedsConsent { .. } => false,
        }
    }

    /// A refusal: typed, or in the session's words (`Refusal::Said`).
    pub(crate) fn refused(r: impl Into<crate::domain::refusal::Refusal>) -> SessionError {
        SessionError::Refused(r.into())
    }

    fn channel(what: &str) -> impl FnOnce(lapin::Error) -> SessionError + '_ {
        move |source| SessionError::Channel {
            what: what.to_string(),
            source,
        }
    }
}

/// Whether a read may spend deliveries that Warren has spent on the queue before.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReadConsent {
    /// Use what this session already read from a queue whose reads cost deliveries; read only
    /// where reading is free or Warren has never read the queue.
    Reuse,
    /// The user was told what reading again costs and said yes.
    ReadAgain,
}

/// What this session read from one queue whose reads cost deliveries: the one copy the plan,
/// the dry run, the replay modal and the list after a replay are computed from.
#[derive(Clone, Debug)]
struct KeptRead {
    page: std::sync::Arc<BrowsePage>,
    body_cap: usize,
}

pub struct Session {
    pub target: Target,
    pub mgmt: Management,
    pub overview: Overview,
    pub whoami: WhoAmI,
    amqp: OnceCell<lapin::Connection>,
    /// Whether the broker lets this user publish at all in the vhost: asked once per session
    /// (see `broker::rights`).
    pub(crate) publishing: OnceCell<crate::broker::rights::Publishing>,
    /// Where in the context's AMQP URLs the next connection starts: a reconnect after a node
    /// loss starts one further, so it does not wait out the lost node's timeout first.
    amqp_start: std::sync::atomic::AtomicUsize,
    /// Reads of queues whose reads cost deliveries, by queue (see [`KeptRead`]).
    reads: std::sync::Mutex<HashMap<String, KeptRead>>,
    /// One lock per queue: two reads of one queue never overlap (they would split it between
    /// two consumers, and both could spend deliveries before either is kept).
    read_locks: std::sync::Mutex<HashMap<String, std::sync::Arc<tokio::sync::Mutex<()>>>>,
    /// Warren's store for the read ledger, opened on first need; `Err` once it failed.
    ledger: std::sync::Mutex<Option<Result<Store, String>>>,
    /// When depths were last written to the store (seconds; see [`Session::depths_due`]).
    depths_written: std::sync::atomic::AtomicI64,
    /// The dead-letter queues the last discovery found (by vhost and name: a discovery of
    /// every vhost names several): a depth refresh records only theirs.
    dlq_names: std::sync::Mutex<HashSet<(String, String)>>,
}

impl Session {
    /// Connects to the management API (overview and whoami) and checks that the AMQP URLs reach
    /// the same cluster (see `broker::cluster`): a command with two URLs to two brokers would
    /// answer for the wrong one. The AMQP connection itself waits until needed.
    pub async fn open(target: Target) -> Result<Session, SessionError> {
        let mgmt = Management::new(&target)?;
        let (overview, whoami) = tokio::join!(mgmt.overview(), mgmt.whoami());
        let overview = overview?;
        cluster::verify(&target.amqp_urls, &overview, mgmt.active_url())
            .await
            .map_err(SessionError::Broker)?;
        Ok(Session {
            overview,
            whoami: whoami?,
            mgmt,
            target,
            amqp: OnceCell::new(),
            publishing: OnceCell::new(),
            amqp_start: std::sync::atomic::AtomicUsize::new(0),
            reads: std::sync::Mutex::new(HashMap::new()),
            read_locks: std::sync::Mutex::new(HashMap::new()),
            ledger: std::sync::Mutex::new(None),
            depths_written: std::sync::atomic::AtomicI64::new(i64::MIN),
            dlq_names: std::sync::Mutex::new(HashSet::new()),
        })
    }

    /// The refusal of `act` when the flag or the context makes this session read-only: the
    /// broker layer's last check behind `ops::rights`, in its words.
    pub(crate) fn configured_refusal(&self, act: crate::domain::rights::Act) -> Option<String> {
        self.configured_read_only(act).map(|r| r.to_string())
    }

    /// [`Session::configured_refusal`], typed.
    pub(crate) fn configured_read_only(
        &self,
        act: crate::domain::rights::Act,
    ) -> Option<crate::domain::refusal::Refusal> {
        crate::domain::rights::ReadOnly::configured(
            self.target.read_only_flag,
            self.target.read_only,
            &self.target.context,
        )
        .map(|why| crate::domain::refusal::Refusal::ReadOnly { act, why })
    }

    pub fn vhost(&self) -> &str {
        &self.target.vhost
    }

    /// "context/vhost", the key under which Warren remembers first-seen times.
    pub fn memory_key(&self) -> String {
        self.memory_key_of(&self.target.vhost)
    }

    /// The broker's version for the quorum rules; an unknown version gets 4.0's cautious rules.
    pub fn version(&self) -> BrokerVersion {
        self.overview.features.rules_version()
    }

    /// The AMQP connection, opened on first use (cluster URLs tried in order).
    pub async fn amqp(&self) -> Result<&lapin::Connection, SessionError> {
        self.amqp
            .get_or_try_init(|| self.connect_amqp("warren"))
            .await
    }

    /// A new AMQP connection (cluster URLs tried in order).
    pub(crate) async fn connect_amqp(&self, name: &str) -> Result<lapin::Connection, SessionError> {
        if self.target.amqp_urls.is_empty() {
            return Err(SessionError::Broker(self.target.no_amqp_url()));
        }
        let n = self.target.amqp_urls.len();
        let start = self.amqp_start.load(std::sync::atomic::Ordering::Relaxed) % n;
        let urls: Vec<String> = (0..n)
            .filter_map(|k| self.target.amqp_urls.get((start + k) % n))
            .map(|u| u.to_string())
            .collect();
        amqp::connect_named(
            &urls,
            &self.target.vhost,
            &self.target.credentials.username,
            self.target.credentials.password.expose(),
            self.target.ca_file.as_deref(),
            name,
        )
        .await
        .map_err(SessionError::from)
    }

    pub async fn discover(&self) -> Result<Discovery, SessionError> {
        let patterns: &[Regex] = &self.target.settings.discovery_patterns;
        let mut d =
            discover::discover_with(&self.mgmt, self.vhost(), patterns, &self.overview.features)
                .await?;
        let conn = self.amqp_for_counts().await;
        discover::count_consumers(&self.mgmt, conn, self.vhost(), &mut d).await;
        self.found_dlqs(std::slice::from_ref(&d));
        Ok(d)
    }

    /// The session's AMQP connection for live consumer counts, when it opens within
    /// [`COUNT_CONNECT`]: a listing without one shows what the management API says.
    async fn amqp_for_counts(&self) -> Option<&lapin::Connection> {
        tokio::time::timeout(COUNT_CONNECT, self.amqp())
            .await
            .ok()
            .and_then(Result::ok)
    }

    /// Keeps which queues the discoveries found to be dead-letter queues.
    fn found_dlqs(&self, found: &[Discovery]) {
        let names = found
            .iter()
            .flat_map(|d| &d.dead_letter_queues)
            .map(|q| (q.vhost.clone(), q.name.clone()))
            .collect();
        *self.dlq_names.lock().unwrap_or_else(|e| e.into_inner()) = names;
    }

    /// Whether the last discovery found `queue` of `vhost` to be a dead-letter queue.
    pub fn is_dlq(&self, vhost: &str, queue: &str) -> bool {
        self.dlq_names
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .contains(&(vhost.to_string(), queue.to_string()))
    }

    /// The discovery of every vhost the user may see (`--vhost '*'`), from one listing of each
    /// kind (see `discover::discover_all`).
    pub async fn discover_all(&self) -> Result<Vec<(String, Discovery)>, SessionError> {
        let patterns: &[Regex] = &self.target.settings.discovery_patterns;
        let mut found =
            discover::discover_all(&self.mgmt, patterns, &self.overview.features).await?;
        // Live counts over the session's own connection, in its vhost; the management API's
        // figures elsewhere (a connection per vhost would cost more than the listing).
        let conn = self.amqp_for_counts().await;
        for (vhost, d) in &mut found {
            let conn = conn.filter(|_| vhost.as_str() == self.vhost());
            discover::count_consumers(&self.mgmt, conn, vhost, d).await;
        }
        let parts: Vec<Discovery> = found.iter().map(|(_, d)| d.clone()).collect();
        self.found_dlqs(&parts);
        Ok(found)
    }

    /// A session of this context in another vhost: the same URLs and credentials (a password
    /// command is not run again), its own AMQP connection and read ledger.
    pub async fn open_in(&self, vhost: &str) -> Result<Session, SessionError> {
        let mut target = self.target.clone();
        target.vhost = vhost.to_string();
        Session::open(target).await
    }

    /// Whether a depth refresh at `now` should be written to the store: one per sample gap.
    pub fn depths_due(&self, now: jiff::Timestamp) -> bool {
        let last = self
            .depths_written
            .load(std::sync::atomic::Ordering::Relaxed);
        now.as_second().saturating_sub(last) >= crate::domain::urgency::SAMPLE_GAP_SECS
    }

    pub fn depths_recorded(&self, now: jiff::Timestamp) {
        self.depths_written
            .store(now.as_second(), std::sync::atomic::Ordering::Relaxed);
    }

    /// The key Warren remembers `vhost` of this context under (see [`Session::memory_key`]).
    pub fn memory_key_of(&self, vhost: &str) -> String {
        format!("{}{}", self.target.context, vhost)
    }

    /// Whether `queue` exists in the vhost (a passive declare).
    pub async fn queue_exists(&self, queue: &str) -> Result<bool, SessionError> {
        queue_exists(self.amqp().await?, queue).await
    }

    /// A fresh AMQP connection of its own (a restore's publishing).
    pub async fn connection(&self, name: &str) -> Result<lapin::Connection, SessionError> {
        self.connect_amqp(name).await
    }
}

/// Resolves the command-line overrides and configuration into a target.
pub fn target(overrides: &config::Overrides) -> Result<Target, config::ConfigError> {
    config::load(overrides).map(|(_, t)| t)
}
