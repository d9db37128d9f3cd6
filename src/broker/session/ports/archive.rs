//! The session's side of `ops::ports` (archive): the broker code the operations reach through the
//! traits `ops` owns.

use crate::broker::archive::{self as keep, DeclareError, Place, StreamState};
use crate::broker::replay::{Progress, Summary};
use crate::broker::session::{ReplaySpec, Selected, Session, SessionError, Work, WriteCheck};
use crate::config::ArchiveSettings;
use crate::domain::archive::Stamp;
use crate::ops::ports::*;
use std::future::Future;
use std::path::Path;
use tokio::sync::watch;

impl ArchivePort for Session {
    type Work = Work;

    fn archive_settings(&self) -> &ArchiveSettings {
        &self.handle.target.archive
    }

    async fn auto_delete(&self, queue: &str) -> Result<bool, SessionError> {
        let info = self.handle.mgmt.queue(self.vhost(), queue).await?;
        Ok(info.auto_delete)
    }

    fn has_streams(&self) -> bool {
        self.handle.streams_supported()
    }

    fn local_place(&self, why: &str) -> Result<Place, String> {
        keep::local_place(self, why)
    }

    fn archive_state(&self) -> impl Future<Output = Result<StreamState, SessionError>> + Send {
        self.handle.archive_state()
    }

    fn create_archive(&self) -> impl Future<Output = Result<(), DeclareError>> + Send {
        self.handle.create_archive()
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
        self.handle
            .write_refusal(&[(String::new(), stream.to_string())])
            .await
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
        let held = self.handle.held_elsewhere(&spec.queue).await;
        let mut result = self.run_job(spec, work, cancel, on_progress).await;
        if let Ok(sum) = &mut result {
            sum.held_elsewhere = held;
        }
        result
    }
}
