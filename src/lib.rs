//! Warren: a terminal tool for RabbitMQ dead-letter queues.
//!
//! The layers, from the inside out:
//! - [`domain`]: pure model — header values, x-death, framework conventions, verdicts,
//!   fingerprints, replay plans, filters, terminal-safe text. No IO.
//! - [`config`]: where Warren connects and how it behaves: the config file, its contexts, URLs
//!   and settings, resolved with the command line's overrides. No broker IO.
//! - [`broker`]: the management API (reqwest) and AMQP (lapin): discovery, browse, replay.
//! - [`store`]: Warren's local memory (rusqlite): first-seen times and the replay audit.
//! - [`local`]: Warren's short-lived local files: a browsed page (`spill`) and a run's moved ids
//!   (`spool`), kept out of memory.
//! - [`demo`]: `warren demo`, a vhost of real dead letters: scenarios as data, the AMQP moves
//!   that make them happen (uses broker and domain).
//! - [`worker`]: the background tokio task that owns broker connections for the TUI.
//! - [`tui`]: the ratatui app: state, pure update, view.
//! - [`cli`]: the command line (clap) tying it together.
//! - `editor`: `$VISUAL`/`$EDITOR`, which both front ends hand a document to.

/// Every allocation in Warren, its binary, tests and benchmarks, goes through mimalloc. A replay
/// converts each message's headers into the domain and back and plans it: about seventy small
/// allocations a message, where glibc's malloc and free were a third of that work's
/// instructions (callgrind on `bench_classify`: 41,175 a message with glibc, 28,300 with
/// mimalloc; see docs/benchmarks.md, Replay).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// mimalloc's `purge_delay` (its `mi_option_t`; the same in its v2 and v3).
const MI_OPTION_PURGE_DELAY: libmimalloc_sys::mi_option_t = 15;

/// Has mimalloc give freed memory back to the system at once instead of 10 ms later: the TUI
/// reading a million dead letters frees as fast as it allocates, and with the delay it peaked
/// at 247 MiB against 205 MiB without (`bench_big_dlq`, docs/benchmarks.md). Called first by
/// `cli::main`, and by the benchmarks that measure what the binary does.
pub fn tune_allocator() {
    // SAFETY: mi_option_set stores an option's value; it takes no pointer and may be called
    // from any thread at any time.
    unsafe { libmimalloc_sys::mi_option_set(MI_OPTION_PURGE_DELAY, 0) }
}

pub mod broker;
pub mod cli;
pub mod config;
pub mod demo;
pub mod domain;
mod editor;
pub mod local;
pub mod ops;
pub mod store;
pub mod tui;
pub mod worker;
