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
use crate::domain::protect::ProtectPlan;
use crate::domain::redirect::{Destination, RedirectRecord};

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
