//! The command log's side in the worker: each broker operation is reported to the UI as it
//! happens, with what it cost, in words (the TUI's `oplog` shows them).

use tokio::sync::mpsc;

use super::protocol::{Operation, OperationKind, ReplayOutcome, Report};

/// Reports broker operations to the UI as they happen (its command log). Sent on their own, not
/// with a task's answers, which the plan drops when a newer request replaced them: the
/// operation happened all the same.
#[derive(Clone)]
pub(super) struct Ops(pub(super) mpsc::Sender<Report>);

impl Ops {
    pub(super) async fn report(&self, kind: OperationKind, text: String) {
        let op = Operation {
            at: jiff::Timestamp::now(),
            kind,
            text,
        };
        let _ = self.0.send(Report::Operation(op)).await;
    }
}

/// What a replay did on the broker: publishes, acks, what stayed.
pub(super) fn replay_text(queue: &str, o: &ReplayOutcome) -> String {
    let p = &o.progress;
    let mut text = format!(
        "from {queue}: {} published, confirmed and acked off {queue}; {} returned unroutable and {} failed, left in {queue}",
        p.moved, p.returned, p.failed
    );
    if o.cancelled {
        text.push_str("; stopped by the operator");
    }
    if let Some(e) = &o.error {
        text.push_str(&format!("; {e}"));
    }
    text
}

/// What an archive or a discard did on the broker, for the command log.
pub(super) fn job_text(verb: &str, queue: &str, o: &ReplayOutcome) -> String {
    let p = &o.progress;
    let done = match verb {
        "discard" => "deleted for good",
        "restore" | "replay" => "restored (published, confirmed)",
        _ => "archived (confirmed, then acked)",
    };
    let mut text = format!(
        "{verb} from {queue}: {} {done}; {} returned and {} failed, left in {queue}",
        p.moved, p.returned, p.failed
    );
    if o.cancelled {
        text.push_str("; stopped by the operator");
    }
    if let Some(e) = &o.error {
        text.push_str(&format!("; {e}"));
    }
    text
}
