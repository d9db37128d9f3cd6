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
//!
//! The shell is split: opening a run (`open`), carrying out effects (`shell`), bounded waits
//! (`wait`), one delivery's decision (`classify`) and carrying on after node loss (`failover`).

use std::collections::{BTreeMap, HashMap, HashSet, VecDeque};
use std::future::Future;
use std::time::{Duration, Instant};

use tokio::sync::watch;

use crate::domain::archive::{ContentSet, Stamp};
use crate::domain::canary::CanaryDecision;
use crate::domain::convention::Conventions;
use crate::domain::engine::{Effect, Engine, Event, Limits, Tally};
use crate::domain::outcome::RunOutcome;
use crate::domain::quorum::BrowsePolicy;
use crate::domain::replay as plan;
use crate::domain::selection::Selection;

mod classify;
mod confirms;
mod drive;
mod failover;
mod finish;
mod open;
pub(crate) mod run10;
mod shell;
mod shell10;
mod shell_mem;
mod wait;
mod words;

pub use crate::domain::engine::{AckOp, AckTracker, BacklogWait, StopReason};
pub use crate::local::spool::Spool;
pub(crate) use classify::archive_properties;
pub use classify::{Planned, plan_publish};
pub(crate) use confirms::content_hash;
pub use failover::run_failover;
pub(crate) use failover::{add_progress, merge};
pub(crate) use shell_mem::{Item, MemoryRun, run_memory};

use open::Opened;
use shell::close_quietly;
use wait::{CancelWatch, Cut, guarded};

/// Where a planned publish goes: exchange and routing key.
pub use crate::domain::preview::TargetKey;

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
    /// `--strip-failure-stamp`: Symfony's `SentToFailureTransportStamp` removed.
    pub strip_failure_stamp: bool,
    /// `--to QUEUE`.
    pub to: Option<String>,
    /// Targets checked by the preflight (they exist, and fan-out was allowed or absent). A
    /// message whose plan points elsewhere is not published.
    pub allowed_targets: HashSet<TargetKey>,
    /// Wait-queue targets and the consuming queue each is replaced with (from the preflight).
    pub redirects: BTreeMap<TargetKey, plan::ReplayTarget>,
    /// The redirects in force when the plan was made (`domain::redirect`): each message's
    /// target is decided with them, as the plan's was.
    pub endpoint_redirects: std::sync::Arc<crate::domain::redirect::Redirects>,
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
    /// `--max-backlog`: publishing waits while a queue the targets rest in holds this many ready
    /// messages (`None`: no cap).
    pub backlog: Option<BacklogCap>,
    /// Edit, then replay: the edit of each message, by key; a message without one is published
    /// as it was read.
    pub edits: Option<std::sync::Arc<crate::domain::edit::Edits>>,
    /// Set when the run reads and publishes over AMQP 1.0 (`domain::amqp10::carrier`): where.
    /// Only for a replay.
    pub amqp10: Option<crate::broker::amqp10::Endpoint10>,
}

/// A replay's backlog cap: at most `max` ready messages in each queue of `queues`, where the
/// run's targets come to rest. Targets checked as the run meets them add their queues as they
/// pass their check, hence the lock.
#[derive(Clone, Debug)]
pub struct BacklogCap {
    pub(crate) max: u64,
    queues: std::sync::Arc<std::sync::Mutex<std::collections::BTreeSet<String>>>,
}

impl BacklogCap {
    pub(crate) fn new(max: u64, queues: impl IntoIterator<Item = String>) -> BacklogCap {
        BacklogCap {
            max,
            queues: std::sync::Arc::new(std::sync::Mutex::new(queues.into_iter().collect())),
        }
    }

    /// The queues watched now.
    pub(crate) fn queues(&self) -> Vec<String> {
        self.queues
            .lock()
            .map(|q| q.iter().cloned().collect())
            .unwrap_or_default()
    }

    /// Adds the queues of a target checked during the run.
    pub(crate) fn watch(&self, more: impl IntoIterator<Item = String>) {
        if let Ok(mut q) = self.queues.lock() {
            q.extend(more);
        }
    }
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
    /// Set while a canary waits for its messages (nothing else moves meanwhile).
    pub canary: Option<crate::domain::canary::CanaryWait>,
    /// Set while publishing waits for the target's backlog (`--max-backlog`): which queue holds
    /// how many ready messages, and the cap.
    pub backlog: Option<BacklogWait>,
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
    /// What the run's canary did, when it had one (`ops::replay`).
    pub canary: Option<crate::domain::canary::CanaryRecord>,
    /// The protocol the run read and published with (`domain::amqp10::carrier`).
    pub carrier: crate::domain::amqp10::carrier::Carrier,
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
            && self.canary.as_ref().is_none_or(|c| c.decision.went_ahead())
    }

    /// Messages their plan kept in the DLQ (a framework deadline passed, …).
    pub fn kept(&self) -> u64 {
        self.counts.kept.values().sum()
    }

    /// The audit's outcome: completed (see [`completed`](Self::completed)), cancelled (a
    /// signal, settled), interrupted (ended without settling), failed (a broker or connection
    /// fault, or nothing moved and some failed or came back), else partial.
    pub fn outcome(&self) -> RunOutcome {
        let outcome = self.outcome_alone();
        if self.reconnected.is_empty() || self.counts.forced.is_some() {
            return outcome;
        }
        let node_loss = format!(
            "reconnected {} time(s) after node loss: messages delivered on a lost connection return to the DLQ when the broker notices — replay again for them",
            self.reconnected.len()
        );
        match outcome {
            RunOutcome::Completed => RunOutcome::Partial(format!("{}; {node_loss}", self.stop)),
            RunOutcome::Cancelled(why) => RunOutcome::Cancelled(Some(match why {
                Some(w) => format!("{w}; {node_loss}"),
                None => node_loss,
            })),
            RunOutcome::Partial(w) => RunOutcome::Partial(format!("{w}; {node_loss}")),
            RunOutcome::Failed(w) => RunOutcome::Failed(format!("{w}; {node_loss}")),
            RunOutcome::Interrupted(why) => RunOutcome::Interrupted(why),
        }
    }

    fn outcome_alone(&self) -> RunOutcome {
        let p = &self.progress;
        let stop = &self.stop;
        if let Some(why) = &self.counts.forced {
            RunOutcome::Interrupted(Some(format!("{why}; {stop}")))
        } else if self.completed() {
            RunOutcome::Completed
        } else if let Some(c) = self.canary.as_ref().filter(|c| !c.decision.went_ahead()) {
            match c.decision {
                CanaryDecision::Cancelled => RunOutcome::Cancelled(Some(c.words())),
                _ => RunOutcome::Partial(c.words()),
            }
        } else if *stop == StopReason::Cancelled {
            RunOutcome::Cancelled(None)
        } else if stop.is_fault() {
            RunOutcome::Failed(stop.to_string())
        } else if p.moved == 0 && p.failed + p.returned > 0 {
            // Nothing moved: the real reason is what happened to the messages, not where the
            // run stopped (a limit reached says nothing of a publish the broker refused).
            let top = self.counts.problems.iter().max_by_key(|(_, n)| **n);
            RunOutcome::Failed(match top {
                Some((why, n)) => format!("{n} × {why}; {stop}"),
                None => stop.to_string(),
            })
        } else if p.failed + p.returned > 0 {
            RunOutcome::Partial(format!(
                "{} failed, {} returned; {stop}",
                p.failed, p.returned
            ))
        } else if self.held_elsewhere > 0 {
            RunOutcome::Partial(format!(
                "{} messages were held unacknowledged by another consumer when the run started and were not reached; {stop}",
                self.held_elsewhere
            ))
        } else if self.planned_unread && self.kept() > 0 {
            RunOutcome::Partial(format!(
                "{} of those confirmed stayed in the DLQ by their own plan (see kept); {stop}",
                self.kept()
            ))
        } else {
            RunOutcome::Partial(stop.to_string())
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
    if let (Some(ep), Action::Replay) = (&job.amqp10, &job.action) {
        return run10::run(consume_conn, ep, job, limits, cancel, on_progress).await;
    }
    let step = limits.step;
    let mut cancel = CancelWatch {
        rx: cancel,
        open: true,
    };
    let mut steps = crate::broker::steps::Steps::new("engine");
    let opened = Opened::open(consume_conn, publish_conn, job, step, &mut cancel).await?;
    steps.done("channels and first message");
    let depth_at_start = opened.depth_at_start;
    let mut summary = Summary::at_start(job, depth_at_start, Default::default());
    if depth_at_start == 0 {
        summary.stop = StopReason::QueueEmpty;
        close_quietly(&opened.consume, &opened.publish, None, step, step).await;
        return Ok(summary);
    }
    let mut shell = opened.start(&mut cancel).await?;
    steps.done("consumer");

    let started = Instant::now();
    let mut drv = Driver {
        // The consumer's own prefetch: the first message, read before it, is outside it, but
        // once that one is settled the broker stops at the prefetch, so the engine counts it in
        // (while it is unsettled, one early: a stop, never a wait for deliveries that cannot
        // come).
        engine: Engine::new(
            finish::config(job, depth_at_start, usize::from(shell.prefetch), &limits),
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
    // A run paced by its target's backlog waits and goes in turns many times a second: what
    // the progress says of it holds for the whole interval between reports.
    let mut backlog_shown = false;
    let mut backlog_seen: Option<BacklogWait> = None;

    drive::drive(&mut shell, &mut drv, |drv| {
        if drv.engine.tally().moved_ids.len() >= SPOOL_BATCH {
            summary.moved_ids.append(drv.engine.take_moved());
        }
        let blocked = drv.engine.tally().blocked.clone();
        if let Some(w) = drv.engine.backlog_wait() {
            backlog_seen = Some(w);
        }
        if blocked != blocked_shown
            || (backlog_seen.is_some() && !backlog_shown)
            || last_progress.elapsed() >= Duration::from_millis(200)
        {
            blocked_shown = blocked;
            let backlog = backlog_seen.take();
            backlog_shown = backlog.is_some();
            last_progress = Instant::now();
            fill_progress(
                &mut summary.progress,
                drv.engine.tally(),
                started,
                depth_at_start,
                job.limit,
            );
            summary.progress.backlog = backlog;
            on_progress(&summary.progress);
        }
    })
    .await;

    shell
        .close_publisher(drv.engine.tally().forced.is_some())
        .await;

    let left = match shell.left {
        Some(counted) => counted,
        None => left_in(shell.consume_conn, &job.dlq).await,
    };
    finish::settle(
        &mut summary,
        &mut drv,
        job,
        started,
        left,
        shell.replayed_before,
    );
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
    // A selected message a cancel handed back untouched is still to do.
    update_rate(
        p,
        started,
        depth_at_start,
        t.seen.saturating_sub(t.untouched),
        limit,
    );
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

/// The messages ready in `queue` now (a passive declare on a channel of its own), when the
/// broker answers within a few seconds.
pub(crate) async fn left_in(conn: &lapin::Connection, queue: &str) -> Option<u64> {
    let name = crate::broker::amqp::short("the queue name", queue).ok()?;
    let limit = Duration::from_secs(5);
    let ch = tokio::time::timeout(limit, conn.create_channel())
        .await
        .ok()?
        .ok()?;
    let depth = tokio::time::timeout(limit, crate::broker::amqp::passive_depth(&ch, name)).await;
    let _ = tokio::time::timeout(Duration::from_secs(1), ch.close(200, "counted".into())).await;
    depth.ok()?.ok()
}

#[cfg(test)]
mod tests {
    use super::wait::Pacer;
    use super::*;

    #[test]
    fn a_return_is_matched_to_the_publish_with_its_exact_content() {
        use lapin::types::{AMQPValue, FieldTable, ShortString};
        let props = |v: i32| {
            let mut h = FieldTable::default();
            h.insert("n".into(), AMQPValue::LongInt(v));
            lapin::BasicProperties::default().with_headers(h)
        };
        let (x, k) = (ShortString::from(""), ShortString::from("work"));
        let one = content_hash(&x, &k, &props(1), b"body");
        assert_eq!(
            one,
            content_hash(&x, &k, &props(1), b"body"),
            "same content"
        );
        for other in [
            content_hash(&x, &k, &props(2), b"body"),
            content_hash(&x, &k, &props(1), b"bodY"),
            content_hash(&x, &ShortString::from("work2"), &props(1), b"body"),
            content_hash(&ShortString::from("ex"), &k, &props(1), b"body"),
        ] {
            assert_ne!(one, other);
        }
    }

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
            canary: None,
            carrier: Default::default(),
        }
    }

    #[test]
    fn a_run_carried_on_after_node_loss_says_so_in_an_outcome_that_reads_back_the_same() {
        let mut done = summary(StopReason::ReachedStartDepth, 10, 0, 0);
        done.reconnected = vec!["node rabbit-2 lost".into()];
        let o = done.outcome();
        assert!(matches!(&o, RunOutcome::Partial(w) if w.contains("reconnected 1 time(s)")));
        assert_eq!(RunOutcome::parse(&o.to_string()), o);
        // Cancelled stays cancelled: its words once read back as a failure.
        let mut cut = summary(StopReason::Cancelled, 4, 0, 0);
        cut.reconnected = vec!["node rabbit-2 lost".into()];
        let o = cut.outcome();
        assert!(matches!(&o, RunOutcome::Cancelled(Some(w)) if w.starts_with("reconnected 1")));
        assert_eq!(RunOutcome::parse(&o.to_string()), o);
    }

    #[test]
    fn a_canary_that_stopped_the_run_is_its_outcome_and_never_completed() {
        use crate::domain::canary::{CanaryDecision, CanaryRecord};
        let record = |decision| CanaryRecord {
            dlq: "orders.dlq".into(),
            size: 10,
            moved: 10,
            came_back: 9,
            exact: true,
            top_failure: Some(("CardDeclined: card declined".into(), 9)),
            waited_ms: 1_200,
            decision,
            left_untouched: 190,
        };
        let mut s = summary(StopReason::LimitReached, 10, 0, 0);
        s.canary = Some(record(CanaryDecision::CameBack));
        assert!(!s.completed());
        let out = s.outcome().to_string();
        assert!(
            out.starts_with("partial: canary: 9 of 10 came back within 2 s"),
            "{out}"
        );
        assert!(out.contains("190 left in orders.dlq untouched"), "{out}");
        s.canary = Some(record(CanaryDecision::Cancelled));
        assert!(
            s.outcome()
                .to_string()
                .starts_with("cancelled: canary: cancelled"),
            "{}",
            s.outcome().to_string()
        );
        s.canary = Some(CanaryRecord {
            came_back: 0,
            top_failure: None,
            left_untouched: 0,
            ..record(CanaryDecision::WentAhead)
        });
        assert_eq!(s.outcome().to_string(), "completed");
    }

    #[test]
    fn the_outcome_is_completed_only_when_everything_selected_moved() {
        let ok = summary(StopReason::ReachedStartDepth, 10, 0, 0);
        assert!(ok.completed());
        assert_eq!(ok.outcome().to_string(), "completed");
        assert_eq!(
            summary(StopReason::QueueEmpty, 3, 0, 0)
                .outcome()
                .to_string(),
            "completed"
        );
        assert_eq!(
            summary(StopReason::LimitReached, 3, 0, 0)
                .outcome()
                .to_string(),
            "completed"
        );

        let none_moved = summary(StopReason::ReachedStartDepth, 0, 0, 50);
        assert!(!none_moved.completed());
        assert!(
            none_moved.outcome().to_string().starts_with("failed"),
            "0 of 50 moved"
        );
        let some = summary(StopReason::ReachedStartDepth, 8, 1, 1);
        assert!(
            some.outcome()
                .to_string()
                .starts_with("partial: 1 failed, 1 returned")
        );
        let window = summary(StopReason::WindowFull { window: 5 }, 8, 0, 0);
        assert!(window.outcome().to_string().starts_with("partial"));
        let stalled = summary(
            StopReason::Stalled {
                idle_secs: 10,
                ready: 4,
            },
            8,
            0,
            0,
        );
        assert!(
            stalled
                .outcome()
                .to_string()
                .starts_with("failed: no delivery for 10s")
        );
        assert_eq!(
            summary(StopReason::Cancelled, 8, 0, 0)
                .outcome()
                .to_string(),
            "cancelled"
        );

        let mut dup = summary(StopReason::ReachedStartDepth, 10, 0, 0);
        dup.counts.duplicated = 2;
        assert!(!dup.completed(), "possible duplicates are not a clean run");
        let mut forced = summary(StopReason::Cancelled, 3, 0, 0);
        forced.counts.forced = Some("stopped at once by a second signal".into());
        assert!(
            forced
                .outcome()
                .to_string()
                .starts_with("interrupted: stopped at once")
        );
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

    /// After a wait for the target's backlog the rate counts from the next publish: the slots
    /// that passed meanwhile are not caught up in a burst (with `--rate`, the slower wins).
    #[test]
    fn pacer_restarted_after_a_backlog_wait_does_not_burst() {
        let mut p = Pacer::new(Some(10.0));
        p.published();
        p.start = p.start.and_then(|s| s.checked_sub(Duration::from_secs(5)));
        assert!(
            p.next_slot() + Duration::from_secs(4) < Instant::now(),
            "40 slots behind"
        );
        p.restart();
        p.published();
        let gap = p.next_slot().saturating_duration_since(Instant::now());
        assert!(
            gap > Duration::from_millis(50),
            "the next one waits its turn: {gap:?}"
        );
    }
}
