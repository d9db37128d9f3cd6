//! Warren: a terminal tool for RabbitMQ dead-letter queues.
//!
//! The layers, from the inside out:
//! - [`domain`]: pure model — header values, x-death, framework conventions, verdicts,
//!   fingerprints, replay plans, filters, terminal-safe text. No IO.
//! - [`broker`]: configuration, the management API (reqwest) and AMQP (lapin): discovery, browse,
//!   replay.
//! - [`store`]: Warren's local memory (rusqlite): first-seen times and the replay audit.
//! - [`demo`]: `warren demo`, a vhost of real dead letters: scenarios as data, the AMQP moves
//!   that make them happen (uses broker and domain).
//! - [`worker`]: the background tokio task that owns broker connections for the TUI.
//! - [`tui`]: the ratatui app: state, pure update, view.
//! - [`cli`]: the command line (clap) tying it together.
//! - `editor`: `$VISUAL`/`$EDITOR`, which both front ends hand a document to.

pub mod broker;
pub mod cli;
pub mod demo;
pub mod domain;
mod editor;
pub mod ops;
pub mod store;
pub mod tui;
pub mod worker;
