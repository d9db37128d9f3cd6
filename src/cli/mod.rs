//! The command line: parses arguments with clap, starts file logging, and dispatches to the
//! commands. Exit codes: 0 success, 1 the work failed (e.g. a replay left messages behind),
//! 2 usage, 3 broker unreachable or refused.

pub mod args;
pub mod commands;
pub mod logging;

use clap::Parser;

pub use args::{Cli, Command};

/// Exit codes, as documented in the README.
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

/// Runs Warren and returns the process exit code.
pub fn main() -> i32 {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => {
            let code = if e.use_stderr() {
                exit::USAGE
            } else {
                exit::OK
            };
            let _ = e.print();
            return code;
        }
    };
    let _log = logging::init();
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("warren: cannot start the async runtime: {e}");
            return exit::FAILED;
        }
    };
    match runtime.block_on(dispatch(cli)) {
        Ok(code) => code,
        Err(f) => {
            tracing::error!(code = f.code, "{}", f.message);
            // Causes quote broker strings (queue names, reply texts): never raw to the terminal.
            eprintln!(
                "warren: {}",
                crate::domain::sanitize::multi_line(&f.message, 4000)
            );
            f.code
        }
    }
}

async fn dispatch(cli: Cli) -> Result<i32, Failure> {
    let c = &cli.conn;
    match &cli.command {
        None => commands::tui(c).await,
        Some(Command::Queues { json, all }) => commands::queues(c, *json, *all).await,
        Some(Command::Show {
            queue,
            snapshot,
            limit,
            json,
            filter,
        }) => {
            commands::show(
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
        }) => commands::groups(c, queue.as_deref(), snapshot.as_deref(), *limit, *json).await,
        Some(Command::Replay(a)) => commands::replay(c, a).await,
        Some(Command::Audit { json, limit }) => commands::audit(*json, *limit).await,
        Some(Command::Protect {
            queue,
            dry_run,
            yes,
        }) => commands::protect(c, queue, *dry_run, *yes).await,
        Some(Command::Export {
            queue,
            output,
            limit,
        }) => commands::export(c, queue, output, *limit).await,
        Some(Command::Open { files }) => commands::open_snapshot(files).await,
        Some(Command::Demo) => commands::demo(c).await,
        Some(Command::Completions { shell }) => {
            let mut cmd = <Cli as clap::CommandFactory>::command();
            clap_complete::generate(*shell, &mut cmd, "warren", &mut std::io::stdout());
            Ok(exit::OK)
        }
        Some(Command::Man) => {
            let man = clap_mangen::Man::new(<Cli as clap::CommandFactory>::command());
            man.render(&mut std::io::stdout())
                .map_err(|e| Failure::failed(format!("cannot write the man page: {e}")))?;
            Ok(exit::OK)
        }
    }
}
