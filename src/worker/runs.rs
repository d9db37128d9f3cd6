//! The TUI's operations, each through its one home (`crate::ops`): the worker builds the typed
//! request from what the modal confirmed, runs it with the UI's cancel and progress, and turns
//! what comes back into reports.

use std::sync::Arc;

use tokio::sync::{mpsc, watch};

use super::front::TuiFront;
use super::ops::{self, Ops, replay_text};
use super::plan::{self, Work};
use super::protocol::{
    self, Failure, OperationKind, ReplayOutcome, ReplayProgress, Report, RestoreHow, Ticket,
};
use crate::broker::archive as keep;
use crate::broker::replay::{StopReason, Summary};
use crate::broker::session::{Session, SessionError};
use crate::domain::run::RunKind;
use crate::domain::selection::Selection;
use crate::ops::archive::{ArchiveRequest, Way};
use crate::ops::replay::ReplayRequest;
use crate::ops::restore::{ArchiveOf, Replaying, RestoreRequest};
use crate::ops::{self as home, Stop};

/// A stop in words, for the modal's or the progress window's error.
pub(super) fn stop_text(stop: Stop) -> String {
    match stop {
        Stop::Refused(r) => r.to_string(),
        Stop::Usage(why) | Stop::Broker(why) => why,
        Stop::ReadCost { text, .. } => format!("{text}; nothing moved"),
        Stop::Unanswered(question) => format!("{question}; nothing changed"),
        Stop::Declined => "nothing moved".into(),
        Stop::DryRun => "a dry run: nothing moved".into(),
    }
}

/// Sends what the front end collected: the command log's lines, and (for a run) the notices.
async fn said(front: &mut TuiFront, ops: &Ops, events: Option<&mpsc::Sender<Report>>) {
    for (kind, text) in front.oplog.drain(..) {
        ops.report(kind, text).await;
    }
    if let Some(events) = events
        && !front.notices.is_empty()
    {
        let _ = events.send(Report::Notice(front.notices.join("; "))).await;
        front.notices.clear();
    }
}

fn group_label(selection: &Selection) -> Option<String> {
    match selection {
        Selection::Group(g) => Some(g.audit_label()),
        _ => None,
    }
}

/// The replay modal's plan: the replay's own plan as a dry run, read from the head.
pub(super) async fn preview(
    s: &Session,
    (queue, selection, edited): (String, Selection, Option<String>),
    // Attempts kept, and Symfony's failure stamp stripped.
    headers: (bool, bool),
    ticket: Ticket,
    ops: &Ops,
) -> Report {
    let spec = super::read::spec_for(s, queue.clone(), selection, None, headers);
    let req = ReplayRequest {
        spec,
        dry_run: true,
        look_first: true,
        unaudited: None,
        filter: None,
        group: None,
        canary: None,
        edit: edited.as_ref().map(|_| Default::default()),
    };
    let mut front = TuiFront::plan(ticket, RestoreHow::default());
    front.edited = edited;
    let stop = match home::replay::prepare(s, req, &mut front).await {
        Ok(_) => Stop::refused("a plan moved nothing"),
        Err(stop) => stop,
    };
    said(&mut front, ops, None).await;
    match (front.replay_preview.take(), stop) {
        (Some(mut p), _) => {
            p.vhost = s.vhost().to_string();
            p.create_audit = crate::broker::audit::stream_to_ask_about(s).await;
            Report::ReplayPreview(p)
        }
        (None, Stop::ReadCost { queue, text }) => Report::ReadCost {
            vhost: s.vhost().to_string(),
            queue,
            text,
            ticket,
        },
        (None, stop) => Report::Error(Failure::in_generation(stop_text(stop), ticket.generation)),
    }
}

/// A replay from its plan to its end: the event that ends the progress window. Progress goes
/// to the UI as it happens (dropped when the UI is behind: the next one says more).
pub(super) async fn replay(
    s: Arc<Session>,
    req: protocol::ReplayRequest,
    cancel_rx: watch::Receiver<bool>,
    events: mpsc::Sender<Report>,
    ops: &Ops,
) -> Report {
    let rate = (req.rate > 0).then_some(f64::from(req.rate));
    let mut spec = super::read::spec_for(
        &s,
        req.queue.clone(),
        req.selection.clone(),
        rate,
        (req.keep_attempts, req.strip_failure_stamp),
    );
    spec.limit = Some(req.expected);
    spec.max_backlog = req.max_backlog;
    let oreq = ReplayRequest {
        spec,
        dry_run: req.dry_run,
        look_first: true,
        unaudited: None,
        filter: Some(req.selection.describe()),
        group: group_label(&req.selection),
        canary: req.canary.clone(),
        edit: req.edited.as_ref().map(|_| Default::default()),
    };
    let mut front = TuiFront::run(req.expected, req.typed);
    front.edited = req.edited.clone();
    front.create_audit = req.create_audit;
    let prepared = home::replay::prepare(&*s, oreq, &mut front).await;
    said(&mut front, ops, Some(&events)).await;
    let mut ready = match prepared {
        Ok(r) => r,
        Err(Stop::DryRun) => {
            return Report::ReplayFinished(ReplayOutcome {
                progress: ReplayProgress {
                    total: front.replay_preview.map_or(0, |p| p.count),
                    ..Default::default()
                },
                dry_run: true,
                cancelled: false,
                error: None,
                summary: front.dry_summary,
                words: Vec::new(),
                headline: String::new(),
            });
        }
        Err(stop) => return plan::replay_failed(&req, &stop_text(stop)),
    };
    let total = ready.count();
    let result = ready.run(cancel_rx, progress_to(&events, total)).await;
    let notes = ready.finish(&result).await;
    concluded(
        (RunKind::Replay, None),
        &req.queue,
        &result,
        total,
        notes,
        &events,
        ops,
    )
    .await
}

/// An archive or a discard the operator accepted: the selection read at the start (never more
/// than `expected`), then the engine's run, on the record in both places.
pub(super) async fn archive_or_discard(
    s: Arc<Session>,
    req: protocol::ReplayRequest,
    cancel_rx: watch::Receiver<bool>,
    events: mpsc::Sender<Report>,
    ops: &Ops,
) -> Report {
    let (way, op) = match &req.job {
        protocol::JobKind::Archive { reason, place } => (
            Way::Archive {
                local: *place == protocol::ArchivePlace::Local,
                create: *place == protocol::ArchivePlace::Create,
                reason: reason.clone(),
            },
            RunKind::Archive,
        ),
        _ => match keep::discard_path(&req.queue) {
            Ok(p) => (Way::Discard { snapshot: Some(p) }, RunKind::Discard),
            Err(e) => return plan::replay_failed(&req, &format!("{e}; nothing deleted")),
        },
    };
    let mut spec = super::read::spec_for(
        &s,
        req.queue.clone(),
        req.selection.clone(),
        None,
        (false, false),
    );
    spec.limit = Some(req.expected);
    let areq = ArchiveRequest {
        spec,
        way,
        dry_run: false,
        filter: Some(req.selection.describe()),
        group: group_label(&req.selection),
    };
    let mut front = TuiFront::run(req.expected, req.typed);
    let prepared = home::archive::prepare(&*s, areq, &mut front).await;
    said(&mut front, ops, Some(&events)).await;
    let mut ready = match prepared {
        Ok(r) => r,
        Err(stop) => return plan::replay_failed(&req, &stop_text(stop)),
    };
    let total = ready.count();
    let result = ready.run(cancel_rx, progress_to(&events, total)).await;
    let place = ready.place().to_string();
    let notes = ready.finish(&result).await;
    concluded(
        (op, Some(&place)),
        &req.queue,
        &result,
        total,
        notes,
        &events,
        ops,
    )
    .await
}

/// The command log's line, what the record could not keep, and the outcome the UI shows.
async fn concluded(
    (op, place): (RunKind, Option<&str>),
    queue: &str,
    result: &Result<Summary, SessionError>,
    total: u64,
    notes: Vec<String>,
    events: &mpsc::Sender<Report>,
    ops: &Ops,
) -> Report {
    let outcome = outcome_of(result, total, (op, place));
    let text = match op {
        RunKind::Replay => replay_text(queue, &outcome),
        op => ops::job_text(op.as_str(), queue, &outcome),
    };
    ops.report(OperationKind::Replay, text).await;
    if !notes.is_empty() {
        let _ = events.send(Report::Notice(notes.join("; "))).await;
    }
    Report::ReplayFinished(outcome)
}

/// An engine run's progress, sent to the UI as it goes (dropped when the UI is behind: the
/// next one says more).
fn progress_to(
    events: &mpsc::Sender<Report>,
    total: u64,
) -> impl FnMut(&crate::broker::replay::Progress) + '_ {
    move |p| {
        let _ = events.try_send(Report::ReplayProgress(ReplayProgress {
            total,
            moved: p.moved,
            returned: p.returned,
            failed: p.failed,
            rate: p.rate,
            blocked: p.blocked.clone(),
            canary: p.canary.clone(),
            backlog: p.backlog.clone(),
        }));
    }
}

/// The engine's verdict as the UI shows it: anything short of "completed" says why, with the
/// problems behind it.
fn outcome_of(
    result: &Result<Summary, SessionError>,
    total: u64,
    (op, place): (RunKind, Option<&str>),
) -> ReplayOutcome {
    match result {
        Ok(sum) => ReplayOutcome {
            progress: ReplayProgress {
                total,
                moved: sum.progress.moved,
                returned: sum.progress.returned,
                failed: sum.progress.failed,
                rate: sum.progress.rate,
                blocked: None,
                canary: None,
                backlog: None,
            },
            dry_run: false,
            cancelled: sum.stop == StopReason::Cancelled && sum.counts.forced.is_none(),
            error: (!sum.completed() && sum.stop != StopReason::Cancelled
                || sum.counts.forced.is_some())
            .then(|| {
                let problems: Vec<String> = sum
                    .counts
                    .problems
                    .iter()
                    .map(|(w, n)| format!("{n} × {w}"))
                    .collect();
                if problems.is_empty() {
                    sum.outcome().to_string()
                } else {
                    format!("{}; {}", sum.outcome(), problems.join("; "))
                }
            }),
            summary: sum.canary.iter().map(|c| c.words()).collect(),
            words: sum.lines(op, place),
            headline: sum.headline(op, place),
        },
        Err(e) => ReplayOutcome {
            progress: ReplayProgress {
                total,
                ..Default::default()
            },
            dry_run: false,
            cancelled: false,
            error: Some(e.to_string()),
            summary: Vec::new(),
            words: vec![crate::domain::sanitize::one_line(&e.to_string(), 600)],
            headline: format!("{} failed: {e}", op.as_str()),
        },
    }
}

fn restore_request(
    queue: &str,
    selection: Selection,
    how: RestoreHow,
    dry_run: bool,
) -> RestoreRequest {
    RestoreRequest {
        archive: ArchiveOf::Named(queue.to_string()),
        filter: (!dry_run).then(|| selection.describe()),
        group: group_label(&selection),
        selection,
        from: None,
        limit: None,
        window: None,
        again: how.again,
        trust_unsigned: false,
        replay: how.replay.then(Replaying::default),
        dry_run,
    }
}

/// The restore modal's plan: the restore's own plan as a dry run.
pub(super) async fn restore_preview(
    s: &Session,
    queue: String,
    selection: Selection,
    how: RestoreHow,
    ticket: Ticket,
    ops: &Ops,
) -> Report {
    let mut front = TuiFront::plan(ticket, how);
    front.reading = Some(super::front::ReadingTo {
        events: ops.0.clone(),
        vhost: s.vhost().to_string(),
        queue: queue.clone(),
    });
    let req = restore_request(&queue, selection, how, true);
    let stop = match home::restore::prepare(s, req, &mut front).await {
        Ok(_) => Stop::refused("a plan restored nothing"),
        Err(stop) => stop,
    };
    said(&mut front, ops, None).await;
    let mut p = front
        .restore_preview
        .take()
        .unwrap_or_else(|| protocol::RestorePreview {
            how,
            refusals: vec![stop_text(stop)],
            ticket,
            ..Default::default()
        });
    p.vhost = s.vhost().to_string();
    p.queue = queue;
    Report::RestorePreview(p)
}

/// A restore the operator accepted: worked out again at its start (never more than the
/// `expected` the modal showed), then published through the replay engine, which Esc stops
/// (what is in flight settled and remembered).
pub(super) async fn restore(
    s: Arc<Session>,
    req: protocol::ReplayRequest,
    how: RestoreHow,
    cancel_rx: watch::Receiver<bool>,
    events: mpsc::Sender<Report>,
    ops: &Ops,
) -> Report {
    let mut front = TuiFront::run(req.expected, req.typed);
    let rreq = restore_request(&req.queue, req.selection.clone(), how, false);
    let prepared = home::restore::prepare(&*s, rreq, &mut front).await;
    said(&mut front, ops, Some(&events)).await;
    let mut ready = match prepared {
        Ok(r) => r,
        Err(stop) => return plan::replay_failed(&req, &stop_text(stop)),
    };
    let total = ready.count();
    let out = ready
        .run(&cancel_rx, |done, failed, total| {
            let _ = events.try_send(Report::ReplayProgress(ReplayProgress {
                total,
                moved: done,
                failed,
                ..Default::default()
            }));
        })
        .await;
    let notes = ready.finish(&out).await;
    let outcome = restore_outcome(&out, total);
    let op = if how.replay { "replay" } else { "restore" };
    ops.report(
        OperationKind::Replay,
        ops::job_text(op, &req.queue, &outcome),
    )
    .await;
    if !notes.is_empty() {
        let _ = events.send(Report::Notice(notes.join("; "))).await;
    }
    Report::ReplayFinished(outcome)
}

/// A restore's publishing as the UI shows it.
fn restore_outcome(out: &crate::broker::restore::Outcome, total: u64) -> ReplayOutcome {
    let mut error = out.error.clone().or_else(|| {
        (!out.completed() && !out.cancelled).then(|| {
            std::iter::once(out.audit.outcome.to_string())
                .chain(out.problems.iter().map(|(w, n)| format!("{n} × {w}")))
                .collect::<Vec<_>>()
                .join("; ")
        })
    });
    if let Some(e) = &out.unrecorded {
        let text = crate::broker::restore::unrecorded_text(out.restored(), e);
        error = Some(error.map_or(text.clone(), |was| format!("{was}; {text}")));
    }
    ReplayOutcome {
        progress: ReplayProgress {
            total,
            moved: out.restored(),
            failed: out.failed(),
            ..Default::default()
        },
        dry_run: false,
        cancelled: out.cancelled,
        error,
        summary: Vec::new(),
        headline: out.lines().swap_remove(0),
        words: out.lines(),
    }
}

/// Sets the policy that lifts `queue`'s delivery limit, on the record; then the list again.
pub(super) async fn protect(
    s: &Session,
    queue: &str,
    ticket: Ticket,
    ops: &Ops,
) -> (Vec<Report>, Option<Work>) {
    let mut front = TuiFront::default();
    match home::protect::apply(s, queue, &mut front).await {
        Ok((plan, notes)) => {
            ops.report(
                OperationKind::Policy,
                format!(
                    "set policy {} in vhost '{}' (lifts the delivery limit of {queue}, keeping the keys of the policy in force)",
                    plan.policy.name,
                    s.vhost()
                ),
            )
            .await;
            let mut text = format!(
                "protected {queue}: policy {} set; reading it no longer spends deliveries",
                plan.policy.name
            );
            for n in notes {
                text.push_str("; ");
                text.push_str(&n);
            }
            // The list again, with the limit lifted.
            (vec![Report::Notice(text)], Some(Work::Discover))
        }
        Err(stop) => (
            vec![Report::Error(Failure::in_generation(
                stop_text(stop),
                ticket.generation,
            ))],
            None,
        ),
    }
}
