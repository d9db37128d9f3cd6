//! Stopping the terminal UI on a signal: a closed terminal, tmux session or SSH connection
//! (SIGHUP), a service manager or `kill` (SIGTERM). (SIGINT is not among them: in raw mode
//! Ctrl-C is a key, and during a configured command it is that command's.) Either cancels the run in progress
//! through the worker and waits, bounded, for the worker to say it finished, so confirmed
//! messages are acknowledged and the audit records the run's counts and ids, as the commands
//! do (`cli::commands::drive`). The exit code is the shell's for that signal: 128 + its number.

use std::time::Duration;

use tokio::sync::mpsc;
use tokio::task::JoinHandle;

use crate::worker::protocol::ReplayOutcome;

/// How long the terminal may take to be restored: after a hangup a write to it can fail, and
/// must never keep Warren from settling.
pub(crate) const RESTORE_LIMIT: Duration = Duration::from_secs(1);

/// How long a failure of the terminal waits for the signal that explains it (a hangup closes
/// the terminal first, then the signal arrives).
pub(crate) const HANGUP_GRACE: Duration = Duration::from_millis(500);

/// How long the worker gets to settle the run in flight once a signal stopped the UI: a settle
/// takes a few seconds at most (the commands wait as long for a first Ctrl-C), and recording
/// the outcome in a locked store up to about 20 more (`store::record_outcome`, which
/// then keeps it pending); a SIGTERM stops waiting at once.
pub(crate) const SETTLE_LIMIT: Duration = Duration::from_secs(30);

/// A signal that stops the UI.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Stop {
    pub name: &'static str,
    pub number: i32,
}

impl Stop {
    pub const HANGUP: Stop = Stop {
        name: "SIGHUP",
        number: 1,
    };
    pub const TERMINATE: Stop = Stop {
        name: "SIGTERM",
        number: 15,
    };

    /// The conventional exit code for dying of this signal.
    pub fn exit_code(self) -> i32 {
        128 + self.number
    }
}

/// The stopping signals as they arrive. Installed once, for the whole UI session: from then on
/// they no longer kill the process.
pub(crate) fn signals() -> mpsc::UnboundedReceiver<Stop> {
    let (tx, rx) = mpsc::unbounded_channel();
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        let kinds = [
            (SignalKind::hangup(), Stop::HANGUP),
            (SignalKind::terminate(), Stop::TERMINATE),
        ];
        for (kind, stop) in kinds {
            let Ok(mut sig) = signal(kind) else {
                tracing::warn!("cannot catch {}: it will end Warren at once", stop.name);
                continue;
            };
            let tx = tx.clone();
            tokio::spawn(async move {
                while sig.recv().await.is_some() {
                    if tx.send(stop).is_err() {
                        return;
                    }
                }
            });
        }
    }
    #[cfg(not(unix))]
    drop(tx);
    rx
}

/// The first signal to arrive within `limit`, if any.
pub(crate) async fn signalled_within(
    stops: &mut mpsc::UnboundedReceiver<Stop>,
    limit: Duration,
) -> Option<Stop> {
    tokio::time::timeout(limit, stops.recv())
        .await
        .ok()
        .flatten()
}

/// Puts the terminal back (main screen, cooked mode, cursor) on a thread of its own, waiting
/// at most `limit` for it: a terminal that hung up may refuse or stall the writes.
pub(crate) fn restore_within(limit: Duration) {
    let (tx, rx) = std::sync::mpsc::channel();
    let spawned = std::thread::Builder::new()
        .name("warren-restore".into())
        .spawn(move || {
            ratatui::restore();
            let _ = tx.send(());
        });
    if spawned.is_ok() && rx.recv_timeout(limit).is_err() {
        tracing::warn!("the terminal could not be restored within {limit:?} (gone?)");
    }
}

/// After the UI ended: waits for the worker, which cancels the run in flight when the UI's
/// sender is dropped and ends once its audit record is finished. After a signal the wait is
/// bounded (`SETTLE_LIMIT`, or a SIGTERM after the first signal: a hangup often comes twice,
/// from the kernel and from tmux or sshd, so a second SIGHUP is not a second request) and the exit code is 128 + the signal's number;
/// otherwise it is `ok`. What happened is logged and said on stderr (which a hangup may have
/// taken away: the log file still has it).
///
/// A run the quit or the signal cut short is said as `warren replay` would say it (its summary,
/// from the broker's counts), and a quit then exits `failed` unless the run still completed.
pub async fn settle(
    worker: JoinHandle<Option<ReplayOutcome>>,
    stopped_by: Option<Stop>,
    ok: i32,
    failed: i32,
) -> i32 {
    let Some(stop) = stopped_by else {
        let cut = worker.await.ok().flatten();
        say_cut(cut.as_ref());
        return match cut {
            Some(run) if !run.completed() => failed,
            _ => ok,
        };
    };
    tracing::warn!(
        "{}: stopping; cancelling the run in progress, if any, and settling it",
        stop.name
    );
    let mut again = signals();
    let insist = async {
        while let Some(second) = again.recv().await {
            if second == Stop::TERMINATE {
                tracing::warn!(
                    "{}: stopping now, without waiting for the settle",
                    second.name
                );
                return;
            }
        }
        std::future::pending::<()>().await
    };
    let (settled, cut) = tokio::select! {
        r = tokio::time::timeout(SETTLE_LIMIT, worker) => match r {
            Ok(joined) => (true, joined.ok().flatten()),
            Err(_) => (false, None),
        },
        () = insist => (false, None),
    };
    say_cut(cut.as_ref());
    let said = if settled {
        format!(
            "warren: stopped by {}; a run in progress was cancelled and settled (see `warren audit`)",
            stop.name
        )
    } else {
        format!(
            "warren: stopped by {}; the run in progress did not settle within {}s: unacknowledged messages go back to the dead-letter queue when the connection closes (see `warren audit`)",
            stop.name,
            SETTLE_LIMIT.as_secs()
        )
    };
    tracing::warn!("{said}");
    crate::errln!("{said}");
    stop.exit_code()
}

/// Prints the summary of the run a quit or a signal cut short, when there was one.
fn say_cut(cut: Option<&ReplayOutcome>) {
    let Some(run) = cut else { return };
    for line in &run.words {
        tracing::warn!("the run cut short by quitting: {line}");
        crate::errln!("{line}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exit_codes_are_the_shells() {
        assert_eq!(Stop::HANGUP.exit_code(), 129);
        assert_eq!(Stop::TERMINATE.exit_code(), 143);
    }
}
