//! The replay plan for one dead letter: where it goes (exchange, routing key and the queue it is
//! expected to reach), which headers are removed and added, and what the operator should know
//! first. Pure: the broker layer executes the plan (and resolves bindings for a target that may
//! fan out). The plan carries no body because a replay never changes the body.
//!
//! Rules (see `frameworks.md` and `rabbitmq.md`; each framework's own are in its convention
//! module's `Replay`: what it strips, its counters, its target): broker deaths go back to the queue they failed in
//! through the default exchange, never through the original exchange, which would also deliver to
//! every other queue bound there; MassTransit to the endpoint's exchange with an empty routing key;
//! NServiceBus to `FailedQ` through the default exchange; Spring to the original exchange and
//! routing key (which may fan out). Retry counters and death headers are stripped (or, where the
//! framework needs the header, set to zero: Celery's `retries`) so the message gets a fresh retry
//! budget, unless attempts are kept; the plan says "reset" only when every counter Warren knows of
//! was. Ids consumers use for idempotency are always kept. A message whose framework deadline has
//! passed (Celery's `expires`) would be discarded unrun on arrival: it stays in the DLQ unless the
//! deadline is cleared. Warren's own headers never start with `x-`, which belongs to the broker.

use jiff::Timestamp;

use super::convention::Convention;
use super::convention::framework::{Counter, Rule, Told};
use super::explain::{Explanation, REPLAY_COUNT_HEADER};
use super::message::DeadLetter;
use super::redirect::Redirects;
// Re-exported: the plan's words, kept in their own module so `redirect` and `convention` can use
// them without importing the plan.
pub use super::target::{BodyBudget, BudgetLimit, ReplayTarget, ReplayWarning};
use super::value::{HeaderValue, Table};

/// The dead-letter queue the message was replayed from.
pub const REPLAYED_FROM_HEADER: &str = "warren-replayed-from";
/// When it was replayed, RFC 3339.
pub const REPLAYED_AT_HEADER: &str = "warren-replayed-at";
/// How many times Warren has replayed it, this time included (a long).
pub const REPLAY_COUNT: &str = REPLAY_COUNT_HEADER;
/// The globally unique id of the run that replayed it (the audit's `run_id`), so a message that
/// dies again links itself to its run (see `domain::comeback`).
pub const REPLAY_ID_HEADER: &str = "warren-replay-id";
/// The headers every replayed message gets (see [`ReplayPlan::added`]): what a plan made without
/// reading the queue can say it adds.
pub const ADDED_HEADERS: [&str; 4] = [
    REPLAYED_FROM_HEADER,
    REPLAYED_AT_HEADER,
    REPLAY_COUNT,
    REPLAY_ID_HEADER,
];

#[derive(Clone, Debug, Default, PartialEq)]
pub struct ReplayOptions {
    /// Leave counters and death headers exactly as they were; only Warren's headers are added.
    pub keep_attempts: bool,
    /// `--clear-expiry`: a message whose framework deadline has passed goes out without it (the
    /// deadline header and the `expiration` property), instead of staying in the DLQ.
    pub clear_expiry: bool,
    /// `--strip-failure-stamp`: a Symfony message (JSON serializer) goes out without
    /// `SentToFailureTransportStamp`, so Symfony 5.4 sends it to the failure transport again
    /// should it fail again, instead of dropping it.
    pub strip_failure_stamp: bool,
    /// `--to`: publish to this queue through the default exchange, whatever the convention says.
    pub target_queue: Option<String>,
    /// The replay time, passed in so planning stays pure.
    pub now: Timestamp,
    /// The run's id, written as `warren-replay-id`; `None` for a plan that is only shown (the
    /// run gets its id when it starts).
    pub run_id: Option<String>,
}

/// What a replay does to the retry budget.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Attempts {
    /// Every counter Warren knows of for this message was removed or set to zero.
    Reset,
    /// Kept as asked (`--keep-attempts`).
    Kept,
    /// These counters survive the replay (e.g. one in the body, which a replay never changes).
    NotReset(Vec<String>),
}

/// A framework deadline that has passed: the framework's worker would discard the message unrun.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Expired {
    /// The framework, for people ("Celery").
    pub framework: &'static str,
    /// The header that holds the deadline (`expires`).
    pub header: &'static str,
    pub deadline: Timestamp,
    /// `--clear-expiry`: the deadline is removed and the message replayed.
    pub cleared: bool,
}

#[derive(Clone, Debug, PartialEq)]
pub struct ReplayPlan {
    /// `None`: no usable target (unknown origin and no `--to`); the plan must not be published.
    pub target: Option<ReplayTarget>,
    /// Header names removed, in the message's header order.
    pub removed: Vec<String>,
    /// Counter headers set to zero rather than removed, because the framework needs them.
    pub reset: Vec<String>,
    /// AMQP properties removed (`expiration`, with a cleared deadline).
    pub removed_properties: Vec<&'static str>,
    pub attempts: Attempts,
    /// Set when the framework's deadline has passed at the replay time.
    pub expired: Option<Expired>,
    /// Headers added or replaced (Warren's three, and the run's id when it has one).
    pub added: Vec<(String, HeaderValue)>,
    /// The complete header table to publish with.
    pub headers: Table,
    pub warnings: Vec<ReplayWarning>,
    /// The `warren-replay-count` this replay writes.
    pub replay_count: i64,
    /// The target was redirected (`domain::redirect`): from where, and why.
    pub redirected: Option<super::redirect::Redirected>,
}

impl ReplayPlan {
    pub fn is_publishable(&self) -> bool {
        self.target.is_some()
    }

    /// Why the message stays in the DLQ although it is selected: its framework would discard it
    /// on arrival. `None` when it may go.
    pub fn held_back(&self) -> Option<String> {
        let e = self.expired.as_ref().filter(|e| !e.cleared)?;
        Some(format!(
            "its `{}` has passed, so {} would discard it unrun; it stays in the DLQ (--clear-expiry removes the deadline and replays it)",
            e.header, e.framework
        ))
    }
}

/// The plan's words for `n` of `of` selected messages whose framework deadline has passed:
/// "Celery will discard 2 of 7 on arrival: their `expires` has passed; …".
pub fn expiry_notice(framework: &str, header: &str, n: u64, of: u64, cleared: bool) -> String {
    let (their, stay, them) = if n == 1 {
        ("its", "it stays", "it")
    } else {
        ("their", "they stay", "them")
    };
    if cleared {
        format!(
            "{n} of {of} had passed {their} {framework} `{header}`: --clear-expiry removes the deadline, so {framework} runs {them}"
        )
    } else {
        format!(
            "{framework} will discard {n} of {of} on arrival: {their} `{header}` has passed; {stay} in the DLQ (--clear-expiry removes the deadline and replays {them})"
        )
    }
}

/// The broker's death record and delivery counters: stripped whatever the convention.
const BROKER: &[Rule] = &[
    Rule::Exact("x-death"),
    Rule::Prefix("x-first-death-"),
    Rule::Prefix("x-last-death-"),
    Rule::Exact("x-delivery-count"),
    Rule::Exact("x-acquired-count"),
];
/// The broker's counters, whatever the convention.
const BROKER_COUNTERS: &[Counter] = &[
    Counter::Header("x-death"),
    Counter::Header("x-delivery-count"),
    Counter::Header("x-acquired-count"),
];

/// Zero in the integer type the framework wrote (a Python int arrives as a 32- or 64-bit one).
fn zero_like(v: &HeaderValue) -> HeaderValue {
    match v {
        HeaderValue::I8(_) => HeaderValue::I8(0),
        HeaderValue::U8(_) => HeaderValue::U8(0),
        HeaderValue::I16(_) => HeaderValue::I16(0),
        HeaderValue::U16(_) => HeaderValue::U16(0),
        HeaderValue::I32(_) => HeaderValue::I32(0),
        HeaderValue::U32(_) => HeaderValue::U32(0),
        HeaderValue::F64(_) => HeaderValue::F64(0.0),
        HeaderValue::ShortString(_) | HeaderValue::LongString(_) => HeaderValue::string("0"),
        _ => HeaderValue::I64(0),
    }
}

/// Ids consumers use for idempotency: never stripped, whatever a prefix rule says.
const KEPT_IDS: &[&str] = &[
    "NServiceBus.MessageId",
    "NServiceBus.CorrelationId",
    "NServiceBus.ConversationId",
    "rbs2-msg-id",
    "rbs2-corr-id",
    "MT-OriginalMessageId",
    "id",
    "message-id",
];

/// True when a replay (without keeping attempts) removes header `name` from a message of convention `c`.
pub fn is_stripped(c: Convention, name: &str) -> bool {
    !KEPT_IDS.contains(&name)
        && BROKER
            .iter()
            .chain(c.framework().replay.strips)
            .any(|r| r.matches(name))
}

/// Sends a plan whose target is a wait queue to the queue that wait queue routes back to (the
/// preflight decides the `redirects`; see `domain::destination`).
pub fn apply_redirect(
    plan: &mut ReplayPlan,
    redirects: &std::collections::BTreeMap<(String, String), ReplayTarget>,
) {
    if let Some(t) = plan.target.as_ref()
        && let Some(r) = redirects.get(&(t.exchange.clone(), t.routing_key.clone()))
    {
        plan.target = Some(r.clone());
    }
}

/// Plans the replay of `dl`, explained as `ex`. Total: any message gives a plan; one that must not
/// be published has no target.
pub fn plan(dl: &DeadLetter, ex: &Explanation, opts: &ReplayOptions) -> ReplayPlan {
    plan_with(dl, ex, opts, &Redirects::default())
}

/// [`plan`] with the redirects in force: the one place a message's target is decided, so the
/// dry run, the run, `show` and the TUI agree. A target whose queue is redirected goes to the
/// redirect's queue and the plan says so; an explicit `--to` is never redirected.
pub fn plan_with(
    dl: &DeadLetter,
    ex: &Explanation,
    opts: &ReplayOptions,
    redirects: &Redirects,
) -> ReplayPlan {
    let mut warnings = Vec::new();
    let explicit = opts
        .target_queue
        .as_deref()
        .map(str::trim)
        .filter(|q| !q.is_empty());
    let (target, redirected) = match explicit {
        Some(q) => (Some(ReplayTarget::queue(q)), None),
        None => redirects.route(convention_target(dl, ex, &mut warnings)),
    };
    message_warnings(dl, ex, target.as_ref(), &mut warnings);

    let mut removed = Vec::new();
    let mut reset = Vec::new();
    let mut removed_properties = Vec::new();
    let mut headers = if opts.keep_attempts {
        if dl.headers.keys().any(|k| is_stripped(ex.convention, k))
            || !ex.counter_headers.is_empty()
        {
            warnings.push(ReplayWarning::AttemptsKept);
        }
        dl.headers.clone()
    } else {
        removed = dl
            .headers
            .keys()
            .filter(|k| is_stripped(ex.convention, k))
            .map(str::to_string)
            .collect();
        // What is stripped (x-death above all, a list of tables) is never copied: this runs
        // for every message a replay moves.
        let mut kept = dl.headers.filtered(|k, _| !is_stripped(ex.convention, k));
        reset_attempts(ex, &mut kept, &mut removed, &mut reset);
        kept
    };
    // The convention's last word on what goes out (Symfony's failure stamp), attempts kept or not.
    (ex.convention.framework().replay.finish)(
        dl,
        opts.strip_failure_stamp,
        &mut headers,
        &mut removed,
        &mut warnings,
    );
    let attempts = if opts.keep_attempts {
        Attempts::Kept
    } else {
        attempts_after(dl, ex, &headers)
    };

    // The framework's deadline, against the replay time passed in.
    let expired = match (ex.deadline, ex.convention.framework().replay.deadline) {
        (Some(deadline), Some(header)) if deadline <= opts.now => Some(Expired {
            framework: ex.convention.label(),
            header,
            deadline,
            cleared: opts.clear_expiry,
        }),
        _ => None,
    };
    if let Some(e) = expired.as_ref().filter(|e| e.cleared) {
        if headers.remove(e.header).is_some() {
            removed.push(e.header.to_string());
        }
        if dl.properties.expiration.is_some() {
            removed_properties.push("expiration");
        }
    }

    let replay_count = ex.replay_count.max(0).saturating_add(1);
    let added = warren_headers(dl, opts, replay_count);
    for (k, v) in &added {
        debug_assert!(!k.starts_with("x-"), "x- headers belong to the broker");
        headers.insert(k.clone(), v.clone());
    }
    ReplayPlan {
        target,
        removed,
        reset,
        removed_properties,
        attempts,
        expired,
        added,
        headers,
        warnings,
        replay_count,
        redirected,
    }
}

/// What the operator should know about this message before it goes to `target`: a skipped
/// message sent back to the endpoint that skipped it, a body's retry budget, an earlier replay,
/// a TTL that is not restored.
fn message_warnings(
    dl: &DeadLetter,
    ex: &Explanation,
    target: Option<&ReplayTarget>,
    warnings: &mut Vec<ReplayWarning>,
) {
    if ex.skipped {
        let endpoint = ex.source.queue.clone();
        // Replaying a skipped message to another endpoint is the fix; to the same one, it skips again.
        let same =
            target.is_none_or(|t| t.expected_queue.is_none() || t.expected_queue == endpoint);
        if same {
            warnings.insert(0, ReplayWarning::Skipped { endpoint });
        }
    }
    (ex.convention.framework().replay.warn)(&told(dl, ex), warnings);
    if ex.replay_count > 0 {
        warnings.push(ReplayWarning::ReplayedBefore {
            count: ex.replay_count,
        });
    }
    // The broker removed the per-message TTL when the message expired and kept it in x-death as
    // original-expiration. It is deliberately not restored: the message would expire again.
    if let Some(ms) = ex
        .deaths
        .entries
        .iter()
        .find_map(|d| d.original_expiration.clone())
    {
        warnings.push(ReplayWarning::ExpirationNotRestored { ms });
    }
}

/// Gives the message a fresh retry budget beyond the stripped headers: rascal's nested
/// counters, the headers a framework needs set to zero, a ladder's error and counter headers.
fn reset_attempts(
    ex: &Explanation,
    headers: &mut Table,
    removed: &mut Vec<String>,
    reset: &mut Vec<String>,
) {
    let replay = &ex.convention.framework().replay;
    (replay.reset)(headers, removed);
    for name in replay.zeroed {
        if let Some(v) = headers.get(name).filter(|v| v.as_i64() != Some(0)) {
            let zero = zero_like(v);
            headers.insert(*name, zero);
            reset.push((*name).to_string());
        }
    }
    // A ladder's error text describes the failure before the replay, so it goes, as a
    // framework's fault headers do. Its counter is set to 0 in its own type rather than
    // removed: apps read `headers['x-retry-count'] || 0` (then both would do), but some read
    // it without a default (`parseInt(h['x-retry-count']) + 1` is NaN for a missing one), and
    // 0 serves both. A counter that is not a number Warren can zero goes.
    for name in &ex.error_headers {
        if headers.remove(name).is_some() {
            removed.push(name.clone());
        }
    }
    for name in &ex.counter_headers {
        match headers.get(name) {
            Some(v) if v.as_i64() == Some(0) => {}
            Some(v) if v.as_i64().is_some() => {
                let zero = zero_like(v);
                headers.insert(name.as_str(), zero);
                reset.push(name.clone());
            }
            Some(_) => {
                headers.remove(name);
                removed.push(name.clone());
            }
            None => {}
        }
    }
}

/// Whether every counter Warren knows of was reset in `headers`, or which survive.
fn attempts_after(dl: &DeadLetter, ex: &Explanation, headers: &Table) -> Attempts {
    let surviving: Vec<String> = BROKER_COUNTERS
        .iter()
        .chain(ex.convention.framework().replay.counters)
        .filter_map(|c| match c {
            Counter::Header(n) => headers
                .get(n)
                .filter(|v| v.as_i64() != Some(0))
                .map(|_| format!("header {n}")),
            Counter::Nested(n, key) => headers
                .get(n)
                .and_then(HeaderValue::as_table)
                .and_then(|t| t.get(key))
                .filter(|v| v.as_i64() != Some(0))
                .map(|_| format!("{n}.{key}")),
            // Never reset, whatever it holds: the plan's `RetryBudget` says what is left.
            Counter::Body(path) => Some(format!("{path} in the body")),
        })
        .chain(ex.counter_headers.iter().filter_map(|n| {
            headers
                .get(n)
                .filter(|v| v.as_i64() != Some(0))
                .map(|_| format!("header {n}"))
        }))
        .chain((ex.convention.framework().replay.surviving)(dl, headers))
        .collect();
    if surviving.is_empty() {
        Attempts::Reset
    } else {
        Attempts::NotReset(surviving)
    }
}

/// The headers Warren adds to every replayed message (see [`ReplayPlan::added`]).
fn warren_headers(
    dl: &DeadLetter,
    opts: &ReplayOptions,
    replay_count: i64,
) -> Vec<(String, HeaderValue)> {
    let mut added = vec![
        (
            REPLAYED_FROM_HEADER.to_string(),
            HeaderValue::string(dl.queue.clone()),
        ),
        (
            REPLAYED_AT_HEADER.to_string(),
            HeaderValue::string(opts.now.to_string()),
        ),
        (REPLAY_COUNT.to_string(), HeaderValue::I64(replay_count)),
    ];
    if let Some(id) = &opts.run_id {
        added.push((
            REPLAY_ID_HEADER.to_string(),
            HeaderValue::string(id.clone()),
        ));
    }
    added
}

/// Where the convention says the message goes, or `None` with the warning that says why not.
/// Where the plan sends `dl` when no `--to` is given (before the preflight follows a wait queue):
/// the convention's target, `None` when nothing records where it came from. The replay
/// endpoint a group is named by (`domain::grouping`).
pub fn default_target(dl: &DeadLetter, ex: &Explanation) -> Option<ReplayTarget> {
    convention_target(dl, ex, &mut Vec::new())
}

fn convention_target(
    dl: &DeadLetter,
    ex: &Explanation,
    warnings: &mut Vec<ReplayWarning>,
) -> Option<ReplayTarget> {
    (ex.convention.framework().replay.target)(&told(dl, ex), warnings)
}

/// What a convention's replay decides by, of the explanation.
fn told<'a>(dl: &'a DeadLetter, ex: &'a Explanation) -> Told<'a> {
    Told {
        dl,
        source: &ex.source,
        retries: ex.retries,
        retry_limit: ex.retry_limit,
    }
}
