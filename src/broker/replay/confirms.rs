//! Publishing with `mandatory` on a confirm-mode channel and turning each confirm into the
//! engine's [`Event::Confirm`]: one implementation for every shell that publishes over AMQP
//! 0.9.1 (a replay's DLQ consumer, a restore's plan in memory). Returns are matched to their
//! publish by content, and a publish the broker refused is told from one that may have arrived.

use std::collections::{HashMap, VecDeque};
use std::task::Poll;

use futures_util::stream::FuturesUnordered;
use futures_util::{FutureExt, StreamExt};
use lapin::Confirmation;
use lapin::options::BasicPublishOptions;
use lapin::types::ShortString;

use crate::broker::amqp;
use crate::domain::engine::{ConfirmOutcome, Event};

use super::wait::{InFlightFuture, next_confirm};

/// What identifies a publish's content: exchange, routing key, properties (headers included)
/// and body, as the broker returns them in a `basic.return`. Only compared within the process,
/// so it is keyed with the process's own random keys (std's SipHash): bodies come from outside,
/// and two messages made to collide would have a returned one matched to the other's publish
/// (and acknowledged off the DLQ). An unkeyed FNV, used before, can be collided offline; SipHash
/// also reads a 1 KiB body in a fifth of FNV's time (0.21–0.25 µs against 1.16–1.19 µs here).
pub(crate) fn content_hash(
    exchange: &ShortString,
    routing_key: &ShortString,
    props: &lapin::BasicProperties,
    body: &[u8],
) -> u64 {
    use std::hash::{BuildHasher, Hasher};
    static KEYS: std::sync::OnceLock<std::hash::RandomState> = std::sync::OnceLock::new();
    let mut h = KEYS.get_or_init(std::hash::RandomState::new).build_hasher();
    h.write(exchange.as_str().as_bytes());
    h.write_u8(0);
    h.write(routing_key.as_str().as_bytes());
    h.write_u8(0);
    amqp::hash_properties(&mut h, props);
    h.write_u8(0);
    h.write(body);
    h.finish()
}

/// One message to publish, under the engine's tag.
pub(super) struct ToSend {
    pub(super) tag: u64,
    pub(super) exchange: ShortString,
    pub(super) routing_key: ShortString,
    pub(super) props: lapin::BasicProperties,
    pub(super) body: Vec<u8>,
}

/// The publishing channel and what is in flight on it.
pub(super) struct Confirms {
    ch: lapin::Channel,
    inflight: FuturesUnordered<InFlightFuture>,
    /// Publishes that completed on their first poll (a closed channel fails at once), and
    /// confirms taken ready with the one being handled (see [`Confirms::settle_returns`]).
    early: VecDeque<(u64, lapin::Result<Confirmation>)>,
    /// How many at the back of `early` [`Confirms::settle_returns`] has not looked at yet.
    early_unstripped: usize,
    /// Content hash of each publish not yet confirmed, by tag: a returned message names its
    /// publish by content, not by the confirm lapin attached it to.
    sent: HashMap<u64, u64>,
    /// The exchange of each publish not yet confirmed, by tag: a publish the broker refused
    /// (403, which closes the channel) names its exchange.
    exchanges: HashMap<u64, String>,
    /// The first tag the broker refused to publish, and why: it and every later publish on that
    /// channel certainly did not arrive.
    refused_from: Option<(u64, String)>,
    /// Publishes a returned message was matched to, with the broker's reason, until their
    /// own confirm is handled.
    returned: HashMap<u64, String>,
}

impl Confirms {
    /// Publishes on `ch`, already in confirm mode.
    pub(super) fn new(ch: lapin::Channel) -> Confirms {
        Confirms {
            ch,
            inflight: FuturesUnordered::new(),
            early: VecDeque::new(),
            early_unstripped: 0,
            sent: HashMap::new(),
            exchanges: HashMap::new(),
            refused_from: None,
            returned: HashMap::new(),
        }
    }

    /// Some publish has not been answered yet.
    pub(super) fn waiting(&self) -> bool {
        !self.inflight.is_empty() || !self.early.is_empty()
    }

    /// Hands one message to lapin with `mandatory`.
    pub(super) async fn send(&mut self, out: ToSend) {
        let t = out.tag;
        self.sent.insert(
            t,
            content_hash(&out.exchange, &out.routing_key, &out.props, &out.body),
        );
        self.exchanges.insert(t, out.exchange.to_string());
        // Publishes are not awaited one by one: lapin resolves a publish only once the IO loop
        // has written it, a thread hop per message. The first poll hands the frames to lapin,
        // so messages still go out in the order they were taken; the rest (the write, then the
        // confirm) completes in `inflight`, bounded by the engine's confirm deadline. A publish
        // that fails (closed channel) completes with the error and is handled with the confirms.
        let ch = self.ch.clone();
        let mut fut: InFlightFuture = Box::pin(async move {
            let ToSend {
                tag,
                exchange,
                routing_key,
                props,
                body,
            } = out;
            let published = ch
                .basic_publish(
                    exchange,
                    routing_key,
                    BasicPublishOptions {
                        mandatory: true,
                        ..Default::default()
                    },
                    &body,
                    props,
                )
                .await;
            // lapin has its own copy in the frames: the body is not kept while the confirm is
            // awaited, so memory in flight is one copy per message.
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
    }

    /// The next publish answered, as the engine's event; `None` when nothing is in flight.
    /// Cancel-safe: nothing is taken until a confirm is ready.
    pub(super) async fn next(&mut self) -> Option<Event> {
        let (t, result) = next_confirm(&mut self.early, &mut self.inflight).await?;
        Some(self.outcome(t, result))
    }

    fn outcome(&mut self, t: u64, result: lapin::Result<Confirmation>) -> Event {
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
            // Refused by the broker's permissions: the channel closed over this publish or an
            // earlier one, before it was routed — certainly not delivered.
            Err(_) if refused.is_some() => ConfirmOutcome::Failed(refused.unwrap_or_default()),
            // No answer, only an error (the channel or the connection closed): the broker may
            // have routed it before (confirms come in batches), so it counts as a possible
            // duplicate.
            Err(e) => ConfirmOutcome::Unknown(e.to_string()),
        };
        Event::Confirm { tag: t, outcome }
    }

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
}
