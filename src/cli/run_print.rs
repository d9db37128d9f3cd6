//! The printing of a replay, archive or discard: the plan before it and the summary after it.

use std::collections::BTreeMap;

use serde_json::{Value, json};

use super::commands::{broker_failure, print_line};
use super::{Failure, exit};
use crate::broker::replay::Summary;
use crate::broker::session::{Preview, ReplaySpec, SessionError};
use crate::domain::sanitize::one_line;

pub(crate) fn print_preview(p: &Preview, spec: &ReplaySpec, dry_run: bool) {
    for line in p.describe(spec, dry_run) {
        crate::errln!("{line}");
    }
}

/// Says what the record could not keep, prints the summary (its headline first: what `op`
/// did, to `place`; see `Summary::headline`) and gives the exit code of an engine run
/// (replay, archive, discard).
pub(crate) fn report_run(
    result: Result<Summary, SessionError>,
    notes: Vec<String>,
    json: bool,
    (op, place): (crate::domain::run::RunKind, Option<&str>),
) -> Result<i32, Failure> {
    for note in notes {
        crate::errln!("warren: {}", one_line(&note, 600));
    }
    match result {
        Ok(sum) => {
            let (outcome, code) = replay_outcome(&sum);
            print_summary(&sum, json, &outcome, (op, place));
            if sum.counts.forced.is_some() {
                // Nothing waits on a broker that may not answer: the connections drop here and
                // the broker returns their unacknowledged deliveries to the queue.
                std::process::exit(code);
            }
            Ok(code)
        }
        Err(e) => Err(broker_failure(e)),
    }
}

/// The audit outcome and the exit code of a finished run: 0 only for "completed" (see
/// [`Summary::outcome`](crate::broker::replay::Summary::outcome)); every other ending left
/// selected messages behind and exits 1.
pub(crate) fn replay_outcome(
    sum: &crate::broker::replay::Summary,
) -> (crate::domain::outcome::RunOutcome, i32) {
    let outcome = sum.outcome();
    let code = if sum.completed() {
        exit::OK
    } else {
        exit::FAILED
    };
    (outcome, code)
}

pub(crate) fn preview_json(p: &Preview, spec: &ReplaySpec) -> Value {
    let targets: BTreeMap<&String, Value> = p
        .targets
        .iter()
        .map(|(k, t)| {
            let redirected = t
                .redirected
                .as_ref()
                .map(|r| json!({"queue": r.from, "reason": r.reason}));
            (k, json!({"exchange": t.exchange, "routing_key": t.routing_key, "count": t.count, "queues": t.reaches, "exact": t.exact, "rests_in": t.rests_in, "via_wait_queues": t.via, "redirected_from": redirected}))
        })
        .collect();
    json!({
        "event": "plan",
        "queue": p.queue,
        "selected": p.selected,
        "matched": p.matched,
        "examined": p.examined,
        "unread": p.unread,
        "checked_as_met": p.checked_as_met,
        "depth": p.depth,
        "targets": targets,
        "removes": p.removed,
        "resets": p.reset,
        "adds": p.added,
        "attempts_not_reset": p.attempts_not_reset,
        "surviving_counters": p.surviving_counters,
        "expired": p.expired.values().sum::<u64>(),
        "expired_stay": if spec.clear_expiry { 0 } else { p.expired.values().sum::<u64>() },
        "clear_expiry": spec.clear_expiry,
        "strip_failure_stamp": spec.strip_failure_stamp,
        "notices": p.notices,
        "replayed_before": p.replayed_before,
        "warnings": p.warnings,
        "refusals": p.refusals,
    })
}

/// A canary's plan for `--json`.
pub(crate) fn canary_plan_json(c: &crate::domain::canary::CanaryPlan) -> Value {
    let (exact, why) = match &c.sight {
        crate::domain::canary::Sight::Exact { .. } => (true, None),
        crate::domain::canary::Sight::Estimate { why } => (false, Some(why)),
    };
    json!({
        "size": c.rule.size,
        "wait_secs": c.rule.wait.as_secs(),
        "tolerance": c.rule.tolerance,
        "exact": exact,
        "estimate_because": why,
        "targets": c.targets,
        "through_wait_queues": c.through_wait_queues,
    })
}

fn print_summary(
    sum: &crate::broker::replay::Summary,
    json: bool,
    outcome: &crate::domain::outcome::RunOutcome,
    (op, place): (crate::domain::run::RunKind, Option<&str>),
) {
    let p = &sum.progress;
    if json {
        print_line(&json!({
            "event": "summary",
            "headline": sum.headline(op, place),
            "moved": p.moved,
            "returned": p.returned,
            "failed": p.failed,
            "remaining": p.remaining,
            "left_in_dlq": sum.left_in_dlq,
            "protocol": sum.carrier.name(),
            "held_elsewhere": sum.held_elsewhere,
            "held_back": sum.counts.held_back,
            "kept": sum.counts.kept,
            "targets": sum.counts.targets,
            "problems": sum.counts.problems,
            "duplicated": sum.counts.duplicated,
            "duplicated_certain": sum.counts.duplicated_certain,
            "duplicate_ids": sum.counts.duplicate_ids,
            "stop": sum.stop.to_string(),
            "forced": sum.counts.forced,
            "reconnected": sum.reconnected,
            "replayed_before": sum.replayed_before,
            "canary": sum.canary,
            "outcome": outcome,
        }));
        return;
    }
    for line in sum.lines(op, place) {
        crate::errln!("{line}");
    }
}
