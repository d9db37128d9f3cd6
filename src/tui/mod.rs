//! The terminal UI (`warren` with no command). One state owner (`State`), a pure
//! `update(&mut State, Event) -> Vec<Command>`, and `view(&State, &mut Frame)` that only draws.
//! The worker (`crate::worker`) turns `Command`s into broker calls and answers with `Report`s;
//! `run` is the terminal loop tying them together.

pub mod custom;
pub mod detail;
pub mod edit;
pub mod event;
pub mod format;
pub mod help;
pub mod keys;
pub mod modal;
pub mod oplog;
mod orders;
pub mod pager;
pub mod picker;
mod queue_row;
mod refresh;
pub mod replays;
pub mod run;
pub mod save;
pub mod state;
pub mod stop;
pub mod theme;
pub mod update;
pub mod view;

pub use crate::worker::protocol::{Command, ReplayRequest};
pub use event::{
    ConnectionState, Event, Failure, Operation, OperationKind, Overview, ReplayOutcome,
    ReplayPreview, ReplayProgress, Report, Ticket,
};
pub use state::State;
pub use theme::Theme;
pub use update::update;
pub use view::view;
