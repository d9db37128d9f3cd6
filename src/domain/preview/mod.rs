//! What a replay would do, decided before anything moves, and how the user asked for it: the
//! plan's types and its words (`Preview`, `ReplaySpec`), the policy that makes one from the
//! messages looked at (`look`), and messages explained with what Warren remembers of them
//! (`explained`). Pure: the session reads and checks, this decides.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};

use crate::domain::replay::{self as plan, ReplayPlan};
use crate::domain::sanitize;
use crate::domain::selection::Selection;

pub mod explained;
pub mod look;

/// A publish's exchange and routing key.
pub type TargetKey = (String, String);

/// Whether a read may spend deliveries that Warren has spent on the queue before.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReadConsent {
    /// Use what this session already read from a queue whose reads cost deliveries; read only
    /// where reading is free or Warren has never read the queue.
    Reuse,
    /// The user was told what reading again costs and said yes.
    ReadAgain,
}

/// What a replay would do, decided before anything moves.
#[derive(Clone, Debug, Default)]
pub struct Preview {
    pub queue: String,
    /// The count the run moves at most: the count the user confirms. For "all" the queue's depth
    /// (capped by `--limit`), else the matches among the messages looked at (capped likewise):
    /// the run stops there, so it never moves more than was confirmed.
    pub selected: u64,
    /// Messages that matched the selection among those looked at.
    pub matched: u64,
    /// Messages looked at (the head of the queue, up to the window).
    pub examined: u64,
    /// They were what this session read before (a queue whose reads cost deliveries is not
    /// read again for a plan): nothing was read now.
    pub reused: bool,
    /// Nothing was read for the plan, and why not (where every message goes was known without
    /// looking: `--to`, or the one queue that dead-letters into the DLQ). Each message is then
    /// planned as the run takes it, and one whose plan points elsewhere stays, reported.
    pub unread: Option<String>,
    /// Nothing was read and the run has several targets, none known without looking: each
    /// target is checked the first time the run meets a message for it (see
    /// [`Session::preview_to_run`]).
    pub checked_as_met: bool,
    /// What the read spent of a delivery limit, in words (`None`: nothing, or reused).
    pub cost: Option<String>,
    pub depth: Option<u64>,
    /// Per target: description → (count, queues it reaches).
    pub targets: BTreeMap<String, TargetPreview>,
    /// Headers removed, and AMQP properties removed as "property expiration".
    pub removed: BTreeSet<String>,
    /// Counter headers set to zero (where the framework or the app reads the header).
    pub reset: BTreeSet<String>,
    pub added: BTreeSet<String>,
    /// Selected messages some of whose retry counters survive the replay (see `Attempts`), and
    /// which counters.
    pub attempts_not_reset: u64,
    pub surviving_counters: BTreeSet<String>,
    /// Selected messages whose framework deadline has passed, per (framework, deadline header).
    /// Without `--clear-expiry` they stay in the DLQ and are not in `selected`.
    pub expired: BTreeMap<(&'static str, &'static str), u64>,
    /// What the plan says about them (`replay::expiry_notice`), one line per framework.
    pub notices: Vec<String>,
    /// Messages that were replayed before and failed again.
    pub replayed_before: u64,
    /// Selected messages that came from AMQP 1.0 clients (`domain::amqp10::carrier::sign`).
    pub amqp10_signs: u64,
    /// The protocol the run reads and publishes with (`domain::amqp10::carrier::choose`).
    pub carrier: crate::domain::amqp10::carrier::Carrier,
    /// Nothing was read and the protocol was left to the messages: the run's head message
    /// decides (`Session::head_is_10`, before the run).
    pub carrier_by_head: bool,
    /// Warnings with counts.
    pub warnings: BTreeMap<String, u64>,
    /// Reasons nothing may move; empty when the replay may go ahead.
    pub refusals: Vec<String>,
    /// Targets checked to exist and allowed.
    pub allowed: HashSet<TargetKey>,
    /// Targets that are wait queues, and the consuming queue each routes back to: a wait queue
    /// is never a replay target (see `domain::destination`).
    pub redirects: BTreeMap<TargetKey, plan::ReplayTarget>,
    /// The redirects in force when the plan was made (`domain::redirect`): the run applies the
    /// same ones.
    pub endpoint_redirects: std::sync::Arc<crate::domain::redirect::Redirects>,
    /// Selected message keys, for the audit and for a TUI replay of exactly these.
    pub keys: Vec<String>,
    /// Message ids (or keys) per target, for `--dry-run` output.
    pub plans: Vec<(String, ReplayPlan)>,
    /// Audited replays per message key, as remembered for the plan: the run writes the replay
    /// count from them too (a framework's own retry drops `warren-replay-count`).
    pub replays: HashMap<String, i64>,
}

impl Preview {
    /// What the replay would do, in words: the CLI prints these lines before it asks (and for
    /// `--dry-run`), and the TUI's dry run shows the same ones. Terminal-safe and bounded.
    pub fn describe(&self, spec: &ReplaySpec, dry_run: bool) -> Vec<String> {
        use sanitize::one_line;
        const CELL: usize = 120;
        let verb = if dry_run { "Would replay" } else { "Replay" };
        let depth = self
            .depth
            .map(|d| format!(" (queue holds {d})"))
            .unwrap_or_default();
        let looked = if let Some(why) = &self.unread {
            format!(" — nothing read first: {}", one_line(why, 200))
        } else if self.examined < self.depth.unwrap_or(0) {
            format!(" — matched among the first {} looked at", self.examined)
        } else {
            String::new()
        };
        let mut out = vec![format!(
            "{verb} {} message(s) from {}{depth}{looked}; selection: {}",
            self.selected,
            one_line(&self.queue, 80),
            one_line(&spec.selection.describe(), 200)
        )];
        for (label, t) in &self.targets {
            out.push(format!(
                "  {:>6} → {}{} via exchange '{}' key '{}' — reaches {}{}",
                t.count,
                one_line(label, 80),
                t.redirected
                    .as_ref()
                    .map_or(String::new(), |r| format!(" ({})", r.describe())),
                one_line(&t.exchange, 60),
                one_line(&t.routing_key, 60),
                if t.reaches.is_empty() {
                    "no queue".to_string()
                } else {
                    one_line(&t.reaches.join(", "), CELL)
                },
                if t.exact { "" } else { " (possibly)" }
            ));
        }
        if let Some(max) = spec.max_backlog {
            let queues: Vec<String> = self.rest_queues().into_iter().collect();
            out.push(format!(
                "  paces    publishing waits while {} hold{} {max} ready message(s) or more",
                if queues.is_empty() {
                    "the queues the targets lead to (as each is checked)".to_string()
                } else {
                    one_line(&queues.join(", "), CELL)
                },
                if queues.len() == 1 { "s" } else { "" }
            ));
        }
        if self.unread.is_some() && !spec.keep_attempts {
            out.push(
                "  removes  the death records and retry counters each message carries".to_string(),
            );
        } else if !self.removed.is_empty() {
            out.push(format!(
                "  removes  {}",
                one_line(
                    &self.removed.iter().cloned().collect::<Vec<_>>().join(", "),
                    400
                )
            ));
        }
        out.push(format!(
            "  adds     {}",
            one_line(
                &self.added.iter().cloned().collect::<Vec<_>>().join(", "),
                400
            )
        ));
        if !self.reset.is_empty() {
            out.push(format!(
                "  resets   {} (to 0: its reader expects the header)",
                one_line(
                    &self.reset.iter().cloned().collect::<Vec<_>>().join(", "),
                    400
                )
            ));
        }
        // "Reset" only when every counter Warren knows of was.
        let attempts = if spec.keep_attempts {
            "kept".to_string()
        } else if self.unread.is_some() {
            "decided per message as the run takes it (--dry-run reads the head and shows them)"
                .to_string()
        } else if self.attempts_not_reset == 0 {
            "reset".to_string()
        } else {
            format!(
                "not reset for {} of them: {} survive{}",
                self.attempts_not_reset,
                one_line(
                    &self
                        .surviving_counters
                        .iter()
                        .cloned()
                        .collect::<Vec<_>>()
                        .join(", "),
                    200
                ),
                if self.surviving_counters.len() == 1 {
                    "s"
                } else {
                    ""
                }
            )
        };
        out.push(format!("  body     untouched; attempts {attempts}"));
        for n in &self.notices {
            out.push(format!("  ! {}", one_line(n, 400)));
        }
        if self.replayed_before > 0 {
            out.push(format!(
                "  ! {} of them were replayed before and failed again",
                self.replayed_before
            ));
        }
        for (w, n) in &self.warnings {
            out.push(format!("  ! {n} × {}", one_line(w, 300)));
        }
        for r in &self.refusals {
            out.push(format!("  ✗ {}", one_line(r, 400)));
        }
        out
    }

    /// Where the run publishes: the checked targets, after wait queues were replaced by the
    /// queue they lead back to. Write permission is checked on exactly these.
    pub fn publish_targets(&self) -> Vec<TargetKey> {
        let mut t: Vec<TargetKey> = self.allowed.iter().cloned().collect();
        t.sort();
        t
    }

    /// The queues the run's messages come to rest in: the ones `--max-backlog` watches.
    pub(crate) fn rest_queues(&self) -> BTreeSet<String> {
        self.targets
            .values()
            .flat_map(TargetPreview::rests)
            .collect()
    }
}

#[derive(Clone, Debug, Default, PartialEq)]
pub struct TargetPreview {
    pub exchange: String,
    pub routing_key: String,
    pub count: u64,
    /// Body bytes of the messages going there (for byte limits).
    pub bytes: u64,
    pub reaches: Vec<String>,
    /// False when the bindings could not decide exactly (headers exchanges).
    pub exact: bool,
    /// Where the messages come to rest when that is not the queue first reached (through wait
    /// queues), with the wait queues passed on the way.
    pub rests_in: Option<String>,
    pub via: Vec<String>,
    /// The routing keys these messages had when they died in the target queue (from x-death):
    /// the keys a wait queue dead-letters them on with, when it has no routing key of its own.
    pub death_keys: BTreeSet<String>,
    /// Its messages were redirected here (`domain::redirect`): from where, and why.
    pub redirected: Option<crate::domain::redirect::Redirected>,
}

impl TargetPreview {
    /// Where its messages come to rest: the queue past the wait queues, else each queue the
    /// publish reaches.
    pub(crate) fn rests(&self) -> Vec<String> {
        match &self.rests_in {
            Some(q) => vec![q.clone()],
            None => self.reaches.clone(),
        }
    }
}

/// How to replay, as the user asked.
#[derive(Clone, Debug)]
pub struct ReplaySpec {
    pub queue: String,
    pub selection: Selection,
    pub limit: Option<u64>,
    pub rate: Option<f64>,
    pub to: Option<String>,
    pub allow_fan_out: bool,
    pub keep_attempts: bool,
    /// Replay messages whose framework deadline has passed, without the deadline.
    pub clear_expiry: bool,
    /// `--strip-failure-stamp`: Symfony messages go out without `SentToFailureTransportStamp`
    /// (see `ReplayOptions::strip_failure_stamp`).
    pub strip_failure_stamp: bool,
    pub window: usize,
    /// Whether looking at the queue may spend deliveries Warren has spent before.
    pub consent: ReadConsent,
    /// The run's globally unique id (see `broker::audit::new_run_id`), written into each
    /// replayed message as `warren-replay-id` and recorded in the audit.
    pub run_id: Option<String>,
    /// `--max-backlog`: publishing waits while a queue the messages come to rest in holds this
    /// many ready messages, and goes on as its consumer drains it (`None`: no cap).
    pub max_backlog: Option<u64>,
    /// Edit, then replay: each selected message is published as edited (`domain::edit`).
    pub edits: Option<std::sync::Arc<crate::domain::edit::Edits>>,
    /// `--protocol`: the protocol the run reads and publishes with, or decided by the messages.
    pub protocol: crate::domain::amqp10::carrier::Choice,
}

impl ReplaySpec {
    /// All of `queue`, read `window` at a time, with nothing else asked: each front end's
    /// request starts here and sets what its operator chose.
    pub fn all_of(queue: &str, window: usize) -> ReplaySpec {
        ReplaySpec {
            queue: queue.to_string(),
            selection: Selection::All,
            limit: None,
            rate: None,
            to: None,
            allow_fan_out: false,
            keep_attempts: false,
            clear_expiry: false,
            strip_failure_stamp: false,
            window,
            consent: ReadConsent::Reuse,
            run_id: None,
            max_backlog: None,
            edits: None,
            protocol: Default::default(),
        }
    }
}
