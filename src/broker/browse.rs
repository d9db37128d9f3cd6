//! Reading a page of messages from the head of a dead-letter queue without destroying any.
//!
//! Classic and quorum queues: `basic.consume` with manual acks and bounded prefetch, collect the
//! page, cancel the consumer, drain what was already on the wire, then hand every message back
//! with ONE explicit `basic.nack(last tag, multiple, requeue=true)` before closing the channel.
//! Closing the channel would also return them, but on quorum queues that costs a delivery on
//! every version (RabbitMQ 4.3 only makes an explicit nack free), so it is never relied on.
//! Cancelling before the nack keeps the broker from re-delivering the returned messages to us.
//!
//! Auto-delete queues: the broker deletes one, with every message in it, when its last consumer
//! cancels, so such a queue is read with `basic.get` (no consumer at all) and the same one nack:
//! a classic queue puts requeued messages back in their places, so the order is kept.
//!
//! Quorum queues count deliveries: each message's `x-delivery-count` is checked against
//! [`BrowsePolicy`] and browsing stops before any message gets near its delivery limit.
//!
//! Streams: consume from `x-stream-offset` (`first` or a numeric offset), acks only grant credit.
//!
//! What was read is kept by the session (`broker::session`), which decides before any read
//! whether it may cost deliveries again.

use std::time::{Duration, Instant};

use futures_util::StreamExt;
use lapin::options::{
    BasicAckOptions, BasicCancelOptions, BasicConsumeOptions, BasicGetOptions, BasicNackOptions,
    BasicQosOptions, QueueDeclareOptions,
};
use lapin::types::{AMQPValue, FieldTable, LongString, ShortString};
use lapin::{Channel, Connection};

use super::amqp::{dead_letter_from_delivery, frame_too_large, soft_error_code};
use crate::domain::features::QueueType;
use crate::domain::message::DeadLetter;
use crate::domain::quorum::BrowsePolicy;

/// Messages per page unless asked otherwise.
pub const DEFAULT_LIMIT: usize = 200;
/// The largest page Warren reads in one browse: a million, which the TUI lists with the
/// messages themselves in a file (`local::spill`).
pub const MAX_LIMIT: usize = 1_000_000;
/// Largest page on a quorum queue with a delivery limit: prefetch is a 16-bit number, and an
/// unbounded prefetch could pull (and so charge a delivery to) messages we never look at.
pub const MAX_QUORUM_LIMIT: usize = u16::MAX as usize;
/// Body bytes kept in memory per message unless asked otherwise (the real size is always known).
pub const DEFAULT_BODY_CAP: usize = 64 * 1024;
/// Stop when the broker sends nothing for this long although the queue held more ready
/// messages at the start (another consumer took them). A loaded broker took over 2 s to deliver
/// a message with a 10,000-level header here, which cut a page short at the old 2 s.
pub const DEFAULT_IDLE_TIMEOUT: Duration = Duration::from_secs(10);
/// How long the ready count may stay below its highest so far before a browse stops waiting
/// for what it handed back (another consumer may be taking them, which is not our concern).
const RETURN_WAIT: Duration = Duration::from_secs(3);
/// The longest a browse waits for what it handed back while the count still rises, before
/// [`RETURN_PER_MESSAGE`]: a loaded broker took more than 3 s to make 20,000 quorum messages
/// ready again, and the next read, started meanwhile, found 8,160 of a head of 10,000 (a CI
/// rehearsal on 2 cores).
const RETURN_CAP: Duration = Duration::from_secs(30);
/// And this much longer per message handed back. RabbitMQ makes a nack's messages ready again
/// one consumer's batch at a time (a streamed read's 8,192 each); on 4.3 a million of them took
/// longer than the flat 30 s, the wait gave up with 786,432 ready, and the read that followed
/// took those for the whole queue (issue 38). 60 µs each: a million, 90 s in all.
const RETURN_PER_MESSAGE: Duration = Duration::from_micros(60);
/// Streams: once messages flow, this much silence means the end of the log was reached.
pub const STREAM_TAIL_IDLE: Duration = Duration::from_millis(500);
/// Stream consumers get credit in batches of this size (streams require a prefetch).
const STREAM_PREFETCH: u16 = 1000;

/// What to browse and how.
#[derive(Clone, Debug)]
pub struct BrowseRequest {
    pub queue: String,
    /// Messages wanted, from the head (or from `stream_offset`). Clamped to [`MAX_LIMIT`].
    pub limit: usize,
    /// Body bytes kept per message.
    pub body_cap: usize,
    pub queue_type: QueueType,
    /// From [`crate::domain::quorum`]; [`BrowsePolicy::unrestricted`] for classic queues.
    pub policy: BrowsePolicy,
    /// Streams only: start at this offset instead of the first message.
    pub stream_offset: Option<u64>,
    /// Stop when the broker sends nothing for this long.
    pub idle_timeout: Duration,
    /// The queue's depth as the management API reports it, when the caller knows it. Streams
    /// always report 0 over AMQP, so this is what bounds a stream page read from the start
    /// (a stream being appended to would otherwise be read until `limit`); without it a stream
    /// page ends [`STREAM_TAIL_IDLE`] after the last message arrived.
    pub known_depth: Option<u64>,
    /// Streams only: read up to and including this offset (the tail [`stream_tail`] found),
    /// waiting out pauses up to `idle_timeout` instead of taking a short silence for the end,
    /// so a loaded broker cannot cut the read short.
    pub end_offset: Option<u64>,
    /// The queue is deleted when its last consumer cancels: read it without consuming.
    pub auto_delete: bool,
    /// The queue's unacknowledged count as the management API last sampled it: held by
    /// another consumer when the queue has one as the read begins (see [`BrowsePage::end`]).
    pub unacked: Option<u64>,
}

impl BrowseRequest {
    /// A request with the defaults: 200 messages, 64 KiB of body each, 10 s idle timeout.
    pub fn new(queue: impl Into<String>, queue_type: QueueType, policy: BrowsePolicy) -> Self {
        BrowseRequest {
            queue: queue.into(),
            limit: DEFAULT_LIMIT,
            body_cap: DEFAULT_BODY_CAP,
            queue_type,
            policy,
            stream_offset: None,
            idle_timeout: DEFAULT_IDLE_TIMEOUT,
            known_depth: None,
            end_offset: None,
            auto_delete: false,
            unacked: None,
        }
    }
}

/// One page of messages, in queue order, all of them still in the queue.
#[derive(Clone, Debug, PartialEq)]
pub struct BrowsePage {
    /// The messages read, unless they were sent on as they arrived (see [`browse_to`]).
    pub messages: Vec<DeadLetter>,
    /// Messages sent on as they arrived instead of kept in `messages`.
    pub sent: u64,
    /// The queue's message count when browsing started (streams: `known_depth` when given, else
    /// the 0 that the broker reports for every stream).
    pub queue_depth_at_start: u64,
    pub stopped: StopReason,
    /// Messages delivered to Warren, kept or not (a safety stop and the drain after the cancel
    /// deliver some that are not kept): each was handed back, which is what a read costs.
    pub delivered: u64,
    /// The highest `x-delivery-count` among the delivered messages, as delivered.
    pub max_delivery_count: Option<u64>,
    /// The highest `x-acquired-count` (RabbitMQ 4.3+: every return, counted or not).
    pub max_acquired_count: Option<u64>,
    /// Every delivered message was handed back with the explicit nack.
    pub returned_explicitly: bool,
    /// Not read now: the session's earlier read of a queue whose reads cost deliveries.
    pub reused: bool,
    /// What the queue held as the read ended, asked while the read still held every message it
    /// was sent (ready beside them, plus them); `None`: not asked (a stream, a failed count).
    pub held_at_end: Option<u64>,
    /// Messages another consumer of the queue held unacknowledged as the read began.
    pub held_elsewhere: u64,
}

impl Default for BrowsePage {
    fn default() -> Self {
        BrowsePage {
            messages: Vec::new(),
            sent: 0,
            queue_depth_at_start: 0,
            stopped: StopReason::Exhausted,
            delivered: 0,
            max_delivery_count: None,
            max_acquired_count: None,
            returned_explicitly: true,
            reused: false,
            held_at_end: None,
            held_elsewhere: 0,
        }
    }
}

impl BrowsePage {
    /// How many messages the read kept, in the page or sent on.
    pub fn len(&self) -> usize {
        self.messages.len() + usize::try_from(self.sent).unwrap_or(usize::MAX)
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// How the read ended, judged by the one rule (`domain::read_end`): "all" only when what
    /// was read is what the broker counted.
    pub fn end(&self) -> crate::domain::read_end::ReadEnd {
        let figures = crate::domain::read_end::ReadFigures {
            read: self.len() as u64,
            at_start: self.queue_depth_at_start,
            at_end: self.held_at_end,
            held_elsewhere: self.held_elsewhere,
        };
        crate::domain::read_end::judge(&self.stopped, &figures)
    }
}

/// Where a read puts the messages it keeps: in the page, or sent on one at a time as they
/// arrive, so that neither the read nor its caller holds the whole page (a million dead
/// letters are gigabytes decoded). A send waits while the receiver is behind; a receiver that
/// is gone drops what it would have got, and the read goes on to hand every message back.
struct Kept {
    messages: Vec<DeadLetter>,
    to: Option<tokio::sync::mpsc::Sender<DeadLetter>>,
    /// The message taken last, until [`Kept::settle`] sends it.
    waiting: Option<DeadLetter>,
    count: usize,
}

impl Kept {
    fn new(to: Option<tokio::sync::mpsc::Sender<DeadLetter>>, capacity: usize) -> Kept {
        let capacity = if to.is_some() {
            0
        } else {
            capacity.min(10_000)
        };
        Kept {
            messages: Vec::with_capacity(capacity),
            to,
            waiting: None,
            count: 0,
        }
    }

    fn put(&mut self, dl: DeadLetter) {
        self.count += 1;
        if self.to.is_some() {
            self.waiting = Some(dl);
        } else {
            self.messages.push(dl);
        }
    }

    /// Sends on what [`Kept::put`] took, waiting for the receiver.
    async fn settle(&mut self) {
        if let (Some(to), Some(dl)) = (&self.to, self.waiting.take()) {
            let _ = to.send(dl).await;
        }
    }

    fn len(&self) -> usize {
        self.count
    }

    fn is_empty(&self) -> bool {
        self.count == 0
    }

    /// The page's messages and how many were sent on instead.
    fn into_parts(self) -> (Vec<DeadLetter>, u64) {
        let sent = if self.to.is_some() { self.count } else { 0 };
        (self.messages, sent as u64)
    }
}

/// Why a page ended where it did: pure data, judged by [`crate::domain::read_end::judge`].
pub use crate::domain::read_end::StopReason;

/// Why a browse failed. Whatever was read has been handed back before this is returned.
#[derive(Debug, thiserror::Error)]
pub enum BrowseError {
    #[error("queue '{queue}' does not exist in this vhost (it may have been deleted)")]
    QueueNotFound { queue: String },
    #[error(
        "RabbitMQ refused to let this user read queue '{queue}': {text}. Reading needs the vhost's read permission"
    )]
    AccessRefused { queue: String, text: String },
    #[error("queue '{queue}' is used by an exclusive consumer or connection: {text}")]
    Locked { queue: String, text: String },
    /// Browsing this queue now would put messages at risk.
    #[error("{reason}")]
    Refused { queue: String, reason: String },
    #[error("RabbitMQ refused to browse '{queue}': {text} ({code})")]
    Broker {
        queue: String,
        code: u16,
        text: String,
    },
    #[error(
        "a message in '{queue}' has properties larger than one {frame_max}-byte AMQP frame, the \
         largest this broker allows (its frame_max), and RabbitMQ sends them in one frame: the \
         x-death header the broker adds when it dead-letters can push a header over. No AMQP \
         client can read that message until the broker's frame_max is raised (rabbitmq.conf: \
         frame_max = 262144, then restart the node; Warren accepts up to 262144). Nothing was \
         removed: what was delivered went back to the queue when the connection closed (on a \
         quorum queue with a delivery limit that return cost each message a delivery, which \
         Warren's read ledger counts)"
    )]
    FrameTooLarge { queue: String, frame_max: u32 },
    #[error(
        "lost the AMQP connection while browsing '{queue}': {source}. Unacknowledged messages go back to the queue when the channel closes; browse again when the broker is reachable"
    )]
    Connection {
        queue: String,
        #[source]
        source: lapin::Error,
    },
}

fn classify(queue: &str, e: lapin::Error) -> BrowseError {
    let queue = queue.to_string();
    if frame_too_large(&e) {
        return BrowseError::FrameTooLarge {
            queue,
            frame_max: 0,
        };
    }
    match soft_error_code(&e) {
        Some((404, _)) => BrowseError::QueueNotFound { queue },
        Some((403, text)) => BrowseError::AccessRefused { queue, text },
        Some((405, text)) => BrowseError::Locked { queue, text },
        Some((code, text)) => BrowseError::Broker { queue, code, text },
        None => BrowseError::Connection { queue, source: e },
    }
}

/// Reads one page as described in the module documentation. On a quorum queue whose head
/// message is already too close to its delivery limit, returns [`BrowseError::Refused`].
pub async fn browse(conn: &Connection, req: &BrowseRequest) -> Result<BrowsePage, BrowseError> {
    browse_to(conn, req, None).await
}

/// [`browse`], each message kept sent on `to` as it arrives rather than kept in the page
/// (`None`: kept in the page). The page's `sent` counts them.
pub async fn browse_to(
    conn: &Connection,
    req: &BrowseRequest,
    to: Option<tokio::sync::mpsc::Sender<DeadLetter>>,
) -> Result<BrowsePage, BrowseError> {
    if !req.policy.allowed {
        return Err(BrowseError::Refused {
            queue: req.queue.clone(),
            reason: req
                .policy
                .reason
                .clone()
                .unwrap_or_else(|| "browsing this queue is not safe".to_string()),
        });
    }
    let channel = conn
        .create_channel()
        .await
        .map_err(|e| classify(&req.queue, e))?;
    let result = match req.queue_type {
        QueueType::Stream => browse_stream(&channel, req, Kept::new(to, req.limit)).await,
        // A plugin's queue type is read like a classic queue: consume and hand back.
        QueueType::Classic | QueueType::Quorum | QueueType::Other(_) => {
            browse_queue(&channel, req, to).await
        }
    };
    // Everything was handed back explicitly; closing only releases the channel. A failure here
    // (the channel already closed by an error) changes nothing for the messages.
    let _ = channel.close(200, "browse done".into()).await;
    result.map_err(|e| with_frame(conn, e))
}

/// A connection lost over a frame too large, said as such, with the negotiated frame size (the
/// error a consumer sees may only say that the connection closed).
fn with_frame(conn: &Connection, e: BrowseError) -> BrowseError {
    let frame_max = conn.configuration().frame_max();
    match e {
        BrowseError::FrameTooLarge { queue, .. } => BrowseError::FrameTooLarge { queue, frame_max },
        BrowseError::Connection { queue, source } if frame_too_large(&source) => {
            BrowseError::FrameTooLarge { queue, frame_max }
        }
        other => other,
    }
}

async fn depth(channel: &Channel, queue: &str) -> Result<u64, BrowseError> {
    Ok(u64::from(declared(channel, queue).await?.message_count()))
}

/// A passive declare: the queue's ready count and consumers, now.
async fn declared(channel: &Channel, queue: &str) -> Result<lapin::Queue, BrowseError> {
    channel
        .queue_declare(
            short(queue)?,
            QueueDeclareOptions {
                passive: true,
                ..QueueDeclareOptions::default()
            },
            FieldTable::default(),
        )
        .await
        .map_err(|e| classify(queue, e))
}

/// True when a passive declare over AMQP finds the queue with no ready message and no
/// consumer, now (the management API's figures are a sample seconds old). Any failure: false.
pub(crate) async fn declared_empty(conn: &Connection, queue: &str) -> bool {
    let Ok(channel) = conn.create_channel().await else {
        return false;
    };
    let empty = declared(&channel, queue)
        .await
        .is_ok_and(|q| q.message_count() == 0 && q.consumer_count() == 0);
    let _ = channel.close(200, "looked".into()).await;
    empty
}

fn short(queue: &str) -> Result<ShortString, BrowseError> {
    ShortString::try_new(queue).map_err(|_| BrowseError::QueueNotFound {
        queue: queue.chars().take(60).collect(),
    })
}

/// A consumer tag that says who is reading, for anyone looking at the management UI.
fn consumer_tag(n: usize) -> ShortString {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    ShortString::try_new(format!("warren-browse-{}-{nanos}-{n}", std::process::id()))
        .unwrap_or_default()
}

async fn browse_queue(
    channel: &Channel,
    req: &BrowseRequest,
    to: Option<tokio::sync::mpsc::Sender<DeadLetter>>,
) -> Result<BrowsePage, BrowseError> {
    let at_start = declared(channel, &req.queue).await?;
    let depth_at_start = u64::from(at_start.message_count());
    // Another consumer's unacknowledged messages are in the queue, out of any read's sight.
    let held_elsewhere = if at_start.consumer_count() > 0 {
        req.unacked.unwrap_or(0)
    } else {
        0
    };
    let quorum_limited = req.policy.limit.is_some() && req.policy.cost_per_browse > 0;
    let max = if quorum_limited {
        MAX_QUORUM_LIMIT
    } else {
        MAX_LIMIT
    };
    let limit = req.limit.min(max);
    let target = usize::try_from(depth_at_start)
        .unwrap_or(usize::MAX)
        .min(limit);
    if target == 0 {
        let stopped = if limit == 0 {
            StopReason::Limit
        } else {
            StopReason::Exhausted
        };
        return Ok(BrowsePage {
            messages: Vec::new(),
            queue_depth_at_start: depth_at_start,
            stopped,
            held_elsewhere,
            ..BrowsePage::default()
        });
    }
    let streamed = to.is_some();
    let mut read = PageRead {
        kept: Kept::new(to, target),
        tags: Vec::new(),
        last_tag: 0,
        delivered: 0,
        max_count: None,
        max_acquired: None,
        failure: None,
        stopped: StopReason::Idle,
    };
    let how = (quorum_limited, streamed);
    read_page(channel, req, (target, limit), how, &mut read).await;
    let (returned_explicitly, ready_beside) = hand_back(channel, req, &mut read).await;
    if let Some(err) = read.failure {
        return Err(err);
    }
    // The broker applies a nack asynchronously (quorum queues through Raft). Wait until the
    // messages are ready again, so that closing the channel cannot race the nack (a close
    // counts as a delivery even on 4.3) and an immediate second browse sees the real depth.
    wait_until_returned(
        channel,
        &req.queue,
        ready_beside.unwrap_or(0).saturating_add(read.delivered),
        read.delivered,
    )
    .await;
    if read.kept.is_empty()
        && let StopReason::QuorumSafety { reason, .. } = read.stopped
    {
        return Err(BrowseError::Refused {
            queue: req.queue.clone(),
            reason,
        });
    }
    let (messages, sent) = read.kept.into_parts();
    Ok(BrowsePage {
        messages,
        sent,
        queue_depth_at_start: depth_at_start,
        stopped: read.stopped,
        delivered: read.delivered,
        max_delivery_count: read.max_count,
        max_acquired_count: read.max_acquired,
        returned_explicitly,
        reused: false,
        held_at_end: ready_beside.map(|r| r.saturating_add(read.delivered)),
        held_elsewhere,
    })
}

/// Reads up to `target` messages into `read`.
///
/// Without acks the broker never sends a consumer more than its prefetch. Where every return
/// costs a delivery, the page is read in growing chunks, one consumer each, and every chunk is
/// checked before the next is asked for: a message too close to its limit stops the read after
/// at most one small chunk was delivered, not after the whole page. Elsewhere one consumer
/// with a prefetch of exactly `target` reads the page and nothing past it (above 65,535, on
/// classic queues only, the prefetch is unbounded and the surplus is handed back too). A page
/// sent on as it arrives is read in chunks of [`STREAMED_CHUNK`], one consumer each: the
/// broker then sends no more than one chunk ahead of the reader, which a million-message
/// page would otherwise find buffered in the client (gigabytes) while it is listed.
async fn read_page(
    channel: &Channel,
    req: &BrowseRequest,
    (target, limit): (usize, usize),
    (quorum_limited, streamed): (bool, bool),
    read: &mut PageRead,
) {
    if req.auto_delete {
        read_by_get(channel, req, target, limit, read).await;
        return;
    }
    let mut chunk = if quorum_limited {
        FIRST_CHUNK
    } else if streamed {
        target.min(STREAMED_CHUNK)
    } else {
        target
    };
    loop {
        let want = chunk.min(target - read.kept.len());
        if !read_chunk(channel, req, want, target, limit, read).await {
            break;
        }
        if quorum_limited {
            chunk = (chunk * 4).min(MAX_CHUNK);
        }
    }
}

/// Hands the read's messages back: the consumers still open are cancelled and drained, then
/// one nack requeues everything delivered. Whether they went back explicitly (no failure, the
/// nack answered), and what was ready beside them (`None`: not known).
async fn hand_back(
    channel: &Channel,
    req: &BrowseRequest,
    read: &mut PageRead,
) -> (bool, Option<u64>) {
    // The consumers still open (a chunk that ended the read) are cancelled and drained now.
    for (tag, mut consumer) in std::mem::take(&mut read.tags) {
        if read.failure.is_some() || !retire(channel, req, &tag, &mut consumer, read).await {
            break;
        }
    }
    let mut returned_explicitly = read.failure.is_none();
    // What is ready beside the messages this read holds: once they are back, at least this
    // much more (a long queue's untouched part alone outnumbers a page handed back).
    // With what the read holds, it is what the queue held as the read ended.
    let ready_beside = if read.last_tag > 0 {
        depth(channel, &req.queue).await.ok()
    } else {
        Some(0)
    };
    if read.last_tag > 0 {
        let nack = channel
            .basic_nack(
                read.last_tag,
                BasicNackOptions {
                    multiple: true,
                    requeue: true,
                },
            )
            .await;
        if let Err(e) = nack {
            returned_explicitly = false;
            if read.failure.is_none() {
                read.failure = Some(classify(&req.queue, e));
            }
        }
    }
    (returned_explicitly, ready_beside)
}

/// A page being read by one or more consumers on one channel.
struct PageRead {
    kept: Kept,
    tags: Vec<(ShortString, lapin::Consumer)>,
    last_tag: u64,
    delivered: u64,
    max_count: Option<u64>,
    max_acquired: Option<u64>,
    failure: Option<BrowseError>,
    stopped: StopReason,
}

/// Quorum reads start with a chunk this small, and grow by 4× up to [`MAX_CHUNK`].
const FIRST_CHUNK: usize = 4;
const MAX_CHUNK: usize = 4096;
/// What a streamed read of a queue asks for at a time (see `browse_queue`): about 10 MiB of
/// 1 KiB dead letters waiting in the client at most.
const STREAMED_CHUNK: usize = 8192;

/// Reads up to `want` more messages with a new consumer whose prefetch is `want`. Returns true
/// when the read should go on with another chunk.
async fn read_chunk(
    channel: &Channel,
    req: &BrowseRequest,
    want: usize,
    target: usize,
    limit: usize,
    read: &mut PageRead,
) -> bool {
    let prefetch = u16::try_from(want).unwrap_or(0);
    if let Err(e) = channel
        .basic_qos(prefetch, BasicQosOptions { global: false })
        .await
    {
        read.failure = Some(classify(&req.queue, e));
        return false;
    }
    let tag = consumer_tag(read.tags.len());
    let name = match short(&req.queue) {
        Ok(n) => n,
        Err(e) => {
            read.failure = Some(e);
            return false;
        }
    };
    let consumer = match channel
        .basic_consume(
            name,
            tag.clone(),
            BasicConsumeOptions::default(),
            FieldTable::default(),
        )
        .await
    {
        Ok(c) => c,
        Err(e) => {
            read.failure = Some(classify(&req.queue, e));
            return false;
        }
    };
    let mut consumer = consumer;
    let more = fill(&mut consumer, req, want, target, limit, read).await;
    if more {
        // Its window is full, so the broker sends it nothing more: cancelled now rather than
        // when the page ends, so that the buffer the client grew for its deliveries goes with
        // it (kept to the end, a million-message page's 123 consumers held about 100 MiB).
        return retire(channel, req, &tag, &mut consumer, read).await;
    }
    // Kept for the cancel and the drain when the page ends.
    read.tags.push((tag, consumer));
    more
}

/// Cancels a chunk's consumer first, so that nothing handed back is delivered to it again, then
/// drains what the broker had already sent it: those are unacknowledged too and must be part of
/// the one nack. False when the channel failed.
async fn retire(
    channel: &Channel,
    req: &BrowseRequest,
    tag: &ShortString,
    consumer: &mut lapin::Consumer,
    read: &mut PageRead,
) -> bool {
    if let Err(e) = channel
        .basic_cancel(tag.clone(), BasicCancelOptions::default())
        .await
    {
        read.failure = Some(classify(&req.queue, e));
        return false;
    }
    loop {
        match tokio::time::timeout(Duration::from_secs(5), consumer.next()).await {
            Ok(Some(Ok(d))) => {
                read.last_tag = read.last_tag.max(d.delivery_tag);
                read.delivered += 1;
                let (count, acquired) = counts_of(&d);
                read.max_count = read.max_count.max(count);
                read.max_acquired = read.max_acquired.max(acquired);
            }
            Ok(Some(Err(e))) => {
                read.failure = Some(classify(&req.queue, e));
                return false;
            }
            Ok(None) | Err(_) => return true,
        }
    }
}

/// Takes up to `want` deliveries from the chunk's consumer. Returns true when the page wants
/// another chunk.
async fn fill(
    consumer: &mut lapin::Consumer,
    req: &BrowseRequest,
    want: usize,
    target: usize,
    limit: usize,
    read: &mut PageRead,
) -> bool {
    let mut got = 0;
    while got < want {
        match tokio::time::timeout(req.idle_timeout, consumer.next()).await {
            Err(_) => {
                read.stopped = StopReason::Idle;
                return false;
            }
            Ok(None) => {
                read.failure = Some(BrowseError::Broker {
                    queue: req.queue.clone(),
                    code: 0,
                    text: "the broker cancelled the consumer (queue deleted?)".to_string(),
                });
                return false;
            }
            Ok(Some(Err(e))) => {
                read.failure = Some(classify(&req.queue, e));
                return false;
            }
            Ok(Some(Ok(delivery))) => {
                got += 1;
                let more = take(req, delivery, target, limit, read);
                read.kept.settle().await;
                if !more {
                    return false;
                }
            }
        }
    }
    true
}

/// Keeps one delivered message. Returns true when the page wants more.
fn take(
    req: &BrowseRequest,
    delivery: lapin::message::Delivery,
    target: usize,
    limit: usize,
    read: &mut PageRead,
) -> bool {
    read.last_tag = read.last_tag.max(delivery.delivery_tag);
    read.delivered += 1;
    let (count, acquired) = counts_of(&delivery);
    read.max_count = read.max_count.max(count);
    read.max_acquired = read.max_acquired.max(acquired);
    let c = count.unwrap_or(0);
    if !req.policy.message_safe(c) {
        read.stopped = StopReason::QuorumSafety {
            delivery_count: c,
            reason: req.policy.explain(Some(c)),
        };
        return false;
    }
    let position = read.kept.len() as u64;
    read.kept.put(dead_letter_from_delivery(
        &req.queue,
        position,
        delivery,
        req.body_cap,
    ));
    if read.kept.len() >= target {
        read.stopped = if read.kept.len() >= limit {
            StopReason::Limit
        } else {
            StopReason::Exhausted
        };
        return false;
    }
    true
}

/// Reads the page one `basic.get` at a time, keeping every message unacknowledged: no consumer
/// is ever registered, so an auto-delete queue is never left by its last one. An empty answer
/// before `target` means another client took messages since the depth was read.
async fn read_by_get(
    channel: &Channel,
    req: &BrowseRequest,
    target: usize,
    limit: usize,
    read: &mut PageRead,
) {
    let name = match short(&req.queue) {
        Ok(n) => n,
        Err(e) => {
            read.failure = Some(e);
            return;
        }
    };
    loop {
        let got = channel.basic_get(name.clone(), BasicGetOptions { no_ack: false });
        match tokio::time::timeout(req.idle_timeout, got).await {
            Err(_) | Ok(Ok(None)) => {
                read.stopped = StopReason::Idle;
                return;
            }
            Ok(Err(e)) => {
                read.failure = Some(classify(&req.queue, e));
                return;
            }
            Ok(Ok(Some(m))) => {
                let more = take(req, m.delivery, target, limit, read);
                read.kept.settle().await;
                if !more {
                    return;
                }
            }
        }
    }
}

/// `x-delivery-count` and `x-acquired-count` (4.3+) as the broker delivered them.
fn counts_of(d: &lapin::message::Delivery) -> (Option<u64>, Option<u64>) {
    let Some(headers) = d.properties.headers().as_ref() else {
        return (None, None);
    };
    let get = |key: &str| {
        headers
            .inner()
            .iter()
            .find(|(k, _)| k.as_str() == key)
            .and_then(|(_, v)| match v {
                AMQPValue::LongLongInt(n) => u64::try_from(*n).ok(),
                AMQPValue::LongInt(n) => u64::try_from(*n).ok(),
                AMQPValue::LongUInt(n) => Some(u64::from(*n)),
                AMQPValue::ShortInt(n) => u64::try_from(*n).ok(),
                AMQPValue::ShortUInt(n) => Some(u64::from(*n)),
                AMQPValue::ShortShortInt(n) => u64::try_from(*n).ok(),
                AMQPValue::ShortShortUInt(n) => Some(u64::from(*n)),
                _ => None,
            })
    };
    (get("x-delivery-count"), get("x-acquired-count"))
}

/// Polls the queue's ready count until it is `ready` again (what was ready beside the read,
/// plus what the read handed back): while the count rises, for up to [`RETURN_CAP`]; once it
/// has not passed its highest for [`RETURN_WAIT`], no longer (another consumer may be taking
/// them, which is not our concern). Measured: a read of the whole of a million right after a
/// read of 100,000 began while they were still going back, and stopped at 990,112 as "all".
async fn wait_until_returned(channel: &Channel, queue: &str, ready: u64, handed_back: u64) {
    if ready == 0 {
        return;
    }
    let start = Instant::now();
    let cap = RETURN_CAP
        + RETURN_PER_MESSAGE.saturating_mul(u32::try_from(handed_back).unwrap_or(u32::MAX));
    let (mut highest, mut rose) = (None, Instant::now());
    // "Has not risen for a while" ends the wait only once the returns began: a loaded quorum
    // queue can take longer than that to apply the first of them (seen in CI: depth 0 for over
    // 3 s after handing back 10,000, and the next read found nothing), and that is no stall.
    let begun = |h: Option<u64>| h.is_some_and(|h| h > 0);
    while start.elapsed() < cap && (!begun(highest) || rose.elapsed() < RETURN_WAIT) {
        match depth(channel, queue).await {
            Ok(d) if d >= ready => return,
            Ok(d) => {
                if highest.is_none_or(|h| d > h) {
                    (highest, rose) = (Some(d), Instant::now());
                }
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
            Err(_) => return,
        }
    }
}

async fn browse_stream(
    channel: &Channel,
    req: &BrowseRequest,
    mut kept: Kept,
) -> Result<BrowsePage, BrowseError> {
    // Streams always report 0 messages to queue.declare: only the caller's figure (from the
    // management API) can bound the page; the declare still checks that the stream exists.
    let declared = depth(channel, &req.queue).await?;
    let depth_at_start = req.known_depth.unwrap_or(declared);
    let limit = req.limit.min(MAX_LIMIT);
    if limit == 0 || req.known_depth == Some(0) {
        return Ok(BrowsePage {
            messages: Vec::new(),
            queue_depth_at_start: depth_at_start,
            stopped: if limit == 0 {
                StopReason::Limit
            } else {
                StopReason::Exhausted
            },
            ..BrowsePage::default()
        });
    }
    let prefetch = u16::try_from(limit)
        .unwrap_or(STREAM_PREFETCH)
        .min(STREAM_PREFETCH);
    channel
        .basic_qos(prefetch, BasicQosOptions { global: false })
        .await
        .map_err(|e| classify(&req.queue, e))?;
    let start = match req.stream_offset {
        Some(o) => AMQPValue::LongLongInt(i64::try_from(o).unwrap_or(i64::MAX)),
        None => AMQPValue::LongString(LongString::from("first")),
    };
    let mut args = FieldTable::default();
    args.insert("x-stream-offset".into(), start);
    let tag = consumer_tag(0);
    let mut consumer = channel
        .basic_consume(
            short(&req.queue)?,
            tag.clone(),
            BasicConsumeOptions::default(),
            args,
        )
        .await
        .map_err(|e| classify(&req.queue, e))?;

    let from = req.stream_offset.unwrap_or(0);
    let mut first_offset: Option<u64> = None;
    let mut unacked: u64 = 0;
    let mut stopped = StopReason::Idle;
    let mut failure = None;
    loop {
        // The end of a stream is silence: once messages flow, a short pause means we are there
        // (unless the caller knows where the end is).
        let idle = if kept.is_empty() || req.end_offset.is_some() {
            req.idle_timeout
        } else {
            req.idle_timeout.min(STREAM_TAIL_IDLE)
        };
        match tokio::time::timeout(idle, consumer.next()).await {
            Err(_) => {
                if req.known_depth.is_none() && req.end_offset.is_none() && !kept.is_empty() {
                    stopped = StopReason::Exhausted;
                }
                break;
            }
            Ok(None) => break,
            Ok(Some(Err(e))) => {
                failure = Some(classify(&req.queue, e));
                break;
            }
            Ok(Some(Ok(delivery))) => {
                let delivery_tag = delivery.delivery_tag;
                let mut dl = dead_letter_from_delivery(&req.queue, 0, delivery, req.body_cap);
                let offset = dl.delivery.stream_offset;
                // A stream consumer may be served from the start of the chunk holding `from`.
                let wanted = offset.is_none_or(|o| o >= from);
                if wanted {
                    let first = *first_offset.get_or_insert(offset.unwrap_or(from));
                    dl.position = offset.unwrap_or(first + kept.len() as u64);
                    kept.put(dl);
                    kept.settle().await;
                }
                // Acks on a stream delete nothing: they grant the consumer more credit.
                unacked += 1;
                if unacked >= u64::from(prefetch / 2).max(1) {
                    let ack = channel
                        .basic_ack(delivery_tag, BasicAckOptions { multiple: true })
                        .await;
                    if let Err(e) = ack {
                        failure = Some(classify(&req.queue, e));
                        break;
                    }
                    unacked = 0;
                }
                if kept.len() >= limit {
                    stopped = StopReason::Limit;
                    break;
                }
                if let (Some(o), Some(end)) = (offset, req.end_offset)
                    && o >= end
                {
                    stopped = StopReason::Exhausted;
                    break;
                }
                // The stream's count at the start bounds the page when reading from the start,
                // so a stream being appended to does not keep us reading.
                let end = req
                    .known_depth
                    .and_then(|d| first_offset.map(|f| f.saturating_add(d)));
                if let (Some(o), Some(end)) = (offset, end)
                    && req.stream_offset.is_none()
                    && o.saturating_add(1) >= end
                {
                    stopped = StopReason::Exhausted;
                    break;
                }
            }
        }
    }
    let _ = channel
        .basic_cancel(tag, BasicCancelOptions::default())
        .await;
    if let Some(e) = failure {
        return Err(e);
    }
    let (messages, sent) = kept.into_parts();
    Ok(BrowsePage {
        messages,
        sent,
        queue_depth_at_start: depth_at_start,
        stopped,
        ..BrowsePage::default()
    })
}

/// The offset of a stream's last message now (`None`: the stream is empty), found by a
/// consumer from `last` (the stream's last chunk), so that a read from the start knows where to
/// stop. Nothing is consumed away. Waits `idle` for the chunk; a short silence after it ends it.
pub async fn stream_tail(
    conn: &Connection,
    queue: &str,
    idle: Duration,
) -> Result<Option<u64>, BrowseError> {
    let channel = conn
        .create_channel()
        .await
        .map_err(|e| classify(queue, e))?;
    let result = async {
        depth(&channel, queue).await?;
        channel
            .basic_qos(STREAM_PREFETCH, BasicQosOptions { global: false })
            .await
            .map_err(|e| classify(queue, e))?;
        let mut args = FieldTable::default();
        args.insert(
            "x-stream-offset".into(),
            AMQPValue::LongString(LongString::from("last")),
        );
        let tag = consumer_tag(1);
        let mut consumer = channel
            .basic_consume(
                short(queue)?,
                tag.clone(),
                BasicConsumeOptions::default(),
                args,
            )
            .await
            .map_err(|e| classify(queue, e))?;
        let mut tail = None;
        let mut unacked = 0u16;
        // The last chunk is read and sent by the broker in one go: once it flows, a short
        // silence is its end.
        let mut wait = idle;
        while let Ok(Some(delivery)) = tokio::time::timeout(wait, consumer.next()).await {
            wait = idle.min(STREAM_TAIL_IDLE);
            let delivery = delivery.map_err(|e| classify(queue, e))?;
            let tag_of = delivery.delivery_tag;
            let dl = dead_letter_from_delivery(queue, 0, delivery, 0);
            tail = tail.max(dl.delivery.stream_offset);
            // Acks on a stream delete nothing: they grant the consumer more credit.
            unacked += 1;
            if unacked >= STREAM_PREFETCH / 2 {
                channel
                    .basic_ack(tag_of, BasicAckOptions { multiple: true })
                    .await
                    .map_err(|e| classify(queue, e))?;
                unacked = 0;
            }
        }
        let _ = channel
            .basic_cancel(tag, BasicCancelOptions::default())
            .await;
        Ok(tail)
    }
    .await;
    let _ = channel.close(200, "stream tail found".into()).await;
    result
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn request_defaults() {
        let r = BrowseRequest::new("dlq", QueueType::Classic, BrowsePolicy::unrestricted());
        assert_eq!(r.limit, DEFAULT_LIMIT);
        assert_eq!(r.body_cap, DEFAULT_BODY_CAP);
        assert_eq!(r.stream_offset, None);
    }
}
