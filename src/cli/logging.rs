//! Logs go to a file in Warren's data directory, never to the terminal (the TUI owns it). The
//! level comes from `WARREN_LOG` (e.g. `WARREN_LOG=debug`), default `info`.

use std::path::PathBuf;

use tracing_appender::non_blocking::WorkerGuard;
use tracing_subscriber::EnvFilter;

/// Where the log file lives: `WARREN_LOG_DIR`, else the platform data dir (e.g.
/// `~/.local/share/warren/`), else the temp dir.
pub fn log_dir() -> PathBuf {
    if let Some(dir) = std::env::var_os("WARREN_LOG_DIR") {
        return PathBuf::from(dir);
    }
    directories::ProjectDirs::from("", "", "warren")
        .map(|d| d.data_dir().to_path_buf())
        .unwrap_or_else(|| std::env::temp_dir().join("warren"))
}

/// Starts file logging. Returns the guard that flushes on drop, or `None` when the log file
/// cannot be created (Warren still works; it just cannot log).
pub fn init() -> Option<WorkerGuard> {
    let dir = log_dir();
    std::fs::create_dir_all(&dir).ok()?;
    let appender = tracing_appender::rolling::never(&dir, "warren.log");
    let (writer, guard) = tracing_appender::non_blocking(appender);
    let filter = EnvFilter::try_from_env("WARREN_LOG").unwrap_or_else(|_| EnvFilter::new("info"));
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(writer)
        .with_ansi(false)
        .try_init()
        .ok()?;
    Some(guard)
}
