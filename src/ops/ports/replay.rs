//! What replay (with its canary and its edit) and restore need of the broker (`ReplayPort`,
//! `RestorePort`, and `Publishing`, the write check both make on the places they publish to),
//! beside where their record is kept (`RecordPort`). A replay's edit reads and archives as an
//! archive does, so `ReplayPort` includes `ArchivePort`; a restore reads the archive's place the
//! same way. `Session` implements them with the code the operations called directly before;
//! `ops::fake` implements them in memory.

use std::collections::HashMap;
use std::future::Future;

use tokio::sync::watch;

use super::ArchivePort;
use crate::broker::archive::Place;
use crate::broker::canary::Canary;
use crate::broker::replay::{Progress, Summary};
use crate::broker::restore::{self, Ask, ChosenRead, Outcome, ReplayWay};
use crate::broker::session::{Explained, Preview, ReplaySpec, SessionError, WriteCheck};
use crate::domain::archive::Stamp;
use crate::domain::canary::{CanaryDecision, CanaryPlan, CanaryRule, CanaryWait, Watch};
use crate::domain::message::DeadLetter;

/// The plan's first-seen times, by message key.
pub type FirstSeen = HashMap<String, jiff::Timestamp>;

/// Whether this user may publish where a run publishes.
pub trait Publishing: Sync {
    /// The write check on each (exchange, routing key) a run publishes to.
    fn publish_refusal(
        &self,
        targets: &[(String, String)],
    ) -> impl Future<Output = WriteCheck> + Send;
}

/// What a replay needs of the broker: its plan, its canary, its run, and (through
/// `ArchivePort`) what its edit reads and archives.
pub trait ReplayPort: ArchivePort + Publishing {
    /// The canary's watch queue, open while the canary waits.
    type Tap: Send;
    /// The plan: a look at the head when `look`, else as little reading as the run needs; the
    /// first-seen times of what was read are remembered on the way.
    /// `SessionError::NeedsConsent`: the read would spend quorum deliveries again.
    fn plan(
        &self,
        spec: &ReplaySpec,
        look: bool,
    ) -> impl Future<Output = Result<(Preview, FirstSeen), SessionError>> + Send;
    /// The canary's plan for `preview`: where its messages rest, whether it can see exactly.
    fn canary_plan(
        &self,
        dlq: &str,
        preview: &Preview,
        rule: CanaryRule,
    ) -> impl Future<Output = CanaryPlan> + Send;
    /// Sets up the canary's watch queue (`Err`: why it cannot be; the canary estimates).
    fn open_tap(
        &self,
        dlq: &str,
        plan: &CanaryPlan,
    ) -> impl Future<Output = Result<Self::Tap, String>> + Send;
    fn close_tap(&self, tap: Self::Tap) -> impl Future<Output = ()> + Send;
    /// Waits for the canary's messages to be consumed or to come back: what was decided, and
    /// what was seen.
    fn canary_wait(
        &self,
        c: &Canary<'_>,
        tap: Option<&mut Self::Tap>,
        cancel: &mut watch::Receiver<bool>,
        on_wait: impl FnMut(&CanaryWait) + Send,
    ) -> impl Future<Output = (CanaryDecision, Watch)> + Send;
    /// What `queue` holds now (`None`: it could not be counted).
    fn left_in(&self, queue: &str) -> impl Future<Output = Option<u64>> + Send;
    /// Messages another consumer holds unacknowledged on `queue` (`Handle::held_elsewhere`).
    fn held_elsewhere(&self, queue: &str) -> impl Future<Output = u64> + Send;
    /// The run: the engine, at most `spec.limit` of the plan, stopped by `cancel`.
    fn replay(
        &self,
        spec: &ReplaySpec,
        preview: &Preview,
        first_seen: FirstSeen,
        cancel: watch::Receiver<bool>,
        on_progress: impl FnMut(&Progress) + Send,
    ) -> impl Future<Output = Result<Summary, SessionError>> + Send;
    /// Keeps copies of `messages` in the archive at `place` (an edit's originals).
    fn keep_copies(
        &self,
        place: &Place,
        stamp: &Stamp,
        messages: &[DeadLetter],
    ) -> impl Future<Output = Result<(), String>> + Send;
}

/// What a restore needs of the broker: the archive's read (through `ArchivePort`, its place),
/// the plan, the room in its targets, and the publishing that is its run.
pub trait RestorePort: ArchivePort + Publishing {
    /// Where the store remembers what was restored from the archive at `place`.
    fn archive_key(&self, place: &Place) -> String;
    /// The context's window: at most this many in one run.
    fn window(&self) -> usize;
    /// Reads the archive and chooses what `ask` takes (at most `cap`), by what `memory`
    /// remembers as restored under `key`; `on_page` hears how many were read after each page.
    fn read_archive(
        &self,
        memory: &mut Self::Memory,
        key: &str,
        place: &Place,
        ask: &Ask,
        cap: usize,
        on_page: &mut (dyn FnMut(u64) + Send),
    ) -> impl Future<Output = Result<ChosenRead, String>> + Send;
    /// The plan back into the queues each came from.
    fn plan_back(
        &self,
        chosen: &[(String, Explained)],
    ) -> impl Future<Output = Result<restore::Plan, String>> + Send;
    /// The plan through the replay's plan (`--replay`).
    fn plan_replay(
        &self,
        place: &Place,
        chosen: Vec<(String, Explained)>,
        way: &ReplayWay,
    ) -> impl Future<Output = Result<restore::Plan, String>> + Send;
    /// Whether `queue` takes `count` more messages (`bytes` of bodies) without dropping or
    /// dead-lettering what it holds: `Some(Err)` refused, `Some(Ok)` a warning.
    fn room_in(
        &self,
        queue: &str,
        count: u64,
        bytes: u64,
    ) -> impl Future<Output = Result<Option<Result<String, String>>, SessionError>> + Send;
    /// Publishes the plan through the replay engine; the restored messages are remembered in
    /// `memory` under `key` (the run `audit_id`) as the engine acknowledges them.
    fn publish(
        &self,
        plan: restore::Plan,
        cancel: &watch::Receiver<bool>,
        memory: Self::Memory,
        key: String,
        audit_id: Option<i64>,
        on_batch: impl FnMut(u64, u64, u64) + Send,
    ) -> impl Future<Output = Outcome> + Send;
}
