//! Everything the UI reacts to, in one enum: terminal input, the clock, and what the background
//! worker reports (its own type, see `worker::protocol`).

use jiff::Timestamp;
use ratatui::crossterm::event::KeyEvent;

pub use crate::worker::protocol::{
    ConnectionState, Failure, JobKind, Operation, OperationKind, Overview, Reach, ReplayOutcome,
    ReplayPreview, ReplayProgress, Report, RestoreHow, RestorePreview, Ticket,
};

#[derive(Clone, Debug)]
pub enum Event {
    /// A key press (the loop drops release and repeat events).
    Key(KeyEvent),
    Resize {
        width: u16,
        height: u16,
    },
    /// The clock moved. Carries the time so that `update` stays pure and tests are deterministic.
    /// Also the cue to refresh depths.
    Tick(Timestamp),
    /// Typing in the filter paused: narrow a large list now (sent by the loop, see
    /// `update::FILTER_SETTLE`).
    FilterSettle,
    /// Nothing else is waiting: a slice of the list's work (`State::idle_step`; sent by the
    /// loop while `State::has_idle_work`).
    Idle,
    /// The queue-list cursor rested: read the queue under it (sent by the loop, see
    /// `update::GLANCE_SETTLE`).
    GlanceSettle,
    /// What the background worker reported (boxed: a report is far larger than a key).
    Worker(Box<Report>),
    /// Back from `$EDITOR`: the document as saved, `None` when the operator gave up, or why
    /// the editor could not be used.
    Edited(Result<Option<String>, String>),
}

impl From<Report> for Event {
    fn from(report: Report) -> Event {
        Event::Worker(Box::new(report))
    }
}
