//! Reading queues safely: browse policies, the per-queue read lock, what this session kept of
//! costly reads, and the read ledger in Warren's store.

use crate::broker::browse::{self, BrowsePage, BrowseRequest};
use crate::domain::discovery;
use crate::domain::features::QueueType;
use crate::domain::identity;
use crate::domain::ledger::{self, ReadDecision, ReadOutcome, ReadRecord};
use crate::domain::message::DeadLetter;

use super::{KeptRead, ReadConsent, Session, SessionError};

impl Session {
    /// Reads up to `limit` messages from the head of `queue` and leaves every one of them where
    /// it was (see `broker::browse`).
    pub async fn browse(
        &self,
        queue: &str,
        limit: usize,
        consent: ReadConsent,
    ) -> Result<std::sync::Arc<BrowsePage>, SessionError> {
        self.browse_with_cap(queue, limit, self.body_cap(), consent)
            .await
    }

    /// How much of each body a browse keeps: the configured cap, never below what message keys
    /// hash, so a key means the same message everywhere.
    fn body_cap(&self) -> usize {
        self.handle
            .target
            .settings
            .browse
            .body_cap_bytes
            .max(identity::HASHED_BODY)
    }

    /// [`Session::browse`] keeping up to `body_cap` bytes of each body (`usize::MAX` for an
    /// export, which must be lossless).
    ///
    /// On a queue whose reads cost deliveries the decision is made before anything is consumed:
    /// from what this session already read (reused, never read twice without consent) and from
    /// the read ledger in Warren's store (refused when the next read would bring a message
    /// within the safety margin of its limit; [`SessionError::NeedsConsent`] when Warren has
    /// read the queue before and the caller has not said yes to reading again).
    pub async fn browse_with_cap(
        &self,
        queue: &str,
        limit: usize,
        body_cap: usize,
        consent: ReadConsent,
    ) -> Result<std::sync::Arc<BrowsePage>, SessionError> {
        self.read_page(queue, limit, body_cap, consent, None).await
    }

    /// [`Session::browse`], each message sent on `to` as it arrives instead of kept in the
    /// page (whose `sent` counts them), so that no layer holds the whole page. A read this
    /// session keeps (one whose reads cost deliveries) is kept whole as before and sent on
    /// once it is complete; so is a kept read used again.
    pub async fn browse_to(
        &self,
        queue: &str,
        limit: usize,
        consent: ReadConsent,
        to: tokio::sync::mpsc::Sender<DeadLetter>,
    ) -> Result<std::sync::Arc<BrowsePage>, SessionError> {
        self.read_page(queue, limit, self.body_cap(), consent, Some(to))
            .await
    }

    async fn read_page(
        &self,
        queue: &str,
        limit: usize,
        body_cap: usize,
        consent: ReadConsent,
        to: Option<tokio::sync::mpsc::Sender<DeadLetter>>,
    ) -> Result<std::sync::Arc<BrowsePage>, SessionError> {
        let lock = self.cache.read_lock(queue);
        let _reading = wait_for_turn(&lock, queue).await?;
        let (info, policy) = self.handle.queue_policy(queue).await?;
        let (qt, depth) = (info.queue_type.clone(), info.messages);
        let costly = policy.cost_per_browse > 0 && policy.limit.is_some();
        // Where returns are free (4.3+) a lost connection's close still counts: the ledger keeps
        // every quorum queue with a limit, so failed reads are charged there too.
        let ledgered = policy.limit.is_some();
        if costly && consent == ReadConsent::Reuse {
            let kept = self.cache.kept(queue);
            if let Some(k) = kept.filter(|k| k.body_cap >= body_cap) {
                // One copy, which the caller would make anyway to own the messages.
                let page = BrowsePage {
                    reused: true,
                    ..(*k.page).clone()
                };
                return Ok(std::sync::Arc::new(send_on(page, to).await));
            }
        }
        let record = if ledgered {
            match self.remembered(queue, &info).await {
                Ok(r) => r,
                // Without the ledger nothing remembers earlier reads: treat the queue as read
                // before, so reading asks first.
                Err(_) => Some(ReadRecord {
                    unfinished: true,
                    reads: 1,
                    ..ReadRecord::default()
                }),
            }
        } else {
            None
        };
        let decision = ledger::decide(&policy, record.as_ref());
        match &decision {
            ReadDecision::Refuse(why) => return Err(SessionError::refused(why.clone())),
            ReadDecision::Again { .. } if consent == ReadConsent::Reuse => {
                return Err(SessionError::NeedsConsent {
                    queue: queue.to_string(),
                    text: decision.cost_text(queue).unwrap_or_default(),
                });
            }
            _ => {}
        }
        let conn = self.handle.amqp().await?;
        let mut req = BrowseRequest::new(queue, qt, policy.clone());
        req.limit = limit;
        req.body_cap = body_cap;
        req.known_depth = depth;
        req.auto_delete = info.auto_delete;
        req.unacked = info.messages_unacknowledged;
        let is_stream = req.queue_type == QueueType::Stream;
        if is_stream {
            bound_by_tail(conn, &mut req).await?;
        }
        let version = self.handle.overview.rabbitmq_version.clone();
        let now_ms = || jiff::Timestamp::now().as_millisecond();
        let begun = ledgered.then(|| ledger::begin(&policy, &version, record.as_ref(), now_ms()));
        if let Some(b) = &begun
            && let Err(e) = self.write_record(queue, Some(b))
            && costly
        {
            return Err(e);
        }
        // A read this session keeps is read whole, then sent on.
        let (stream, later) = if costly { (None, to) } else { (to, None) };
        let page = browse::browse_to(conn, &req, stream)
            .await
            .map_err(SessionError::from);
        // A failed read leaves the begun record: the worst case, which is what it may have cost.
        let mut page = page?;
        if is_stream {
            // Read to its tail: at least what it read, whatever the lagging count said.
            page.queue_depth_at_start = (page.len() as u64).max(depth.unwrap_or(0));
        }
        let page = std::sync::Arc::new(page);
        if let Some(b) = &begun {
            let outcome = ReadOutcome {
                delivered: page.delivered,
                max_delivery_count: page.max_delivery_count,
                max_acquired_count: page.max_acquired_count,
                returned_explicitly: page.returned_explicitly,
                stopped: match &page.stopped {
                    browse::StopReason::QuorumSafety { reason, .. } => Some(reason.clone()),
                    _ => None,
                },
            };
            let settled =
                self.write_record(queue, Some(&ledger::finish(&policy, b, &outcome, now_ms())));
            if costly {
                settled?;
                self.cache.keep(
                    queue,
                    KeptRead {
                        page: page.clone(),
                        body_cap,
                    },
                );
            }
        }
        match later {
            Some(to) => Ok(std::sync::Arc::new(
                send_on((*page).clone(), Some(to)).await,
            )),
            None => Ok(page),
        }
    }

    /// What reading `queue` would cost now, decided without touching it.
    pub async fn read_decision(&self, queue: &str) -> Result<ReadDecision, SessionError> {
        let (info, policy) = self.handle.queue_policy(queue).await?;
        if policy.limit.is_none() {
            return Ok(ledger::decide(&policy, None));
        }
        let record = self.remembered(queue, &info).await.unwrap_or(None);
        Ok(ledger::decide(&policy, record.as_ref()))
    }

    /// The queue's ledger record, unless the queue is seen empty by both the management API
    /// and a declare now (see `ledger::forget_when_empty`).
    pub(super) async fn remembered(
        &self,
        queue: &str,
        info: &discovery::QueueInfo,
    ) -> Result<Option<ReadRecord>, String> {
        let record = self.read_record(queue)?;
        let reported = ledger::Emptiness::reported(
            info.messages,
            info.messages_unacknowledged,
            info.consumers,
        );
        let looked = reported && record.is_some();
        let declared = if looked {
            match self.handle.amqp().await {
                Ok(conn) => browse::declared_empty(conn, queue).await,
                Err(_) => false,
            }
        } else {
            false
        };
        let kept =
            ledger::forget_when_empty(record.clone(), ledger::Emptiness { reported, declared });
        if kept != record {
            // Written back, so that the next look sees the change (a refusal writes nothing).
            let _ = self.write_record(queue, kept.as_ref());
        }
        Ok(kept)
    }

    fn read_record(&self, queue: &str) -> Result<Option<ReadRecord>, String> {
        let key = self.handle.memory_key();
        self.cache.with_ledger(|st| st.read_record(&key, queue))
    }

    /// Writes the ledger. A costly read that cannot be recorded does not happen: nothing would
    /// remember what it cost.
    pub(super) fn write_record(
        &self,
        queue: &str,
        r: Option<&ReadRecord>,
    ) -> Result<(), SessionError> {
        let key = self.handle.memory_key();
        self.cache.with_ledger(|st| st.put_read_record(&key, queue, r))
            .map_err(|e| {
                SessionError::refused(format!(
                    "reading '{queue}' costs deliveries and Warren cannot record what it spends: {e}. \
                     Set {} to a writable file, or make the queue free to read with `warren protect {queue}`",
                    crate::store::STORE_ENV
                ))
            })
    }
}

/// `page` with its messages sent on `to` (when given) rather than kept in it.
async fn send_on(
    mut page: BrowsePage,
    to: Option<tokio::sync::mpsc::Sender<DeadLetter>>,
) -> BrowsePage {
    if let Some(to) = to {
        let messages = std::mem::take(&mut page.messages);
        page.sent += messages.len() as u64;
        for m in messages {
            // A receiver that is gone wants none of them.
            if to.send(m).await.is_err() {
                break;
            }
        }
    }
    page
}

/// The messages of a page, without a copy unless the session keeps the page too.
pub fn into_messages(page: std::sync::Arc<BrowsePage>) -> Vec<DeadLetter> {
    std::sync::Arc::try_unwrap(page).map_or_else(|shared| shared.messages.clone(), |p| p.messages)
}

/// How long a read waits for another read or a replay of the same queue to finish.
const TURN_WAIT: std::time::Duration = std::time::Duration::from_secs(30);

/// The queue's read lock, or a clear refusal when another read or a replay holds it too long.
pub(super) async fn wait_for_turn<'a>(
    lock: &'a tokio::sync::Mutex<()>,
    queue: &str,
) -> Result<tokio::sync::MutexGuard<'a, ()>, SessionError> {
    tokio::time::timeout(TURN_WAIT, lock.lock())
        .await
        .map_err(|_| {
            SessionError::refused(format!(
                "another read or a replay of '{queue}' is still running in this session; try again when it has finished"
            ))
        })
}

/// How long a stream the management API counts as empty may take to show its last chunk: an
/// empty stream costs this much to read.
const EMPTY_STREAM_WAIT: std::time::Duration = std::time::Duration::from_secs(3);

/// Bounds a stream's read by its last offset now instead of the management API's count, which
/// lags seconds behind the stream's writes: a stream counted empty just before 3 messages
/// arrived read as empty (measured: 0 for 5 s after the writes, on 3.10 and 4.3), and a
/// count that lags reads short. The count, which only grows, says how long to wait for the tail.
async fn bound_by_tail(
    conn: &lapin::Connection,
    req: &mut BrowseRequest,
) -> Result<(), SessionError> {
    let wait = match req.known_depth {
        Some(n) if n > 0 => req.idle_timeout,
        _ => EMPTY_STREAM_WAIT,
    };
    match browse::stream_tail(conn, &req.queue, wait).await? {
        // Empty: the read ends before it starts.
        None => req.known_depth = Some(0),
        Some(tail) => {
            req.end_offset = Some(tail);
            req.known_depth = None;
        }
    }
    Ok(())
}
