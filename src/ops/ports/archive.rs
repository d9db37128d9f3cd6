//! What archive and discard need of the broker (`ArchivePort`), beside where their record is
//! kept (`RecordPort`). `Session` implements it with the code the operations called directly
//! before; `ops::fake` implements it in memory.

use std::future::Future;
use std::path::Path;

use tokio::sync::watch;

use super::{RecordPort, Rights};
use crate::broker::archive::{DeclareError, Place, StreamState};
use crate::broker::replay::{Progress, Summary};
use crate::broker::session::{ReplaySpec, Selected, SessionError, WriteCheck};
use crate::config::ArchiveSettings;
use crate::domain::archive::Stamp;

/// What archive and discard need of the broker.
pub trait ArchivePort: Rights + RecordPort {
    /// What a run takes: prepared before the record starts, run after.
    type Work: Send;
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
