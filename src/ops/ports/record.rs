//! Where every record is kept: Warren's local store (the memory port, `MemoryPort`) and the
//! broker's audit stream (`RecordPort`, whose `BrokerLog` appends to it). `ops::record` is the
//! one writer on them, for runs (replay, archive, discard, restore) and for the changes that are
//! no run (a protect's policy, a redirect, a group note). `Session` and `Store` implement them
//! with the code the operations called directly before; `ops::fake` implements them in memory.

use std::collections::HashMap;
use std::future::Future;

use jiff::Timestamp;
use serde::Serialize;

use super::Author;
use crate::broker::audit::{BrokerRecord, Consent};
use crate::domain::grouping::GroupNote;
use crate::domain::run::RunKind;
use crate::local::spool::Spool;
use crate::store::{AuditOutcome, AuditStart, ProtectRecord, Store};

/// Warren's local store, as the operations use it: the audit's row of a run, begun before
/// anything moves and finished with what really happened, the protects, the notes on groups
/// and the first-seen times of messages. `vhost_key` is where a context's vhost is remembered
/// (`RecordPort::memory_key`).
pub trait MemoryPort {
    /// Writes the run's start; its number in the store, or why it could not be written.
    fn start_run(&self, op: RunKind, start: &AuditStart) -> Result<i64, String>;
    /// Writes how run `id` ended, with its moved ids: what could not be written.
    fn finish_run(&self, id: i64, out: &AuditOutcome, moved: &Spool) -> Vec<String>;
    /// Keeps the record of a policy a protect set.
    fn keep_protect(&self, rec: &ProtectRecord) -> Result<(), String>;
    /// Keeps `note` as the note of its group, replacing any earlier one (an empty text removes
    /// it): whether a note is now kept.
    fn set_note(&self, vhost_key: &str, note: &GroupNote) -> Result<bool, String>;
    /// The notes on `queue`'s groups, every grouping mode, oldest first.
    fn notes(&self, vhost_key: &str, queue: &str) -> Result<Vec<GroupNote>, String>;
    /// Forgets the notes of groups that are gone: how many were.
    fn forget_notes(&self, vhost_key: &str, gone: &[&GroupNote]) -> Result<usize, String>;
    /// Records `now` as the first-seen time of the messages with `keys` in `queue` not seen
    /// before: every key's first-seen time.
    fn seen(
        &self,
        vhost_key: &str,
        queue: &str,
        keys: &[String],
        now: Timestamp,
    ) -> Result<HashMap<String, Timestamp>, String>;
    /// How many audited replays in `context` and `vhost` moved each of the messages `ids`.
    fn replays(
        &self,
        context: &str,
        vhost: &str,
        ids: &[String],
    ) -> Result<HashMap<String, i64>, String>;
}

impl MemoryPort for Store {
    fn start_run(&self, op: RunKind, start: &AuditStart) -> Result<i64, String> {
        self.begin_operation(op, start).map_err(|e| e.to_string())
    }

    fn finish_run(&self, id: i64, out: &AuditOutcome, moved: &Spool) -> Vec<String> {
        crate::store::record_outcome(self, id, out, moved)
    }

    fn keep_protect(&self, rec: &ProtectRecord) -> Result<(), String> {
        self.record_protect(rec).map_err(|e| e.to_string())
    }

    fn set_note(&self, vhost_key: &str, note: &GroupNote) -> Result<bool, String> {
        self.set_group_note(vhost_key, note)
            .map_err(|e| e.to_string())
    }

    fn notes(&self, vhost_key: &str, queue: &str) -> Result<Vec<GroupNote>, String> {
        self.group_notes(vhost_key, queue)
            .map_err(|e| e.to_string())
    }

    fn forget_notes(&self, vhost_key: &str, gone: &[&GroupNote]) -> Result<usize, String> {
        self.forget_group_notes(vhost_key, gone)
            .map_err(|e| e.to_string())
    }

    fn seen(
        &self,
        vhost_key: &str,
        queue: &str,
        keys: &[String],
        now: Timestamp,
    ) -> Result<HashMap<String, Timestamp>, String> {
        self.record_seen(vhost_key, queue, keys, now)
            .map_err(|e| e.to_string())
    }

    fn replays(
        &self,
        context: &str,
        vhost: &str,
        ids: &[String],
    ) -> Result<HashMap<String, i64>, String> {
        self.replay_counts(context, vhost, ids)
            .map_err(|e| e.to_string())
    }
}

/// The broker's audit stream, opened for appending (or why it could not be).
pub trait BrokerLog: Send + Sized {
    /// A log that writes nothing, because of `why` (a run kept off the record).
    fn off(why: &str) -> Self;
    /// Whether entries reach the broker.
    fn is_written(&self) -> bool;
    /// Appends one entry (`kind`, `event`, the record as JSON): why the broker record could not
    /// be written, the first time it could not (`None` after that, and when the operator
    /// declined the stream up front).
    fn append<T: Serialize + Sync>(
        &mut self,
        kind: &str,
        event: &str,
        run_id: &str,
        record: &T,
    ) -> impl Future<Output = Option<String>> + Send;
    /// Writes how a run ended, with its moved ids: why the broker record could not be written,
    /// the first time it could not.
    fn finish(
        &mut self,
        op: &str,
        run_id: &str,
        out: AuditOutcome,
        moved: &Spool,
    ) -> impl Future<Output = Option<String>> + Send;
}

impl BrokerLog for BrokerRecord {
    fn off(why: &str) -> BrokerRecord {
        BrokerRecord::off(why)
    }

    fn is_written(&self) -> bool {
        BrokerRecord::is_written(self)
    }

    fn append<T: Serialize + Sync>(
        &mut self,
        kind: &str,
        event: &str,
        run_id: &str,
        record: &T,
    ) -> impl Future<Output = Option<String>> + Send {
        BrokerRecord::append(self, kind, event, run_id, record)
    }

    fn finish(
        &mut self,
        op: &str,
        run_id: &str,
        out: AuditOutcome,
        moved: &Spool,
    ) -> impl Future<Output = Option<String>> + Send {
        BrokerRecord::finish(self, op, run_id, out, moved)
    }
}

/// Where the record is kept: Warren's local store, and the broker's audit stream.
pub trait RecordPort: Sync {
    type Log: BrokerLog;
    type Memory: MemoryPort + Send;
    /// Who acts, as the broker vouches (`whoami`), where, and what the context says of the
    /// audit stream.
    fn operator(&self) -> Author;
    /// Where Warren remembers this vhost of this context (first-seen times, notes).
    fn memory_key(&self) -> String;
    /// Warren's local store, opened; `Err`: why it cannot be.
    fn memory(&self) -> Result<Self::Memory, String>;
    /// Opens the broker's audit stream for appending, creating it as `consent` allows.
    fn open_log(&self, consent: Consent<'_>) -> impl Future<Output = Self::Log> + Send;
}
