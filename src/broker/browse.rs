//! Reading a page of messages from the head of a dead-letter queue without destroying any.
//!
//! Classic and quorum queues: `basic.consume` with manual acks and bounded prefetch, collect the
//! page, cancel the consumer, drain what was already on the wire, then hand every message back
//! with ONE explicit `basic.nack(last tag, multiple, requeue=true)` before closing the channel.
//! Closing the channel would also return them, but on quorum queues that costs a delivery on
//! every version (RabbitMQ 4.3 only makes an explicit nack free), so it is never relied on.
//! Cancelling before the nack keeps the broker from re-delivering the returned messages to us.
//!
//! Quorum queues count deliveries: each message's `x-delivery-count` is checked against
//! [`BrowsePolicy`] and browsing stops before any message gets near its delivery limit.
//!
//! Streams: consume from `x-stream-offset` (`first` or a numeric offset), acks only grant credit.
//!
//! [`BrowseCache`] keeps the last page per (vhost, queue) so redrawing a screen does not browse
//! (and, on quorum queues, cost deliveries) again.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use futures_util::StreamExt;
use lapin::options::{
    BasicAckOptions, BasicCancelOptions, BasicConsumeOptions, BasicNackOptions, BasicQosOptions,
    QueueDeclareOptions,
};
use lapin::types::{AMQPValue, FieldTable, LongString, ShortString};
use lapin::{Channel, Connection};

use super::amqp::{dead_letter_from_delivery, soft_error_code};
use crate::domain::message::DeadLetter;
use crate::domain::quorum::{BrowsePolicy, QueueType};

/// Messages per page unless asked otherwise.
pub const DEFAULT_LIMIT: usize = 200;
/// The largest page Warren reads in one browse.
pub const MAX_LIMIT: usize = 100_000;
/// Largest page on a quorum queue with a delivery limit: prefetch is a 16-bit number, and an
/// unbounded prefetch could pull (and so charge a delivery to) messages we never look at.
pub const MAX_QUORUM_LIMIT: usize = u16::MAX as usize;
/// Body bytes kept in memory per message unless asked otherwise (the real size is always known).
pub const DEFAULT_BODY_CAP: usize = 64 * 1024;
/// Stop when the broker sends nothing for this long (messages held by another consumer).
pub const DEFAULT_IDLE_TIMEOUT: Duration = Duration::from_secs(2);
/// How long to wait for handed-back messages to be ready again before closing the channel.
const RETURN_WAIT: Duration = Duration::from_secs(3);
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
}

impl BrowseRequest {
    /// A request with the defaults: 200 messages, 64 KiB of body each, 2 s idle timeout.
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
        }
    }
}

/// One page of messages, in queue order, all of them still in the queue.
#[derive(Clone, Debug, PartialEq)]
pub struct BrowsePage {
    pub messages: Vec<DeadLetter>,
    /// The queue's message count when browsing started (streams: `known_depth` when given, else
    /// the 0 that the broker reports for every stream).
    pub queue_depth_at_start: u64,
    pub stopped: StopReason,
}

/// Why a page ended where it did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum StopReason {
    /// `limit` messages were read.
    Limit,
    /// Every message that was in the queue at the start was read.
    Exhausted,
    /// The next message is too close to its delivery limit to be read again; `reason` says
    /// why and how to make the queue safe.
    QuorumSafety { delivery_count: u64, reason: String },
    /// The broker sent nothing for the idle timeout (another consumer may hold messages).
    Idle,
}

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
        QueueType::Stream => browse_stream(&channel, req).await,
        QueueType::Classic | QueueType::Quorum => browse_queue(&channel, req).await,
    };
    // Everything was handed back explicitly; closing only releases the channel. A failure here
    // (the channel already closed by an error) changes nothing for the messages.
    let _ = channel.close(200, "browse done".into()).await;
    result
}

async fn depth(channel: &Channel, queue: &str) -> Result<u64, BrowseError> {
    let name = short(queue)?;
    let q = channel
        .queue_declare(
            name,
            QueueDeclareOptions {
                passive: true,
                ..QueueDeclareOptions::default()
            },
            FieldTable::default(),
        )
        .await
        .map_err(|e| classify(queue, e))?;
    Ok(u64::from(q.message_count()))
}

fn short(queue: &str) -> Result<ShortString, BrowseError> {
    ShortString::try_new(queue).map_err(|_| BrowseError::QueueNotFound {
        queue: queue.chars().take(60).collect(),
    })
}

/// A consumer tag that says who is reading, for anyone looking at the management UI.
fn consumer_tag() -> ShortString {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    ShortString::try_new(format!("warren-browse-{}-{nanos}", std::process::id()))
        .unwrap_or_default()
}

async fn browse_queue(channel: &Channel, req: &BrowseRequest) -> Result<BrowsePage, BrowseError> {
    let depth_at_start = depth(channel, &req.queue).await?;
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
        });
    }
    // Without acks the broker never sends more than the prefetch, so a prefetch of exactly
    // `target` reads the page and nothing past it. Above 65,535 (classic queues only) the
    // prefetch is unbounded and the surplus that arrives before the cancel is handed back too.
    let prefetch = u16::try_from(target).unwrap_or(0);
    channel
        .basic_qos(prefetch, BasicQosOptions { global: false })
        .await
        .map_err(|e| classify(&req.queue, e))?;
    let tag = consumer_tag();
    let mut consumer = channel
        .basic_consume(
            short(&req.queue)?,
            tag.clone(),
            BasicConsumeOptions::default(),
            FieldTable::default(),
        )
        .await
        .map_err(|e| classify(&req.queue, e))?;

    let mut messages: Vec<DeadLetter> = Vec::with_capacity(target.min(10_000));
    let mut last_tag: u64 = 0;
    let mut delivered: u64 = 0;
    let mut failure: Option<BrowseError> = None;
    let mut stopped = StopReason::Idle;
    loop {
        match tokio::time::timeout(req.idle_timeout, consumer.next()).await {
            Err(_) => break, // idle
            Ok(None) => {
                failure = Some(BrowseError::Broker {
                    queue: req.queue.clone(),
                    code: 0,
                    text: "the broker cancelled the consumer (queue deleted?)".to_string(),
                });
                break;
            }
            Ok(Some(Err(e))) => {
                failure = Some(classify(&req.queue, e));
                break;
            }
            Ok(Some(Ok(delivery))) => {
                last_tag = last_tag.max(delivery.delivery_tag);
                delivered += 1;
                let dl = dead_letter_from_delivery(
                    &req.queue,
                    messages.len() as u64,
                    delivery,
                    req.body_cap,
                );
                let count = dl.delivery.delivery_count.unwrap_or(0);
                if !req.policy.message_safe(count) {
                    stopped = StopReason::QuorumSafety {
                        delivery_count: count,
                        reason: req.policy.explain(Some(count)),
                    };
                    break;
                }
                messages.push(dl);
                if messages.len() >= target {
                    stopped = if messages.len() >= limit {
                        StopReason::Limit
                    } else {
                        StopReason::Exhausted
                    };
                    break;
                }
            }
        }
    }

    // Cancel first so nothing handed back is delivered to us again, then drain what the broker
    // had already sent: those are unacked too and must be part of the one nack.
    if failure.is_none() {
        if let Err(e) = channel
            .basic_cancel(tag, BasicCancelOptions::default())
            .await
        {
            failure = Some(classify(&req.queue, e));
        } else {
            loop {
                match tokio::time::timeout(Duration::from_secs(5), consumer.next()).await {
                    Ok(Some(Ok(d))) => {
                        last_tag = last_tag.max(d.delivery_tag);
                        delivered += 1;
                    }
                    Ok(Some(Err(e))) => {
                        failure = Some(classify(&req.queue, e));
                        break;
                    }
                    Ok(None) | Err(_) => break,
                }
            }
        }
    }
    if last_tag > 0 {
        let nack = channel
            .basic_nack(
                last_tag,
                BasicNackOptions {
                    multiple: true,
                    requeue: true,
                },
            )
            .await;
        if let (Err(e), None) = (nack, &failure) {
            failure = Some(classify(&req.queue, e));
        }
    }
    if let Some(err) = failure {
        return Err(err);
    }
    // The broker applies a nack asynchronously (quorum queues through Raft). Wait until the
    // messages are ready again, so that closing the channel cannot race the nack (a close
    // counts as a delivery even on 4.3) and an immediate second browse sees the real depth.
    wait_until_returned(channel, &req.queue, delivered).await;
    if messages.is_empty()
        && let StopReason::QuorumSafety { reason, .. } = stopped
    {
        return Err(BrowseError::Refused {
            queue: req.queue.clone(),
            reason,
        });
    }
    Ok(BrowsePage {
        messages,
        queue_depth_at_start: depth_at_start,
        stopped,
    })
}

/// Polls the queue's ready count until it holds at least the `returned` messages again, for at
/// most [`RETURN_WAIT`] (another consumer may be taking them, which is not our concern).
async fn wait_until_returned(channel: &Channel, queue: &str, returned: u64) {
    if returned == 0 {
        return;
    }
    let start = Instant::now();
    while start.elapsed() < RETURN_WAIT {
        match depth(channel, queue).await {
            Ok(d) if d >= returned => return,
            Ok(_) => tokio::time::sleep(Duration::from_millis(10)).await,
            Err(_) => return,
        }
    }
}

async fn browse_stream(channel: &Channel, req: &BrowseRequest) -> Result<BrowsePage, BrowseError> {
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
    let tag = consumer_tag();
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
    let mut messages: Vec<DeadLetter> = Vec::with_capacity(limit.min(10_000));
    let mut first_offset: Option<u64> = None;
    let mut unacked: u64 = 0;
    let mut stopped = StopReason::Idle;
    let mut failure = None;
    loop {
        // The end of a stream is silence: once messages flow, a short pause means we are there.
        let idle = if messages.is_empty() {
            req.idle_timeout
        } else {
            req.idle_timeout.min(STREAM_TAIL_IDLE)
        };
        match tokio::time::timeout(idle, consumer.next()).await {
            Err(_) => {
                if req.known_depth.is_none() && !messages.is_empty() {
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
                    dl.position = offset.unwrap_or(first + messages.len() as u64);
                    messages.push(dl);
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
                if messages.len() >= limit {
                    stopped = StopReason::Limit;
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
    Ok(BrowsePage {
        messages,
        queue_depth_at_start: depth_at_start,
        stopped,
    })
}

/// The last page read per (vhost, queue), with when it was read. Browsing is not free (quorum
/// queues count deliveries, every message gets `redelivered`), so the UI shows the cached page
/// when a screen is redrawn or revisited and browses again only when the user asks for a
/// refresh, or after a replay changed the queue. The cache never expires entries by itself:
/// the caller decides, using [`CachedPage::age`].
#[derive(Debug, Default)]
pub struct BrowseCache {
    pages: HashMap<(String, String), CachedPage>,
}

/// A page and when it was read.
#[derive(Clone, Debug)]
pub struct CachedPage {
    pub page: BrowsePage,
    pub read_at: Instant,
}

impl CachedPage {
    pub fn age(&self) -> Duration {
        self.read_at.elapsed()
    }
}

impl BrowseCache {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn get(&self, vhost: &str, queue: &str) -> Option<&CachedPage> {
        self.pages.get(&(vhost.to_string(), queue.to_string()))
    }

    /// Stores a freshly read page, replacing the previous one for that queue.
    pub fn put(&mut self, vhost: &str, queue: &str, page: BrowsePage) {
        self.pages.insert(
            (vhost.to_string(), queue.to_string()),
            CachedPage {
                page,
                read_at: Instant::now(),
            },
        );
    }

    /// Forgets one queue's page (after a replay or purge changed it).
    pub fn invalidate(&mut self, vhost: &str, queue: &str) {
        self.pages.remove(&(vhost.to_string(), queue.to_string()));
    }

    pub fn clear(&mut self) {
        self.pages.clear();
    }

    pub fn len(&self) -> usize {
        self.pages.len()
    }

    pub fn is_empty(&self) -> bool {
        self.pages.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn page(n: usize) -> BrowsePage {
        BrowsePage {
            messages: (0..n)
                .map(|i| DeadLetter {
                    queue: "q".into(),
                    position: i as u64,
                    ..DeadLetter::default()
                })
                .collect(),
            queue_depth_at_start: n as u64,
            stopped: StopReason::Exhausted,
        }
    }

    #[test]
    fn cache_is_keyed_by_vhost_and_queue() {
        let mut c = BrowseCache::new();
        c.put("/", "q", page(2));
        c.put("other", "q", page(3));
        assert_eq!(c.get("/", "q").map(|p| p.page.messages.len()), Some(2));
        assert_eq!(c.get("other", "q").map(|p| p.page.messages.len()), Some(3));
        assert!(c.get("/", "missing").is_none());
        c.put("/", "q", page(5));
        assert_eq!(c.get("/", "q").map(|p| p.page.messages.len()), Some(5));
        assert!(
            c.get("/", "q")
                .is_some_and(|p| p.age() < Duration::from_secs(60))
        );
        c.invalidate("/", "q");
        assert!(c.get("/", "q").is_none());
        assert_eq!(c.len(), 1);
        c.clear();
        assert!(c.is_empty());
    }

    #[test]
    fn request_defaults() {
        let r = BrowseRequest::new("dlq", QueueType::Classic, BrowsePolicy::unrestricted());
        assert_eq!(r.limit, DEFAULT_LIMIT);
        assert_eq!(r.body_cap, DEFAULT_BODY_CAP);
        assert_eq!(r.stream_offset, None);
    }
}
