//! What the UI asks the background worker to do. `update` returns these as data and performs no
//! IO itself; the worker turns them into broker calls and answers with `Event`s.

use std::path::PathBuf;

use crate::domain::message::DeadLetter;
use crate::domain::selection::Selection;
use crate::domain::snapshot::SnapshotHeader;

#[derive(Clone, Debug)]
pub enum Command {
    /// Discover the vhost's queues (answer: `Event::QueuesLoaded`).
    LoadQueues,
    /// Fetch depths only, without browsing messages (answer: `Event::DepthsRefreshed`).
    RefreshDepths,
    /// Read up to `limit` messages from the head of `queue` without removing them
    /// (answer: `Event::MessagesLoaded`).
    Browse {
        queue: String,
        limit: usize,
        /// The operator accepted that reading again spends deliveries (a quorum queue with a
        /// limit); otherwise the worker reuses what it already read from such a queue.
        read_again: bool,
    },
    /// Work out what replaying `selection` from `queue` would do (answer: `Event::ReplayPreview`).
    PreviewReplay {
        queue: String,
        selection: Selection,
        /// The plan differs: with attempts kept nothing is removed.
        keep_attempts: bool,
    },
    /// Replay, after the operator accepted the confirmation (answer: `Event::ReplayProgress`…,
    /// then `Event::ReplayFinished`). Never emitted in read-only mode.
    Replay(ReplayRequest),
    /// Stop a running replay after the message in flight; what moved stays moved.
    CancelReplay,
    /// Set the policy that lifts `queue`'s delivery limit (answer: `Event::Notice`, then the
    /// queue list again). Never emitted in read-only mode.
    Protect(String),
    /// Another context, or another vhost of this one. `generation` is the session the UI shows
    /// from now on: answers tagged with an older one are dropped (see `event::Ticket`).
    SwitchContext {
        name: String,
        generation: u64,
    },
    SwitchVhost {
        name: String,
        generation: u64,
    },
    /// Write what is on screen as plain text to `path` (performed by the terminal loop, which
    /// has the frame; answer: `Event::Notice` or `Event::Error`). Allowed read-only.
    SaveScreen {
        path: PathBuf,
    },
    /// Write `messages` as a snapshot file (`warren open` reads it) to `path` (performed by the
    /// terminal loop; answer: `Event::Notice` or `Event::Error`). Allowed read-only.
    SaveSnapshot {
        path: PathBuf,
        header: SnapshotHeader,
        messages: Vec<DeadLetter>,
    },
    Quit,
}

/// An accepted replay.
#[derive(Clone, Debug)]
pub struct ReplayRequest {
    pub queue: String,
    pub selection: Selection,
    /// The count the operator confirmed; the worker stops if the selection grew past it.
    pub expected: u64,
    /// Messages per second.
    pub rate: u32,
    /// Keep the retry counters instead of resetting them.
    pub keep_attempts: bool,
    pub dry_run: bool,
}
