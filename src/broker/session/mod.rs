//! A session: a connection handle (`broker::handle::Handle`: the target, the management client,
//! the AMQP connection opened on first need) and a read cache (`cache::ReadCache`: what was read
//! and found), with the broker side of the operations the CLI and the TUI worker share —
//! discover, browse safely, plan and run a replay — which implement the ports `ops` owns.
//! Everything that decides uses the pure domain; this layer only fetches and moves.
//!
//! Split by concern: the read cache (`cache`); reads and the read ledger (`reads`), what Warren
//! remembers (`memory`), the replay plan (`preview`, `planning`) and its target checks
//! (`targets`), runs (`run`), selection (`select`), the archive stream (`archive`), write checks
//! (`write_check`) and the sessions of a scope (`sessions`).

use crate::broker::amqp;
use crate::broker::browse;
use crate::broker::management::ManagementError;
use crate::broker::replay;
use crate::config;
use crate::config::Target;
use crate::domain::discovery::Discovery;

mod archive;
mod cache;
mod planning;
mod policy;
mod ports;
mod reads;
mod run;
mod select;
mod sessions;
mod targets;
mod write_check;

pub use crate::domain::preview::explained::{
    Explained, Remembered, age_secs, arrival, dead_since, explain_all,
};
pub use crate::domain::preview::look::CHECKED_AS_MET;
pub use crate::domain::preview::{Preview, ReplaySpec, TargetPreview};
pub use crate::domain::preview::{ReadConsent, TargetKey};
pub use reads::into_messages;
pub use run::Work;
pub use select::Selected;
pub use sessions::Sessions;
pub use write_check::WriteCheck;
pub(crate) use write_check::{Trial, trial_publish};

pub use crate::broker::handle::Handle;
use cache::{KeptRead, ReadCache};
pub(crate) use targets::Rest;
pub(crate) use targets::queue_exists;

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

/// One connected broker as the operations see it: the connection handle (`broker::handle`:
/// URLs, the management client, the AMQP connection, what the broker said of itself) and what
/// this session has read and found ([`ReadCache`]). The ports `ops` owns are implemented on it.
pub struct Session {
    pub handle: Handle,
    cache: ReadCache,
}

impl Session {
    /// Opens the connection handle (see [`Handle::open`]) with an empty read cache.
    pub async fn open(target: Target) -> Result<Session, SessionError> {
        Ok(Session {
            handle: Handle::open(target).await?,
            cache: ReadCache::default(),
        })
    }

    pub fn vhost(&self) -> &str {
        self.handle.vhost()
    }

    pub async fn discover(&self) -> Result<Discovery, SessionError> {
        let d = self.handle.discover().await?;
        self.cache.found_dlqs(std::slice::from_ref(&d));
        Ok(d)
    }

    /// Whether the last discovery found `queue` of `vhost` to be a dead-letter queue.
    pub fn is_dlq(&self, vhost: &str, queue: &str) -> bool {
        self.cache.is_dlq(vhost, queue)
    }

    /// The discovery of every vhost the user may see (`--vhost '*'`), from one listing of each
    /// kind (see `discover::discover_all`).
    pub async fn discover_all(&self) -> Result<Vec<(String, Discovery)>, SessionError> {
        let found = self.handle.discover_all().await?;
        let parts: Vec<Discovery> = found.iter().map(|(_, d)| d.clone()).collect();
        self.cache.found_dlqs(&parts);
        Ok(found)
    }

    /// A session of this context in another vhost: the same URLs and credentials (a password
    /// command is not run again), its own AMQP connection and read cache.
    pub async fn open_in(&self, vhost: &str) -> Result<Session, SessionError> {
        let mut target = self.handle.target.clone();
        target.vhost = vhost.to_string();
        Session::open(target).await
    }

    /// Whether a depth refresh at `now` should be written to the store: one per sample gap.
    pub fn depths_due(&self, now: jiff::Timestamp) -> bool {
        self.cache.depths_due(now)
    }

    pub fn depths_recorded(&self, now: jiff::Timestamp) {
        self.cache.depths_recorded(now)
    }
}

/// Resolves the command-line overrides and configuration into a target.
pub fn target(overrides: &config::Overrides) -> Result<Target, config::ConfigError> {
    config::load(overrides).map(|(_, t)| t)
}
