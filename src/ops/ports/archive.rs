//! What archive and discard need of the broker (`ArchivePort`), the broker half of a run's
//! record (`RecordPort`, `BrokerLog`), and Warren's local store as a run's record uses it (the
//! memory port, `MemoryPort`). `Session` and `Store` implement them with the code the
//! operations called directly before; `ops::fake` implements them in memory.

use std::future::Future;
use std::path::Path;

use tokio::sync::watch;

use super::{Author, Rights};
use crate::broker::archive::{self as keep, DeclareError, Place, StreamState};
use crate::broker::audit::{BrokerRecord, Consent};
use crate::broker::config::ArchiveSettings;
use crate::broker::replay::{Progress, Summary};
use crate::broker::session::{ReplaySpec, Selected, Session, SessionError, Work, WriteCheck};
use crate::broker::spool::Spool;
use crate::domain::archive::Stamp;
use crate::store::{AuditOutcome, AuditStart, Operation, Store};

/// Warren's local store as a run's record uses it: the audit's row, begun before anything
/// moves and finished with what really happened.
pub trait MemoryPort {
    /// Writes the run's start; its number in the store, or why it could not be written.
    fn start_run(&self, op: Operation, start: &AuditStart) -> Result<i64, String>;
    /// Writes how run `id` ended, with its moved ids: what could not be written.
    fn finish_run(&self, id: i64, out: &AuditOutcome, moved: &Spool) -> Vec<String>;
}

impl MemoryPort for Store {
    fn start_run(&self, op: Operation, start: &AuditStart) -> Result<i64, String> {
        self.begin_operation(op, start).map_err(|e| e.to_string())
    }

    fn finish_run(&self, id: i64, out: &AuditOutcome, moved: &Spool) -> Vec<String> {
        crate::broker::audit::record_outcome(self, id, out, moved)
    }
}

/// The broker half of a run's record, once its start was written (or could not be).
pub trait BrokerLog: Send {
    /// Whether the broker has the run's start.
    fn is_written(&self) -> bool;
    /// Writes how the run ended, with its moved ids: what to tell the operator the first time
    /// the broker record could not be written.
    fn finish(
        &mut self,
        op: &str,
        run_id: &str,
        out: AuditOutcome,
        moved: &Spool,
    ) -> impl Future<Output = Option<String>> + Send;
}

impl BrokerLog for BrokerRecord {
    fn is_written(&self) -> bool {
        BrokerRecord::is_written(self)
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

/// Where a run's record is kept: Warren's local store, and the broker's audit stream.
pub trait RecordPort: Sync {
    type Log: BrokerLog;
    type Memory: MemoryPort + Send;
    /// Warren's local store, opened; `Err`: why it cannot be.
    fn memory(&self) -> Result<Self::Memory, String>;
    /// Opens the broker's audit stream as `consent` allows and writes the run's start on it:
    /// the log, and what to tell the operator when the start could not be written.
    fn record_start(
        &self,
        op: Operation,
        start: &AuditStart,
        consent: Consent<'_>,
    ) -> impl Future<Output = (Self::Log, Option<String>)> + Send;
}

impl RecordPort for Session {
    type Log = BrokerRecord;
    type Memory = Store;

    fn memory(&self) -> Result<Store, String> {
        Store::open_default().map_err(|e| e.to_string())
    }

    async fn record_start(
        &self,
        op: Operation,
        start: &AuditStart,
        consent: Consent<'_>,
    ) -> (BrokerRecord, Option<String>) {
        let mut broker = BrokerRecord::open(self, consent).await;
        // The broker's copy of the start, before the first publish, so a crash reads
        // "interrupted" there too.
        let note = broker
            .append(op.as_str(), "start", &start.run_id, start)
            .await;
        (broker, note)
    }
}

/// What archive and discard need of the broker.
pub trait ArchivePort: Rights + RecordPort {
    /// What a run takes: prepared before the record starts, run after.
    type Work: Send;
    /// Who runs it as the broker vouches (`whoami`), where, and what the context says of
    /// creating the audit stream.
    fn operator(&self) -> Author;
    /// The context's archive: its stream, its max-age, `archive_local`, `archive_create`.
    fn archive_settings(&self) -> &ArchiveSettings;
    /// Whether `queue` is auto-delete (a run's consumer would end it).
    fn auto_delete(&self, queue: &str) -> impl Future<Output = Result<bool, SessionError>> + Send;
    /// Whether this broker has streams (RabbitMQ 3.9 and later).
    fn has_streams(&self) -> bool;
    /// The archive as a local file, for the reason given.
    fn local_place(&self, why: &str) -> Result<Place, String>;
    /// What holds the archive stream's name.
    fn archive_state(&self) -> impl Future<Output = Result<StreamState, SessionError>> + Send;
    /// Creates the archive stream (asked for first).
    fn create_archive(&self) -> impl Future<Output = Result<(), DeclareError>> + Send;
    /// Why the archive at `place` would not keep what is archived, if so.
    fn retention_refusal(&self, place: &Place) -> impl Future<Output = Result<(), String>> + Send;
    /// Reads the head of the queue (bodies up to `cap`) and picks the selection, remembering
    /// first-seen times. `SessionError::NeedsConsent`: the read would spend deliveries again.
    fn select(
        &self,
        spec: &ReplaySpec,
        cap: usize,
    ) -> impl Future<Output = Result<Selected, SessionError>> + Send;
    /// Whether this user may publish to the archive stream `stream`.
    fn write_refusal(&self, stream: &str) -> impl Future<Output = WriteCheck> + Send;
    /// An archive's work: into the stream, or into the local file (written here).
    fn archive_work(
        &self,
        place: &Place,
        stamp: Stamp,
        sel: &Selected,
        count: u64,
    ) -> Result<Self::Work, String>;
    /// A discard's work, after its snapshot (when kept) is written here.
    fn discard_work(
        &self,
        queue: &str,
        snapshot: Option<&Path>,
        sel: &Selected,
    ) -> Result<Self::Work, String>;
    /// The run: the engine, stopped by `cancel`, its progress to `on_progress`.
    fn run(
        &self,
        spec: &ReplaySpec,
        work: Self::Work,
        cancel: watch::Receiver<bool>,
        on_progress: impl FnMut(&Progress) + Send,
    ) -> impl Future<Output = Result<Summary, SessionError>> + Send;
}

impl ArchivePort for Session {
    type Work = Work;

    fn operator(&self) -> Author {
        Author {
            broker_user: self.whoami.name.clone(),
            context: self.target.context.clone(),
            vhost: self.vhost().to_string(),
            create_streams: self.target.audit.create,
        }
    }

    fn archive_settings(&self) -> &ArchiveSettings {
        &self.target.archive
    }

    async fn auto_delete(&self, queue: &str) -> Result<bool, SessionError> {
        let info = self.mgmt.queue(self.vhost(), queue).await?;
        Ok(info.auto_delete)
    }

    fn has_streams(&self) -> bool {
        self.streams_supported()
    }

    fn local_place(&self, why: &str) -> Result<Place, String> {
        keep::local_place(self, why)
    }

    fn archive_state(&self) -> impl Future<Output = Result<StreamState, SessionError>> + Send {
        Session::archive_state(self)
    }

    fn create_archive(&self) -> impl Future<Output = Result<(), DeclareError>> + Send {
        Session::create_archive(self)
    }

    fn retention_refusal(&self, place: &Place) -> impl Future<Output = Result<(), String>> + Send {
        keep::retention_refusal(self, place)
    }

    async fn select(&self, spec: &ReplaySpec, cap: usize) -> Result<Selected, SessionError> {
        Session::select(self, spec, cap, |keys| {
            crate::ops::remember(self, &spec.queue, keys)
        })
        .await
    }

    async fn write_refusal(&self, stream: &str) -> WriteCheck {
        Session::write_refusal(self, &[(String::new(), stream.to_string())]).await
    }

    fn archive_work(
        &self,
        place: &Place,
        stamp: Stamp,
        sel: &Selected,
        count: u64,
    ) -> Result<Work, String> {
        keep::archive_work(self, place, stamp, sel, count)
    }

    fn discard_work(
        &self,
        queue: &str,
        snapshot: Option<&Path>,
        sel: &Selected,
    ) -> Result<Work, String> {
        keep::discard_work(self, queue, snapshot, sel)
    }

    async fn run(
        &self,
        spec: &ReplaySpec,
        work: Work,
        cancel: watch::Receiver<bool>,
        on_progress: impl FnMut(&Progress) + Send,
    ) -> Result<Summary, SessionError> {
        let held = crate::ops::held_elsewhere(self, &spec.queue).await;
        let mut result = self.run_job(spec, work, cancel, on_progress).await;
        if let Ok(sum) = &mut result {
            sum.held_elsewhere = held;
        }
        result
    }
}
