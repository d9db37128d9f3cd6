//! The command line: parses arguments with clap, starts file logging, and dispatches to the
//! commands. Exit codes: 0 success, 1 the work failed (e.g. a replay left messages behind),
//! 2 usage, 3 broker unreachable or refused.

pub mod archive;
pub mod args;
mod audit;
pub mod commands;
pub(crate) mod front;
mod groups;
pub mod logging;
mod man;
mod redirect;
mod run_print;
mod show;
pub mod triage;

use std::fmt;
use std::io::Write as _;
use std::sync::atomic::{AtomicBool, Ordering};

use clap::Parser;

pub use args::{Cli, Command};

/// Exit codes, as documented in docs/cli.md and the man page (`man::EXIT_CODES`).
pub mod exit {
    pub const OK: i32 = 0;
    pub const FAILED: i32 = 1;
    pub const USAGE: i32 = 2;
    pub const BROKER: i32 = 3;
}

/// A command's failure: the one-line cause for stderr and the exit code.
#[derive(Debug)]
pub struct Failure {
    pub code: i32,
    pub message: String,
}

impl Failure {
    pub fn usage(message: impl Into<String>) -> Failure {
        Failure {
            code: exit::USAGE,
            message: message.into(),
        }
    }
    pub fn broker(message: impl Into<String>) -> Failure {
        Failure {
            code: exit::BROKER,
            message: message.into(),
        }
    }
    pub fn failed(message: impl Into<String>) -> Failure {
        Failure {
            code: exit::FAILED,
            message: message.into(),
        }
    }
}

/// Stack for Warren's own threads (the runtime's workers and the thread that drives the
/// command): deep headers are never taken apart by Warren's code (they are kept as
/// `HeaderValue::TooDeep`), but a lapin value can still be dropped here, recursively, when lapin
/// hands back prefetched messages; 64 MiB covers the deepest a 128 KiB frame allows.
const THREAD_STACK: usize = 64 << 20;

/// Runs Warren and returns the process exit code.
pub fn main() -> i32 {
    crate::tune_allocator();
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => {
            let code = if e.use_stderr() {
                exit::USAGE
            } else {
                exit::OK
            };
            // `--help | head -1`: clap's own printing must not fail loudly either.
            let _ = e.print();
            return code;
        }
    };
    let _log = logging::init();
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .thread_stack_size(THREAD_STACK)
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            crate::errln!("warren: cannot start the async runtime: {e}");
            return exit::FAILED;
        }
    };
    // The command runs on a thread with a known stack, not on the main thread's (often 8 MiB).
    let driver = std::thread::Builder::new()
        .name("warren-main".into())
        .stack_size(THREAD_STACK)
        .spawn(move || runtime.block_on(dispatch(cli)));
    let result = match driver.map(|h| h.join()) {
        Ok(Ok(result)) => result,
        Ok(Err(_)) => {
            // The panic message is already on stderr; say what it means.
            crate::errln!("warren: internal error (a bug); the log file has the details");
            return exit::FAILED;
        }
        Err(e) => {
            crate::errln!("warren: cannot start a thread: {e}");
            return exit::FAILED;
        }
    };
    match result {
        Ok(code) => code,
        Err(f) => {
            tracing::error!(code = f.code, "{}", f.message);
            // Causes quote broker strings (queue names, reply texts): never raw to the terminal.
            crate::errln!(
                "warren: {}",
                crate::domain::sanitize::multi_line(&f.message, 4000)
            );
            f.code
        }
    }
}

/// Set once stdout or stderr is closed: the rest of the output is dropped.
static STDOUT_CLOSED: AtomicBool = AtomicBool::new(false);
static STDERR_CLOSED: AtomicBool = AtomicBool::new(false);

/// Writes to stdout (or stderr). `println!` panics when the reader has gone
/// (`warren show Q --json | head -1`: EPIPE); here a failed write only stops the output and is
/// logged once, and the command finishes its work (a replay still settles what it moved) and
/// exits with its usual code. Use through [`outln!`], [`out!`], [`errln!`] and [`err!`].
pub fn write_out(to_stderr: bool, args: fmt::Arguments<'_>) {
    let closed = if to_stderr {
        &STDERR_CLOSED
    } else {
        &STDOUT_CLOSED
    };
    if closed.load(Ordering::Relaxed) {
        return;
    }
    let r = if to_stderr {
        let mut e = std::io::stderr().lock();
        e.write_fmt(args).and_then(|()| e.flush())
    } else {
        let mut o = std::io::stdout().lock();
        o.write_fmt(args).and_then(|()| o.flush())
    };
    if let Err(e) = r {
        closed.store(true, Ordering::Relaxed);
        let which = if to_stderr { "stderr" } else { "stdout" };
        if e.kind() == std::io::ErrorKind::BrokenPipe {
            tracing::info!("{which} was closed by its reader; the rest of the output is dropped");
        } else {
            tracing::warn!("cannot write to {which} ({e}); the rest of the output is dropped");
        }
    }
}

/// Writes raw bytes to stdout the same way (completions, the man page).
pub fn write_out_bytes(bytes: &[u8]) {
    if STDOUT_CLOSED.load(Ordering::Relaxed) {
        return;
    }
    let mut o = std::io::stdout().lock();
    if let Err(e) = o.write_all(bytes).and_then(|()| o.flush()) {
        STDOUT_CLOSED.store(true, Ordering::Relaxed);
        tracing::info!("stdout closed ({e}); the rest of the output is dropped");
    }
}

/// `println!` that never panics: see [`write_out`].
#[macro_export]
macro_rules! outln {
    () => { $crate::cli::write_out(false, format_args!("\n")) };
    ($($t:tt)*) => { $crate::cli::write_out(false, format_args!("{}\n", format_args!($($t)*))) };
}

/// `print!` that never panics: see [`write_out`].
#[macro_export]
macro_rules! out {
    ($($t:tt)*) => { $crate::cli::write_out(false, format_args!($($t)*)) };
}

/// `eprintln!` that never panics: see [`write_out`].
#[macro_export]
macro_rules! errln {
    () => { $crate::cli::write_out(true, format_args!("\n")) };
    ($($t:tt)*) => { $crate::cli::write_out(true, format_args!("{}\n", format_args!($($t)*))) };
}

/// `eprint!` that never panics: see [`write_out`].
#[macro_export]
macro_rules! err {
    ($($t:tt)*) => { $crate::cli::write_out(true, format_args!($($t)*)) };
}

async fn dispatch(cli: Cli) -> Result<i32, Failure> {
    let c = &cli.conn;
    match &cli.command {
        None => commands::tui(c).await,
        Some(Command::Queues { json, all, sort }) => triage::queues(c, *json, *all, *sort).await,
        Some(Command::Watch(a)) => triage::watch(c, a).await,
        Some(Command::Show {
            queue,
            snapshot,
            limit,
            json,
            filter,
        }) => {
            show::show(
                c,
                queue.as_deref(),
                snapshot.as_deref(),
                *limit,
                *json,
                filter.as_deref(),
            )
            .await
        }
        Some(Command::Groups {
            queue,
            snapshot,
            limit,
            json,
            by,
            note,
        }) => {
            let note = note.as_deref().and_then(|n| match n {
                [group, text] => Some((group.as_str(), text.as_str())),
                _ => None,
            });
            groups::groups(
                c,
                queue.as_deref(),
                snapshot.as_deref(),
                *limit,
                groups::GroupsOutput {
                    json: *json,
                    by: *by,
                },
                note,
            )
            .await
        }
        Some(Command::Replay(a)) => commands::replay(c, a).await,
        Some(Command::Archive(a)) => archive::archive(c, a).await,
        Some(Command::Restore(a)) => archive::restore(c, a).await,
        Some(Command::Discard(a)) => archive::discard(c, a).await,
        Some(Command::Audit { json, local, limit }) => audit::audit(c, *json, *local, *limit).await,
        Some(Command::Protect {
            queue,
            dry_run,
            yes,
        }) => commands::protect(c, queue, *dry_run, *yes).await,
        Some(Command::Redirect { command }) => redirect::redirect(c, command).await,
        Some(Command::Export {
            queue,
            output,
            limit,
        }) => commands::export(c, queue, output, *limit).await,
        Some(Command::Open { files }) => commands::open_snapshot(c, files).await,
        Some(Command::Demo) => commands::demo(c).await,
        Some(Command::Completions { shell }) => {
            // Rendered first: clap_complete panics when its writer fails (a closed pipe).
            let mut cmd = <Cli as clap::CommandFactory>::command();
            let mut buf = Vec::new();
            clap_complete::generate(*shell, &mut cmd, "warren", &mut buf);
            write_out_bytes(&buf);
            Ok(exit::OK)
        }
        Some(Command::Man) => {
            let buf = man::render()
                .map_err(|e| Failure::failed(format!("cannot render the man page: {e}")))?;
            write_out_bytes(&buf);
            Ok(exit::OK)
        }
    }
}
