//! Checking a plan's targets: they exist, reach one queue, lead (through wait queues) to a queue
//! with room; and the passive declares the checks use.

use crate::broker::handle::Handle;
use std::collections::BTreeMap;

use crate::broker::amqp;
use crate::broker::replay;
use crate::domain::destination;
use crate::domain::discovery::{self, ExchangeInfo, RoutingTable};
use crate::domain::replay as plan;

use super::{Preview, ReplaySpec, SessionError, TargetPreview};
use crate::domain::preview::look::Looked;

impl Handle {
    /// The check of one target a run met first (see [`Preview::checked_as_met`]): the plan's
    /// checks, as if every message of the run (`count`, `bytes`) went there. `Ok`: where a
    /// wait queue sends them instead, if it is one, and the queues they come to rest in;
    /// `Err`: why its messages stay in the DLQ.
    pub(super) async fn check_met(
        &self,
        spec: &ReplaySpec,
        req: &replay::CheckRequest,
        count: u64,
        bytes: u64,
    ) -> Result<(Option<plan::ReplayTarget>, Vec<String>), String> {
        let target = &req.target;
        let label = replay::check_name(target);
        let failed =
            |e: SessionError| format!("checking {label} failed: {e}; its messages stay in the DLQ");
        let (exchanges, bindings) = tokio::join!(
            self.mgmt.exchanges(self.vhost()),
            self.mgmt.bindings(self.vhost())
        );
        let exchanges: Vec<ExchangeInfo> = exchanges.map_err(|e| failed(e.into()))?;
        let bindings = bindings.map_err(|e| failed(e.into()))?;
        let table = RoutingTable::new(&exchanges, &bindings);
        let conn = self.amqp().await.map_err(failed)?;
        let mut t = TargetPreview {
            exchange: target.0.clone(),
            routing_key: target.1.clone(),
            count,
            bytes,
            death_keys: req.death_key.iter().cloned().collect(),
            ..Default::default()
        };
        let mut p = Preview::default();
        self.check_target(spec, &label, &mut t, &table, conn, &mut p)
            .await
            .map_err(failed)?;
        if p.allowed.is_empty() {
            return Err(format!(
                "{}; its messages stay in the DLQ",
                p.refusals.join("; ")
            ));
        }
        Ok((p.redirects.get(target).cloned(), t.rests()))
    }

    /// The second half of a plan: follows every target to where it comes to rest and checks it
    /// can take the messages (see [`Session::preview`]).
    pub(super) async fn check_targets(
        &self,
        spec: &ReplaySpec,
        looked: Looked,
    ) -> Result<Preview, SessionError> {
        Ok(self.check_targets_with_dlq(spec, looked).await?.0)
    }

    /// [`Session::check_targets`], and the DLQ as the management API reports it.
    pub(super) async fn check_targets_with_dlq(
        &self,
        spec: &ReplaySpec,
        looked: Looked,
    ) -> Result<(Preview, discovery::QueueInfo), SessionError> {
        let Looked {
            mut p,
            depth,
            staying,
            skipped,
        } = looked;
        // Where each target routes, per the broker's bindings, and where it comes to rest; and
        // the DLQ's own policy, needed at the end: three reads side by side.
        let (exchanges, bindings, dlq) = tokio::join!(
            self.mgmt.exchanges(self.vhost()),
            self.mgmt.bindings(self.vhost()),
            self.queue_policy(&spec.queue)
        );
        let exchanges: Vec<ExchangeInfo> = exchanges?;
        let bindings = bindings?;
        let table = RoutingTable::new(&exchanges, &bindings);
        let conn = self.amqp().await?;
        let mut targets = std::mem::take(&mut p.targets);
        for (label, t) in targets.iter_mut() {
            self.check_target(spec, label, t, &table, conn, &mut p)
                .await?;
        }
        p.targets = targets;
        for (_, rp) in p.plans.iter_mut() {
            plan::apply_redirect(rp, &p.redirects);
        }
        if skipped > 0 && spec.to.is_none() {
            p.refusals.push(format!(
                "{skipped} message(s) come from a MassTransit _skipped queue: no consumer on that endpoint handles their type, so replaying them there skips them again. Deploy the consumer first, or send them to the endpoint that has it with --to"
            ));
        }
        // The run reads the queue too: what it does not move is handed back, which costs a
        // quorum message a delivery where returns count. Say so where a person confirms.
        let (info, quorum) = dlq?;
        if let Some(limit) = quorum.limit.filter(|_| quorum.cost_per_browse > 0)
            && p.selected < depth
        {
            *p.warnings
                .entry(format!(
                    "the replay reads past what it moves: each message it hands back costs {} deliver{} of the queue's limit of {limit}",
                    quorum.cost_per_browse,
                    if quorum.cost_per_browse == 1 { "y" } else { "ies" }
                ))
                .or_insert(0) += depth - p.selected;
        }
        if spec.queue.contains("parking") {
            *p.warnings
                .entry("this is a parking lot: messages that could not be decoded fail identically until the reading code changes; replaying before that deploy is churn".into())
                .or_insert(0) += 1;
        }
        if p.selected == 0 && staying > 0 {
            p.refusals.push(format!(
                "every selected message has passed its framework's deadline, which would discard it unrun; replay with --clear-expiry to remove the deadline ({})",
                p.notices.join("; ")
            ));
        } else if p.selected == 0 {
            p.refusals
                .push("no message matches the selection at the head of the queue".into());
        }
        Ok((p, info))
    }

    /// Checks one target of a plan: it can be published to, exists, reaches exactly one queue
    /// (or fan-out is allowed), is not the DLQ itself; a wait queue is followed to where it
    /// leads (a redirect), and the queue where the messages rest must have room for `t.count`.
    /// What is wrong goes into `p.refusals`, what to know into `p.warnings`; a target that
    /// passes goes into `p.allowed` (after its redirect).
    async fn check_target(
        &self,
        spec: &ReplaySpec,
        label: &str,
        t: &mut TargetPreview,
        table: &RoutingTable<'_>,
        conn: &lapin::Connection,
        p: &mut Preview,
    ) -> Result<(), SessionError> {
        let routing = table.route(&t.exchange, &t.routing_key);
        t.reaches = routing.queues;
        t.exact = routing.exact;
        let mut ok = true;
        // Targets come from headers and bodies (a Spring routing key, a Sneakers queue):
        // a name AMQP cannot carry holds that target's messages, with the reason.
        let too_long = amqp::short("the exchange name", &t.exchange)
            .and(amqp::short("the routing key", &t.routing_key))
            .err();
        if let Some(e) = too_long {
            let mut shown: String = label.chars().take(60).collect();
            if shown.len() < label.len() {
                shown.push('…');
            }
            p.refusals.push(format!(
                "{shown} cannot be published to: {e}; its messages stay in the DLQ"
            ));
            ok = false;
        } else if t.exchange.is_empty() {
            if !queue_exists(conn, &t.routing_key).await? {
                p.refusals.push(format!(
                    "target queue '{}' does not exist in vhost '{}'",
                    t.routing_key,
                    self.vhost()
                ));
                ok = false;
            }
        } else if !exchange_exists(conn, &t.exchange).await? {
            p.refusals.push(format!(
                "target exchange '{}' does not exist in vhost '{}'",
                t.exchange,
                self.vhost()
            ));
            ok = false;
        }
        if ok && t.reaches.len() == 1 {
            ok = self.follow_to_rest(label, t, table, conn, p).await?;
        }
        if t.reaches.contains(&spec.queue) {
            p.refusals.push(format!(
                "{label} leads back into '{}' itself: replaying a DLQ into itself is refused",
                spec.queue
            ));
            ok = false;
        }
        if t.reaches.is_empty() && ok {
            p.refusals.push(format!(
                "{label} reaches no queue: the broker would return every message"
            ));
            ok = false;
        }
        if t.reaches.len() > 1 && !spec.allow_fan_out && spec.to.is_none() {
            p.refusals.push(format!(
                "{label} would reach {} queues ({}): name one with --to, or allow it with --allow-fan-out",
                t.reaches.len(),
                t.reaches.join(", ")
            ));
            ok = false;
        }
        if ok {
            let key = (t.exchange.clone(), t.routing_key.clone());
            let key = p
                .redirects
                .get(&key)
                .map_or(key, |r| (r.exchange.clone(), r.routing_key.clone()));
            p.allowed.insert(key);
        }
        Ok(())
    }

    /// Follows a target that reaches one queue through wait queues to where its messages rest
    /// (a redirect when that is elsewhere) and checks that queue has room: `false` when the
    /// target must not be used (the reason is in `p.refusals`).
    async fn follow_to_rest(
        &self,
        label: &str,
        t: &mut TargetPreview,
        table: &RoutingTable<'_>,
        conn: &lapin::Connection,
        p: &mut Preview,
    ) -> Result<bool, SessionError> {
        let mut ok = true;
        let first = t.reaches[0].clone();
        // A wait queue without a dead-letter routing key sends each message on with the
        // key it had when it entered: follow every such key; they must agree.
        let keys: Vec<String> = if t.death_keys.is_empty() {
            vec![t.routing_key.clone()]
        } else {
            t.death_keys.iter().cloned().collect()
        };
        let mut rests: BTreeMap<String, Vec<String>> = BTreeMap::new();
        let mut lost = None;
        for k in &keys {
            match self.rest_of(&first, k, table).await? {
                Rest::Queue { queue, via } => {
                    rests.insert(queue, via);
                }
                Rest::Lost(why) => lost = Some(why),
            }
        }
        let rest = match (lost, rests.len()) {
            (Some(why), _) => Rest::Lost(why),
            (None, 1) => rests
                .into_iter()
                .next()
                .map_or(Rest::Lost("no resting place".into()), |(queue, via)| {
                    Rest::Queue { queue, via }
                }),
            (None, _) => Rest::Lost(format!(
                "the wait queue '{first}' sends these back to {} different queues ({}); replay each group with --to",
                rests.len(),
                rests.keys().cloned().collect::<Vec<_>>().join(", ")
            )),
        };
        match rest {
            Rest::Queue { queue, via } => {
                if !via.is_empty() {
                    // A wait queue is never the target: the consuming queue is, through
                    // the default exchange (which reaches exactly that queue).
                    p.redirects.insert(
                        (t.exchange.clone(), t.routing_key.clone()),
                        plan::ReplayTarget {
                            exchange: String::new(),
                            routing_key: queue.clone(),
                            expected_queue: Some(queue.clone()),
                        },
                    );
                    *p.warnings
                        .entry(format!(
                            "{label} is a wait queue ({}): these go straight to '{queue}', where it sends them back",
                            via.join(" → ")
                        ))
                        .or_insert(0) += t.count;
                    t.reaches = vec![queue.clone()];
                    t.rests_in = Some(queue.clone());
                    t.via = via;
                }
                match self.room_in(conn, &queue, t.count, t.bytes).await? {
                    Some(Err(why)) => {
                        p.refusals.push(why);
                        ok = false;
                    }
                    Some(Ok(warning)) => {
                        *p.warnings.entry(warning).or_insert(0) += t.count;
                    }
                    None => {}
                }
            }
            Rest::Lost(why) => {
                p.refusals.push(format!("{label}: {why}"));
                ok = false;
            }
        }
        Ok(ok)
    }

    /// Whether `queue` has room for `count` more messages of `bytes` in all (see
    /// `domain::destination::room_verdict`): `Some(Err)` refuses (the broker would drop or
    /// dead-letter others), `Some(Ok)` warns, `None` fits. Every operation that publishes into a
    /// queue asks this before it starts.
    pub async fn room_in(
        &self,
        conn: &lapin::Connection,
        queue: &str,
        count: u64,
        bytes: u64,
    ) -> Result<Option<Result<String, String>>, SessionError> {
        // The queue's settings and its live count are independent reads: side by side.
        let (reported, depth) = tokio::join!(
            async {
                let info = self.mgmt.queue(self.vhost(), queue).await?;
                let settings = self.settings_of(&info).await?;
                Ok::<_, SessionError>((info, settings))
            },
            queue_depth(conn, queue)
        );
        let (mut info, settings) = reported?;
        // The room check counts on the broker's own figure, over AMQP: the management one is a
        // sample up to a stats interval old (3.10 said 67 in a queue capped at 30), and a stale
        // low figure would let drop-head discard messages. The passive count is the ready
        // messages, which is what max-length limits. Bytes have no live source; they stay
        // sampled.
        if let Some(depth) = depth? {
            info.messages = Some(depth);
        }
        let room = destination::check_room(&info, &settings, count.max(1), bytes);
        Ok(destination::room_verdict(queue, count, &room))
    }

    /// Follows a publish into `queue` with `routing_key` through wait queues to the queue where
    /// it comes to rest (see `domain::destination`).
    pub(crate) async fn rest_of(
        &self,
        queue: &str,
        routing_key: &str,
        table: &RoutingTable<'_>,
    ) -> Result<Rest, SessionError> {
        let mut current = queue.to_string();
        let mut key = routing_key.to_string();
        let mut via = Vec::new();
        for _ in 0..destination::MAX_HOPS {
            let info = match self.mgmt.queue(self.vhost(), &current).await {
                Ok(i) => i,
                Err(e) if via.is_empty() => return Err(e.into()),
                Err(_) => {
                    return Ok(Rest::Lost(format!(
                        "after the wait queue(s) {} it would go to '{current}', which does not exist",
                        via.join(" → ")
                    )));
                }
            };
            let settings = self.settings_of(&info).await?;
            match destination::step(&info, &settings, &key, table) {
                destination::Step::Rest => {
                    return Ok(Rest::Queue {
                        queue: current,
                        via,
                    });
                }
                destination::Step::Wait {
                    next, routing_key, ..
                } => {
                    via.push(current);
                    if via.contains(&next) {
                        return Ok(Rest::Lost(format!(
                            "the wait queues {} send it round in a loop",
                            via.join(" → ")
                        )));
                    }
                    current = next;
                    key = routing_key;
                }
                destination::Step::Dropped { why } => return Ok(Rest::Lost(why)),
                destination::Step::Ambiguous { queues } => {
                    return Ok(Rest::Lost(format!(
                        "the wait queue '{current}' sends it on to {} queues ({}); name the one that consumes it with --to",
                        queues.len(),
                        queues.join(", ")
                    )));
                }
            }
        }
        Ok(Rest::Lost(format!(
            "more than {} wait queues in a row ({}): Warren does not follow further",
            destination::MAX_HOPS,
            via.join(" → ")
        )))
    }
}

/// Where a replayed message ends up.
pub(crate) enum Rest {
    /// In `queue`, after passing the wait queues `via`.
    Queue { queue: String, via: Vec<String> },
    /// Nowhere: it would be dropped (the reason says where and why).
    Lost(String),
}

/// Passive declare on a throwaway channel: a missing queue closes the channel it was asked on.
pub(crate) async fn queue_exists(
    conn: &lapin::Connection,
    name: &str,
) -> Result<bool, SessionError> {
    queue_depth(conn, name).await.map(|d| d.is_some())
}

/// The queue's message count from a passive declare (`None` when it does not exist).
pub(super) async fn queue_depth(
    conn: &lapin::Connection,
    name: &str,
) -> Result<Option<u64>, SessionError> {
    let name =
        amqp::short("the queue name", name).map_err(|e| SessionError::refused(e.to_string()))?;
    let ch = conn.create_channel().await.map_err(SessionError::channel(
        "opening a channel to read a queue's depth",
    ))?;
    let r = ch
        .queue_declare(
            name,
            lapin::options::QueueDeclareOptions {
                passive: true,
                ..Default::default()
            },
            lapin::types::FieldTable::default(),
        )
        .await;
    let _ = ch.close(200, "checked".into()).await;
    match r {
        Ok(q) => Ok(Some(u64::from(q.message_count()))),
        Err(e) => settle_check(Err(e)).map(|_| None),
    }
}

async fn exchange_exists(conn: &lapin::Connection, name: &str) -> Result<bool, SessionError> {
    let ch = conn.create_channel().await.map_err(SessionError::channel(
        "opening a channel to check an exchange",
    ))?;
    let r = ch
        .exchange_declare(
            amqp::short("the exchange name", name)
                .map_err(|e| SessionError::refused(e.to_string()))?,
            lapin::ExchangeKind::Direct,
            lapin::options::ExchangeDeclareOptions {
                passive: true,
                ..Default::default()
            },
            lapin::types::FieldTable::default(),
        )
        .await;
    let _ = ch.close(200, "checked".into()).await;
    settle_check(r)
}

fn settle_check(r: lapin::Result<()>) -> Result<bool, SessionError> {
    match r {
        Ok(()) => Ok(true),
        Err(e) => match amqp::soft_error_code(&e) {
            Some((404, _)) => Ok(false),
            Some((code, text)) => Err(SessionError::Broker(format!(
                "checking the replay target failed: {text} ({code})"
            ))),
            None => Err(SessionError::Channel {
                what: "lost the connection while checking the replay target".into(),
                source: e,
            }),
        },
    }
}
