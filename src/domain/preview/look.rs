//! The replay plan's policy: what a plan says of the messages looked at (each selected one
//! planned, the counts confirmed, the warnings), where every message goes when that is known
//! without looking, and when a plan may read nothing first. Pure: the session reads the messages
//! and checks the targets; this decides.

use std::sync::Arc;

use crate::domain::convention::Conventions;
use crate::domain::identity;
use crate::domain::message::DeadLetter;
use crate::domain::redirect::{Redirected, Redirects};
use crate::domain::replay::{self as plan, ReplayOptions, ReplayPlan};
use crate::domain::sanitize;
use crate::domain::selection::Selection;

use super::explained::{Explained, Remembered, age_secs, explain_all};
use super::{Preview, ReplaySpec, TargetPreview};

/// A plan before its targets are checked (see `Session::check_targets`).
pub(crate) struct Looked {
    pub(crate) p: Preview,
    /// The DLQ's depth when the plan was made.
    pub(crate) depth: u64,
    /// Selected messages that stay because their framework would discard them.
    pub(crate) staying: u64,
    /// Selected messages from a MassTransit `_skipped` queue.
    pub(crate) skipped: usize,
}

/// A target known without looking, and the redirect that chose it.
pub(crate) type Known = (plan::ReplayTarget, Option<Redirected>);

/// `looked`, refused for `why` when there is one.
pub(crate) fn refused_by(mut looked: Looked, why: Option<String>) -> Looked {
    looked.p.refusals.extend(why);
    looked
}

/// The count confirmed, which is the count that moves: for all of the queue, what it holds
/// (capped by the limit) when only its head was looked at — the run stops at the depth it
/// started with —, else what matched among the `examined` messages of a queue of `depth`. The
/// one rule for a replay's plan and an archive's or discard's.
pub(crate) fn confirmed(spec: &ReplaySpec, examined: u64, depth: u64, matched: u64) -> u64 {
    if matches!(spec.selection, Selection::All) && examined < depth {
        spec.limit.map_or(depth, |l| l.min(depth))
    } else {
        matched
    }
}

/// What the plan says when several targets are checked as the run meets them.
pub const CHECKED_AS_MET: &str = "targets are checked as they are first met";

/// Whether a plan that cannot know its one target without looking may still read nothing
/// first, checking each target as the run first meets it: all of the queue is replayed (the
/// count then comes from the queue; a filter or group is counted among messages looked at),
/// and it is not a MassTransit `_skipped` queue (refused by what its messages say).
pub(crate) fn checks_as_met(spec: &ReplaySpec) -> bool {
    matches!(spec.selection, Selection::All)
        && spec.to.is_none()
        && !spec.queue.ends_with("_skipped")
}

/// Plans each selected message of `messages`, the head of a queue that held `depth`.
pub(crate) fn look_at(
    conventions: &Conventions,
    spec: &ReplaySpec,
    messages: Vec<DeadLetter>,
    depth: u64,
    redirects: &Arc<Redirects>,
    remember: impl FnOnce(&[String]) -> Remembered,
) -> Looked {
    let keys: Vec<String> = messages.iter().map(identity::message_key).collect();
    let memory = remember(&keys);
    let now = jiff::Timestamp::now();
    let mut p = Preview {
        queue: spec.queue.clone(),
        examined: messages.len() as u64,
        depth: Some(depth),
        endpoint_redirects: redirects.clone(),
        ..Default::default()
    };
    let explained = explain_all(messages, &memory, conventions);
    p.replays = memory.replays.clone();
    let opts = ReplayOptions {
        keep_attempts: spec.keep_attempts,
        clear_expiry: spec.clear_expiry,
        strip_failure_stamp: spec.strip_failure_stamp,
        target_queue: spec.to.clone(),
        now,
        run_id: None,
    };
    // Selected messages that stay in the DLQ because their framework would discard them.
    let mut staying = 0u64;
    for e in &explained {
        if spec.limit.is_some_and(|l| p.matched - staying >= l) {
            break;
        }
        if !spec
            .selection
            .selects(&e.message, &e.explanation, &e.key, age_secs(e, now))
        {
            continue;
        }
        p.matched += 1;
        p.keys.push(e.key.clone());
        let rp = plan::plan_with(&e.message, &e.explanation, &opts, redirects);
        if let Some(x) = &rp.expired {
            *p.expired.entry((x.framework, x.header)).or_insert(0) += 1;
            if !x.cleared {
                // It stays in the DLQ: nothing of its plan happens.
                staying += 1;
                continue;
            }
        }
        add_plan(&mut p, e, rp);
    }
    // The count confirmed is the count that moves: "all" is the queue as it stands (the run
    // stops at the depth it started with), a selection is what matched here. Messages whose
    // framework would discard them stay (unless their deadline is cleared).
    let all = matches!(spec.selection, Selection::All);
    p.selected = confirmed(spec, p.examined, depth, p.matched).saturating_sub(staying);
    p.notices = p
        .expired
        .iter()
        .map(|((framework, header), n)| {
            plan::expiry_notice(framework, header, *n, p.matched, spec.clear_expiry)
        })
        .collect();
    if p.selected > p.matched {
        *p.warnings
            .entry(format!(
                "only the first {} of {} were looked at: the rest go where their own plan says, and one whose target was not checked here stays in the DLQ and is reported",
                p.examined, depth
            ))
            .or_insert(0) += 1;
    } else if !all && p.examined < depth {
        *p.warnings
            .entry(format!(
                "the selection was matched against the first {} of {} messages: the run moves these {} and leaves later matches for another replay",
                p.examined, depth, p.matched
            ))
            .or_insert(0) += 1;
    }
    let skipped = explained
        .iter()
        .filter(|e| {
            e.explanation.skipped
                && spec
                    .selection
                    .selects(&e.message, &e.explanation, &e.key, age_secs(e, now))
        })
        .count();
    Looked {
        p,
        depth,
        staying,
        skipped,
    }
}

/// Where every message of the replay goes, when that is known without reading the queue,
/// and how it is known: all of the queue is replayed and `--to` names the target, or the
/// DLQ is fed by the dead-lettering of exactly one queue (`discovery`, read when
/// [`checks_as_met`]), where broker dead-lettered messages go back (after its redirect, if
/// it has one). `None`: the plan must look at the messages.
pub(crate) fn known_target(
    spec: &ReplaySpec,
    redirects: &Redirects,
    discovery: Option<&crate::domain::discovery::Discovery>,
) -> Option<(Known, String)> {
    if !matches!(spec.selection, Selection::All) {
        return None;
    }
    let direct = |q: &str| plan::ReplayTarget {
        exchange: String::new(),
        routing_key: q.to_string(),
        expected_queue: Some(q.to_string()),
    };
    if let Some(to) = &spec.to {
        return Some((
            (direct(to), None),
            format!("--to names '{}'", sanitize::one_line(to, 100)),
        ));
    }
    let dlq = discovery?.dlq(&spec.queue)?;
    match dlq.feeders.as_slice() {
        [one] if !dlq.feeders_uncertain => Some((
            match redirects.route(Some(direct(one))) {
                (Some(t), why) => (t, why),
                (None, _) => (direct(one), None),
            },
            format!(
                "only '{}' dead-letters into it",
                sanitize::one_line(one, 100)
            ),
        )),
        _ => None,
    }
}

/// Adds one selected message's plan to the preview: what it removes, resets and adds, its
/// warnings, and its target's count and bytes.
fn add_plan(p: &mut Preview, e: &Explained, rp: ReplayPlan) {
    p.removed.extend(rp.removed.iter().cloned());
    p.reset.extend(rp.reset.iter().cloned());
    p.removed.extend(
        rp.removed_properties
            .iter()
            .map(|n| format!("property {n}")),
    );
    if let plan::Attempts::NotReset(c) = &rp.attempts {
        p.attempts_not_reset += 1;
        p.surviving_counters.extend(c.iter().cloned());
    }
    p.added.extend(rp.added.iter().map(|(k, _)| k.clone()));
    if rp.replay_count > 1 {
        p.replayed_before += 1;
    }
    if crate::domain::amqp10::carrier::sign(&e.message).is_some() {
        p.amqp10_signs += 1;
    }
    for w in &rp.warnings {
        *p.warnings.entry(w.to_string()).or_insert(0) += 1;
    }
    match &rp.target {
        Some(t) => {
            let label = t
                .expected_queue
                .clone()
                .unwrap_or_else(|| format!("exchange '{}' key '{}'", t.exchange, t.routing_key));
            let entry = p.targets.entry(label).or_insert_with(|| TargetPreview {
                exchange: t.exchange.clone(),
                routing_key: t.routing_key.clone(),
                ..Default::default()
            });
            entry.count += 1;
            entry.bytes += e.message.body_size;
            if entry.redirected.is_none() {
                entry.redirected = rp.redirected.clone();
            }
            if let Some(k) = e.explanation.deaths.routing_key_in(&t.routing_key)
                && t.exchange.is_empty()
            {
                entry.death_keys.insert(k.to_string());
            }
        }
        None => {
            *p.warnings
                .entry("no known origin: these stay unless --to names a queue".into())
                .or_insert(0) += 1;
        }
    }
    p.plans.push((
        e.message
            .properties
            .message_id
            .clone()
            .unwrap_or_else(|| e.key.clone()),
        rp,
    ));
}

#[cfg(test)]
#[path = "look_tests.rs"]
mod tests;
