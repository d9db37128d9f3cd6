//! The replay engine's decisions, as a state machine: it takes events (a delivery, a confirm, a
//! rate slot, a cancel, `connection.blocked`, the passing of time) and returns effects (publish,
//! ack, sync, ask the depth, cancel the consumer, drain, hand back, close, finish). No IO, no
//! lapin types, no clock: time comes in as values, so every path of a replay — blocked publishes,
//! deadlines, signals, returns after confirms, a channel that dies with acks on the wire — is a
//! unit test without a broker. `broker::replay` is the thin shell that performs the effects.
//!
//! The guarantees it keeps: a DLQ delivery is acknowledged only after its publish was confirmed
//! and not returned; everything else is held and handed back with one `nack(multiple, requeue)`
//! after the consumer is cancelled and drained; every wait has a deadline and every stop a reason;
//! a second cancel ends the run at once; and a message that may now be in both places (confirmed
//! by the target, its ack not provably processed by the DLQ) is counted as a duplicate.

mod ack;
mod backlog;
mod source;
mod stop;

pub use ack::{AckOp, AckTracker};
pub use backlog::BacklogWait;
pub use source::Source;
pub use stop::StopReason;

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::time::{Duration, Instant};

/// Every wait of a run, bounded.
#[derive(Clone, Debug, PartialEq)]
pub struct Limits {
    /// A publish not confirmed this long after it went out (while not blocked) stops the run.
    pub confirm: Duration,
    /// Publishing blocked by the broker this long stops the run.
    pub blocked: Duration,
    /// Silence of the consumer after which the broker is asked how many messages are ready.
    pub idle: Duration,
    /// Silence after which a queue that still holds messages stops the run as stalled.
    pub stall: Duration,
    /// Settling (confirms in flight, acks, cancel, drain, hand back, close) after a stop; past
    /// this the run ends at once.
    pub settle: Duration,
    /// One request to the broker (ack, sync, declare, cancel, nack, close).
    pub step: Duration,
    /// How often written acks are proven (a round trip on the DLQ's channel).
    pub sync_every: Duration,
    /// Flush acks after this many ready tags, whenever nothing is pending, and at least every
    /// `ack_every`: a confirmed message not yet acknowledged is replayed again if the connection
    /// dies, so a slow (throttled) run must not sit on a large batch.
    pub ack_batch: usize,
    pub ack_every: Duration,
    /// With a backlog cap: how often the target's ready messages are counted at most, while
    /// they are near or over the cap.
    pub backlog_poll: Duration,
    /// With a backlog cap: waiting this long without the target's backlog going down stops the
    /// run (its consumer is gone or stuck).
    pub backlog_stall: Duration,
}

impl Default for Limits {
    fn default() -> Limits {
        Limits {
            confirm: Duration::from_secs(30),
            blocked: Duration::from_secs(60),
            idle: Duration::from_secs(2),
            stall: Duration::from_secs(10),
            settle: Duration::from_secs(10),
            step: Duration::from_secs(5),
            sync_every: Duration::from_secs(1),
            ack_batch: 256,
            ack_every: Duration::from_millis(50),
            backlog_poll: Duration::from_millis(50),
            backlog_stall: Duration::from_secs(300),
        }
    }
}

#[derive(Clone, Debug)]
pub struct Config {
    pub depth_at_start: u64,
    pub limit: Option<u64>,
    pub window: usize,
    /// The consumer's prefetch: with this many unsettled deliveries the broker sends no more.
    pub prefetch: usize,
    pub limits: Limits,
    /// How long after its channel processed an ack the DLQ may still lose it: zero for a classic
    /// queue; for a quorum queue the settle is a Raft command the leader commits later, and a
    /// node loss can undo the last moments' acks (seen: 3 of 500 in a second). A round trip on
    /// the channel proves only acks at least this old ([`crate::domain::features::settle_lag`]).
    pub settle_lag: Duration,
    /// `--max-backlog`: publishing waits while the queues the targets rest in hold this many
    /// ready messages or more (see `backlog`); `None`: no cap.
    pub backlog: Option<u64>,
    /// Where deliveries come from: a queue, or a list in memory (see [`Source`]).
    pub source: Source,
}

/// What to do with one delivery, decided by the caller from the message (selection, plan,
/// refusal: the pure domain) before it reaches the engine.
#[derive(Clone, Debug, PartialEq)]
pub enum Decision {
    /// Not selected: held and handed back.
    Skip,
    /// Selected, but its plan keeps it in the DLQ (its framework would discard it on arrival):
    /// held and handed back, counted as held back with why.
    Keep(String),
    /// Selected but must not be published: held, counted as failed, with why.
    Refuse(String),
    /// Publish it; `key` names it in the audit, `target` counts it per target.
    Publish { key: String, target: String },
    /// Publish it once its target, which no check has passed yet, passes one: the plan read
    /// nothing first and the run has several targets, so each is checked the first time a
    /// message for it is met ([`Effect::CheckTarget`] with `check`, which names the target;
    /// the answer is [`Event::TargetChecked`]). Until then the message waits and nothing more
    /// is taken; a target that fails its check holds each of its messages back, counted as
    /// failed with why; the others go on.
    Unchecked {
        key: String,
        target: String,
        check: String,
    },
    /// Delete it for good: acknowledged without a publish (`warren discard`, whose snapshot
    /// the caller wrote before the run, or a local archive). Counted as moved and as discarded;
    /// like a confirmed publish, its ack is proven before the run calls it settled.
    Discard { key: String },
}

/// How a publish ended.
#[derive(Clone, Debug, PartialEq)]
pub enum ConfirmOutcome {
    /// Confirmed and routed.
    Ack,
    /// Confirmed but returned unroutable (`mandatory`), with the broker's reply.
    Returned(String),
    /// The broker refused it (`basic.nack`).
    Nack,
    /// Certainly not delivered (the publishing channel was closed by the broker over an error).
    Failed(String),
    /// The connection died before the confirm: it may or may not have reached the target.
    Unknown(String),
}

#[derive(Clone, Debug, PartialEq)]
pub enum Event {
    Delivery {
        tag: u64,
        decision: Decision,
        /// Set when the message is close to its quorum delivery limit: why.
        near_limit: Option<String>,
    },
    /// The waiting publish's rate slot came.
    Slot,
    /// The answer to [`Effect::AskBacklog`]: ready messages in each queue the targets rest in.
    Backlog(Result<Vec<(String, u64)>, String>),
    Confirm {
        tag: u64,
        outcome: ConfirmOutcome,
    },
    /// `connection.blocked` on the publishing connection, with the broker's reason.
    Blocked(String),
    Unblocked,
    /// Ctrl-C, SIGTERM, SIGHUP or the TUI's cancel; a second one ends the run at once.
    Cancel,
    /// Time passed (a deadline came).
    Tick,
    /// The answer to [`Effect::AskDepth`]: ready messages in the DLQ.
    Depth(Result<u64, String>),
    /// The DLQ's consumer, channel or connection failed.
    ConsumeLost(String),
    /// The ack frames of the last [`Effect::Ack`] were written (or not).
    AcksWritten(Result<(), String>),
    /// The round trip of [`Effect::Sync`] came back: every ack written before it was processed.
    Synced(Result<(), String>),
    ConsumerCancelled(Result<(), String>),
    /// A delivery that was already on its way when the consumer was cancelled.
    Drained(u64),
    DrainDone,
    HandedBack(Result<(), String>),
    /// The DLQ's channel closed (`Ok`: with close-ok, proving every earlier frame was processed).
    Closed(Result<(), String>),
    /// The answer to [`Effect::CheckTarget`]: `Ok` with the name its messages are counted
    /// under when that changed (a wait queue's messages go to the queue it leads back to),
    /// `Err` with why its messages must stay in the DLQ.
    TargetChecked {
        check: String,
        result: Result<Option<String>, String>,
    },
}

#[derive(Clone, Debug, PartialEq)]
pub enum Effect {
    /// Publish the waiting message with this DLQ tag.
    Publish(u64),
    /// Send these ack frames on the DLQ's channel, then report [`Event::AcksWritten`].
    Ack(Vec<AckOp>),
    /// A round trip on the DLQ's channel (processed in order after the acks), then
    /// [`Event::Synced`].
    Sync,
    /// Ask the broker how many ready messages the DLQ holds, then [`Event::Depth`].
    AskDepth,
    /// Ask how many ready messages each queue the targets rest in holds, then
    /// [`Event::Backlog`].
    AskBacklog,
    /// Cancel the consumer, then [`Event::ConsumerCancelled`].
    CancelConsumer,
    /// Read what the consumer had already been sent ([`Event::Drained`]), then
    /// [`Event::DrainDone`].
    Drain,
    /// Hand back every held delivery: `nack(top, multiple, requeue)`, then [`Event::HandedBack`].
    Nack { top: u64 },
    /// Close the channels, then [`Event::Closed`].
    Close,
    /// Check the target named (it exists, its route delivers, it has room; see
    /// [`Decision::Unchecked`]), then [`Event::TargetChecked`].
    CheckTarget(String),
    /// The run is over: read [`Engine::tally`].
    Finish,
}

/// Counts as the run goes; the final tally when it is over.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Tally {
    pub seen: u64,
    pub published: u64,
    pub moved: u64,
    /// Of `moved`, the ones acknowledged without a publish ([`Decision::Discard`]).
    pub discarded: u64,
    pub returned: u64,
    pub failed: u64,
    /// Looked at and handed back: not selected, or kept by their plan.
    pub held_back: u64,
    /// Selected, but handed back without a publish because a cancel or a fault came first:
    /// still in the DLQ, and still to do.
    pub untouched: u64,
    /// Of those, the ones their plan kept in the DLQ, by why.
    pub kept: BTreeMap<String, u64>,
    pub targets: BTreeMap<String, u64>,
    /// Keys of the moved messages, in the order they were confirmed, until the shell takes
    /// them ([`Engine::take_moved`]).
    pub moved_ids: Vec<String>,
    pub problems: BTreeMap<String, u64>,
    /// Messages that may now be in both the target and the DLQ: confirmed by the target without
    /// a provably processed ack in the DLQ, or published without an answer before the connection
    /// died. An upper bound: never fewer than there are.
    pub duplicated: u64,
    /// Of those, the ones that certainly are duplicates (confirmed, never acknowledged).
    pub duplicated_certain: u64,
    /// Keys of the messages counted in `duplicated`.
    pub duplicate_ids: Vec<String>,
    /// The broker's `connection.blocked` reason while publishing is blocked.
    pub blocked: Option<String>,
    /// Set when the run ended without settling (a second cancel, or settling past its deadline):
    /// unacknowledged deliveries go back to the DLQ when the connection closes.
    pub forced: Option<String>,
}

impl Tally {
    /// Adds a later segment's counts (a run that reconnected carries on with a new engine). The
    /// last segment says whether the run ended without settling and whether it is blocked.
    pub fn merge(&mut self, later: Tally) {
        self.seen += later.seen;
        self.published += later.published;
        self.moved += later.moved;
        self.discarded += later.discarded;
        self.returned += later.returned;
        self.failed += later.failed;
        self.held_back += later.held_back;
        self.untouched += later.untouched;
        for (k, n) in later.kept {
            *self.kept.entry(k).or_insert(0) += n;
        }
        for (k, n) in later.targets {
            *self.targets.entry(k).or_insert(0) += n;
        }
        self.moved_ids.extend(later.moved_ids);
        for (k, n) in later.problems {
            *self.problems.entry(k).or_insert(0) += n;
        }
        self.duplicated += later.duplicated;
        self.duplicated_certain += later.duplicated_certain;
        self.duplicate_ids.extend(later.duplicate_ids);
        self.blocked = later.blocked;
        self.forced = later.forced;
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Phase {
    /// Taking deliveries, or stopped and waiting for the confirms in flight.
    Running,
    Cancelling,
    Draining,
    HandingBack,
    Closing,
    Done,
}

/// What the shell should listen to now.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Wants {
    /// Read the next delivery.
    pub take: bool,
    /// Wait for the rate slot of the waiting publish.
    pub slot: bool,
    /// Wait for confirms.
    pub confirms: bool,
    /// The waiting publish waits for the target's backlog to go down (not for its rate slot):
    /// the rate counts again from when it goes.
    pub backlog: bool,
}

struct Waiting {
    tag: u64,
    key: String,
    target: String,
}

struct InFlight {
    key: String,
    target: String,
}

/// A message whose target is being checked ([`Decision::Unchecked`]).
struct Unchecked {
    tag: u64,
    key: String,
    target: String,
    check: String,
}

/// What a target's check said, or that it has not answered yet.
enum Check {
    Pending,
    Passed(Option<String>),
    Failed(String),
}

/// The replay state machine. See the module documentation.
pub struct Engine {
    cfg: Config,
    phase: Phase,
    acks: AckTracker,
    tally: Tally,
    stop: Option<StopReason>,
    taking: bool,
    waiting: Option<Waiting>,
    /// Taken, waiting for its target's check: nothing more is taken meanwhile.
    unchecked: Option<Unchecked>,
    /// Each target checked during the run, by the name its check goes by.
    checks: HashMap<String, Check>,
    inflight: HashMap<u64, InFlight>,
    /// Oldest publish first, for the confirm deadline (tags whose confirm came are skipped).
    sent_order: VecDeque<(u64, Instant)>,
    /// Keys of confirmed messages not yet provably acknowledged.
    confirmed_keys: HashMap<u64, String>,
    /// Acked tags whose ack was written but not yet proven settled, in order written, each
    /// with when a round trip proved its channel had processed it.
    unproven: VecDeque<(u64, Option<Instant>)>,
    /// The time of the event being handled.
    now: Instant,
    /// How many of `unproven` the outstanding sync covers.
    sync_mark: Option<usize>,
    last_sync: Instant,
    last_ack: Instant,
    last_delivery: Instant,
    last_depth_check: Option<Instant>,
    asking_depth: bool,
    blocked_since: Option<Instant>,
    unblocked_at: Option<Instant>,
    settle_by: Option<Instant>,
    cancels: u32,
    consume_alive: bool,
    close_sent: bool,
    /// The target's backlog, when the run has a cap.
    backlog: Option<backlog::Backlog>,
}

impl Engine {
    pub fn new(cfg: Config, now: Instant) -> Engine {
        Engine {
            backlog: cfg.backlog.map(backlog::Backlog::new),
            cfg,
            phase: Phase::Running,
            acks: AckTracker::default(),
            tally: Tally::default(),
            stop: None,
            taking: true,
            waiting: None,
            unchecked: None,
            checks: HashMap::new(),
            inflight: HashMap::new(),
            sent_order: VecDeque::new(),
            confirmed_keys: HashMap::new(),
            unproven: VecDeque::new(),
            now,
            sync_mark: None,
            last_sync: now,
            last_ack: now,
            last_delivery: now,
            last_depth_check: None,
            asking_depth: false,
            blocked_since: None,
            unblocked_at: None,
            settle_by: None,
            cancels: 0,
            consume_alive: true,
            close_sent: false,
        }
    }

    pub fn tally(&self) -> &Tally {
        &self.tally
    }
    /// The keys moved since the last call, oldest first, taken out of the tally: the shell
    /// keeps them out of memory (`local::spool`), so a run's memory does not grow with it.
    pub fn take_moved(&mut self) -> Vec<String> {
        std::mem::take(&mut self.tally.moved_ids)
    }
    /// Why the run stopped (or is stopping); `None` while it runs.
    pub fn stop_reason(&self) -> Option<&StopReason> {
        self.stop.as_ref()
    }
    pub fn is_done(&self) -> bool {
        self.phase == Phase::Done
    }
    pub fn limits(&self) -> &Limits {
        &self.cfg.limits
    }
    pub fn in_flight(&self) -> usize {
        self.inflight.len()
    }
    /// The deliveries held to go back to the DLQ at the end (handed back by one nack).
    pub fn held_count(&self) -> usize {
        self.acks.held()
    }

    pub fn wants(&self) -> Wants {
        let running = self.phase == Phase::Running;
        let ready = running && self.waiting.is_some() && self.blocked_since.is_none();
        Wants {
            take: running
                && self.taking
                && self.waiting.is_none()
                && self.unchecked.is_none()
                && self.room_to_take(),
            slot: ready && self.backlog_allows(),
            confirms: running && !self.inflight.is_empty(),
            backlog: ready && !self.backlog_allows(),
        }
    }

    /// The next moment something is due without an event: the shell sends [`Event::Tick`] then.
    pub fn deadline(&self) -> Option<Instant> {
        let l = self.cfg.limits.clone();
        let mut due: Option<Instant> = None;
        let mut at = |t: Instant| due = Some(due.map_or(t, |d| d.min(t)));
        if self.phase == Phase::Done {
            return None;
        }
        if let Some(t) = self.settle_by {
            at(t);
        }
        if self.phase != Phase::Running {
            return due;
        }
        if let Some(b) = self.blocked_since {
            at(b + l.blocked);
        } else if let Some(t) = self.oldest_unconfirmed() {
            at(t + l.confirm);
        }
        if self.idle_applies() {
            at(self.last_depth_check.unwrap_or(self.last_delivery) + l.idle);
        }
        if self.acks.ready_len() > 0 {
            at(self.last_ack + l.ack_every);
        }
        if !self.unproven.is_empty() && self.sync_mark.is_none() {
            at(self.last_sync + l.sync_every);
        }
        if let Some(t) = self.backlog_deadline() {
            at(t);
        }
        due
    }

    /// Feeds one event; returns the effects to perform, in order.
    pub fn on(&mut self, now: Instant, ev: Event) -> Vec<Effect> {
        let mut fx = Vec::new();
        if self.phase == Phase::Done {
            return fx;
        }
        self.now = self.now.max(now);
        match ev {
            Event::Delivery {
                tag,
                decision,
                near_limit,
            } => {
                if let Some(check) = self.delivery(now, tag, decision, near_limit) {
                    fx.push(Effect::CheckTarget(check));
                }
            }
            Event::TargetChecked { check, result } => self.target_checked(check, result),
            Event::Slot => self.slot(now, &mut fx),
            Event::Backlog(answer) => self.backlog_counted(now, answer),
            Event::Confirm { tag, outcome } => self.confirm(now, tag, outcome),
            Event::Blocked(reason) => self.blocked(now, reason),
            Event::Unblocked => {
                self.blocked_since = None;
                self.unblocked_at = Some(now);
                self.tally.blocked = None;
            }
            Event::Cancel => {
                if self.cancel(now) {
                    return vec![Effect::Finish];
                }
            }
            Event::Tick => {
                if let Some(f) = self.tick(now) {
                    fx.push(f);
                }
                if self.phase == Phase::Done {
                    return vec![Effect::Finish];
                }
            }
            Event::Depth(answer) => self.depth(now, answer),
            Event::ConsumeLost(why) => self.consume_lost(now, why),
            Event::AcksWritten(r) => {
                if let Err(e) = r {
                    self.consume_lost(now, e);
                }
            }
            Event::Synced(r) => {
                let mark = self.sync_mark.take();
                match r {
                    Ok(()) => self.prove(mark.unwrap_or(usize::MAX)),
                    Err(e) => self.consume_lost(now, e),
                }
            }
            Event::ConsumerCancelled(r) => self.consumer_cancelled(now, r, &mut fx),
            Event::Drained(tag) => {
                self.acks.received(tag);
                self.acks.hold(tag);
            }
            Event::DrainDone => {
                if self.phase == Phase::Draining {
                    self.hand_back(&mut fx);
                }
            }
            Event::HandedBack(r) => self.handed_back(r),
            Event::Closed(r) => {
                if self.phase == Phase::Closing {
                    self.closed(r, &mut fx);
                    return fx;
                }
            }
        }
        self.after(now, &mut fx);
        fx
    }

    /// The waiting message's rate slot came: publish it, or hold it if the run stopped meanwhile.
    fn slot(&mut self, now: Instant, fx: &mut Vec<Effect>) {
        let Some(w) = self.waiting.take() else {
            return;
        };
        if self.phase != Phase::Running {
            self.acks.hold(w.tag);
            return;
        }
        self.tally.published += 1;
        self.backlog_published(now);
        self.inflight.insert(
            w.tag,
            InFlight {
                key: w.key,
                target: w.target,
            },
        );
        self.sent_order.push_back((w.tag, now));
        fx.push(Effect::Publish(w.tag));
        if self
            .cfg
            .limit
            .is_some_and(|l| self.tally.published + self.tally.discarded >= l)
        {
            self.stop_with(now, StopReason::LimitReached);
        }
    }

    /// `connection.blocked`: starts the blocked clock (once) and keeps the broker's reason.
    fn blocked(&mut self, now: Instant, reason: String) {
        self.blocked_since.get_or_insert(now);
        self.tally.blocked = Some(if reason.trim().is_empty() {
            "no reason given".to_string()
        } else {
            reason
        });
    }

    /// A cancel: the first settles, the second ends the run at once (then returns true).
    fn cancel(&mut self, now: Instant) -> bool {
        self.cancels += 1;
        if self.cancels >= 2 {
            self.force("stopped at once by a second signal");
            return true;
        }
        self.stop_with(now, StopReason::Cancelled);
        if self.blocked_since.is_some() {
            // Nothing is confirmed while publishing is blocked: do not wait for it.
            let abandoned = self.abandon_inflight("publishing was blocked by the broker");
            self.note_stop(StopReason::Cancelled, abandoned > 0);
        }
        false
    }

    /// The broker's answer to how many messages are ready: empty, stalled, or no answer stop.
    fn depth(&mut self, now: Instant, answer: Result<u64, String>) {
        self.asking_depth = false;
        self.last_depth_check = Some(now);
        match answer {
            Ok(0) => self.stop_with(now, StopReason::QueueEmpty),
            Ok(ready) => {
                let idle = now.saturating_duration_since(self.last_delivery);
                if idle >= self.cfg.limits.stall {
                    self.stop_with(
                        now,
                        StopReason::Stalled {
                            idle_secs: idle.as_secs(),
                            ready,
                        },
                    );
                }
            }
            Err(e) => self.stop_with(
                now,
                StopReason::NoAnswer(format!(
                    "asking how many messages the queue holds failed: {e}"
                )),
            ),
        }
    }

    /// The consumer's cancel came back: its acks are proven and what was on its way is drained.
    fn consumer_cancelled(&mut self, now: Instant, r: Result<(), String>, fx: &mut Vec<Effect>) {
        if self.phase != Phase::Cancelling {
            return;
        }
        match r {
            // cancel-ok came after every ack written before it was processed.
            Ok(()) => {
                self.prove(usize::MAX);
                self.phase = Phase::Draining;
                fx.push(Effect::Drain);
            }
            Err(e) => self.consume_lost(now, e),
        }
    }

    /// The held messages went back to the DLQ (or did not: a problem and the stop's reason).
    fn handed_back(&mut self, r: Result<(), String>) {
        if self.phase != Phase::HandingBack {
            return;
        }
        if let Err(e) = r {
            self.tally
                .problems
                .entry(format!("handing back held messages failed: {e}"))
                .or_insert(0);
            self.stop = Some(StopReason::ConnectionLost(format!(
                "handing back held messages failed: {e}"
            )));
        }
        self.phase = Phase::Closing;
    }

    /// The DLQ's channel closed: a clean close proves every ack; the run is over.
    fn closed(&mut self, r: Result<(), String>, fx: &mut Vec<Effect>) {
        if r.is_ok() && self.consume_alive {
            self.prove(usize::MAX);
        } else {
            self.consume_alive = false;
        }
        self.finish_counts();
        self.phase = Phase::Done;
        fx.push(Effect::Finish);
    }

    /// Takes one delivery; returns the target to check when it is the first met of its target.
    fn delivery(
        &mut self,
        now: Instant,
        tag: u64,
        decision: Decision,
        near_limit: Option<String>,
    ) -> Option<String> {
        self.acks.received(tag);
        self.last_delivery = now;
        self.last_depth_check = None;
        if self.phase != Phase::Running || !self.taking {
            // Arrived after the stop: handed back untouched.
            self.acks.hold(tag);
            return None;
        }
        let mut to_check = None;
        self.tally.seen += 1;
        if self.tally.seen >= self.cfg.depth_at_start {
            // "All" is what the queue held at the start: what arrives now waits for the next run.
            self.stop_with(now, StopReason::ReachedStartDepth);
        }
        let mut publishing = false;
        match decision {
            Decision::Skip => {
                self.acks.hold(tag);
                self.tally.held_back += 1;
            }
            Decision::Keep(why) => {
                self.acks.hold(tag);
                self.tally.held_back += 1;
                *self.tally.kept.entry(why).or_insert(0) += 1;
            }
            Decision::Refuse(why) => {
                self.acks.hold(tag);
                self.tally.failed += 1;
                *self.tally.problems.entry(why).or_insert(0) += 1;
            }
            Decision::Publish { key, target } => {
                publishing = true;
                self.waiting = Some(Waiting { tag, key, target });
            }
            Decision::Unchecked { key, target, check } => {
                // Counted as a publish for the quorum rule: it is not handed back unless its
                // target fails the check.
                publishing = true;
                let m = Unchecked {
                    tag,
                    key,
                    target,
                    check,
                };
                match self.checks.get(&m.check) {
                    Some(Check::Passed(_)) | Some(Check::Failed(_)) => self.release(m),
                    Some(Check::Pending) => self.unchecked = Some(m),
                    None => {
                        self.checks.insert(m.check.clone(), Check::Pending);
                        to_check = Some(m.check.clone());
                        self.unchecked = Some(m);
                    }
                }
            }
            Decision::Discard { key } => {
                // Nothing to confirm: ready to acknowledge at once, and settled like a
                // confirmed publish (proven by a round trip, else counted as possibly still
                // in the DLQ).
                publishing = true;
                self.acks.ready(tag);
                self.tally.moved += 1;
                self.tally.discarded += 1;
                self.tally.moved_ids.push(key.clone());
                self.confirmed_keys.insert(tag, key);
                if self
                    .cfg
                    .limit
                    .is_some_and(|l| self.tally.published + self.tally.discarded >= l)
                {
                    self.stop_with(now, StopReason::LimitReached);
                }
            }
        }
        if let Some(why) = near_limit
            && !publishing
        {
            self.stop_with(now, StopReason::QuorumSafety(why));
        }
        if self.acks.held() >= self.cfg.window {
            self.stop_with(
                now,
                StopReason::WindowFull {
                    window: self.cfg.window,
                },
            );
        }
        self.prefetch_full(now);
        to_check
    }

    /// A target's check answered: the message waiting for it goes on (or is held back), and so
    /// will every later one of that target.
    fn target_checked(&mut self, check: String, result: Result<Option<String>, String>) {
        let state = match result {
            Ok(label) => Check::Passed(label),
            Err(why) => Check::Failed(why),
        };
        self.checks.insert(check.clone(), state);
        if self.unchecked.as_ref().is_some_and(|m| m.check == check)
            && let Some(m) = self.unchecked.take()
        {
            if self.phase == Phase::Running
                && !self
                    .stop
                    .as_ref()
                    .is_some_and(|s| *s == StopReason::Cancelled || s.is_fault())
            {
                self.release(m);
            } else {
                // Cancelled or failed meanwhile: handed back untouched.
                self.acks.hold(m.tag);
            }
        }
    }

    /// A message whose target's check has answered: waits for its publish slot, or is held
    /// back as failed with why.
    fn release(&mut self, m: Unchecked) {
        match self.checks.get(&m.check) {
            Some(Check::Passed(label)) => {
                self.waiting = Some(Waiting {
                    tag: m.tag,
                    key: m.key,
                    target: label.clone().unwrap_or(m.target),
                });
            }
            Some(Check::Failed(why)) => {
                let why = why.clone();
                self.acks.hold(m.tag);
                self.tally.failed += 1;
                *self.tally.problems.entry(why).or_insert(0) += 1;
            }
            Some(Check::Pending) | None => self.unchecked = Some(m),
        }
    }

    /// Held messages fill the prefetch: the broker sends nothing more, so the run cannot go on
    /// (the window is larger than the prefetch). A stop like a full window, never a wait.
    fn prefetch_full(&mut self, now: Instant) {
        if self.taking && self.held_take_room() && self.acks.held() >= self.cfg.prefetch {
            let held = self.acks.held();
            let refused = self.tally.returned + self.tally.failed;
            let why = if refused > 0 {
                StopReason::RefusedFillPrefetch { held, refused }
            } else {
                StopReason::WindowFull { window: held }
            };
            self.stop_with(now, why);
        }
    }

    fn confirm(&mut self, now: Instant, tag: u64, outcome: ConfirmOutcome) {
        // A confirm for a publish already given up on (its deadline passed) changes nothing:
        // it was counted as failed and as a possible duplicate.
        let Some(m) = self.inflight.remove(&tag) else {
            return;
        };
        let problem = |t: &mut Tally, why: String| *t.problems.entry(why).or_insert(0) += 1;
        match outcome {
            ConfirmOutcome::Ack => {
                self.acks.ready(tag);
                self.tally.moved += 1;
                *self.tally.targets.entry(m.target).or_insert(0) += 1;
                self.tally.moved_ids.push(m.key.clone());
                self.confirmed_keys.insert(tag, m.key);
            }
            ConfirmOutcome::Returned(why) => {
                self.acks.hold(tag);
                self.tally.returned += 1;
                problem(&mut self.tally, format!("returned by the broker: {why}"));
            }
            ConfirmOutcome::Nack => {
                self.acks.hold(tag);
                self.tally.failed += 1;
                problem(
                    &mut self.tally,
                    "the broker refused the publish (nack)".to_string(),
                );
            }
            ConfirmOutcome::Failed(why) => {
                self.acks.hold(tag);
                self.tally.failed += 1;
                problem(&mut self.tally, format!("publish failed: {why}"));
                self.stop_with(now, StopReason::ConnectionLost(why));
            }
            ConfirmOutcome::Unknown(why) => {
                self.acks.hold(tag);
                self.tally.failed += 1;
                self.tally.duplicated += 1;
                self.tally.duplicate_ids.push(m.key);
                problem(
                    &mut self.tally,
                    format!("publish unanswered, the connection failed: {why}"),
                );
                self.stop_with(now, StopReason::ConnectionLost(why));
            }
        }
        self.prefetch_full(now);
    }

    fn tick(&mut self, now: Instant) -> Option<Effect> {
        let l = self.cfg.limits.clone();
        if self.settle_by.is_some_and(|t| now >= t) {
            self.force(&format!(
                "settling took longer than {}s; ended without it",
                l.settle.as_secs()
            ));
            return None;
        }
        if self.phase != Phase::Running {
            return None;
        }
        self.backlog_stall(now);
        if let Some(b) = self.blocked_since
            && now.saturating_duration_since(b) >= l.blocked
        {
            let reason = self.tally.blocked.clone().unwrap_or_default();
            self.stop_with(
                now,
                StopReason::Blocked {
                    secs: now.saturating_duration_since(b).as_secs(),
                    reason,
                },
            );
            self.abandon_inflight("publishing was blocked by the broker");
        } else if self.blocked_since.is_none()
            && let Some(t) = self.oldest_unconfirmed()
            && now.saturating_duration_since(t) >= l.confirm
        {
            let n = self.inflight.len() as u64;
            self.stop_with(
                now,
                StopReason::NoConfirm {
                    secs: l.confirm.as_secs(),
                    unconfirmed: n,
                },
            );
            self.abandon_inflight("not confirmed in time");
        }
        if self.idle_applies()
            && now.saturating_duration_since(self.last_depth_check.unwrap_or(self.last_delivery))
                >= l.idle
        {
            self.asking_depth = true;
            return Some(Effect::AskDepth);
        }
        None
    }

    /// After every event: acks to send, a sync due, the next settling step.
    fn after(&mut self, now: Instant, fx: &mut Vec<Effect>) {
        if self.phase == Phase::Closing && !self.close_sent {
            self.close_sent = true;
            fx.push(Effect::Close);
            return;
        }
        if self.phase != Phase::Running {
            return;
        }
        let l = self.cfg.limits.clone();
        let ready = self.acks.ready_len();
        if self.consume_alive
            && ready > 0
            && (ready >= l.ack_batch
                || self.acks.pending() == 0
                || now.saturating_duration_since(self.last_ack) >= l.ack_every)
        {
            self.last_ack = now;
            self.flush_acks(fx);
        }
        if self.consume_alive
            && !self.unproven.is_empty()
            && self.sync_mark.is_none()
            && now.saturating_duration_since(self.last_sync) >= l.sync_every
        {
            self.last_sync = now;
            self.sync_mark = Some(self.unproven.len());
            fx.push(Effect::Sync);
        }
        self.backlog_ask(now, fx);
        if self.stop.is_some() && self.backlog.is_some() {
            // A message selected before a stop by the run's own measure still waits for the
            // backlog: that wait has its own bound (`backlog_stall`), and settling is bounded
            // from when it went.
            if self.waiting.is_some() {
                self.settle_by = None;
            } else {
                self.settle_by.get_or_insert(now + l.settle);
            }
        }
        if self.stop.is_some()
            && self.inflight.is_empty()
            && self.waiting.is_none()
            && self.unchecked.is_none()
        {
            if !self.consume_alive {
                self.phase = Phase::Closing;
                self.close_sent = true;
                fx.push(Effect::Close);
                return;
            }
            // Settle: ack what the broker confirmed, then stop the consumer and drain what it
            // had already been sent, so no delivery is left for a channel close to return.
            self.flush_acks(fx);
            self.phase = Phase::Cancelling;
            fx.push(Effect::CancelConsumer);
        }
    }

    fn flush_acks(&mut self, fx: &mut Vec<Effect>) {
        let mut settled = Vec::new();
        let ops = self.acks.flush_into(&mut settled);
        if !ops.is_empty() {
            self.unproven.extend(settled.into_iter().map(|t| (t, None)));
            fx.push(Effect::Ack(ops));
        }
    }

    fn hand_back(&mut self, fx: &mut Vec<Effect>) {
        let top = self.acks.max_seen();
        if self.acks.held() > 0 && top > 0 {
            self.phase = Phase::HandingBack;
            fx.push(Effect::Nack { top });
        } else {
            self.phase = Phase::Closing;
        }
    }

    fn stop_with(&mut self, now: Instant, reason: StopReason) {
        self.taking = false;
        // A publish waiting for its slot still goes when the run stopped by its own measure
        // (it was selected before the stop); not after a cancel or a fault.
        let cut = if reason == StopReason::Cancelled || reason.is_fault() {
            self.hold_waiting()
        } else {
            0
        };
        self.note_stop(reason, cut > 0);
        self.settle_by.get_or_insert(now + self.cfg.limits.settle);
    }

    /// Keeps the first reason to stop, unless the run had reached its own end and a later
    /// cancel or fault then left a selected message undone: that run did not go through
    /// everything, and its reason must not say it did.
    fn note_stop(&mut self, reason: StopReason, cut_short: bool) {
        match &self.stop {
            Some(first) if !(cut_short && first.is_finished()) => {}
            _ => self.stop = Some(reason),
        }
    }

    /// The message waiting for its slot or for its target's check is handed back untouched,
    /// counted as [`Tally::untouched`]. Returns how many were.
    fn hold_waiting(&mut self) -> u64 {
        let mut held = 0;
        if let Some(w) = self.waiting.take() {
            self.acks.hold(w.tag);
            held += 1;
        }
        if let Some(m) = self.unchecked.take() {
            self.acks.hold(m.tag);
            held += 1;
        }
        self.tally.untouched += held;
        held
    }

    /// Publishes still unanswered are given up: held (handed back), counted as failed and as
    /// possible duplicates (they may still reach the target). Returns how many were.
    fn abandon_inflight(&mut self, why: &str) -> usize {
        let mut tags: Vec<u64> = self.inflight.keys().copied().collect();
        tags.sort_unstable();
        let abandoned = tags.len();
        for t in tags {
            if let Some(m) = self.inflight.remove(&t) {
                self.acks.hold(t);
                self.tally.failed += 1;
                self.tally.duplicated += 1;
                self.tally.duplicate_ids.push(m.key);
                *self
                    .tally
                    .problems
                    .entry(format!("publish unanswered: {why}"))
                    .or_insert(0) += 1;
            }
        }
        self.sent_order.clear();
        abandoned
    }

    fn consume_lost(&mut self, now: Instant, why: String) {
        if !self.consume_alive {
            return;
        }
        self.consume_alive = false;
        self.stop_with(now, StopReason::ConnectionLost(why.clone()));
        // Nothing can be acknowledged any more: what is in flight is settled by the connection
        // closing (the broker requeues every unacknowledged delivery).
        let abandoned = self.abandon_inflight("the dead-letter queue's channel failed");
        self.note_stop(StopReason::ConnectionLost(why), abandoned > 0);
        if matches!(
            self.phase,
            Phase::Cancelling | Phase::Draining | Phase::HandingBack
        ) {
            self.phase = Phase::Closing;
        }
    }

    /// Ends the run now: nothing more is sent. Confirmed but not provably acknowledged messages
    /// (and publishes still unanswered) may now be in both places.
    fn force(&mut self, why: &str) {
        self.taking = false;
        self.tally.forced = Some(why.to_string());
        let cut = self.abandon_inflight("the run was ended before its confirm") as u64
            + self.hold_waiting();
        self.note_stop(StopReason::Cancelled, cut > 0);
        self.consume_alive = false;
        self.finish_counts();
        self.phase = Phase::Done;
    }

    /// Counts what may be duplicated when the run ends: confirmed tags never acknowledged
    /// (certain), and acks written but not proven processed (possible).
    fn finish_counts(&mut self) {
        if self.consume_alive {
            return;
        }
        let never_acked: Vec<u64> = self.acks.ready_tags().collect();
        for t in &never_acked {
            self.tally.duplicated += 1;
            self.tally.duplicated_certain += 1;
            if let Some(k) = self.confirmed_keys.remove(t) {
                self.tally.duplicate_ids.push(k);
            }
        }
        for (t, _) in std::mem::take(&mut self.unproven) {
            self.tally.duplicated += 1;
            if let Some(k) = self.confirmed_keys.remove(&t) {
                self.tally.duplicate_ids.push(k);
            }
        }
    }

    /// A round trip came back: the first `covered` acks were processed by the channel. Those
    /// processed at least `settle_lag` ago are settled for good (on a classic queue, at once).
    fn prove(&mut self, covered: usize) {
        let (now, lag) = (self.now, self.cfg.settle_lag);
        for (_, processed) in self.unproven.iter_mut().take(covered) {
            processed.get_or_insert(now);
        }
        while let Some(&(t, Some(at))) = self.unproven.front() {
            if now.saturating_duration_since(at) < lag {
                break;
            }
            self.unproven.pop_front();
            self.confirmed_keys.remove(&t);
        }
        self.sync_mark = None;
    }

    fn oldest_unconfirmed(&self) -> Option<Instant> {
        let oldest = self
            .sent_order
            .iter()
            .find(|(t, _)| self.inflight.contains_key(t))
            .map(|&(_, at)| at)?;
        // Time blocked does not count against the confirm deadline.
        Some(match self.unblocked_at {
            Some(u) if u > oldest => u,
            _ => oldest,
        })
    }

    /// The consumer's silence means something only when it may send: taking, no publish
    /// waiting, publishing not blocked and room in the prefetch.
    fn idle_applies(&self) -> bool {
        self.silence_counts()
            && self.phase == Phase::Running
            && self.taking
            && self.waiting.is_none()
            && !self.asking_depth
            && self.blocked_since.is_none()
            && self.acks.unsettled() < self.cfg.prefetch
    }

    /// Drops confirmed entries from the front of the send order (keeps it short).
    pub fn compact(&mut self) {
        while let Some(&(t, _)) = self.sent_order.front() {
            if self.inflight.contains_key(&t) {
                break;
            }
            self.sent_order.pop_front();
        }
    }
}

#[cfg(test)]
mod tests;
#[cfg(test)]
mod tests_memory;
#[cfg(test)]
mod tests_stop;
