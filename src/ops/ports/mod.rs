//! The ports `ops` reaches the broker through: traits it owns, so each guarantee of an
//! operation (rights first, nothing created without consent, the record after the change) is
//! a unit test against an in-memory fake (`ops::fake`), with no broker. `Session` implements
//! them over the management API and AMQP, and `Store` implements the memory port (Warren's
//! local store as the record uses it). Every record is written by `ops::record` through
//! `RecordPort` and `MemoryPort`. Every operation is on them: redirect, protect, archive,
//! discard, replay (with its canary and its edit) and restore.

use std::future::Future;

mod archive;
mod record;
mod replay;
pub use archive::ArchivePort;
pub use record::{BrokerLog, MemoryPort, RecordPort};
pub use replay::{FirstSeen, Publishing, ReplayPort, RestorePort};

use super::Stop;
use super::rights::ReadOnly;
use crate::broker::audit::Consent;
use crate::broker::redirects::Current;
use crate::broker::session::Session;
use crate::domain::protect::ProtectPlan;
use crate::domain::redirect::{Destination, RedirectRecord};
use crate::domain::sanitize::one_line;

/// Whether anything may leave a queue here: asked by every operation before anything else.
pub trait Rights: Sync {
    /// Why nothing may leave a queue here, if so (`ops::rights::read_only`).
    fn read_only(&self) -> impl Future<Output = Option<ReadOnly>> + Send;
}

/// Who makes a change, for its record, and what the context says of creating streams.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Author {
    /// The user the broker vouches for on each entry (its `user_id`).
    pub broker_user: String,
    pub context: String,
    pub vhost: String,
    /// `create_audit_stream` in the context, when set.
    pub create_streams: Option<bool>,
    /// Whether the context keeps an audit stream on the broker (`audit_stream = ""` turns it
    /// off).
    pub audit_stream: bool,
}

/// What a redirect needs of the broker (its record is kept through `RecordPort`).
pub trait RedirectPort: Rights + RecordPort {
    fn author(&self) -> Author;
    /// The redirects in force (`Err`: why they could not be read).
    fn redirects(&self) -> impl Future<Output = Result<Current, String>> + Send;
    /// What the queue a redirect would send to is.
    fn destination(&self, queue: &str) -> impl Future<Output = Result<Destination, Stop>> + Send;
    /// What keeping a change would create and must be asked about first (the redirect
    /// stream, the audit stream), each in the operator's words.
    fn streams_to_create(&self) -> impl Future<Output = Vec<String>> + Send;
    /// Keeps the change on the redirect stream, creating it with `consent`.
    fn keep(
        &self,
        event: &'static str,
        rec: &RedirectRecord,
        consent: Consent<'_>,
    ) -> impl Future<Output = Result<(), String>> + Send;
}

/// What protecting a queue needs of the broker (its record is kept through `RecordPort`).
pub trait ProtectPort: Rights + RecordPort {
    /// The policy that lifts `queue`'s delivery limit: looked at, or set when `apply`.
    fn protect(
        &self,
        queue: &str,
        apply: bool,
    ) -> impl Future<Output = Result<ProtectPlan, Stop>> + Send;
}

impl Rights for Session {
    fn read_only(&self) -> impl Future<Output = Option<ReadOnly>> + Send {
        super::rights::read_only(&self.handle)
    }
}

impl RedirectPort for Session {
    fn author(&self) -> Author {
        Author {
            broker_user: self.handle.target.credentials.username.clone(),
            context: self.handle.target.context.clone(),
            vhost: self.vhost().to_string(),
            create_streams: self.handle.target.audit.create,
            audit_stream: self.handle.target.audit.stream.is_some(),
        }
    }

    fn redirects(&self) -> impl Future<Output = Result<Current, String>> + Send {
        crate::broker::redirects::current(self)
    }

    async fn destination(&self, queue: &str) -> Result<Destination, Stop> {
        use crate::broker::management::ManagementError;
        let broker =
            |e: String| Stop::Broker(format!("looking up '{}': {e}", one_line(queue, 100)));
        let info = match self.handle.mgmt.queue(self.vhost(), queue).await {
            Ok(i) => i,
            Err(ManagementError::NoQueue { .. }) => return Ok(Destination::Missing),
            Err(e) => return Err(broker(e.to_string())),
        };
        let settings = self
            .handle
            .settings_of(&info)
            .await
            .map_err(|e| broker(e.to_string()))?;
        Ok(
            if crate::domain::destination::is_wait_queue(&info, &settings) {
                Destination::WaitQueue
            } else {
                Destination::Queue
            },
        )
    }

    async fn streams_to_create(&self) -> Vec<String> {
        let (redirect_stream, audit_stream) = tokio::join!(
            crate::broker::redirects::creation_question(self),
            crate::broker::audit::stream_to_ask_about(self)
        );
        [redirect_stream, audit_stream]
            .into_iter()
            .flatten()
            .collect()
    }

    fn keep(
        &self,
        event: &'static str,
        rec: &RedirectRecord,
        consent: Consent<'_>,
    ) -> impl Future<Output = Result<(), String>> + Send {
        crate::broker::redirects::keep(self, event, rec, consent)
    }
}

impl ProtectPort for Session {
    async fn protect(&self, queue: &str, apply: bool) -> Result<ProtectPlan, Stop> {
        self.handle
            .protect(queue, apply)
            .await
            .map_err(super::replay::stop_of)
    }
}
