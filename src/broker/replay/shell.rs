//! The broker side of a running replay ([`Shell`]): carries out the engine's effects and turns
//! what the broker says into the engine's events.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use futures_util::StreamExt;
use lapin::options::{
    BasicAckOptions, BasicCancelOptions, BasicNackOptions, BasicQosOptions, QueueDeclareOptions,
};
use lapin::types::{FieldTable, ShortString};

use crate::broker::amqp;
use crate::domain::engine::{Decision, Effect, Event};

use super::confirms::{Confirms, ToSend};
use super::{
    AckOp, CheckRequest, Driver, Job, TargetKey, classify::classify, open::Events, open::tag_name,
    wait::Cut, wait::Pacer, wait::sleep_until_opt, wait::timed_out, wait::until,
};

/// A message read from the DLQ and waiting for its rate slot, ready to publish.
pub(super) struct Outgoing {
    pub(super) tag: u64,
    /// Exchange and routing key, checked to fit AMQP's short strings when planned.
    pub(super) target: (ShortString, ShortString),
    pub(super) props: lapin::BasicProperties,
    pub(super) body: Vec<u8>,
    /// Warren replayed it before.
    pub(super) replayed_before: bool,
    /// For a target not checked yet: the routing key it had when it died there.
    pub(super) death_key: Option<String>,
}

/// How long the count at the close waits for a quorum DLQ to count what went back, and how
/// often it asks meanwhile.
pub(super) const LEFT_WAIT: Duration = Duration::from_secs(2);
pub(super) const LEFT_POLL: Duration = Duration::from_millis(50);

/// A running replay's broker side: its channels, its consumer, and what is in flight.
pub(super) struct Shell<'a> {
    pub(super) job: &'a Job,
    pub(super) consume_conn: &'a lapin::Connection,
    pub(super) publish_conn: &'a lapin::Connection,
    pub(super) consume: lapin::Channel,
    pub(super) publish: lapin::Channel,
    pub(super) consumer: lapin::Consumer,
    pub(super) events: Events,
    pub(super) events_open: bool,
    pub(super) dlq_name: ShortString,
    pub(super) tag: String,
    pub(super) prefetch: u16,
    /// The first message, read before the consumer started: the engine's first delivery.
    pub(super) first: Option<lapin::message::Delivery>,
    pub(super) step: Duration,
    pub(super) pacer: Pacer,
    /// The publishes in flight on `publish`, and their confirms.
    pub(super) confirms: Confirms,
    /// Taken for publishing and replayed before (see [`Summary::replayed_before`]).
    pub(super) replayed_before: u64,
    /// The message read last, published when the engine says so.
    pub(super) outgoing: Option<Outgoing>,
    /// The targets the engine may ask to check ([`Decision::Unchecked`]), by check name, with
    /// the death routing key of the first message met (see [`CheckRequest::death_key`]).
    pub(super) check_keys: HashMap<String, (TargetKey, Option<String>)>,
    /// Targets checked during the run that are wait queues, and where their messages go
    /// instead.
    pub(super) checked_redirects: HashMap<TargetKey, (ShortString, ShortString)>,
    /// The channel depth questions are asked on (a failed passive declare closes its channel).
    pub(super) depth_ch: Option<lapin::Channel>,
    /// Set when a request went unanswered: closing then only starts, without waiting for a
    /// broker that does not answer.
    pub(super) unresponsive: bool,
    /// What the DLQ held at the close, counted on the consumer's channel ([`Shell::count_left`]):
    /// `None` when it was not asked there, `Some(None)` when it was and gave no sure count.
    pub(super) left: Option<Option<u64>>,
}

impl super::drive::Performer for Shell<'_> {
    async fn perform(&mut self, effect: Effect, drv: &mut Driver) -> Option<Event> {
        Shell::perform(self, effect, drv).await
    }

    async fn next_event(&mut self, drv: &mut Driver) -> Option<Event> {
        Shell::next_event(self, drv).await
    }
}

impl Shell<'_> {
    /// Carries out one effect; the event it ends in, if any, is for the engine.
    pub(super) async fn perform(&mut self, effect: Effect, drv: &mut Driver) -> Option<Event> {
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
                self.send(t).await;
                return None;
            }
            Effect::Ack(ops) => self.ack(ops, drv).await,
            Effect::Sync => self.sync(drv).await,
            Effect::AskDepth => self.ask_depth(drv).await,
            Effect::AskBacklog => self.ask_backlog(drv).await,
            Effect::CancelConsumer => self.cancel_consumer(drv).await,
            Effect::Drain => self.drain(drv).await,
            Effect::Nack { top } => self.nack(top, drv).await,
            Effect::Close => self.close(drv).await,
        };
        Some(ev)
    }

    /// Hands the message read last to lapin, when it is the one the engine says to publish.
    async fn send(&mut self, t: u64) {
        let Some(out) = self.outgoing.take().filter(|o| o.tag == t) else {
            return;
        };
        self.confirms
            .send(ToSend {
                tag: out.tag,
                exchange: out.target.0,
                routing_key: out.target.1,
                props: out.props,
                body: out.body,
            })
            .await;
        self.pacer.published();
    }

    /// Writes the engine's acks to the DLQ's channel, bounded.
    async fn ack(&mut self, ops: Vec<AckOp>, drv: &mut Driver) -> Event {
        let step = self.step;
        let r = drv.guarded(step, send_acks(&self.consume, ops)).await;
        self.unresponsive |= timed_out(&r);
        Event::AcksWritten(r.map_err(|e| e.text("acknowledging in the dead-letter queue failed")))
    }

    /// Proves the acks written so far with a `basic.qos` round trip.
    async fn sync(&mut self, drv: &mut Driver) -> Event {
        let step = self.step;
        // basic.qos is answered after every frame sent before it on this channel was
        // processed: it proves the acks written so far.
        let qos = self
            .consume
            .basic_qos(self.prefetch, BasicQosOptions::default());
        let r = drv.guarded(step, qos).await;
        self.unresponsive |= timed_out(&r);
        Event::Synced(r.map_err(|e| e.text("the dead-letter queue's node (frozen, or cut off?)")))
    }

    /// Asks the DLQ's depth with a passive declare on a channel of its own.
    async fn ask_depth(&mut self, drv: &mut Driver) -> Event {
        let r = self.ready_in(self.dlq_name.clone(), drv).await;
        Event::Depth(r.map_err(|e| e.text("passive declare")))
    }

    /// Counts the ready messages of each queue the targets rest in (`--max-backlog`), each
    /// with a passive declare, which the queue answers exactly and at once.
    async fn ask_backlog(&mut self, drv: &mut Driver) -> Event {
        let queues = self
            .job
            .backlog
            .as_ref()
            .map(|b| b.queues())
            .unwrap_or_default();
        let mut counts = Vec::with_capacity(queues.len());
        for q in queues {
            let r = match amqp::short("the queue name", &q) {
                Ok(name) => self
                    .ready_in(name, drv)
                    .await
                    .map_err(|e| e.text(&format!("passive declare of '{q}'"))),
                Err(e) => Err(e.to_string()),
            };
            match r {
                Ok(n) => counts.push((q, n)),
                Err(e) => return Event::Backlog(Err(e)),
            }
        }
        Event::Backlog(Ok(counts))
    }

    /// The ready messages of `queue`: a passive declare on a channel of its own, bounded (a
    /// failed declare closes the channel it was asked on, never the consumer's).
    async fn ready_in(&mut self, queue: ShortString, drv: &mut Driver) -> Result<u64, Cut> {
        let step = self.step;
        let ch = match self.depth_ch.take().filter(|c| c.status().connected()) {
            Some(c) => Ok(c),
            None => drv.guarded(step, self.consume_conn.create_channel()).await,
        };
        let r = match ch {
            Ok(ch) => {
                let declare = ch.queue_declare(
                    queue,
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
        r
    }

    /// Cancels the run's consumer on the DLQ, bounded.
    async fn cancel_consumer(&mut self, drv: &mut Driver) -> Event {
        let step = self.step;
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

    /// Takes what the broker sent before cancel-ok, to be handed back with the rest.
    async fn drain(&mut self, drv: &mut Driver) -> Event {
        let step = self.step;
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

    /// Hands back every held delivery up to `top` with one multiple nack.
    async fn nack(&mut self, top: u64, drv: &mut Driver) -> Event {
        let step = self.step;
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

    /// What the DLQ holds once the held messages went back, asked on the consumer's own channel
    /// before it closes: a classic queue handles one channel's nack before its later declare,
    /// where a declare on another channel can be answered first (seen on 4.3: "the DLQ holds 0"
    /// with 17 handed back). A quorum queue applies returns in its own time: asked again,
    /// briefly, until the handed-back messages are counted; `None` when they never were (then
    /// no figure is better than a wrong one). A failed declare closes this channel: the run's
    /// acks are then unproven and counted as possible duplicates, the safe side.
    async fn count_left(&mut self, drv: &mut Driver) -> Option<u64> {
        let back = drv.engine.held_count() as u64;
        let until = Instant::now() + LEFT_WAIT;
        loop {
            let declare = self.consume.queue_declare(
                self.dlq_name.clone(),
                QueueDeclareOptions {
                    passive: true,
                    ..Default::default()
                },
                FieldTable::default(),
            );
            let r = drv.guarded(self.step, declare).await;
            self.unresponsive |= timed_out(&r);
            let n = u64::from(r.ok()?.message_count());
            if n >= back {
                return Some(n);
            }
            if Instant::now() >= until {
                return None;
            }
            tokio::time::sleep(LEFT_POLL).await;
        }
    }

    /// Closes the run's channels, waiting on none that cannot answer.
    async fn close(&mut self, drv: &mut Driver) -> Event {
        if self.consume.status().connected() && !self.unresponsive {
            self.left = Some(self.count_left(drv).await);
        }
        let step = self.step;
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

    /// Waits for what happens next: a cancel, the broker blocking or unblocking, a confirm, the
    /// pacer's next slot, a delivery, or the engine's next deadline. `None`: nothing for the
    /// engine (an event it does not need), ask again.
    pub(super) async fn next_event(&mut self, drv: &mut Driver) -> Option<Event> {
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
        if wants.backlog {
            // Waiting for the target's backlog: once it goes, the rate counts from then (no
            // burst to catch up), so the slower of the two wins.
            self.pacer.restart();
        }
        let slot = self.pacer.next_slot();
        let ev = tokio::select! {
            biased;
            () = drv.cancel.next() => Event::Cancel,
            e = self.events.next(), if self.events_open => {
                super::wait::connection_event(e, &mut self.events_open)?
            }
            confirm = self.confirms.next(), if wants.confirms && self.confirms.waiting() => {
                let ev = confirm?;
                drv.engine.compact();
                ev
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
    pub(super) async fn close_publisher(&mut self, forced: bool) {
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

/// Closes what is still open, each close bounded; errors change nothing at this point.
pub(super) async fn close_quietly(
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
