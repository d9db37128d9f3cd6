//! The replay engine: moves selected dead letters back to where they failed, at least once.
//!
//! For each delivery from the DLQ: explain it, plan it (pure, `domain::replay`), publish it with
//! `mandatory` on a confirm-mode channel, and acknowledge it in the DLQ only after the broker
//! confirmed it and did not return it. Unselected, returned and failed messages are held
//! unacknowledged and handed back at the end with one explicit `basic.nack(multiple, requeue)`,
//! so they keep their place. If the process dies between publish and ack the broker requeues the
//! delivery: a message may be replayed twice, never lost.
//!
//! Consuming and publishing use two channels, so a publish that closes its channel (an exchange
//! that vanished) cannot take the DLQ's delivery tags with it.

use std::collections::{BTreeMap, HashMap, HashSet, VecDeque};
use std::future::Future;
use std::pin::Pin;
use std::task::Poll;
use std::time::{Duration, Instant};

use futures_util::stream::FuturesUnordered;
use futures_util::{FutureExt, StreamExt};
use lapin::Confirmation;
use lapin::options::{
    BasicAckOptions, BasicCancelOptions, BasicConsumeOptions, BasicGetOptions, BasicNackOptions,
    BasicPublishOptions, BasicQosOptions, ConfirmSelectOptions, QueueDeclareOptions,
};
use lapin::types::{FieldTable, ShortString};
use tokio::sync::watch;

use crate::broker::amqp;
use crate::domain::archive::{ContentSet, Stamp};
use crate::domain::convention::Conventions;
use crate::domain::engine::{
    Config, ConfirmOutcome, Decision, Effect, Engine, Event, Limits, Tally,
};
use crate::domain::explain;
use crate::domain::identity;
use crate::domain::quorum::BrowsePolicy;
use crate::domain::replay::{self as plan, ReplayOptions};
use crate::domain::selection::Selection;

/// Where a planned publish goes: exchange and routing key.
pub type TargetKey = (String, String);

/// What a run does with each selected message: one engine and its guarantees for every way out
/// of a dead-letter queue.
#[derive(Clone, Debug, Default)]
pub enum Action {
    /// Publish it where it failed, per its plan (`domain::replay`).
    #[default]
    Replay,
    /// Publish it to the archive stream exactly as it was delivered — body, every property and
    /// header, `x-death` included — plus the four archive headers; acknowledged after the
    /// stream confirmed it.
    /// `user_id`: the connection's broker user, set as each copy's `user_id` (the broker
    /// refuses it from anyone else), the message's own kept in a header.
    Archive {
        stream: String,
        stamp: Stamp,
        user_id: String,
    },
    /// Acknowledge it without publishing. `only`: the messages of the snapshot written before
    /// the run (`warren discard`, a local archive), each taken once, and nothing else; `None`
    /// (`--no-snapshot`): every selected message.
    Discard {
        only: Option<std::sync::Arc<std::sync::Mutex<ContentSet>>>,
    },
}

impl Action {
    /// The action as a verb, for what Warren says.
    pub fn verb(&self) -> &'static str {
        match self {
            Action::Replay => "replay",
            Action::Archive { .. } => "archive",
            Action::Discard { .. } => "discard",
        }
    }
}

/// One replay run, fully decided before anything moves.
#[derive(Clone, Debug)]
pub struct Job {
    /// Replay, archive or discard.
    pub action: Action,
    pub dlq: String,
    pub selection: Selection,
    /// Move at most this many.
    pub limit: Option<u64>,
    /// Messages per second; `None` = as fast as confirms allow.
    pub rate: Option<f64>,
    /// Unselected (or returned, or failed) messages held back at most before stopping.
    pub window: usize,
    pub keep_attempts: bool,
    /// `--clear-expiry`: replay a message whose framework deadline has passed, without it.
    pub clear_expiry: bool,
    /// `--to QUEUE`.
    pub to: Option<String>,
    /// Targets checked by the preflight (they exist, and fan-out was allowed or absent). A
    /// message whose plan points elsewhere is not published.
    pub allowed_targets: HashSet<TargetKey>,
    /// Wait-queue targets and the consuming queue each is replaced with (from the preflight).
    pub redirects: BTreeMap<TargetKey, plan::ReplayTarget>,
    /// Audited replays per message key (see `session::Remembered::replays_of`).
    pub replays: HashMap<String, i64>,
    /// When Warren first saw each message, by key: with its `x-death`, its age for `age:`
    /// (`domain::arrival`).
    pub first_seen: HashMap<String, jiff::Timestamp>,
    /// Quorum delivery-limit safety, as for browsing.
    pub quorum: BrowsePolicy,
    /// How long an ack the DLQ's channel processed may still be undone
    /// ([`settle_lag`](crate::domain::features::settle_lag)).
    pub settle_lag: Duration,
    /// `[conventions]`: how messages are read, as the plan read them.
    pub conventions: Conventions,
    /// The run's globally unique id, written into each message as `warren-replay-id`.
    pub run_id: Option<String>,
    /// The DLQ's average message size as the broker reports it (`None`: unknown): the prefetch
    /// is bounded by bytes as well as by count (see [`PREFETCH_BYTES`]).
    pub message_bytes: Option<u64>,
    /// Set when the plan read nothing first and the run has several targets: a target not in
    /// `allowed_targets` is checked the first time a message for it is met, by asking here
    /// ([`CheckRequest`]); its messages wait for the answer (never published unchecked).
    /// `None`: such a message stays in the DLQ, reported.
    pub checks: Option<tokio::sync::mpsc::Sender<CheckRequest>>,
}

/// A target met for the first time during a run (see [`Job::checks`]): check it and answer
/// on `reply` — `Ok` with the queue it leads to instead when it is a wait queue, `Err` with why
/// its messages must stay in the DLQ.
#[derive(Debug)]
pub struct CheckRequest {
    pub target: TargetKey,
    /// The routing key the first message met had when it died in the target queue: where a
    /// wait queue without a dead-letter routing key sends it on.
    pub death_key: Option<String>,
    pub reply: tokio::sync::oneshot::Sender<Result<Option<plan::ReplayTarget>, String>>,
}

/// The name a target's check goes by, in the engine and in what the run reports.
pub fn check_name(target: &TargetKey) -> String {
    if target.0.is_empty() {
        format!("queue '{}'", target.1)
    } else {
        format!("exchange '{}' key '{}'", target.0, target.1)
    }
}

/// What the deliveries a run may have unacknowledged at once may weigh, about: the prefetch
/// count is cut to fit it (at least 1), so a queue of large messages does not multiply
/// Warren's memory (RabbitMQ ignores AMQP's own prefetch-size).
pub const PREFETCH_BYTES: u64 = 16 * 1024 * 1024;

/// The prefetch count for a run: room for the held messages (or a pipeline deep enough for
/// batched confirms), cut to [`PREFETCH_BYTES`] by a message's size — the larger of the
/// broker's average ([`Job::message_bytes`], which lags behind a queue filled a moment ago) and
/// `first`, the size of the first message, read before the consumer starts.
pub fn prefetch_for(job: &Job, first: Option<u64>) -> u16 {
    let by_count: u16 = match job.selection {
        // Confirms for persistent messages come back in batches (the broker syncs to disk
        // periodically), so the pipeline needs room for more than a batch in flight.
        Selection::All if job.allowed_targets.len() <= 1 => 2000,
        _ => u16::try_from(job.window.saturating_add(1000)).unwrap_or(u16::MAX),
    };
    let size = job.message_bytes.max(first).filter(|&b| b > 0);
    match size {
        // A frame's overhead (properties, headers) is counted too, as about 512 bytes.
        Some(size) => {
            let fits = PREFETCH_BYTES / (size + 512);
            u16::try_from(fits.max(1)).unwrap_or(u16::MAX).min(by_count)
        }
        None => by_count,
    }
}

pub use crate::broker::spool::Spool;
pub use crate::domain::engine::{AckOp, AckTracker, StopReason};

/// Moved keys the engine may gather before the shell writes them to the run's [`Spool`].
const SPOOL_BATCH: usize = 4096;

/// Progress while running; also the final tally.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Progress {
    pub moved: u64,
    pub returned: u64,
    pub failed: u64,
    /// Selected messages the run has not reached yet (an estimate from the start depth).
    pub remaining: u64,
    /// Messages per second over the run so far.
    pub rate: f64,
    pub eta: Option<Duration>,
    /// Set while the broker blocks publishing (`connection.blocked`), with its reason (e.g.
    /// "low on memory"): the run waits, up to a deadline.
    pub blocked: Option<String>,
}

/// The outcome of a run.
#[derive(Clone, Debug)]
pub struct Summary {
    pub progress: Progress,
    pub depth_at_start: u64,
    /// What the engine counted: held back, per target, moved and duplicate keys, problems, and
    /// whether the run ended without settling (`forced`). Summed over reconnects. Its
    /// `moved_ids` is empty: the moved keys are in [`moved_ids`](Self::moved_ids).
    pub counts: Tally,
    /// Keys of the moved messages, in the order they were confirmed, kept out of memory as the
    /// run goes (see [`Spool`]).
    pub moved_ids: Spool,
    pub stop: StopReason,
    /// Why the run reconnected to another node and carried on, once per reconnect. Deliveries
    /// of a lost connection go back to the DLQ only when the broker notices, so such a run is
    /// never "completed".
    pub reconnected: Vec<String>,
    /// Messages the run published that Warren had replayed before (`warren-replay-count`, or
    /// the audit): they failed again. What a plan made without reading says after the run.
    pub replayed_before: u64,
    /// The plan read nothing first (see `session::Preview::unread`), so the count confirmed
    /// included messages that their own plan keeps in the DLQ: such a run is not "completed".
    pub planned_unread: bool,
    /// What the DLQ held when the run ended, as the broker counts it (returned, refused and
    /// untouched messages, and any that arrived since), when it answered.
    pub left_in_dlq: Option<u64>,
    /// Messages another consumer held unacknowledged when the run started: the run never saw
    /// them, so it did not go through everything the queue held.
    pub held_elsewhere: u64,
}

impl Summary {
    /// Every selected message the run reached was moved, nothing failed, nothing was returned,
    /// nothing may be duplicated, and it stopped because it was done.
    pub fn completed(&self) -> bool {
        self.stop.is_finished()
            && self.counts.forced.is_none()
            && self.reconnected.is_empty()
            && self.progress.failed == 0
            && self.progress.returned == 0
            && self.counts.duplicated == 0
            && !(self.planned_unread && self.kept() > 0)
            && self.held_elsewhere == 0
    }

    /// Messages their plan kept in the DLQ (a framework deadline passed, …).
    pub fn kept(&self) -> u64 {
        self.counts.kept.values().sum()
    }

    /// The audit's outcome: "completed" (see [`completed`](Self::completed)), "cancelled" (a
    /// signal, settled), "interrupted: …" (ended without settling), "failed: …" (a broker or
    /// connection fault, or nothing moved and some failed or came back), else "partial: …".
    pub fn outcome(&self) -> String {
        let text = self.outcome_alone();
        if self.reconnected.is_empty() || self.counts.forced.is_some() {
            return text;
        }
        let text = if text == "completed" {
            format!("partial: {}", self.stop)
        } else {
            text
        };
        format!(
            "{text}; reconnected {} time(s) after node loss: messages delivered on a lost connection return to the DLQ when the broker notices — replay again for them",
            self.reconnected.len()
        )
    }

    fn outcome_alone(&self) -> String {
        let p = &self.progress;
        if let Some(why) = &self.counts.forced {
            format!("interrupted: {why}; {}", self.stop)
        } else if self.completed() {
            "completed".to_string()
        } else if self.stop == StopReason::Cancelled {
            "cancelled".to_string()
        } else if self.stop.is_fault() {
            format!("failed: {}", self.stop)
        } else if p.moved == 0 && p.failed + p.returned > 0 {
            // Nothing moved: the real reason is what happened to the messages, not where the
            // run stopped (a limit reached says nothing of a publish the broker refused).
            let top = self.counts.problems.iter().max_by_key(|(_, n)| **n);
            match top {
                Some((why, n)) => format!("failed: {n} × {why}; {}", self.stop),
                None => format!("failed: {}", self.stop),
            }
        } else if p.failed + p.returned > 0 {
            format!(
                "partial: {} failed, {} returned; {}",
                p.failed, p.returned, self.stop
            )
        } else if self.held_elsewhere > 0 {
            format!(
                "partial: {} messages were held unacknowledged by another consumer when the run started and were not reached; {}",
                self.held_elsewhere, self.stop
            )
        } else if self.planned_unread && self.kept() > 0 {
            format!(
                "partial: {} of those confirmed stayed in the DLQ by their own plan (see kept); {}",
                self.kept(),
                self.stop
            )
        } else {
            format!("partial: {}", self.stop)
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum ReplayError {
    #[error("cannot open a channel to RabbitMQ: {0}")]
    Channel(String),
    #[error("queue '{queue}' cannot be read: {reason}")]
    Queue { queue: String, reason: String },
}

/// Message-per-second pacing: message `n` may go at `start + n / rate`, where `start` is the
/// first publish (not the start of the run: counting from before the first delivery arrived
/// would let the first few messages out in a burst to catch up).
#[derive(Debug)]
struct Pacer {
    start: Option<Instant>,
    per_msg: Option<Duration>,
    sent: u64,
}

impl Pacer {
    fn new(rate: Option<f64>) -> Pacer {
        let per_msg = rate
            .filter(|r| r.is_finite() && *r > 0.0)
            .map(|r| Duration::from_secs_f64(1.0 / r));
        Pacer {
            start: None,
            per_msg,
            sent: 0,
        }
    }
    fn next_slot(&self) -> Instant {
        match (self.start, self.per_msg) {
            (Some(start), Some(d)) => start + d.mul_f64(self.sent as f64),
            _ => Instant::now(),
        }
    }
    fn published(&mut self) {
        if self.start.is_none() {
            self.start = Some(Instant::now());
        }
        self.sent += 1;
    }
}

/// One publish, from handing its frames to lapin to the broker's confirm, with its DLQ tag.
type InFlightFuture = Pin<Box<dyn Future<Output = (u64, lapin::Result<Confirmation>)> + Send>>;

/// The next settled publish: one that completed on its first poll, else the next confirm.
async fn next_confirm(
    early: &mut VecDeque<(u64, lapin::Result<Confirmation>)>,
    inflight: &mut FuturesUnordered<InFlightFuture>,
) -> Option<(u64, lapin::Result<Confirmation>)> {
    match early.pop_front() {
        Some(done) => Some(done),
        None => inflight.next().await,
    }
}

/// A message read from the DLQ and waiting for its rate slot, ready to publish.
struct Outgoing {
    tag: u64,
    /// Exchange and routing key, checked to fit AMQP's short strings when planned.
    target: (ShortString, ShortString),
    props: lapin::BasicProperties,
    body: Vec<u8>,
    /// Warren replayed it before.
    replayed_before: bool,
    /// For a target not checked yet: the routing key it had when it died there.
    death_key: Option<String>,
}

/// What identifies a publish's content: exchange, routing key, properties (headers included)
/// and body, as the broker returns them in a `basic.return`.
pub(crate) fn content_hash(
    exchange: &ShortString,
    routing_key: &ShortString,
    props: &lapin::BasicProperties,
    body: &[u8],
) -> u64 {
    use std::hash::Hasher;
    let mut h = fnv::FnvHasher::default();
    h.write(exchange.as_str().as_bytes());
    h.write_u8(0);
    h.write(routing_key.as_str().as_bytes());
    h.write_u8(0);
    amqp::hash_properties(&mut h, props);
    h.write_u8(0);
    h.write(body);
    h.finish()
}

/// Why an awaited step did not give its answer.
enum Cut {
    Timeout(Duration),
    /// A cancel (signal) arrived while waiting.
    Cancel,
    Failed(String),
}

impl Cut {
    fn text(&self, what: &str) -> String {
        match self {
            Cut::Timeout(d) => format!("{what}: no answer within {}s", d.as_secs()),
            Cut::Cancel => format!("{what}: interrupted by a signal"),
            Cut::Failed(e) => format!("{what}: {e}"),
        }
    }
}

/// Awaits `fut` for at most `limit`, giving up early when `cancel` changes.
async fn bounded<T, E: std::fmt::Display>(
    limit: Duration,
    cancel: &mut CancelWatch,
    fut: impl Future<Output = Result<T, E>>,
) -> Result<T, Cut> {
    tokio::select! {
        biased;
        () = cancel.next() => Err(Cut::Cancel),
        r = tokio::time::timeout(limit, fut) => match r {
            Ok(Ok(v)) => Ok(v),
            Ok(Err(e)) => Err(Cut::Failed(e.to_string())),
            Err(_) => Err(Cut::Timeout(limit)),
        },
    }
}

/// Awaits `fut` for at most `limit` while the engine runs. A cancel meanwhile goes to the engine
/// at once: a first one (a stop) lets the wait go on; one that ends the run (a second) abandons
/// it, and the caller then finds the engine done.
async fn guarded<T, E: std::fmt::Display>(
    limit: Duration,
    cancel: &mut CancelWatch,
    engine: &mut Engine,
    fx: &mut VecDeque<Effect>,
    fut: impl Future<Output = Result<T, E>>,
) -> Result<T, Cut> {
    tokio::pin!(fut);
    let timer = tokio::time::sleep(limit);
    tokio::pin!(timer);
    loop {
        tokio::select! {
            biased;
            () = cancel.next() => {
                fx.extend(engine.on(Instant::now(), Event::Cancel));
                if engine.is_done() {
                    return Err(Cut::Cancel);
                }
            }
            r = &mut fut => return r.map_err(|e| Cut::Failed(e.to_string())),
            () = &mut timer => return Err(Cut::Timeout(limit)),
        }
    }
}

/// The cancel signal: each new `true` sent (or the sender going away) is one cancel.
struct CancelWatch {
    rx: watch::Receiver<bool>,
    open: bool,
}

impl CancelWatch {
    /// Resolves at the next cancel; never when the sender is gone and that was reported.
    async fn next(&mut self) {
        loop {
            if !self.open {
                return std::future::pending().await;
            }
            match self.rx.changed().await {
                Ok(()) if *self.rx.borrow_and_update() => return,
                Ok(()) => continue,
                Err(_) => {
                    // The sender is gone: nobody can cancel any more, which is taken as a cancel.
                    self.open = false;
                    return;
                }
            }
        }
    }
}

/// Runs a replay. `cancel` flips to `true` to stop: in-flight messages are settled correctly and
/// the rest is left untouched; sending `true` again ends the run at once. `on_progress` is called
/// a few times a second, and at once when the broker blocks or unblocks publishing.
pub async fn run(
    conn: &lapin::Connection,
    job: &Job,
    cancel: watch::Receiver<bool>,
    on_progress: impl FnMut(&Progress),
) -> Result<Summary, ReplayError> {
    run_split(conn, conn, job, cancel, on_progress).await
}

/// [`run`] with the DLQ consumed on `consume_conn` and the target published on `publish_conn`.
/// Two connections let the broker parse publishes and encode deliveries in parallel (each
/// connection has its own reader and writer), which is most of its cost per replayed message.
///
/// The decisions are `domain::engine`'s; this function only performs its effects and turns what
/// the broker does into its events. Every await is bounded by a deadline.
pub async fn run_split(
    consume_conn: &lapin::Connection,
    publish_conn: &lapin::Connection,
    job: &Job,
    cancel: watch::Receiver<bool>,
    on_progress: impl FnMut(&Progress),
) -> Result<Summary, ReplayError> {
    run_with(
        consume_conn,
        publish_conn,
        job,
        Limits::default(),
        cancel,
        on_progress,
    )
    .await
}

/// [`run_split`] with the deadlines given. The engine decides every step; this shell opens the
/// channels, carries out each effect the engine asks for ([`Shell::perform`]) and turns what the
/// broker says into the engine's events ([`Shell::next_event`]).
pub async fn run_with(
    consume_conn: &lapin::Connection,
    publish_conn: &lapin::Connection,
    job: &Job,
    limits: Limits,
    cancel: watch::Receiver<bool>,
    mut on_progress: impl FnMut(&Progress),
) -> Result<Summary, ReplayError> {
    let step = limits.step;
    let mut cancel = CancelWatch {
        rx: cancel,
        open: true,
    };
    let opened = Opened::open(consume_conn, publish_conn, job, step, &mut cancel).await?;
    let depth_at_start = opened.depth_at_start;
    let mut summary = Summary {
        progress: Progress {
            // Of the selection, like every later count: the run stops at its limit.
            remaining: job.limit.map_or(depth_at_start, |l| l.min(depth_at_start)),
            ..Default::default()
        },
        depth_at_start,
        counts: Tally::default(),
        moved_ids: Spool::default(),
        stop: StopReason::ReachedStartDepth,
        reconnected: Vec::new(),
        replayed_before: 0,
        planned_unread: false,
        left_in_dlq: None,
        held_elsewhere: 0,
    };
    if depth_at_start == 0 {
        summary.stop = StopReason::QueueEmpty;
        close_quietly(&opened.consume, &opened.publish, None, step, step).await;
        return Ok(summary);
    }
    let mut shell = opened.start(&mut cancel).await?;

    let started = Instant::now();
    let mut drv = Driver {
        engine: Engine::new(
            Config {
                depth_at_start,
                limit: job.limit,
                window: job.window,
                // The consumer's own: the first message, read before it, is outside its
                // prefetch, but once that one is settled the broker stops at the prefetch, so
                // the engine counts it in (while it is unsettled, one early: a stop, never a
                // wait for deliveries that cannot come).
                prefetch: usize::from(shell.prefetch),
                limits: limits.clone(),
                settle_lag: job.settle_lag,
            },
            started,
        ),
        fx: VecDeque::new(),
        cancel,
    };
    if publish_conn.status().blocked() {
        let e = drv.engine.on(
            Instant::now(),
            Event::Blocked("blocked before the run started".into()),
        );
        drv.fx.extend(e);
    }
    let mut last_progress = Instant::now();
    let mut blocked_shown: Option<String> = None;

    'run: loop {
        while let Some(effect) = drv.fx.pop_front() {
            if matches!(effect, Effect::Finish) {
                break 'run;
            }
            let Some(ev) = shell.perform(effect, &mut drv).await else {
                continue;
            };
            if drv.engine.is_done() {
                // A second cancel came while waiting: the run ends now.
                break 'run;
            }
            let e = drv.engine.on(Instant::now(), ev);
            drv.fx.extend(e);
        }

        let Some(ev) = shell.next_event(&mut drv).await else {
            continue;
        };
        let e = drv.engine.on(Instant::now(), ev);
        drv.fx.extend(e);
        if drv.engine.tally().moved_ids.len() >= SPOOL_BATCH {
            summary.moved_ids.append(drv.engine.take_moved());
        }

        let blocked = drv.engine.tally().blocked.clone();
        if blocked != blocked_shown || last_progress.elapsed() >= Duration::from_millis(200) {
            blocked_shown = blocked;
            last_progress = Instant::now();
            fill_progress(
                &mut summary.progress,
                drv.engine.tally(),
                started,
                depth_at_start,
                job.limit,
            );
            on_progress(&summary.progress);
        }
    }

    shell
        .close_publisher(drv.engine.tally().forced.is_some())
        .await;

    summary.moved_ids.append(drv.engine.take_moved());
    let t = drv.engine.tally();
    fill_progress(&mut summary.progress, t, started, depth_at_start, job.limit);
    summary.progress.eta = None;
    // What is still in the DLQ, as the broker counts it once everything held went back. The
    // messages the run did not look at are never more than that (another consumer took some,
    // or the queue was emptied meanwhile).
    summary.left_in_dlq = left_in(shell.consume_conn, &job.dlq).await;
    if let Some(left) = summary.left_in_dlq {
        summary.progress.remaining = summary.progress.remaining.min(left);
    }
    summary.counts = t.clone();
    summary.replayed_before = shell.replayed_before;
    summary.stop = drv
        .engine
        .stop_reason()
        .cloned()
        .unwrap_or(StopReason::ReachedStartDepth);
    on_progress(&summary.progress);
    Ok(summary)
}

/// The engine, the effects it asked for and not yet carried out, and the cancel signal: what
/// every wait on the broker must keep serving.
struct Driver {
    engine: Engine,
    fx: VecDeque<Effect>,
    cancel: CancelWatch,
}

impl Driver {
    /// Awaits `fut` for at most `limit`, feeding cancels to the engine meanwhile.
    async fn guarded<T, E: std::fmt::Display>(
        &mut self,
        limit: Duration,
        fut: impl Future<Output = Result<T, E>>,
    ) -> Result<T, Cut> {
        guarded(limit, &mut self.cancel, &mut self.engine, &mut self.fx, fut).await
    }
}

/// The publishing connection's events (`connection.blocked` and `unblocked`).
type Events = Pin<Box<dyn futures_util::Stream<Item = lapin::Event> + Send>>;

/// The channels of a run, open and set up, before the consumer starts.
struct Opened<'a> {
    job: &'a Job,
    consume_conn: &'a lapin::Connection,
    publish_conn: &'a lapin::Connection,
    consume: lapin::Channel,
    publish: lapin::Channel,
    events: Events,
    dlq_name: ShortString,
    prefetch: u16,
    /// The first message, read with `basic.get` before the consumer started (see
    /// [`prefetch_for`]).
    first: Option<lapin::message::Delivery>,
    step: Duration,
    depth_at_start: u64,
}

impl<'a> Opened<'a> {
    async fn open(
        consume_conn: &'a lapin::Connection,
        publish_conn: &'a lapin::Connection,
        job: &'a Job,
        step: Duration,
        cancel: &mut CancelWatch,
    ) -> Result<Opened<'a>, ReplayError> {
        // Listen before anything is published: `connection.blocked` comes when the first publish
        // meets an alarm.
        let events: Events = Box::pin(publish_conn.events_listener());
        let chan_err = |e: Cut| ReplayError::Channel(e.text("opening a channel"));
        let consume = bounded(step, cancel, consume_conn.create_channel())
            .await
            .map_err(chan_err)?;
        let publish = bounded(step, cancel, publish_conn.create_channel())
            .await
            .map_err(chan_err)?;
        bounded(
            step,
            cancel,
            publish.confirm_select(ConfirmSelectOptions::default()),
        )
        .await
        .map_err(|e| ReplayError::Channel(e.text("confirm mode")))?;

        let queue_err = |e: Cut| ReplayError::Queue {
            queue: job.dlq.clone(),
            reason: e.text("declare"),
        };
        let dlq_name = amqp::short("the queue name", &job.dlq).map_err(|e| ReplayError::Queue {
            queue: job.dlq.clone(),
            reason: e.to_string(),
        })?;
        let declared = bounded(
            step,
            cancel,
            consume.queue_declare(
                dlq_name.clone(),
                QueueDeclareOptions {
                    passive: true,
                    ..Default::default()
                },
                FieldTable::default(),
            ),
        )
        .await
        .map_err(queue_err)?;
        let depth_at_start = u64::from(declared.message_count());

        // The first message is read before the consumer starts, so its size bounds the
        // prefetch even where the broker's average lags behind a fresh fill. A consumer's
        // prefetch is fixed when it starts (RabbitMQ applies a per-consumer `basic.qos` to
        // consumers started after it): what is learnt from its deliveries comes too late. The
        // message stays unacknowledged on this channel, its tag the first of the run's, and is
        // the engine's first delivery like any other. Not while the queue has a consumer: a
        // `basic.get` passes by a single active consumer, so the run would take a message
        // that queue gives to one consumer only (the broker's average bounds it then).
        let first = if depth_at_start > 0 && declared.consumer_count() == 0 {
            bounded(
                step,
                cancel,
                consume.basic_get(dlq_name.clone(), BasicGetOptions { no_ack: false }),
            )
            .await
            .map_err(|e| ReplayError::Queue {
                queue: job.dlq.clone(),
                reason: first_read_failure(consume_conn, &e),
            })?
            .map(|m| m.delivery)
        } else {
            None
        };
        // Held messages stay unacknowledged, so the prefetch must leave room for them.
        let prefetch = prefetch_for(job, first.as_ref().map(|d| d.data.len() as u64));
        bounded(
            step,
            cancel,
            consume.basic_qos(prefetch, BasicQosOptions::default()),
        )
        .await
        .map_err(queue_err)?;
        Ok(Opened {
            job,
            consume_conn,
            publish_conn,
            consume,
            publish,
            events,
            dlq_name,
            prefetch,
            first,
            step,
            depth_at_start,
        })
    }

    /// Starts consuming the dead-letter queue.
    async fn start(self, cancel: &mut CancelWatch) -> Result<Shell<'a>, ReplayError> {
        let tag = format!("warren-replay-{}", std::process::id());
        let consumer = bounded(
            self.step,
            cancel,
            self.consume.basic_consume(
                self.dlq_name.clone(),
                tag_name(&tag),
                BasicConsumeOptions::default(),
                FieldTable::default(),
            ),
        )
        .await
        .map_err(|e| ReplayError::Queue {
            queue: self.job.dlq.clone(),
            reason: e.text("declare"),
        })?;
        Ok(Shell {
            job: self.job,
            consume_conn: self.consume_conn,
            publish_conn: self.publish_conn,
            consume: self.consume,
            publish: self.publish,
            consumer,
            events: self.events,
            events_open: true,
            dlq_name: self.dlq_name,
            tag,
            prefetch: self.prefetch,
            first: self.first,
            step: self.step,
            pacer: Pacer::new(self.job.rate),
            inflight: FuturesUnordered::new(),
            early: VecDeque::new(),
            early_unstripped: 0,
            replayed_before: 0,
            sent: HashMap::new(),
            exchanges: HashMap::new(),
            refused_from: None,
            returned: HashMap::new(),
            outgoing: None,
            check_keys: HashMap::new(),
            checked_redirects: HashMap::new(),
            depth_ch: None,
            unresponsive: false,
        })
    }
}

/// Why the first message could not be read. lapin drops the connection over a frame above the
/// negotiated size (a header that `x-death` pushed past it) and the read then never answers:
/// said as the likely cause, since nothing else names it.
fn first_read_failure(conn: &lapin::Connection, e: &Cut) -> String {
    let text = e.text("reading the first message");
    if conn.status().connected() {
        return text;
    }
    format!(
        "{text}; the connection was closed under it, which a message whose properties exceed the \
         broker's {}-byte frame does (`warren show` says so). Nothing moved",
        conn.configuration().frame_max()
    )
}

fn tag_name(tag: &str) -> ShortString {
    amqp::short("the consumer tag", tag).unwrap_or_default()
}

/// A running replay's broker side: its channels, its consumer, and what is in flight.
struct Shell<'a> {
    job: &'a Job,
    consume_conn: &'a lapin::Connection,
    publish_conn: &'a lapin::Connection,
    consume: lapin::Channel,
    publish: lapin::Channel,
    consumer: lapin::Consumer,
    events: Events,
    events_open: bool,
    dlq_name: ShortString,
    tag: String,
    prefetch: u16,
    /// The first message, read before the consumer started: the engine's first delivery.
    first: Option<lapin::message::Delivery>,
    step: Duration,
    pacer: Pacer,
    inflight: FuturesUnordered<InFlightFuture>,
    /// Publishes that completed on their first poll (a closed channel fails at once), and
    /// confirms taken ready with the one being handled (see [`Shell::settle_returns`]).
    early: VecDeque<(u64, lapin::Result<Confirmation>)>,
    /// How many at the back of `early` [`Shell::settle_returns`] has not looked at yet.
    early_unstripped: usize,
    /// Taken for publishing and replayed before (see [`Summary::replayed_before`]).
    replayed_before: u64,
    /// Content hash of each publish not yet confirmed, by DLQ tag: a returned message names
    /// its publish by content, not by the confirm lapin attached it to.
    sent: HashMap<u64, u64>,
    /// The exchange of each publish not yet confirmed, by DLQ tag: a publish the broker refused
    /// (403, which closes the channel) names its exchange.
    exchanges: HashMap<u64, String>,
    /// The first tag the broker refused to publish, and why: it and every later publish on that
    /// channel certainly did not arrive.
    refused_from: Option<(u64, String)>,
    /// Publishes a returned message was matched to, with the broker's reason, until their
    /// own confirm is handled.
    returned: HashMap<u64, String>,
    /// The message read last, published when the engine says so.
    outgoing: Option<Outgoing>,
    /// The targets the engine may ask to check ([`Decision::Unchecked`]), by check name, with
    /// the death routing key of the first message met (see [`CheckRequest::death_key`]).
    check_keys: HashMap<String, (TargetKey, Option<String>)>,
    /// Targets checked during the run that are wait queues, and where their messages go
    /// instead.
    checked_redirects: HashMap<TargetKey, (ShortString, ShortString)>,
    /// The channel depth questions are asked on (a failed passive declare closes its channel).
    depth_ch: Option<lapin::Channel>,
    /// Set when a request went unanswered: closing then only starts, without waiting for a
    /// broker that does not answer.
    unresponsive: bool,
}

impl Shell<'_> {
    /// Moves every returned message to the publish it belongs to. lapin hands a `basic.return`
    /// to the next confirm it resolves, and resolves a multiple ack's tags in no set order, so
    /// the confirm carrying a return is often another publish's: trusted as it came, a routed
    /// message went back to the DLQ and the unroutable one was acknowledged off it, lost (seen
    /// with a binding removed mid-run: r-72 gone, r-56 in both queues). A return reaches lapin
    /// before the ack of its own publish, so by the time that publish's confirm is ready, the one
    /// carrying its return is ready too: all ready confirms are taken now, and each return is
    /// matched to its publish by content (routing, properties and body).
    fn settle_returns(
        &mut self,
        tag: u64,
        result: lapin::Result<Confirmation>,
    ) -> lapin::Result<Confirmation> {
        while let Some(Some(done)) = self.inflight.next().now_or_never() {
            self.early.push_back(done);
            self.early_unstripped += 1;
        }
        let mut claim = |carrier: u64, ret: lapin::message::BasicReturnMessage| {
            let d = &ret.delivery;
            let hash = content_hash(&d.exchange, &d.routing_key, &d.properties, &d.data);
            // The lowest unconfirmed publish with this content; identical messages are
            // interchangeable. None found (it should not happen): the carrier, as lapin said.
            let owner = self
                .sent
                .iter()
                .filter(|(t, h)| **h == hash && !self.returned.contains_key(t))
                .map(|(t, _)| *t)
                .min()
                .unwrap_or(carrier);
            self.returned
                .insert(owner, format!("{} {}", ret.reply_code, ret.reply_text));
        };
        let strip =
            |r: lapin::Result<Confirmation>,
             carrier: u64,
             claim: &mut dyn FnMut(u64, lapin::message::BasicReturnMessage)| {
                match r {
                    Ok(Confirmation::Ack(Some(ret))) => {
                        claim(carrier, ret);
                        Ok(Confirmation::Ack(None))
                    }
                    Ok(Confirmation::Nack(Some(ret))) => {
                        claim(carrier, ret);
                        Ok(Confirmation::Nack(None))
                    }
                    other => other,
                }
            };
        let result = strip(result, tag, &mut claim);
        // Only the ready confirms not looked at before: the rest carry no return any more
        // (going over every one each time cost a seventh of a replay's CPU, measured).
        let fresh = self.early_unstripped.min(self.early.len());
        let from = self.early.len() - fresh;
        for entry in self.early.range_mut(from..) {
            let r = std::mem::replace(&mut entry.1, Ok(Confirmation::NotRequested));
            entry.1 = strip(r, entry.0, &mut claim);
        }
        self.early_unstripped = 0;
        result
    }

    /// Carries out one effect; the event it ends in, if any, is for the engine.
    async fn perform(&mut self, effect: Effect, drv: &mut Driver) -> Option<Event> {
        let step = self.step;
        let ev = match effect {
            Effect::Finish => return None,
            Effect::CheckTarget(name) => {
                let result = self.check_target(&name, drv).await;
                Event::TargetChecked {
                    check: name,
                    result,
                }
            }
            Effect::Publish(t) => {
                let out = self.outgoing.take().filter(|o| o.tag == t)?;
                self.sent.insert(
                    t,
                    content_hash(&out.target.0, &out.target.1, &out.props, &out.body),
                );
                self.exchanges.insert(t, out.target.0.to_string());
                // Publishes are not awaited one by one: lapin resolves a publish only once
                // the IO loop has written it, a thread hop per message. The first poll hands
                // the frames to lapin, so messages still go out in the order they were read;
                // the rest (the write, then the confirm) completes in `inflight`, bounded by
                // the engine's confirm deadline. A publish that fails (closed channel)
                // completes with the error and is handled with the confirms.
                let ch = self.publish.clone();
                let mut fut: InFlightFuture = Box::pin(async move {
                    let Outgoing {
                        tag,
                        target,
                        props,
                        body,
                        ..
                    } = out;
                    let published = ch
                        .basic_publish(
                            target.0,
                            target.1,
                            BasicPublishOptions {
                                mandatory: true,
                                ..Default::default()
                            },
                            &body,
                            props,
                        )
                        .await;
                    // lapin has its own copy in the frames: the body is not kept while the
                    // confirm is awaited, so memory in flight is one copy per message.
                    drop(body);
                    let r = match published {
                        Ok(confirm) => confirm.await,
                        Err(e) => Err(e),
                    };
                    (tag, r)
                });
                match futures_util::poll!(fut.as_mut()) {
                    Poll::Ready(done) => {
                        self.early.push_back(done);
                        self.early_unstripped += 1;
                    }
                    Poll::Pending => self.inflight.push(fut),
                }
                self.pacer.published();
                return None;
            }
            Effect::Ack(ops) => {
                let r = drv.guarded(step, send_acks(&self.consume, ops)).await;
                self.unresponsive |= timed_out(&r);
                Event::AcksWritten(
                    r.map_err(|e| e.text("acknowledging in the dead-letter queue failed")),
                )
            }
            Effect::Sync => {
                // basic.qos is answered after every frame sent before it on this channel was
                // processed: it proves the acks written so far.
                let qos = self
                    .consume
                    .basic_qos(self.prefetch, BasicQosOptions::default());
                let r = drv.guarded(step, qos).await;
                self.unresponsive |= timed_out(&r);
                Event::Synced(
                    r.map_err(|e| e.text("the dead-letter queue's node (frozen, or cut off?)")),
                )
            }
            Effect::AskDepth => {
                // A passive declare on a channel of its own: a failed declare closes the
                // channel it was asked on, never the consumer's.
                let ch = match self.depth_ch.take().filter(|c| c.status().connected()) {
                    Some(c) => Ok(c),
                    None => drv.guarded(step, self.consume_conn.create_channel()).await,
                };
                let r = match ch {
                    Ok(ch) => {
                        let declare = ch.queue_declare(
                            self.dlq_name.clone(),
                            QueueDeclareOptions {
                                passive: true,
                                ..Default::default()
                            },
                            FieldTable::default(),
                        );
                        let r = drv.guarded(step, declare).await;
                        self.depth_ch = Some(ch);
                        r.map(|d| u64::from(d.message_count()))
                    }
                    Err(e) => Err(e),
                };
                self.unresponsive |= timed_out(&r);
                Event::Depth(r.map_err(|e| e.text("passive declare")))
            }
            Effect::CancelConsumer => {
                let r = if self.consume.status().connected() {
                    let cancel = self
                        .consume
                        .basic_cancel(tag_name(&self.tag), BasicCancelOptions::default());
                    let r = drv.guarded(step, cancel).await;
                    self.unresponsive |= timed_out(&r);
                    r.map_err(|e| e.text("cancelling the consumer"))
                } else {
                    Err("the dead-letter queue's channel is closed".to_string())
                };
                Event::ConsumerCancelled(r)
            }
            Effect::Drain => {
                // What the broker had sent before cancel-ok is held and handed back with the
                // rest, so no delivery is left for a channel close to return (which would
                // count a delivery on quorum queues).
                let drain_until = Instant::now() + step;
                // The first message, read before the consumer started and not taken yet, is
                // handed back with the rest.
                if let Some(d) = self.first.take() {
                    let e = drv
                        .engine
                        .on(Instant::now(), Event::Drained(d.delivery_tag));
                    drv.fx.extend(e);
                }
                while !drv.engine.is_done() {
                    let left = drain_until.saturating_duration_since(Instant::now());
                    let wait = left.min(Duration::from_millis(500));
                    let consumer = &mut self.consumer;
                    let next = drv
                        .guarded(wait, async {
                            match consumer.next().await {
                                Some(Ok(d)) => Ok(d.delivery_tag),
                                Some(Err(e)) => Err(e.to_string()),
                                None => Err("consumer ended".to_string()),
                            }
                        })
                        .await;
                    match next {
                        Ok(t) => {
                            let e = drv.engine.on(Instant::now(), Event::Drained(t));
                            drv.fx.extend(e);
                        }
                        Err(_) => break,
                    }
                }
                Event::DrainDone
            }
            Effect::Nack { top } => {
                let nack = self.consume.basic_nack(
                    top,
                    BasicNackOptions {
                        multiple: true,
                        requeue: true,
                    },
                );
                let r = drv.guarded(step, nack).await;
                self.unresponsive |= timed_out(&r);
                Event::HandedBack(r.map_err(|e| e.text("nack")))
            }
            Effect::Close => {
                let close_limit = if self.unresponsive {
                    Duration::from_millis(1)
                } else {
                    step
                };
                let r = if self.consume.status().connected() {
                    drv.guarded(close_limit, self.consume.close(200, "replay done".into()))
                        .await
                        .map_err(|e| e.text("closing the dead-letter queue's channel"))
                } else {
                    Err("the dead-letter queue's channel was already closed".to_string())
                };
                // A blocked connection writes nothing (not even a close): do not wait on it.
                let publish_limit = if self.publish_conn.status().blocked() {
                    Duration::from_millis(1)
                } else {
                    close_limit
                };
                let depth_ch = self.depth_ch.take();
                let (consume, publish) = (&self.consume, &self.publish);
                let closing = async {
                    close_quietly(consume, publish, depth_ch, publish_limit, close_limit).await;
                    Ok::<(), String>(())
                };
                let _ = drv.guarded(Duration::from_secs(4), closing).await;
                Event::Closed(r)
            }
        };
        Some(ev)
    }

    /// Waits for what happens next: a cancel, the broker blocking or unblocking, a confirm, the
    /// pacer's next slot, a delivery, or the engine's next deadline. `None`: nothing for the
    /// engine (an event it does not need), ask again.
    async fn next_event(&mut self, drv: &mut Driver) -> Option<Event> {
        let wants = drv.engine.wants();
        // Confirmed publishes off the front first: the deadline looks for the oldest one
        // still unconfirmed.
        drv.engine.compact();
        if wants.take
            && let Some(d) = self.first.take()
        {
            return Some(self.delivered(d, drv));
        }
        let deadline = drv.engine.deadline();
        let slot = self.pacer.next_slot();
        let ev = tokio::select! {
            biased;
            () = drv.cancel.next() => Event::Cancel,
            e = self.events.next(), if self.events_open => match e {
                Some(lapin::Event::ConnectionBlocked(why)) => Event::Blocked(why),
                Some(lapin::Event::ConnectionUnblocked) => Event::Unblocked,
                Some(_) => return None,
                None => {
                    self.events_open = false;
                    return None;
                }
            },
            confirm = next_confirm(&mut self.early, &mut self.inflight), if wants.confirms && (!self.inflight.is_empty() || !self.early.is_empty()) => {
                let (t, result) = confirm?;
                let result = self.settle_returns(t, result);
                self.sent.remove(&t);
                let refused = result.as_ref().err().and_then(|e| self.refused(t, e));
                self.exchanges.remove(&t);
                let returned = self.returned.remove(&t);
                let outcome = match result {
                    Ok(Confirmation::Ack(_)) => match returned {
                        Some(why) => ConfirmOutcome::Returned(why),
                        None => ConfirmOutcome::Ack,
                    },
                    Ok(Confirmation::Nack(_)) => ConfirmOutcome::Nack,
                    // Cannot happen on a confirm channel; never ack what was not confirmed.
                    Ok(Confirmation::NotRequested) => ConfirmOutcome::Failed("no publisher confirm".into()),
                    // No answer, only an error (the channel or the connection closed): the
                    // broker may have routed it before (confirms come in batches), so it counts
                    // as a possible duplicate.
                    // Refused by the broker's permissions: the channel closed over this publish
                    // or an earlier one, before it was routed — certainly not delivered.
                    Err(_) if refused.is_some() => ConfirmOutcome::Failed(refused.unwrap_or_default()),
                    Err(e) => ConfirmOutcome::Unknown(e.to_string()),
                };
                drv.engine.compact();
                Event::Confirm { tag: t, outcome }
            }
            () = until(slot), if wants.slot => Event::Slot,
            next = self.consumer.next(), if wants.take => match next {
                // The stream ends only when the broker cancelled the consumer or the channel
                // closed: not an empty queue, and not a success.
                None => Event::ConsumeLost(
                    "the broker cancelled the consumer (was the queue deleted?) or closed the channel".into(),
                ),
                Some(Err(e)) => Event::ConsumeLost(e.to_string()),
                Some(Ok(d)) => self.delivered(d, drv),
            },
            () = sleep_until_opt(deadline) => Event::Tick,
        };
        Some(ev)
    }

    /// Why the publish with DLQ tag `tag` certainly did not arrive, when the channel closed over
    /// a publish the broker refused (403 ACCESS_REFUSED names the exchange): the first in-flight
    /// publish to that exchange was refused, and nothing sent after it was processed. A publish
    /// sent before it may have been routed, and stays a possible duplicate.
    fn refused(&mut self, tag: u64, e: &lapin::Error) -> Option<String> {
        if self.refused_from.is_none()
            && let Some((403, text)) = amqp::soft_error_code(e)
        {
            let named = |x: &str| {
                let resource = if x.is_empty() { "amq.default" } else { x };
                text.contains(&format!("exchange '{resource}'"))
            };
            let first = self
                .exchanges
                .iter()
                .filter(|(_, x)| named(x))
                .map(|(t, _)| *t)
                .min();
            if let Some(first) = first {
                self.refused_from =
                    Some((first, format!("the broker refused the publish: {text}")));
            }
        }
        match &self.refused_from {
            Some((first, why)) if tag >= *first => Some(why.clone()),
            _ => None,
        }
    }

    /// A delivery, classified for the engine; what it would publish waits in `outgoing`.
    fn delivered(&mut self, d: lapin::message::Delivery, drv: &Driver) -> Event {
        let (ev, mut out) = classify(self.job, drv.engine.tally().seen, d);
        if let Event::Delivery {
            decision: Decision::Unchecked { check, .. },
            ..
        } = &ev
            && let Some(o) = out.as_mut()
        {
            let key = (o.target.0.to_string(), o.target.1.to_string());
            if let Some(to) = self.checked_redirects.get(&key) {
                o.target = to.clone();
            }
            let death_key = o.death_key.take();
            self.check_keys
                .entry(check.clone())
                .or_insert((key, death_key));
        }
        if out.as_ref().is_some_and(|o| o.replayed_before) {
            self.replayed_before += 1;
        }
        self.outgoing = out;
        ev
    }

    /// Asks for the check of the target named `name` ([`Job::checks`]), bounded: `Ok` with the
    /// name its messages are counted under when a wait queue sends them on, `Err` with why its
    /// messages stay. A wait queue's messages are published to where it leads, this one too.
    async fn check_target(
        &mut self,
        name: &str,
        drv: &mut Driver,
    ) -> Result<Option<String>, String> {
        let (Some(tx), Some((key, death_key))) =
            (self.job.checks.clone(), self.check_keys.get(name).cloned())
        else {
            return Err(format!(
                "{name} was not checked before the run; its messages stay in the DLQ"
            ));
        };
        let ask = async {
            let (reply, answer) = tokio::sync::oneshot::channel();
            tx.send(CheckRequest {
                target: key.clone(),
                death_key,
                reply,
            })
            .await
            .map_err(|_| "nothing answers target checks".to_string())?;
            answer
                .await
                .map_err(|_| "the check ended without an answer".to_string())?
        };
        let redirect = match drv.guarded(self.step * 4, ask).await {
            Ok(r) => r,
            Err(Cut::Failed(why)) => return Err(why),
            Err(e) => {
                self.unresponsive |= matches!(e, Cut::Timeout(_));
                return Err(format!(
                    "{}; its messages stay in the DLQ",
                    e.text(&format!("checking {name}"))
                ));
            }
        };
        let Some(r) = redirect else {
            return Ok(None);
        };
        let to = amqp::short("the exchange name", &r.exchange)
            .and_then(|e| amqp::short("the routing key", &r.routing_key).map(|k| (e, k)))
            .map_err(|e| format!("{name} leads to a queue that cannot be published to: {e}"))?;
        if let Some(o) = self.outgoing.as_mut()
            && o.target.0.as_str() == key.0
            && o.target.1.as_str() == key.1
        {
            o.target = to.clone();
        }
        self.checked_redirects.insert(key, to);
        Ok(Some(r.expected_queue.unwrap_or(r.routing_key)))
    }

    /// Closes the publishing connection when the run has its own. A forced end sends nothing
    /// more: closing starts without waiting for the broker, so a later close of it (the
    /// caller's) returns at once instead of hanging on a frozen node; deliveries go back to the
    /// DLQ when the connections drop.
    async fn close_publisher(&mut self, forced: bool) {
        if std::ptr::eq(self.consume_conn, self.publish_conn) {
            return;
        }
        if forced {
            let _ = tokio::time::timeout(
                Duration::from_millis(1),
                self.publish_conn.close(200, "replay interrupted".into()),
            )
            .await;
        } else if self.publish_conn.status().connected() {
            let limit = if self.publish_conn.status().blocked() || self.unresponsive {
                Duration::from_millis(1)
            } else {
                self.step
            };
            let _ = tokio::time::timeout(limit, self.publish_conn.close(200, "replay done".into()))
                .await;
        }
    }
}

/// [`run_with`], carrying on after node loss: when a stretch ends because the connection was
/// lost or the broker stopped answering (not cancelled, not forced), `connect` is asked for a
/// new (consume, publish) pair — the next node of a cluster — and the replay goes on from the
/// queue as it is then, at most `max_reconnects` times. Counts, ids and duplicates add up over
/// the stretches; a failed reconnect ends the run with the counts so far.
pub async fn run_failover<C, Fut>(
    mut connect: C,
    job: &Job,
    limits: Limits,
    cancel: watch::Receiver<bool>,
    mut on_progress: impl FnMut(&Progress),
    max_reconnects: u32,
) -> Result<Summary, ReplayError>
where
    C: FnMut() -> Fut,
    Fut: Future<Output = Result<(lapin::Connection, lapin::Connection), String>>,
{
    let mut job = job.clone();
    let mut total: Option<Summary> = None;
    loop {
        let (consume, publish) = match connect().await {
            Ok(pair) => pair,
            Err(e) => {
                return match total {
                    Some(mut t) => {
                        t.stop = StopReason::ConnectionLost(format!(
                            "{}; reconnecting failed: {e}",
                            t.stop
                        ));
                        Ok(t)
                    }
                    None => Err(ReplayError::Channel(e)),
                };
            }
        };
        if total.is_some() {
            settle_in(&consume, &job.dlq, &limits).await;
        }
        let base = total
            .as_ref()
            .map(|t| t.progress.clone())
            .unwrap_or_default();
        // Right after a node loss the queue may not answer for itself yet (a quorum queue
        // electing a new leader reports nothing ready and delivers nothing): be patient before
        // calling it empty or stalled.
        let stretch = if total.is_some() {
            Limits {
                idle: limits.idle.max(Duration::from_secs(10)),
                stall: limits.stall.max(Duration::from_secs(20)),
                ..limits.clone()
            }
        } else {
            limits.clone()
        };
        let r = run_with(&consume, &publish, &job, stretch, cancel.clone(), |p| {
            on_progress(&add_progress(&base, p))
        })
        .await;
        for c in [&consume, &publish] {
            if c.status().connected() {
                let _ = tokio::time::timeout(
                    limits.step.min(Duration::from_secs(2)),
                    c.close(200, "replay done".into()),
                )
                .await;
            }
        }
        let seg = match (r, total.take()) {
            (Ok(seg), t) => match t {
                Some(t) => merge(t, seg),
                None => seg,
            },
            (Err(e), Some(mut t)) => {
                t.stop = StopReason::ConnectionLost(format!("{}; after reconnecting: {e}", t.stop));
                return Ok(t);
            }
            (Err(e), None) => return Err(e),
        };
        let lost = matches!(
            seg.stop,
            StopReason::ConnectionLost(_) | StopReason::NoAnswer(_)
        ) && seg.counts.forced.is_none();
        let moved_here = seg.progress.moved - base.moved;
        if let Some(l) = job.limit {
            job.limit = Some(l.saturating_sub(moved_here));
        }
        if !lost
            || seg.reconnected.len() >= max_reconnects as usize
            || *cancel.borrow()
            || job.limit == Some(0)
        {
            return Ok(seg);
        }
        let mut seg = seg;
        seg.reconnected.push(seg.stop.to_string());
        total = Some(seg);
    }
}

/// After a node loss, waits (at most 10 s) until `queue` reports ready messages on the new
/// connection: a quorum queue electing a new leader reports none meanwhile, and a run started
/// then would stop at once as "empty".
async fn settle_in(conn: &lapin::Connection, queue: &str, limits: &Limits) {
    let Ok(queue) = amqp::short("the queue name", queue) else {
        return;
    };
    let until = Instant::now() + Duration::from_secs(10);
    while Instant::now() < until {
        let Ok(Ok(ch)) = tokio::time::timeout(limits.step, conn.create_channel()).await else {
            return;
        };
        let declared = tokio::time::timeout(
            limits.step,
            ch.queue_declare(
                queue.clone(),
                QueueDeclareOptions {
                    passive: true,
                    ..Default::default()
                },
                FieldTable::default(),
            ),
        )
        .await;
        let _ = tokio::time::timeout(Duration::from_secs(1), ch.close(200, "checked".into())).await;
        // Ready messages: go on. No answer at all: the queue's node is not back; the run's own
        // deadlines decide from here rather than this wait.
        if matches!(&declared, Ok(Ok(d)) if d.message_count() > 0) || declared.is_err() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

/// The messages ready in `queue` now (a passive declare on a channel of its own), when the
/// broker answers within a few seconds.
async fn left_in(conn: &lapin::Connection, queue: &str) -> Option<u64> {
    let name = amqp::short("the queue name", queue).ok()?;
    let limit = Duration::from_secs(5);
    let ch = tokio::time::timeout(limit, conn.create_channel())
        .await
        .ok()?
        .ok()?;
    let declared = tokio::time::timeout(
        limit,
        ch.queue_declare(
            name,
            QueueDeclareOptions {
                passive: true,
                ..Default::default()
            },
            FieldTable::default(),
        ),
    )
    .await;
    let _ = tokio::time::timeout(Duration::from_secs(1), ch.close(200, "counted".into())).await;
    declared.ok()?.ok().map(|d| u64::from(d.message_count()))
}

fn add_progress(base: &Progress, p: &Progress) -> Progress {
    Progress {
        moved: base.moved + p.moved,
        returned: base.returned + p.returned,
        failed: base.failed + p.failed,
        ..p.clone()
    }
}

fn merge(mut t: Summary, s: Summary) -> Summary {
    t.progress = add_progress(&t.progress, &s.progress);
    t.counts.merge(s.counts);
    t.moved_ids.extend_from(&s.moved_ids);
    t.stop = s.stop;
    t.reconnected.extend(s.reconnected);
    t.replayed_before += s.replayed_before;
    t.planned_unread |= s.planned_unread;
    t.left_in_dlq = s.left_in_dlq;
    t.held_elsewhere = t.held_elsewhere.max(s.held_elsewhere);
    t
}

/// Turns one delivery into the engine's event, and the message to publish when it is selected.
fn classify(job: &Job, seen: u64, delivery: lapin::message::Delivery) -> (Event, Option<Outgoing>) {
    let t = delivery.delivery_tag;
    // An archive publishes the delivery's own properties, not a round trip through the model.
    let archived = match &job.action {
        Action::Archive { .. } => Some(delivery.properties.clone()),
        _ => None,
    };
    // The whole body: replay publishes exactly what it read.
    let msg = amqp::dead_letter_from_delivery(&job.dlq, seen, delivery, usize::MAX);
    let key = identity::message_key(&msg);
    let audited = if identity::is_id_key(&key) {
        job.replays.get(&key).copied().unwrap_or(0)
    } else {
        0
    };
    let exp = if job.selection.reads_story() {
        explain::explain_with(&msg, &job.conventions, audited)
    } else {
        explain::explain_for_replay(&msg, &job.conventions, audited)
    };
    let age = crate::domain::arrival::Arrival::of(
        &exp.deaths,
        exp.failed_at,
        job.first_seen.get(&key).copied(),
    )
    .age_secs(jiff::Timestamp::now());
    let delivery_count = msg.delivery.delivery_count;
    let near_limit = delivery_count
        .filter(|&c| !job.quorum.message_safe(c))
        .map(|c| {
            format!(
                "message {} has been delivered {c} times; returning more messages could push them past the queue's delivery limit",
                seen + 1
            )
        });
    let mut out = None;
    let selected = job.selection.selects(&msg, &exp, &key, age);
    let decision = if !selected {
        Decision::Skip
    } else if let Action::Discard { only } = &job.action {
        let in_snapshot = only
            .as_ref()
            .is_none_or(|set| set.lock().unwrap_or_else(|e| e.into_inner()).take(&msg));
        if in_snapshot {
            Decision::Discard { key }
        } else {
            // Not in the snapshot (it came later, or changed): never deleted.
            Decision::Skip
        }
    } else if let (
        Action::Archive {
            stream,
            stamp,
            user_id,
        },
        Some(props),
    ) = (&job.action, archived)
    {
        match (
            archive_properties(props, stamp, user_id),
            amqp::short("the archive stream's name", stream),
        ) {
            (_, Err(e)) => Decision::Refuse(format!("cannot be archived: {e}")),
            (props, Ok(routing_key)) => {
                out = Some(Outgoing {
                    tag: t,
                    target: (ShortString::default(), routing_key),
                    props,
                    body: msg.body,
                    replayed_before: false,
                    death_key: None,
                });
                Decision::Publish {
                    key,
                    target: stream.clone(),
                }
            }
        }
    } else {
        match plan_publish(job, &msg, &exp) {
            Err(keeps) => keeps,
            Ok(planned) => {
                let target = (
                    planned.exchange.to_string(),
                    planned.routing_key.to_string(),
                );
                let mut death_key = None;
                let decision = if job.allowed_targets.contains(&target) {
                    Decision::Publish {
                        key,
                        target: planned.target,
                    }
                } else {
                    if target.0.is_empty() {
                        death_key = exp.deaths.routing_key_in(&target.1).map(String::from);
                    }
                    // Only with `job.checks` (see `refusal`): checked when first met.
                    Decision::Unchecked {
                        key,
                        target: planned.target,
                        check: check_name(&target),
                    }
                };
                out = Some(Outgoing {
                    tag: t,
                    target: (planned.exchange, planned.routing_key),
                    props: planned.props,
                    body: msg.body,
                    replayed_before: planned.replayed_before,
                    death_key,
                });
                decision
            }
        }
    };
    (
        Event::Delivery {
            tag: t,
            decision,
            near_limit,
        },
        out,
    )
}

/// A message planned for a replay, ready to publish.
pub struct Planned {
    pub exchange: ShortString,
    pub routing_key: ShortString,
    pub props: lapin::BasicProperties,
    /// The target as the counts name it (the queue, else the exchange).
    pub target: String,
    /// Warren replayed it before (its plan writes a replay count above 1).
    pub replayed_before: bool,
}

/// Plans one message as `job` says (`domain::replay`, wait-queue redirects, the checked
/// targets); `Err` is the decision that keeps it in the DLQ ([`Decision::Keep`] or
/// [`Decision::Refuse`]). The run decides with it per delivery, and `warren restore --replay`
/// per archived message.
pub fn plan_publish(
    job: &Job,
    msg: &crate::domain::message::DeadLetter,
    exp: &explain::Explanation,
) -> Result<Planned, Decision> {
    let mut p = plan::plan(
        msg,
        exp,
        &ReplayOptions {
            keep_attempts: job.keep_attempts,
            clear_expiry: job.clear_expiry,
            target_queue: job.to.clone(),
            // Decided per message at the moment it is taken: a deadline may pass mid-run.
            now: jiff::Timestamp::now(),
            run_id: job.run_id.clone(),
        },
    );
    plan::apply_redirect(&mut p, &job.redirects);
    let mut properties = msg.properties.clone();
    if p.removed_properties.contains(&"expiration") {
        properties.expiration = None;
    }
    match (refusal(job, &p), p.target.as_ref()) {
        _ if let Some(why) = p.held_back() => Err(Decision::Keep(why)),
        (Some(why), _) => Err(Decision::Refuse(why)),
        (None, None) => Err(Decision::Refuse(
            "no known origin to send it back to".into(),
        )),
        (None, Some(tg)) => match (
            amqp::properties_to_amqp(&properties, &p.headers),
            amqp::short("the exchange name", &tg.exchange),
            amqp::short("the routing key", &tg.routing_key),
        ) {
            (Err(e), _, _) => Err(Decision::Refuse(format!(
                "cannot be re-encoded for publishing: {e}"
            ))),
            // Names from headers and bodies: one too long for AMQP holds this message.
            (_, Err(e), _) | (_, _, Err(e)) => {
                Err(Decision::Refuse(format!("cannot be published: {e}")))
            }
            (Ok(props), Ok(exchange), Ok(routing_key)) => Ok(Planned {
                exchange,
                routing_key,
                props,
                target: tg
                    .expected_queue
                    .clone()
                    .unwrap_or_else(|| format!("exchange {}", tg.exchange)),
                replayed_before: p.replay_count > 1,
            }),
        },
    }
}

/// The delivery's own properties for the archive stream: every property as the broker
/// delivered it but `user_id`, which is the archiver's (the message's own kept in
/// [`ORIGINAL_USER_ID`](crate::domain::archive::ORIGINAL_USER_ID)); the headers as their exact encoding in one header (a stream would drop
/// `x-death`, see [`ORIGINAL_HEADERS`](crate::domain::archive::ORIGINAL_HEADERS)) beside the
/// archive's four. Reading the archive puts them back (`amqp::dead_letter_from_delivery`).
fn archive_properties(
    props: lapin::BasicProperties,
    stamp: &Stamp,
    user_id: &str,
) -> lapin::BasicProperties {
    use lapin::types::{AMQPValue, LongString};
    let mut headers = FieldTable::default();
    if let Some(own) = props.headers() {
        headers.insert(
            ShortString::from(crate::domain::archive::ORIGINAL_HEADERS),
            AMQPValue::LongString(LongString::from(amqp::encode_value(
                &AMQPValue::FieldTable(own.clone()),
            ))),
        );
    }
    for (k, v) in stamp.headers(jiff::Timestamp::now()) {
        headers.insert(
            ShortString::from(k),
            AMQPValue::LongString(LongString::from(v.into_bytes())),
        );
    }
    let own = props.user_id().as_ref().map(|u| u.to_string());
    headers.insert(
        ShortString::from(crate::domain::archive::ORIGINAL_USER_ID),
        AMQPValue::LongString(LongString::from(own.unwrap_or_default().into_bytes())),
    );
    props
        .with_headers(headers)
        .with_user_id(ShortString::from(user_id.to_string()))
}

/// Closes what is still open, each close bounded; errors change nothing at this point.
async fn close_quietly(
    consume: &lapin::Channel,
    publish: &lapin::Channel,
    depth: Option<lapin::Channel>,
    publish_limit: Duration,
    limit: Duration,
) {
    let limit = limit.min(Duration::from_secs(2));
    for (ch, limit) in [
        (Some(consume), limit),
        (Some(publish), publish_limit.min(limit)),
        (depth.as_ref(), limit),
    ] {
        if let Some(ch) = ch.filter(|c| c.status().connected()) {
            let _ = tokio::time::timeout(limit, ch.close(200, "replay done".into())).await;
        }
    }
}

/// The step went unanswered within its deadline.
fn timed_out<T>(r: &Result<T, Cut>) -> bool {
    matches!(r, Err(Cut::Timeout(_)))
}

async fn sleep_until_opt(at: Option<Instant>) {
    match at {
        Some(at) => until(at).await,
        None => std::future::pending().await,
    }
}

fn fill_progress(
    p: &mut Progress,
    t: &Tally,
    started: Instant,
    depth_at_start: u64,
    limit: Option<u64>,
) {
    p.moved = t.moved;
    p.returned = t.returned;
    p.failed = t.failed;
    p.blocked = t.blocked.clone();
    update_rate(p, started, depth_at_start, t.seen, limit);
}
/// Resolves at `slot`; at once when it has passed. A timer is not used for a slot that has come:
/// tokio rounds timers up to the next millisecond, which would cap an unthrottled replay at about
/// a thousand messages a second.
async fn until(slot: Instant) {
    if slot > Instant::now() {
        tokio::time::sleep_until(slot.into()).await;
    }
}

/// Why a planned message must not be published in this run, if it must not.
fn refusal(job: &Job, p: &plan::ReplayPlan) -> Option<String> {
    let Some(target) = p.target.as_ref() else {
        return Some("no known origin to send it back to; name one with --to".into());
    };
    if target.expected_queue.as_deref() == Some(job.dlq.as_str()) {
        return Some("its target is the dead-letter queue itself".into());
    }
    if job.checks.is_none()
        && !job
            .allowed_targets
            .contains(&(target.exchange.clone(), target.routing_key.clone()))
    {
        return Some(format!(
            "target exchange '{}' key '{}' was not checked before the run (not in the preview)",
            target.exchange, target.routing_key
        ));
    }
    None
}

async fn send_acks(ch: &lapin::Channel, ops: Vec<AckOp>) -> Result<(), String> {
    for op in ops {
        ch.basic_ack(
            op.tag,
            BasicAckOptions {
                multiple: op.multiple,
            },
        )
        .await
        .map_err(|e| format!("acknowledging in the dead-letter queue failed: {e}"))?;
    }
    Ok(())
}

fn update_rate(
    p: &mut Progress,
    started: Instant,
    depth_at_start: u64,
    seen: u64,
    limit: Option<u64>,
) {
    let secs = started.elapsed().as_secs_f64();
    let done = p.moved + p.returned + p.failed;
    p.rate = if secs > 0.0 {
        p.moved as f64 / secs
    } else {
        0.0
    };
    let mut remaining = depth_at_start.saturating_sub(seen);
    if let Some(l) = limit {
        remaining = remaining.min(l.saturating_sub(done));
    }
    p.remaining = remaining;
    p.eta = (p.rate > 0.0).then(|| Duration::from_secs_f64(remaining as f64 / p.rate));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn contiguous_ready_tags_settle_with_one_multiple_ack() {
        let mut a = AckTracker::default();
        for t in 1..=5 {
            a.received(t);
        }
        for t in 1..=5 {
            a.ready(t);
        }
        assert_eq!(
            a.flush(),
            vec![AckOp {
                tag: 5,
                multiple: true
            }]
        );
        assert!(a.flush().is_empty(), "nothing is acked twice");
    }

    #[test]
    fn held_tags_are_never_covered_by_a_multiple_ack() {
        let mut a = AckTracker::default();
        for t in 1..=6 {
            a.received(t);
        }
        a.ready(1);
        a.ready(2);
        a.hold(3);
        a.ready(4);
        a.ready(6);
        // 5 still in flight: 6 waits for it.
        assert_eq!(
            a.flush(),
            vec![
                AckOp {
                    tag: 2,
                    multiple: true
                },
                AckOp {
                    tag: 4,
                    multiple: false
                },
            ]
        );
        a.ready(5);
        assert_eq!(
            a.flush(),
            vec![
                AckOp {
                    tag: 5,
                    multiple: false
                },
                AckOp {
                    tag: 6,
                    multiple: false
                }
            ]
        );
        assert_eq!(a.held(), 1);
        assert_eq!(a.unsettled(), 1, "only the held tag is left");
    }

    #[test]
    fn pending_tags_block_multiple_acks_above_them() {
        let mut a = AckTracker::default();
        for t in 1..=3 {
            a.received(t);
        }
        a.ready(2);
        a.ready(3);
        assert!(a.flush().is_empty(), "2 and 3 wait for 1");
        a.ready(1);
        assert_eq!(
            a.flush(),
            vec![AckOp {
                tag: 3,
                multiple: true
            }],
            "then one frame settles all three"
        );
    }

    fn summary(stop: StopReason, moved: u64, failed: u64, returned: u64) -> Summary {
        Summary {
            progress: Progress {
                moved,
                failed,
                returned,
                ..Default::default()
            },
            depth_at_start: 10,
            counts: Tally::default(),
            moved_ids: Spool::default(),
            stop,
            reconnected: Vec::new(),
            replayed_before: 0,
            planned_unread: false,
            left_in_dlq: None,
            held_elsewhere: 0,
        }
    }

    #[test]
    fn the_outcome_is_completed_only_when_everything_selected_moved() {
        let ok = summary(StopReason::ReachedStartDepth, 10, 0, 0);
        assert!(ok.completed());
        assert_eq!(ok.outcome(), "completed");
        assert_eq!(
            summary(StopReason::QueueEmpty, 3, 0, 0).outcome(),
            "completed"
        );
        assert_eq!(
            summary(StopReason::LimitReached, 3, 0, 0).outcome(),
            "completed"
        );

        let none_moved = summary(StopReason::ReachedStartDepth, 0, 0, 50);
        assert!(!none_moved.completed());
        assert!(none_moved.outcome().starts_with("failed"), "0 of 50 moved");
        let some = summary(StopReason::ReachedStartDepth, 8, 1, 1);
        assert!(some.outcome().starts_with("partial: 1 failed, 1 returned"));
        let window = summary(StopReason::WindowFull { window: 5 }, 8, 0, 0);
        assert!(window.outcome().starts_with("partial"));
        let stalled = summary(
            StopReason::Stalled {
                idle_secs: 10,
                ready: 4,
            },
            8,
            0,
            0,
        );
        assert!(stalled.outcome().starts_with("failed: no delivery for 10s"));
        assert_eq!(
            summary(StopReason::Cancelled, 8, 0, 0).outcome(),
            "cancelled"
        );

        let mut dup = summary(StopReason::ReachedStartDepth, 10, 0, 0);
        dup.counts.duplicated = 2;
        assert!(!dup.completed(), "possible duplicates are not a clean run");
        let mut forced = summary(StopReason::Cancelled, 3, 0, 0);
        forced.counts.forced = Some("stopped at once by a second signal".into());
        assert!(forced.outcome().starts_with("interrupted: stopped at once"));
    }

    #[test]
    fn pacer_spaces_messages_by_the_rate() {
        let mut p = Pacer::new(Some(100.0));
        p.published();
        let Some(first) = p.start else {
            panic!("the first publish starts the clock")
        };
        p.sent = 50;
        let later = p.next_slot();
        let gap = later.duration_since(first).as_secs_f64();
        assert!((gap - 0.5).abs() < 1e-6, "{gap}");
        assert_eq!(Pacer::new(None).per_msg, None);
        assert_eq!(Pacer::new(Some(0.0)).per_msg, None);
    }
}
