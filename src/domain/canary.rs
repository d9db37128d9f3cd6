//! A replay's canary: the first few selected messages go first, and the rest only once those
//! were consumed without coming back dead. The seed says a replay "does not fix anything":
//! replaying into a consumer that still has the bug refills the DLQ, so a large replay proves
//! the fix on a few messages before it moves the rest.
//!
//! Pure: what the broker shows (a message of this run seen coming back, the target's ready and
//! unacknowledged counts, the DLQ's depth) comes in as [`Seen`] with the time it was seen, and
//! [`Watch::decide`] says when the canary is through and what it decided. The shell
//! (`broker::canary`) looks; `ops::replay` runs the two stretches.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use super::sanitize::one_line;

/// The TUI's replay modal starts with a canary above this many messages, unless configured.
pub const DEFAULT_ABOVE: u64 = 100;
/// The canary's size when the modal starts with one, unless configured.
pub const DEFAULT_SIZE: u64 = 10;
/// The sizes `c` in the replay modal steps through (then off).
pub const SIZES: [u64; 5] = [5, 10, 25, 50, 100];

/// How long the canary waits for its messages, unless told otherwise.
pub const DEFAULT_WAIT: Duration = Duration::from_secs(30);

/// How long a count of unacknowledged messages from the management API may lag behind the
/// queue: its statistics are collected every 5 s by default (`collect_statistics_interval`),
/// so a reading taken this long after an event shows the queue as it was after it.
pub const STATS_LAG: Duration = Duration::from_millis(5_500);

/// Once more came back than tolerated, how long to go on counting (so the report says "9 of
/// 10", not "1 of 10") before stopping; nothing moves meanwhile.
pub const GRACE: Duration = Duration::from_secs(1);

/// The canary as the operator asked for it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CanaryRule {
    /// Messages replayed first.
    pub size: u64,
    /// How long to wait for them to be consumed or to come back.
    pub wait: Duration,
    /// How many may come back dead without stopping the replay.
    pub tolerance: u64,
}

impl CanaryRule {
    /// A canary means something only when more is selected than it takes.
    pub fn applies(&self, selected: u64) -> bool {
        applies(self.size, selected)
    }
}

/// The one rule for whether a canary of `size` runs on `selected` messages: only when more is
/// selected than it takes. The replay (`ops::replay`) and the TUI's modal both decide by it.
pub fn applies(size: u64, selected: u64) -> bool {
    size > 0 && selected > size
}

/// The modal's canary line: what the canary of `size` (or none) will do for `selected`
/// messages, said before the run, never after it. `above`: the size of selection above which
/// a canary starts on its own (`[replay] canary_above`, 0: never).
pub fn modal_words(size: Option<u64>, selected: Option<u64>, above: u64) -> String {
    match (size, selected) {
        (Some(n), Some(c)) if !applies(n, c) => {
            format!("no canary: only {c} selected (canary above {n})")
        }
        (Some(n), _) => format!("the first {n} first; the rest only if none come back"),
        (None, Some(c)) if above > 0 && c <= above => {
            format!("no canary: only {c} selected (canary above {above})")
        }
        (None, _) => "off".into(),
    }
}

/// How the canary sees its messages come back.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Sight {
    /// Every message dead-lettered into the DLQ is also copied to a queue of Warren's, bound
    /// as the DLQ is, and a message counts when it carries this run's id: exact, whatever
    /// live traffic fails meanwhile. The exchanges watched.
    Exact { exchanges: Vec<String> },
    /// The DLQ's growth is counted instead (fresh failures of live traffic count too, so it
    /// may stop a replay that would have worked; never the other way): why it cannot be exact.
    Estimate { why: String },
}

/// The canary of a replay, as planned.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CanaryPlan {
    pub rule: CanaryRule,
    pub sight: Sight,
    /// The queues the canary's messages come to rest in, watched until the consumer took them.
    pub targets: Vec<String>,
    /// Some go on through wait queues (a retry ladder): the canary then never ends early on
    /// the targets' counts, it waits its whole time for what comes back.
    pub through_wait_queues: bool,
}

impl CanaryPlan {
    /// The plan's line: what the canary will do.
    pub fn describe(&self) -> String {
        let r = &self.rule;
        let how = match &self.sight {
            Sight::Exact { exchanges } => format!(
                "those coming back are told from live failures by this run's id (watching {})",
                exchanges.join(", ")
            ),
            Sight::Estimate { why } => {
                format!("those coming back are estimated from the DLQ's growth ({why})")
            }
        };
        format!(
            "canary: the first {} first, then up to {} s for them to be consumed; more than {} back dead stops the replay; {how}",
            r.size,
            r.wait.as_secs(),
            r.tolerance
        )
    }
}

/// What the broker showed, at the time it was seen.
#[derive(Clone, Debug, PartialEq)]
pub enum Seen {
    /// A message of this run came back dead: its failure, in a few words.
    CameBack { failure: String },
    /// The DLQ's ready messages (an estimating canary's measure).
    DlqReady(u64),
    /// Ready messages in the canary's target queues, summed.
    TargetsReady(u64),
    /// Unacknowledged messages in the target queues, summed, from the management API.
    TargetsUnacked(u64),
}

/// What the canary decided.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CanaryDecision {
    /// The consumer took them and no more than tolerated came back: the rest was replayed.
    WentAhead,
    /// More than tolerated came back dead: nothing more moved.
    CameBack,
    /// They were still waiting in the target when the time was up (no consumer, or one far
    /// behind): nothing more moved.
    NotConsumed,
    /// The canary's own stretch did not end as asked (a fault, a refusal): nothing more moved.
    RunStopped,
    /// The operator cancelled while the canary waited.
    Cancelled,
    /// The watch queue closed before the canary was through: what comes back could no longer
    /// be seen, so nothing more moved.
    Blind,
}

impl CanaryDecision {
    pub fn went_ahead(self) -> bool {
        self == CanaryDecision::WentAhead
    }
}

/// What the canary did, for the audit, the JSON summary and the Replays view.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct CanaryRecord {
    /// The dead-letter queue replayed from.
    pub dlq: String,
    /// The canary's size as asked.
    pub size: u64,
    /// Of those, how many were replayed.
    pub moved: u64,
    /// How many came back dead within the wait (an estimate when `exact` is false).
    pub came_back: u64,
    pub exact: bool,
    /// The most common failure of those that came back, and how many had it.
    pub top_failure: Option<(String, u64)>,
    pub waited_ms: u64,
    pub decision: CanaryDecision,
    /// The messages the rest of the run would have moved and that stayed in the DLQ.
    pub left_untouched: u64,
}

impl CanaryRecord {
    /// In words: "canary: 9 of 10 came back within 12 s, 9 × CardDeclined: … — the consumer
    /// still fails; 190 left in orders.dlq untouched".
    pub fn words(&self) -> String {
        let dlq = one_line(&self.dlq, 80);
        let secs = self.waited_ms.div_ceil(1000);
        let back = if self.exact { "" } else { "about " };
        let top = match &self.top_failure {
            Some((why, n)) => format!(", {n} × {why}"),
            None => String::new(),
        };
        let left = format!("{} left in {dlq} untouched", self.left_untouched);
        match self.decision {
            CanaryDecision::WentAhead => format!(
                "canary: {} replayed, {back}{} came back within {secs} s{top} — went ahead",
                self.moved, self.came_back
            ),
            // An estimate counts live traffic's failures too: it says what is likely, no more.
            CanaryDecision::CameBack => format!(
                "canary: {back}{} of {} came back within {secs} s{top} — the consumer {}still fails; {left}",
                self.came_back,
                self.moved,
                if self.exact { "" } else { "likely " }
            ),
            CanaryDecision::NotConsumed => format!(
                "canary: {} replayed, not consumed within {secs} s (no consumer, or one far behind; raise --canary-wait to wait longer) — {left}",
                self.moved
            ),
            CanaryDecision::RunStopped => format!(
                "canary: its own {} did not go through as asked — {left}",
                self.moved
            ),
            CanaryDecision::Cancelled => {
                format!("canary: cancelled while waiting after {secs} s — {left}")
            }
            CanaryDecision::Blind => format!(
                "canary: its watch queue closed after {secs} s, so what came back could no longer be seen ({} so far) — {left}",
                self.came_back
            ),
        }
    }
}

/// The canary's wait, as a state: what was seen so far, and when it is through.
#[derive(Clone, Debug)]
pub struct Watch {
    rule: CanaryRule,
    exact: bool,
    early: bool,
    moved: u64,
    started: Instant,
    failures: BTreeMap<String, u64>,
    back: u64,
    dlq_base: Option<u64>,
    dlq_now: u64,
    delivered_at: Option<Instant>,
    settled: bool,
    over_since: Option<Instant>,
}

impl Watch {
    /// The wait after the canary's `moved` messages were confirmed, from `now`.
    pub fn new(plan: &CanaryPlan, moved: u64, now: Instant) -> Watch {
        Watch {
            rule: plan.rule.clone(),
            exact: matches!(plan.sight, Sight::Exact { .. }),
            early: !plan.through_wait_queues,
            moved,
            started: now,
            failures: BTreeMap::new(),
            back: 0,
            dlq_base: None,
            dlq_now: 0,
            delivered_at: None,
            settled: false,
            over_since: None,
        }
    }

    /// How many came back so far (exact, or the DLQ's growth).
    pub fn came_back(&self) -> u64 {
        if self.exact {
            self.back
        } else {
            self.dlq_now
                .saturating_sub(self.dlq_base.unwrap_or(self.dlq_now))
        }
    }

    pub fn on(&mut self, now: Instant, seen: Seen) {
        match seen {
            Seen::CameBack { failure } => {
                self.back += 1;
                *self.failures.entry(failure).or_insert(0) += 1;
            }
            Seen::DlqReady(n) => {
                // The first reading is the base: what the DLQ held once the canary's stretch
                // handed back what it did not move.
                self.dlq_base.get_or_insert(n);
                self.dlq_now = n;
            }
            Seen::TargetsReady(0) => {
                self.delivered_at.get_or_insert(now);
            }
            Seen::TargetsReady(_) => {}
            Seen::TargetsUnacked(n) => {
                // A reading this long after every canary message was delivered shows the
                // consumer after it took them: none unacknowledged means each was settled.
                if n == 0
                    && self
                        .delivered_at
                        .is_some_and(|d| now.saturating_duration_since(d) >= STATS_LAG)
                {
                    self.settled = true;
                }
            }
        }
        if self.came_back() > self.rule.tolerance {
            self.over_since.get_or_insert(now);
        }
    }

    /// Through, and what it decided; `None` while it waits.
    pub fn decide(&self, now: Instant) -> Option<CanaryDecision> {
        let back = self.came_back();
        if let Some(over) = self.over_since
            && (back >= self.moved || now.saturating_duration_since(over) >= GRACE)
        {
            return Some(CanaryDecision::CameBack);
        }
        if self.over_since.is_some() {
            return None;
        }
        if self.early && self.settled {
            return Some(CanaryDecision::WentAhead);
        }
        if now.saturating_duration_since(self.started) >= self.rule.wait {
            return Some(if self.delivered_at.is_some() {
                CanaryDecision::WentAhead
            } else {
                CanaryDecision::NotConsumed
            });
        }
        None
    }

    /// Whether the counts of unacknowledged messages are worth asking for now.
    pub fn wants_unacked(&self, now: Instant) -> bool {
        self.early
            && !self.settled
            && self
                .delivered_at
                .is_some_and(|d| now.saturating_duration_since(d) >= STATS_LAG)
    }

    /// The record of the canary, decided `decision` at `now`; `left` stayed untouched.
    pub fn record(
        &self,
        dlq: &str,
        now: Instant,
        decision: CanaryDecision,
        left: u64,
    ) -> CanaryRecord {
        let top = self
            .failures
            .iter()
            .max_by(|a, b| a.1.cmp(b.1).then(b.0.cmp(a.0)))
            .map(|(k, n)| (k.clone(), *n));
        CanaryRecord {
            dlq: dlq.to_string(),
            size: self.rule.size,
            moved: self.moved,
            came_back: self.came_back(),
            exact: self.exact,
            top_failure: top,
            waited_ms: u64::try_from(now.saturating_duration_since(self.started).as_millis())
                .unwrap_or(u64::MAX),
            decision,
            left_untouched: if decision.went_ahead() { 0 } else { left },
        }
    }

    /// Where the wait stands, for the progress line.
    pub fn progress(&self, now: Instant) -> CanaryWait {
        CanaryWait {
            moved: self.moved,
            came_back: self.came_back(),
            exact: self.exact,
            taken: self.delivered_at.is_some(),
            waited: now.saturating_duration_since(self.started),
            wait: self.rule.wait,
        }
    }
}

/// Where a canary's wait stands: shown while nothing else moves.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CanaryWait {
    pub moved: u64,
    pub came_back: u64,
    pub exact: bool,
    /// The consumer has taken every canary message from the target.
    pub taken: bool,
    pub waited: Duration,
    pub wait: Duration,
}

impl std::fmt::Display for CanaryWait {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let state = if self.taken {
            "taken by the consumer"
        } else {
            "waiting in the target"
        };
        write!(
            f,
            "canary: {} replayed, {}{} came back, {state}; {}/{} s",
            self.moved,
            if self.exact { "" } else { "about " },
            self.came_back,
            self.waited.as_secs(),
            self.wait.as_secs()
        )
    }
}

#[cfg(test)]
mod tests;
