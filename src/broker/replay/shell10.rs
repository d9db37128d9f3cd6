//! The broker side of a replay over AMQP 1.0 ([`Shell10`]): the same engine's effects, carried
//! out on a receiver on the DLQ and a sender per target, for messages an AMQP 1.0 client
//! published (see `domain::amqp10::carrier`). A delivery is accepted only after the target's
//! `accepted` outcome for its copy (RabbitMQ's AMQP 1.0 publisher confirm); everything else is
//! released back after the receiver stops taking. Depths are asked over AMQP 0.9.1 as in every
//! run.

use std::collections::{BTreeMap, HashMap};
use std::pin::Pin;
use std::time::{Duration, Instant};

use fe2o3_amqp::link::delivery::DeliveryInfo;
use fe2o3_amqp::link::receiver::CreditMode;
use fe2o3_amqp::types::messaging::{Body, Outcome};
use fe2o3_amqp::types::primitives::Value;
use fe2o3_amqp::{Receiver, Sender};
use futures_util::StreamExt;
use futures_util::stream::FuturesUnordered;

use crate::broker::amqp10::convert::{self, Marks, Message10};
use crate::broker::amqp10::{self as a10, Link10};
use crate::domain::engine::{ConfirmOutcome, Effect, Event};

use super::wait::{Pacer, sleep_until_opt, timed_out, until};
use super::{AckOp, Driver, Job, classify::decide};

type Settled = Pin<Box<dyn std::future::Future<Output = (u64, ConfirmOutcome)> + Send>>;

/// A selected message read last, ready to publish when the engine says so.
pub(super) struct Outgoing10 {
    tag: u64,
    address: String,
    message: Message10,
    replayed_before: bool,
}

pub(super) struct Shell10<'a> {
    pub(super) job: &'a Job,
    pub(super) depth_conn: &'a lapin::Connection,
    pub(super) link: Link10,
    pub(super) receiver: Receiver,
    pub(super) senders: HashMap<String, Sender>,
    /// Deliveries not settled yet, by the run's own tag (1, 2, …, as the engine counts).
    pub(super) unsettled: BTreeMap<u64, DeliveryInfo>,
    pub(super) next_tag: u64,
    pub(super) outgoing: Option<Outgoing10>,
    pub(super) inflight: FuturesUnordered<Settled>,
    pub(super) pacer: Pacer,
    pub(super) step: Duration,
    pub(super) prefetch: u32,
    pub(super) replayed_before: u64,
    pub(super) unresponsive: bool,
    pub(super) left: Option<Option<u64>>,
    /// The receiver was told to stop taking (credit 0): never topped up again.
    pub(super) stopped: bool,
    /// The channel depths are asked on (see [`Shell10::ready_in`]).
    pub(super) depth_ch: Option<lapin::Channel>,
}

impl super::drive::Performer for Shell10<'_> {
    async fn perform(&mut self, effect: Effect, drv: &mut Driver) -> Option<Event> {
        Shell10::perform(self, effect, drv).await
    }

    async fn next_event(&mut self, drv: &mut Driver) -> Option<Event> {
        Shell10::next_event(self, drv).await
    }
}

impl Shell10<'_> {
    /// Attaches the run's receiver to the DLQ, taking up to `prefetch` at a time.
    pub(super) async fn receiver(
        link: &mut Link10,
        job: &Job,
        prefetch: u32,
    ) -> Result<Receiver, String> {
        let mut r = Receiver::builder()
            .name(format!("warren-replay-{}", std::process::id()))
            .source(a10::address("", &job.dlq))
            .credit_mode(CreditMode::Manual)
            .auto_accept(false)
            .attach(&mut link.session)
            .await
            .map_err(|e| format!("the dead-letter queue cannot be read over AMQP 1.0: {e}"))?;
        r.set_credit(prefetch)
            .await
            .map_err(|e| format!("the dead-letter queue's receiver failed: {e}"))?;
        Ok(r)
    }

    pub(super) async fn perform(&mut self, effect: Effect, drv: &mut Driver) -> Option<Event> {
        let ev = match effect {
            Effect::Finish => return None,
            Effect::Publish(t) => {
                self.send(t, drv).await;
                return None;
            }
            Effect::CheckTarget(name) => Event::TargetChecked {
                check: name.clone(),
                result: Err(format!(
                    "{name} was not checked before the run (a replay over AMQP 1.0 checks its targets in the plan); its messages stay in the DLQ"
                )),
            },
            Effect::Ack(ops) => self.settle(ops, drv).await,
            Effect::Sync => self.sync(drv).await,
            Effect::AskDepth => {
                let r = self.ready_in(&self.job.dlq.clone(), drv).await;
                Event::Depth(r)
            }
            Effect::AskBacklog => self.ask_backlog(drv).await,
            Effect::CancelConsumer => {
                self.stopped = true;
                let r = drv.guarded(self.step, self.receiver.set_credit(0)).await;
                self.unresponsive |= timed_out(&r);
                Event::ConsumerCancelled(r.map_err(|e| e.text("stopping the receiver")))
            }
            Effect::Drain => self.drain(drv).await,
            Effect::Nack { top } => self.release(top, drv).await,
            Effect::Close => self.close(drv).await,
        };
        Some(ev)
    }

    /// Publishes the message read last to its target's sender (attached on first use); its
    /// outcome comes in `inflight`.
    async fn send(&mut self, t: u64, drv: &mut Driver) {
        let Some(out) = self.outgoing.take().filter(|o| o.tag == t) else {
            return;
        };
        let step = self.step;
        if !self.senders.contains_key(&out.address) {
            let name = format!("warren-replay-to-{}", self.senders.len());
            let attach = Sender::attach(&mut self.link.session, name, out.address.clone());
            match drv.guarded(step, attach).await {
                Ok(s) => {
                    self.senders.insert(out.address.clone(), s);
                }
                Err(e) => {
                    // Never sent: certainly not delivered.
                    let why = e.text(&format!("attaching a sender to {}", out.address));
                    self.inflight
                        .push(Box::pin(async move { (t, ConfirmOutcome::Failed(why)) }));
                    return;
                }
            }
        }
        let Some(sender) = self.senders.get_mut(&out.address) else {
            return;
        };
        let sent = drv
            .guarded(step * 4, sender.send_batchable(out.message))
            .await;
        let fut: Settled = match sent {
            Ok(settled) => Box::pin(async move {
                let outcome = match settled.await {
                    Ok(Outcome::Accepted(_)) => ConfirmOutcome::Ack,
                    Ok(Outcome::Released(_)) => ConfirmOutcome::Returned(
                        "the broker released it: no queue took it (unroutable)".into(),
                    ),
                    Ok(Outcome::Modified(_)) => {
                        ConfirmOutcome::Returned("the broker did not take it (modified)".into())
                    }
                    Ok(Outcome::Rejected(r)) => {
                        let _ = r;
                        ConfirmOutcome::Nack
                    }
                    Err(e) => ConfirmOutcome::Unknown(e.to_string()),
                };
                (t, outcome)
            }),
            // The transfer may have left before the error: a possible duplicate.
            Err(e) => {
                let why = e.text("publishing over AMQP 1.0");
                Box::pin(async move { (t, ConfirmOutcome::Unknown(why)) })
            }
        };
        if out.replayed_before {
            self.replayed_before += 1;
        }
        self.inflight.push(fut);
        self.pacer.published();
    }

    /// Accepts the deliveries the engine settles (a multiple op: every one up to its tag still
    /// unsettled, which the engine guarantees are all confirmed).
    async fn settle(&mut self, ops: Vec<AckOp>, drv: &mut Driver) -> Event {
        let mut infos = Vec::new();
        for op in ops {
            if op.multiple {
                let tags: Vec<u64> = self.unsettled.range(..=op.tag).map(|(t, _)| *t).collect();
                infos.extend(tags.iter().filter_map(|t| self.unsettled.remove(t)));
            } else if let Some(i) = self.unsettled.remove(&op.tag) {
                infos.push(i);
            }
        }
        let r = drv
            .guarded(self.step, self.receiver.accept_all(infos))
            .await;
        self.unresponsive |= timed_out(&r);
        if r.is_ok() && !self.stopped {
            // AMQP 1.0 credit is not given back by settling, as a 0.9.1 prefetch is: the window
            // is topped up to `prefetch` deliveries held at once.
            let room = self.prefetch.saturating_sub(self.unsettled.len() as u32);
            let r = drv.guarded(self.step, self.receiver.set_credit(room)).await;
            self.unresponsive |= timed_out(&r);
        }
        Event::AcksWritten(r.map_err(|e| e.text("accepting in the dead-letter queue failed")))
    }

    /// Proves the dispositions written so far: a link attached to the DLQ and closed again on
    /// the same session is answered only after the broker processed every frame before it.
    async fn sync(&mut self, drv: &mut Driver) -> Event {
        let dlq = a10::address("", &self.job.dlq);
        let session = &mut self.link.session;
        let probe = async move {
            let r = Receiver::builder()
                .name(format!("warren-sync-{}", std::process::id()))
                .source(dlq)
                .credit_mode(CreditMode::Manual)
                .attach(session)
                .await
                .map_err(|e| e.to_string())?;
            r.close().await.map_err(|e| e.to_string())
        };
        let r = drv.guarded(self.step, probe).await;
        self.unresponsive |= timed_out(&r);
        Event::Synced(r.map_err(|e| e.text("the dead-letter queue's node (frozen, or cut off?)")))
    }

    /// Ready messages in `queue`, asked over AMQP 0.9.1 (a passive declare) on a channel kept
    /// for it (a failed declare closes it: the next question opens another), bounded.
    async fn ready_in(&mut self, queue: &str, drv: &mut Driver) -> Result<u64, String> {
        let conn = self.depth_conn;
        let kept = self.depth_ch.take().filter(|c| c.status().connected());
        let name =
            crate::broker::amqp::short("the queue name", queue).map_err(|e| e.to_string())?;
        let ask = async move {
            let ch = match kept {
                Some(c) => c,
                None => conn.create_channel().await.map_err(|e| e.to_string())?,
            };
            let n = crate::broker::amqp::passive_depth(&ch, name)
                .await
                .map_err(|e| e.to_string())?;
            Ok::<_, String>((n, ch))
        };
        let r = drv.guarded(self.step * 2, ask).await;
        self.unresponsive |= timed_out(&r);
        match r {
            Ok((n, ch)) => {
                self.depth_ch = Some(ch);
                Ok(n)
            }
            Err(e) => Err(e.text("passive declare")),
        }
    }

    async fn ask_backlog(&mut self, drv: &mut Driver) -> Event {
        let queues = self
            .job
            .backlog
            .as_ref()
            .map(|b| b.queues())
            .unwrap_or_default();
        let mut counts = Vec::with_capacity(queues.len());
        for q in queues {
            match self.ready_in(&q, drv).await {
                Ok(n) => counts.push((q, n)),
                Err(e) => return Event::Backlog(Err(e)),
            }
        }
        Event::Backlog(Ok(counts))
    }

    /// Takes what the broker sent before the credit went to 0, to be released with the rest.
    async fn drain(&mut self, drv: &mut Driver) -> Event {
        let until_at = Instant::now() + self.step;
        while !drv.engine.is_done() {
            let left = until_at.saturating_duration_since(Instant::now());
            let wait = left.min(Duration::from_millis(300));
            let receiver = &mut self.receiver;
            let next = drv
                .guarded(wait, async {
                    receiver
                        .recv::<Body<Value>>()
                        .await
                        .map_err(|e| e.to_string())
                })
                .await;
            let Ok(d) = next else { break };
            let t = self.take_tag(DeliveryInfo::from(&d));
            let e = drv.engine.on(Instant::now(), Event::Drained(t));
            drv.fx.extend(e);
        }
        Event::DrainDone
    }

    /// Hands back every delivery still held, up to `top`: released, so each keeps its place
    /// (a quorum queue returns it to the head).
    async fn release(&mut self, top: u64, drv: &mut Driver) -> Event {
        let tags: Vec<u64> = self.unsettled.range(..=top).map(|(t, _)| *t).collect();
        let infos: Vec<DeliveryInfo> = tags
            .iter()
            .filter_map(|t| self.unsettled.remove(t))
            .collect();
        let r = drv
            .guarded(self.step, self.receiver.release_all(infos))
            .await;
        self.unresponsive |= timed_out(&r);
        Event::HandedBack(r.map_err(|e| e.text("releasing")))
    }

    /// Counts what the DLQ holds once the releases were processed, then closes the links.
    async fn close(&mut self, drv: &mut Driver) -> Event {
        if !self.unresponsive {
            let back = drv.engine.held_count() as u64;
            let _ = self.sync(drv).await;
            let until_at = Instant::now() + super::shell::LEFT_WAIT;
            let mut left = None;
            while Instant::now() < until_at {
                match self.ready_in(&self.job.dlq.clone(), drv).await {
                    Ok(n) if n >= back => {
                        left = Some(n);
                        break;
                    }
                    Ok(_) => tokio::time::sleep(super::shell::LEFT_POLL).await,
                    Err(_) => break,
                }
            }
            self.left = Some(left);
        }
        let limit = if self.unresponsive {
            Duration::from_millis(1)
        } else {
            self.step
        };
        if let Some(ch) = self.depth_ch.take() {
            let _ = tokio::time::timeout(limit, ch.close(200, "counted".into())).await;
        }
        let senders: Vec<Sender> = self.senders.drain().map(|(_, s)| s).collect();
        let closing = async {
            for s in senders {
                let _ = s.close().await;
            }
            Ok::<(), String>(())
        };
        let _ = drv.guarded(limit, closing).await;
        Event::Closed(Ok(()))
    }

    fn take_tag(&mut self, info: DeliveryInfo) -> u64 {
        self.next_tag += 1;
        self.unsettled.insert(self.next_tag, info);
        self.next_tag
    }

    /// A delivery, decided as any other (the model reads it as a 0.9.1 reader would); the copy
    /// to publish waits in `outgoing`.
    fn delivered(
        &mut self,
        d: fe2o3_amqp::link::delivery::Delivery<Body<Value>>,
        drv: &Driver,
    ) -> Event {
        let seen = drv.engine.tally().seen;
        let t = self.take_tag(DeliveryInfo::from(&d));
        let message = d.into_message();
        let msg = convert::dead_letter(&self.job.dlq, seen, &message);
        let before = msg.headers.clone();
        let (ev, out) = decide(self.job, seen, t, msg, None);
        self.outgoing = out.map(|o| {
            let headers = o.props.headers().clone().unwrap_or_default();
            let after: std::collections::BTreeSet<String> =
                headers.inner().keys().map(|k| k.to_string()).collect();
            let marks = Marks {
                removed: before
                    .keys()
                    .filter(|k| k.starts_with("x-opt-") && !after.contains(*k))
                    .map(String::from)
                    .collect(),
                added: headers
                    .inner()
                    .iter()
                    .filter(|(k, _)| k.as_str().starts_with("warren-"))
                    .map(|(k, v)| (k.to_string(), mark_value(v)))
                    .collect(),
                clear_ttl: o.props.expiration().is_none(),
            };
            Outgoing10 {
                tag: t,
                address: a10::address(o.target.0.as_str(), o.target.1.as_str()),
                message: convert::republish(message, &marks),
                replayed_before: o.replayed_before,
            }
        });
        ev
    }

    /// What happens next: a cancel, an outcome, the pacer's slot, a delivery or a deadline.
    pub(super) async fn next_event(&mut self, drv: &mut Driver) -> Option<Event> {
        let wants = drv.engine.wants();
        drv.engine.compact();
        let deadline = drv.engine.deadline();
        if wants.backlog {
            self.pacer.restart();
        }
        let slot = self.pacer.next_slot();
        let ev = tokio::select! {
            biased;
            () = drv.cancel.next() => Event::Cancel,
            done = self.inflight.next(), if wants.confirms && !self.inflight.is_empty() => {
                let (tag, outcome) = done?;
                drv.engine.compact();
                Event::Confirm { tag, outcome }
            }
            () = until(slot), if wants.slot => Event::Slot,
            next = self.receiver.recv::<Body<Value>>(), if wants.take => match next {
                Ok(d) => self.delivered(d, drv),
                Err(e) => Event::ConsumeLost(format!("the dead-letter queue's receiver failed: {e}")),
            },
            () = sleep_until_opt(deadline) => Event::Tick,
        };
        Some(ev)
    }
}

/// A replay mark as an annotation value: text as text, a count as a long.
fn mark_value(v: &lapin::types::AMQPValue) -> Value {
    use lapin::types::AMQPValue as A;
    match v {
        A::LongString(s) => Value::String(String::from_utf8_lossy(s.as_bytes()).into_owned()),
        A::ShortString(s) => Value::String(s.to_string()),
        A::LongLongInt(n) => Value::Long(*n),
        A::LongInt(n) => Value::Long(i64::from(*n)),
        A::LongUInt(n) => Value::Long(i64::from(*n)),
        A::Timestamp(t) => Value::Timestamp(fe2o3_amqp::types::primitives::Timestamp::from(
            i64::try_from(*t).unwrap_or(i64::MAX).saturating_mul(1000),
        )),
        other => Value::String(format!("{other:?}")),
    }
}
