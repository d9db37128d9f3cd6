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

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet, VecDeque};
use std::future::Future;
use std::pin::Pin;
use std::task::Poll;
use std::time::{Duration, Instant};

use futures_util::StreamExt;
use futures_util::stream::FuturesUnordered;
use lapin::Confirmation;
use lapin::options::{
    BasicAckOptions, BasicCancelOptions, BasicConsumeOptions, BasicNackOptions,
    BasicPublishOptions, BasicQosOptions, ConfirmSelectOptions, QueueDeclareOptions,
};
use lapin::types::FieldTable;
use tokio::sync::watch;

use crate::broker::amqp;
use crate::domain::explain;
use crate::domain::identity;
use crate::domain::message::DeadLetter;
use crate::domain::quorum::BrowsePolicy;
use crate::domain::replay::{self as plan, ReplayOptions};
use crate::domain::selection::Selection;

/// Where a planned publish goes: exchange and routing key.
pub type TargetKey = (String, String);

/// One replay run, fully decided before anything moves.
#[derive(Clone, Debug)]
pub struct Job {
    pub dlq: String,
    pub selection: Selection,
    /// Move at most this many.
    pub limit: Option<u64>,
    /// Messages per second; `None` = as fast as confirms allow.
    pub rate: Option<f64>,
    /// Unselected (or returned, or failed) messages held back at most before stopping.
    pub window: usize,
    pub keep_attempts: bool,
    /// `--to QUEUE`.
    pub to: Option<String>,
    /// Targets checked by the preflight (they exist, and fan-out was allowed or absent). A
    /// message whose plan points elsewhere is not published.
    pub allowed_targets: HashSet<TargetKey>,
    /// Wait-queue targets and the consuming queue each is replaced with (from the preflight).
    pub redirects: BTreeMap<TargetKey, plan::ReplayTarget>,
    /// How long ago each message died as far as Warren knows, by message key (for `age:`).
    pub ages: HashMap<String, u64>,
    /// Quorum delivery-limit safety, as for browsing.
    pub quorum: BrowsePolicy,
}

/// Why the run ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum StopReason {
    /// Went through everything the queue held when the replay started.
    ReachedStartDepth,
    /// The DLQ ran dry (or nothing arrived for a while).
    QueueEmpty,
    LimitReached,
    Cancelled,
    /// The hold-back window filled: more matching messages may lie further down.
    WindowFull {
        window: usize,
    },
    /// A quorum message came close to its delivery limit; returning more would risk losing it.
    QuorumSafety(String),
    /// The connection or a channel failed.
    ConnectionLost(String),
}

impl std::fmt::Display for StopReason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            StopReason::ReachedStartDepth => {
                f.write_str("went through every message the queue held at the start")
            }
            StopReason::QueueEmpty => f.write_str("the queue is empty"),
            StopReason::LimitReached => f.write_str("the limit was reached"),
            StopReason::Cancelled => {
                f.write_str("cancelled; in-flight messages were settled, the rest untouched")
            }
            StopReason::WindowFull { window } => write!(
                f,
                "held back {window} unselected messages (the window); more matching messages may lie further down — raise --window or replay again"
            ),
            StopReason::QuorumSafety(why) => write!(f, "stopped for quorum safety: {why}"),
            StopReason::ConnectionLost(why) => write!(f, "the connection was lost: {why}"),
        }
    }
}

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
}

/// The outcome of a run.
#[derive(Clone, Debug)]
pub struct Summary {
    pub progress: Progress,
    pub depth_at_start: u64,
    /// Messages looked at and handed back because they were not selected.
    pub held_back: u64,
    /// Per target (expected queue, else exchange), how many moved.
    pub targets: BTreeMap<String, u64>,
    /// Keys of the moved messages (message id where there is one), for the audit.
    pub moved_ids: Vec<String>,
    /// Why messages were returned or failed, with counts.
    pub problems: BTreeMap<String, u64>,
    /// Confirmed by the target but not acknowledged in the DLQ because the connection failed:
    /// these are now in both places.
    pub duplicated: u64,
    pub stop: StopReason,
}

#[derive(Debug, thiserror::Error)]
pub enum ReplayError {
    #[error("cannot open a channel to RabbitMQ: {0}")]
    Channel(String),
    #[error("queue '{queue}' cannot be read: {reason}")]
    Queue { queue: String, reason: String },
}

/// Settles DLQ deliveries with as few frames as possible: one `multiple` ack for a run of ready
/// tags below anything still held or in flight, single acks above. Never acks a tag twice (the
/// broker closes the channel for that) and never acks a held tag.
#[derive(Debug, Default)]
pub struct AckTracker {
    ready: BTreeSet<u64>,
    /// Received and not yet decided (being planned or awaiting a confirm).
    pending: BTreeSet<u64>,
    /// To be handed back at the end.
    held: BTreeSet<u64>,
    max_seen: u64,
}

/// One ack frame to send.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AckOp {
    pub tag: u64,
    pub multiple: bool,
}

impl AckTracker {
    pub fn received(&mut self, tag: u64) {
        self.pending.insert(tag);
        self.max_seen = self.max_seen.max(tag);
    }
    pub fn ready(&mut self, tag: u64) {
        self.pending.remove(&tag);
        self.ready.insert(tag);
    }
    pub fn hold(&mut self, tag: u64) {
        self.pending.remove(&tag);
        self.held.insert(tag);
    }
    pub fn held(&self) -> usize {
        self.held.len()
    }
    pub fn pending(&self) -> usize {
        self.pending.len()
    }
    /// Confirmed tags not yet acknowledged.
    pub fn ready_len(&self) -> usize {
        self.ready.len()
    }
    pub fn max_seen(&self) -> u64 {
        self.max_seen
    }
    /// Tags that are not yet acknowledged (held or pending).
    pub fn unsettled(&self) -> usize {
        self.held.len() + self.pending.len() + self.ready.len()
    }

    /// The ack frames that settle the ready tags that can be settled well now. Tags above a
    /// pending one wait for it: confirms resolve in bursts and out of order, and acknowledging
    /// them one by one then would cost a frame each, where waiting lets one `multiple` ack cover
    /// the run. Tags above a held one can never be covered by a `multiple` ack (it would take the
    /// held message too), so those are acknowledged singly.
    pub fn flush(&mut self) -> Vec<AckOp> {
        let eligible: Vec<u64> = match self.pending.first() {
            Some(&low) => self.ready.range(..low).copied().collect(),
            None => self.ready.iter().copied().collect(),
        };
        let held_low = self.held.first().copied();
        let mut ops = Vec::new();
        let (covered, single): (Vec<u64>, Vec<u64>) = eligible
            .iter()
            .partition(|&&t| held_low.is_none_or(|h| t < h));
        if let Some(&top) = covered.last() {
            ops.push(AckOp {
                tag: top,
                multiple: true,
            });
        }
        ops.extend(single.iter().map(|&tag| AckOp {
            tag,
            multiple: false,
        }));
        for t in &eligible {
            self.ready.remove(t);
        }
        ops
    }
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

struct InFlight {
    key: String,
    target: String,
}

/// How long the DLQ may stay silent before the run assumes it is empty.
const IDLE: Duration = Duration::from_secs(2);
/// Flush acks after this many ready tags, whenever nothing is pending, and at least every
/// [`ACK_EVERY`]: a confirmed message that is not yet acknowledged is replayed again if the
/// connection dies, so a slow (throttled) run must not sit on a large batch.
const ACK_BATCH: usize = 256;
const ACK_EVERY: Duration = Duration::from_millis(50);

/// Runs a replay. `cancel` flips to `true` to stop: in-flight messages are settled correctly and
/// the rest is left untouched. `on_progress` is called a few times a second.
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
pub async fn run_split(
    consume_conn: &lapin::Connection,
    publish_conn: &lapin::Connection,
    job: &Job,
    cancel: watch::Receiver<bool>,
    mut on_progress: impl FnMut(&Progress),
) -> Result<Summary, ReplayError> {
    let consume = consume_conn
        .create_channel()
        .await
        .map_err(|e| ReplayError::Channel(e.to_string()))?;
    let publish = publish_conn
        .create_channel()
        .await
        .map_err(|e| ReplayError::Channel(e.to_string()))?;
    publish
        .confirm_select(ConfirmSelectOptions::default())
        .await
        .map_err(|e| ReplayError::Channel(e.to_string()))?;

    let queue_err = |e: lapin::Error| ReplayError::Queue {
        queue: job.dlq.clone(),
        reason: e.to_string(),
    };
    let dlq_name = amqp::short("the queue name", &job.dlq).map_err(|e| ReplayError::Queue {
        queue: job.dlq.clone(),
        reason: e.to_string(),
    })?;
    let declared = consume
        .queue_declare(
            dlq_name.clone(),
            QueueDeclareOptions {
                passive: true,
                ..Default::default()
            },
            FieldTable::default(),
        )
        .await
        .map_err(queue_err)?;
    let depth_at_start = u64::from(declared.message_count());

    // Held messages stay unacknowledged, so the prefetch must leave room for them.
    let prefetch: u16 = match job.selection {
        // Confirms for persistent messages come back in batches (the broker syncs to disk
        // periodically), so the pipeline needs room for more than a batch in flight.
        Selection::All if job.allowed_targets.len() <= 1 => 2000,
        _ => u16::try_from(job.window.saturating_add(1000)).unwrap_or(u16::MAX),
    };
    consume
        .basic_qos(prefetch, BasicQosOptions::default())
        .await
        .map_err(queue_err)?;

    let mut summary = Summary {
        progress: Progress {
            remaining: depth_at_start,
            ..Default::default()
        },
        depth_at_start,
        held_back: 0,
        targets: BTreeMap::new(),
        moved_ids: Vec::new(),
        problems: BTreeMap::new(),
        duplicated: 0,
        stop: StopReason::ReachedStartDepth,
    };
    if depth_at_start == 0 {
        summary.stop = StopReason::QueueEmpty;
        return Ok(summary);
    }

    let tag = format!("warren-replay-{}", std::process::id());
    let mut consumer = consume
        .basic_consume(
            dlq_name,
            amqp::short("the consumer tag", &tag).unwrap_or_default(),
            BasicConsumeOptions::default(),
            FieldTable::default(),
        )
        .await
        .map_err(queue_err)?;

    let started = Instant::now();
    let mut pacer = Pacer::new(job.rate);
    let mut acks = AckTracker::default();
    let mut inflight: FuturesUnordered<InFlightFuture> = FuturesUnordered::new();
    // Publishes that completed on their first poll (a closed channel fails at once).
    let mut early: VecDeque<(u64, lapin::Result<Confirmation>)> = VecDeque::new();
    let mut inflight_meta: HashMap<u64, InFlight> = HashMap::new();
    let mut seen: u64 = 0;
    let mut published: u64 = 0;
    let mut taking = true;
    let mut stop: Option<StopReason> = None;
    let mut cancel = cancel;
    let mut last_progress = Instant::now();
    let mut last_ack = Instant::now();
    // A selected delivery waiting for its rate slot.
    let mut waiting: Option<(u64, String, String, plan::ReplayPlan, DeadLetter)> = None;

    macro_rules! problem {
        ($why:expr) => {
            *summary.problems.entry($why).or_insert(0) += 1
        };
    }

    loop {
        if !taking && waiting.is_none() && inflight.is_empty() && early.is_empty() {
            break;
        }
        let slot = pacer.next_slot();
        tokio::select! {
            biased;
            changed = cancel.changed(), if taking || waiting.is_some() => {
                if changed.is_err() || *cancel.borrow() {
                    taking = false;
                    stop.get_or_insert(StopReason::Cancelled);
                    if let Some((t, ..)) = waiting.take() {
                        acks.hold(t);
                    }
                }
            }
            confirm = next_confirm(&mut early, &mut inflight), if !inflight.is_empty() || !early.is_empty() => {
                let Some((t, result)): Option<(u64, lapin::Result<Confirmation>)> = confirm else { continue };
                let meta: Option<InFlight> = inflight_meta.remove(&t);
                match result {
                    Ok(Confirmation::Ack(None)) => {
                        acks.ready(t);
                        summary.progress.moved += 1;
                        if let Some(m) = meta {
                            *summary.targets.entry(m.target).or_insert(0) += 1;
                            summary.moved_ids.push(m.key);
                        }
                    }
                    Ok(Confirmation::Ack(Some(ret))) => {
                        acks.hold(t);
                        summary.progress.returned += 1;
                        problem!(format!("returned by the broker: {} {}", ret.reply_code, ret.reply_text));
                    }
                    Ok(Confirmation::Nack(_)) => {
                        acks.hold(t);
                        summary.progress.failed += 1;
                        problem!("the broker refused the publish (nack)".to_string());
                    }
                    Ok(Confirmation::NotRequested) => {
                        // Cannot happen on a confirm channel; never ack what was not confirmed.
                        acks.hold(t);
                        summary.progress.failed += 1;
                        problem!("no publisher confirm".to_string());
                    }
                    Err(e) => {
                        acks.hold(t);
                        summary.progress.failed += 1;
                        problem!(format!("publish failed: {e}"));
                        taking = false;
                        stop.get_or_insert(StopReason::ConnectionLost(e.to_string()));
                    }
                }
            }
            _ = until(slot), if waiting.is_some() => {
                let Some((t, key, target, p, msg)) = waiting.take() else { continue };
                let Some(target_key) = p.target.as_ref().map(|tg| (tg.exchange.clone(), tg.routing_key.clone())) else {
                    acks.hold(t);
                    continue;
                };
                let props = match amqp::properties_to_amqp(&msg.properties, &p.headers) {
                    Ok(props) => props,
                    Err(e) => {
                        acks.hold(t);
                        summary.progress.failed += 1;
                        problem!(format!("cannot be re-encoded for publishing: {e}"));
                        continue;
                    }
                };
                // Publishes are not awaited one by one: lapin resolves a publish only once the IO
                // loop has written it, a thread hop per message. The first poll hands the frames
                // to lapin, so messages still go out in the order they were read; the rest (the
                // write, then the confirm) completes in `inflight`. A publish that fails (closed
                // channel) completes with the error and is handled with the confirms.
                // Names from headers and bodies: one too long for AMQP holds this message.
                let (exchange, routing_key) = match (
                    amqp::short("the exchange name", &target_key.0),
                    amqp::short("the routing key", &target_key.1),
                ) {
                    (Ok(e), Ok(r)) => (e, r),
                    (Err(e), _) | (_, Err(e)) => {
                        acks.hold(t);
                        summary.progress.failed += 1;
                        problem!(format!("cannot be published: {e}"));
                        continue;
                    }
                };
                let ch = publish.clone();
                let mut fut: InFlightFuture = Box::pin(async move {
                    let r = match ch
                        .basic_publish(
                            exchange,
                            routing_key,
                            BasicPublishOptions { mandatory: true, ..Default::default() },
                            &msg.body,
                            props,
                        )
                        .await
                    {
                        Ok(confirm) => confirm.await,
                        Err(e) => Err(e),
                    };
                    (t, r)
                });
                match futures_util::poll!(fut.as_mut()) {
                    Poll::Ready(done) => early.push_back(done),
                    Poll::Pending => inflight.push(fut),
                }
                pacer.published();
                published += 1;
                inflight_meta.insert(t, InFlight { key, target });
                if job.limit.is_some_and(|l| published >= l) {
                    taking = false;
                    stop.get_or_insert(StopReason::LimitReached);
                }
            }
            next = tokio::time::timeout(IDLE, consumer.next()), if taking && waiting.is_none() => {
                let delivery = match next {
                    Err(_) => {
                        taking = false;
                        stop.get_or_insert(StopReason::QueueEmpty);
                        continue;
                    }
                    // The stream ends only when the broker cancelled the consumer or the channel
                    // closed: not an empty queue, and not a success.
                    Ok(None) => {
                        taking = false;
                        stop.get_or_insert(StopReason::ConnectionLost(
                            "the broker cancelled the consumer (was the queue deleted?) or closed the channel".into(),
                        ));
                        continue;
                    }
                    Ok(Some(Err(e))) => {
                        taking = false;
                        stop.get_or_insert(StopReason::ConnectionLost(e.to_string()));
                        continue;
                    }
                    Ok(Some(Ok(d))) => d,
                };
                let t = delivery.delivery_tag;
                acks.received(t);
                seen += 1;
                if seen >= depth_at_start {
                    // "All" is what the queue held at the start: what arrives now waits for the next run.
                    taking = false;
                    stop.get_or_insert(StopReason::ReachedStartDepth);
                }
                // The whole body: replay publishes exactly what it read.
                let msg = amqp::dead_letter_from_delivery(&job.dlq, seen - 1, delivery, usize::MAX);
                let exp = explain::explain(&msg);
                let key = identity::message_key(&msg);
                let age = job.ages.get(&key).copied();
                let delivery_count = msg.delivery.delivery_count;
                let near_limit = delivery_count.is_some_and(|c| !job.quorum.message_safe(c));

                if !job.selection.selects(&msg, &exp, &key, age) {
                    acks.hold(t);
                    summary.held_back += 1;
                } else {
                    let mut p = plan::plan(
                        &msg,
                        &exp,
                        &ReplayOptions { keep_attempts: job.keep_attempts, target_queue: job.to.clone(), now: jiff::Timestamp::now() },
                    );
                    plan::apply_redirect(&mut p, &job.redirects);
                    match refusal(job, &p) {
                        Some(why) => {
                            acks.hold(t);
                            summary.progress.failed += 1;
                            problem!(why);
                        }
                        None => {
                            let target = p
                                .target
                                .as_ref()
                                .map(|tg| tg.expected_queue.clone().unwrap_or_else(|| format!("exchange {}", tg.exchange)))
                                .unwrap_or_default();
                            waiting = Some((t, key, target, p, msg));
                        }
                    }
                }
                if near_limit && waiting.is_none() {
                    taking = false;
                    stop.get_or_insert(StopReason::QuorumSafety(format!(
                        "message {} has been delivered {} times; returning more messages could push them past the queue's delivery limit",
                        seen,
                        delivery_count.unwrap_or(0)
                    )));
                }
                if acks.held() >= job.window {
                    taking = false;
                    stop.get_or_insert(StopReason::WindowFull { window: job.window });
                }
            }
        }

        let ready = acks.ready_len();
        if ready > 0
            && (ready >= ACK_BATCH || acks.pending() == 0 || last_ack.elapsed() >= ACK_EVERY)
        {
            last_ack = Instant::now();
            if let Err(e) = send_acks(&consume, acks.flush()).await {
                // Confirmed by the target but still in the DLQ: they exist twice now.
                summary.duplicated += ready as u64;
                stop.get_or_insert(StopReason::ConnectionLost(e));
                break;
            }
        }
        if last_progress.elapsed() >= Duration::from_millis(200) {
            last_progress = Instant::now();
            update_rate(
                &mut summary.progress,
                started,
                depth_at_start,
                seen,
                job.limit,
            );
            on_progress(&summary.progress);
        }
    }

    // Settle: ack what the broker confirmed, then hand back everything else in one nack. Stop
    // the consumer first and drain what it had already been sent, so no delivery is left for a
    // channel close to return (which would count a delivery on quorum queues).
    // A lost publish channel (e.g. an access refusal) leaves the consuming channel working: its
    // held messages are still handed back here rather than waiting for the connection to close.
    let ready = acks.ready_len() as u64;
    let mut lost = !consume.status().connected();
    if let Err(e) = send_acks(&consume, acks.flush()).await {
        stop = Some(StopReason::ConnectionLost(e));
        lost = true;
        // Confirmed but never acknowledged: the broker requeues them, so they exist twice now.
        summary.duplicated += ready;
    }
    if !lost {
        if consume
            .basic_cancel(
                amqp::short("the consumer tag", &tag).unwrap_or_default(),
                BasicCancelOptions::default(),
            )
            .await
            .is_ok()
        {
            while let Ok(Some(Ok(d))) =
                tokio::time::timeout(Duration::from_millis(500), consumer.next()).await
            {
                acks.received(d.delivery_tag);
                acks.hold(d.delivery_tag);
            }
        }
        let top = acks.max_seen();
        if acks.held() > 0
            && top > 0
            && let Err(e) = consume
                .basic_nack(
                    top,
                    BasicNackOptions {
                        multiple: true,
                        requeue: true,
                    },
                )
                .await
        {
            stop = Some(StopReason::ConnectionLost(format!(
                "handing back held messages failed: {e}"
            )));
        }
        let _ = consume.close(200, "replay done".into()).await;
    }
    if publish.status().connected() {
        let _ = publish.close(200, "replay done".into()).await;
    }

    update_rate(
        &mut summary.progress,
        started,
        depth_at_start,
        seen,
        job.limit,
    );
    summary.progress.eta = None;
    summary.stop = stop.unwrap_or(StopReason::ReachedStartDepth);
    on_progress(&summary.progress);
    Ok(summary)
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
    if !job
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
