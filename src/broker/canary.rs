//! The canary's eyes on the broker: how its messages are seen coming back (a watch queue of
//! Warren's bound as the DLQ is, or the DLQ's depth), and the wait itself, whose decisions are
//! `domain::canary`'s. Nothing here reads the DLQ: a quorum DLQ spends no delivery on it.

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use futures_util::StreamExt;
use lapin::options::{BasicConsumeOptions, QueueBindOptions, QueueDeclareOptions};
use lapin::types::FieldTable;
use tokio::sync::watch;

use crate::broker::amqp;
use crate::broker::session::{Preview, Session};
use crate::domain::canary::{
    CanaryDecision, CanaryPlan, CanaryRule, CanaryWait, Seen, Sight, Watch,
};
use crate::domain::discovery::Binding;
use crate::domain::sanitize::one_line;

/// How often the target's counts are read while the canary waits.
const POLL: Duration = Duration::from_millis(250);
/// How often the management API is asked for unacknowledged counts (it lags seconds anyway).
const MGMT_EVERY: Duration = Duration::from_secs(1);
/// Most target queues watched; a plan reaching more waits its whole time instead.
const MAX_TARGETS: usize = 16;

/// The watch queue: an exclusive, server-named queue bound as the DLQ is to the exchanges its
/// targets dead-letter to, so every dead letter routed to the DLQ is copied here too (the
/// copy is Warren's; the DLQ's own is untouched). Gone with its connection.
pub struct Tap {
    conn: lapin::Connection,
    consumer: lapin::Consumer,
}

impl Tap {
    pub(crate) async fn close(self) {
        let _ = tokio::time::timeout(
            Duration::from_secs(2),
            self.conn.close(200, "canary done".into()),
        )
        .await;
    }
}

impl Session {
    /// The canary of a replay that `preview` allowed: where its messages rest and how Warren
    /// will see them come back.
    pub(crate) async fn canary_plan(
        &self,
        dlq: &str,
        preview: &Preview,
        rule: CanaryRule,
    ) -> CanaryPlan {
        let mut targets = BTreeSet::new();
        for t in preview.targets.values() {
            match &t.rests_in {
                Some(q) => {
                    targets.insert(q.clone());
                }
                None => targets.extend(t.reaches.iter().cloned()),
            }
        }
        let through_wait_queues = preview.targets.values().any(|t| !t.via.is_empty())
            || targets.is_empty()
            || targets.len() > MAX_TARGETS;
        let targets: Vec<String> = targets.into_iter().take(MAX_TARGETS).collect();
        let sight = self.sight(dlq, &targets).await;
        CanaryPlan {
            rule,
            sight,
            targets,
            through_wait_queues,
        }
    }

    /// Exact when every target dead-letters through a named exchange that routes to the DLQ.
    async fn sight(&self, dlq: &str, targets: &[String]) -> Sight {
        let estimate = |why: String| Sight::Estimate { why };
        if targets.is_empty() {
            return estimate("the plan read nothing, so its targets are known only as met".into());
        }
        let mut exchanges = BTreeSet::new();
        for t in targets {
            let info = match self.handle.mgmt.queue(self.vhost(), t).await {
                Ok(i) => i,
                Err(e) => return estimate(format!("'{}': {e}", one_line(t, 80))),
            };
            let settings = match self.handle.settings_of(&info).await {
                Ok(s) => s,
                Err(e) => return estimate(e.to_string()),
            };
            match settings.dead_letter_exchange.as_deref() {
                None => {
                    return estimate(format!(
                        "'{}' has no dead-letter exchange: its consumer puts failures in the DLQ itself",
                        one_line(t, 80)
                    ));
                }
                Some("") => {
                    return estimate(format!(
                        "'{}' dead-letters through the default exchange, which cannot be watched",
                        one_line(t, 80)
                    ));
                }
                Some(x) => {
                    exchanges.insert(x.to_string());
                }
            }
        }
        let bindings = match self.handle.mgmt.queue_bindings(self.vhost(), dlq).await {
            Ok(b) => b,
            Err(e) => return estimate(e.to_string()),
        };
        for x in &exchanges {
            if !bindings.iter().any(|b| &b.source == x) {
                return estimate(format!(
                    "exchange '{}' does not route to the DLQ directly",
                    one_line(x, 80)
                ));
            }
        }
        Sight::Exact {
            exchanges: exchanges.into_iter().collect(),
        }
    }

    /// Opens the watch queue of an exact canary (before its first message moves); `Err`: it
    /// could not be set up (permissions), with why — the canary then estimates.
    pub(crate) async fn open_tap(&self, dlq: &str, plan: &CanaryPlan) -> Result<Tap, String> {
        let Sight::Exact { exchanges } = &plan.sight else {
            return Err("the canary estimates".into());
        };
        let bindings: Vec<Binding> = self
            .handle
            .mgmt
            .queue_bindings(self.vhost(), dlq)
            .await
            .map_err(|e| e.to_string())?
            .into_iter()
            .filter(|b| exchanges.contains(&b.source))
            .collect();
        let conn = self
            .handle
            .connect_amqp("warren-canary")
            .await
            .map_err(|e| e.to_string())?;
        match tap_on(&conn, &bindings).await {
            Ok(consumer) => Ok(Tap { conn, consumer }),
            Err(e) => {
                let _ = conn.close(200, "canary not set up".into()).await;
                Err(e.to_string())
            }
        }
    }

    /// The canary's wait after its `moved` messages were confirmed: what came back, whether the
    /// consumer took them, and the decision (`Cancelled` when `cancel` flips). `dlq_base`: what
    /// the DLQ would hold had none come back (an estimating canary counts from it: a consumer
    /// may reject them before the canary's own stretch has even ended).
    pub(crate) async fn canary_wait(
        &self,
        c: &Canary<'_>,
        mut tap: Option<&mut Tap>,
        cancel: &mut watch::Receiver<bool>,
        mut on_wait: impl FnMut(&CanaryWait),
    ) -> (CanaryDecision, Watch) {
        let (dlq, plan, run_id) = (c.dlq, c.plan, c.run_id);
        let mut w = Watch::new(plan, c.moved, Instant::now());
        let estimate = tap.is_none();
        if estimate {
            w.on(Instant::now(), Seen::DlqReady(c.dlq_base));
        }
        let Ok(conn) = self.handle.amqp().await else {
            return (CanaryDecision::NotConsumed, w);
        };
        let mut counts = Counts {
            ch: None,
            last_mgmt: None,
        };
        let mut tick = tokio::time::interval(POLL);
        let mut cancel_open = true;
        loop {
            let now = Instant::now();
            if let Some(d) = w.decide(now) {
                return (d, w);
            }
            if *cancel.borrow() {
                return (CanaryDecision::Cancelled, w);
            }
            tokio::select! {
                d = next_of(&mut tap) => match d {
                    Some(Ok(d)) => {
                        if let Some(failure) = came_back(self, dlq, run_id, d) {
                            w.on(Instant::now(), Seen::CameBack { failure });
                        }
                    }
                    // The watch queue is gone: what comes back can no longer be seen, and a
                    // canary that cannot see must not let the rest go.
                    _ => return (CanaryDecision::Blind, w),
                },
                // A sender gone for good can cancel no more: stop listening, never spin.
                r = cancel.changed(), if cancel_open => cancel_open = r.is_ok(),
                _ = tick.tick() => {
                    self.canary_look(&mut counts, conn, dlq, plan, estimate, &mut w).await;
                    on_wait(&w.progress(Instant::now()));
                }
            }
        }
    }

    /// One look at the counts the canary decides on.
    async fn canary_look(
        &self,
        counts: &mut Counts,
        conn: &lapin::Connection,
        dlq: &str,
        plan: &CanaryPlan,
        estimate: bool,
        w: &mut Watch,
    ) {
        let mut ready = Some(0u64);
        for t in &plan.targets {
            ready = match (ready, counts.ready(conn, t).await) {
                (Some(a), Some(b)) => Some(a + b),
                _ => None,
            };
        }
        let now = Instant::now();
        if let Some(n) = ready {
            w.on(now, Seen::TargetsReady(n));
        }
        if estimate && let Some(n) = counts.ready(conn, dlq).await {
            w.on(now, Seen::DlqReady(n));
        }
        if w.wants_unacked(now) && counts.last_mgmt.is_none_or(|t| now - t >= MGMT_EVERY) {
            counts.last_mgmt = Some(now);
            let mut sum = Some(0u64);
            for t in &plan.targets {
                let n = self
                    .handle
                    .mgmt
                    .queue(self.vhost(), t)
                    .await
                    .ok()
                    .and_then(|q| q.messages_unacknowledged);
                sum = sum.zip(n).map(|(a, b)| a + b);
            }
            if let Some(n) = sum {
                // The reading shows the queue as it was up to a collection interval ago: it
                // counts as taken when the request was made.
                w.on(now, Seen::TargetsUnacked(n));
            }
        }
    }
}

/// A canary whose own stretch is over.
pub struct Canary<'a> {
    pub dlq: &'a str,
    pub plan: &'a CanaryPlan,
    /// The run's id, which its messages carry.
    pub run_id: &'a str,
    /// The canary's messages that moved.
    pub moved: u64,
    pub dlq_base: u64,
}

/// The counts' channel (passive declares), opened again after a queue that vanished closed it.
struct Counts {
    ch: Option<lapin::Channel>,
    last_mgmt: Option<Instant>,
}

impl Counts {
    /// A queue's ready messages, exactly and at once (a passive declare).
    async fn ready(&mut self, conn: &lapin::Connection, queue: &str) -> Option<u64> {
        let name = amqp::short("the queue name", queue).ok()?;
        if !self.ch.as_ref().is_some_and(|c| c.status().connected()) {
            self.ch = tokio::time::timeout(Duration::from_secs(5), conn.create_channel())
                .await
                .ok()?
                .ok();
        }
        let ch = self.ch.as_ref()?;
        tokio::time::timeout(Duration::from_secs(5), amqp::passive_depth(ch, name))
            .await
            .ok()?
            .ok()
    }
}

async fn next_of(tap: &mut Option<&mut Tap>) -> Option<lapin::Result<lapin::message::Delivery>> {
    match tap {
        Some(t) => t.consumer.next().await,
        None => std::future::pending().await,
    }
}

/// The failure of a message copied to the watch queue when it is one of this run's, in a few
/// words (its fingerprint's summary, as the groups name it).
fn came_back(s: &Session, dlq: &str, run_id: &str, d: lapin::message::Delivery) -> Option<String> {
    let dl = amqp::dead_letter_from_delivery(dlq, 0, d, 64 * 1024);
    if crate::domain::comeback::run_id_of(&dl).as_deref() != Some(run_id) {
        return None;
    }
    let ex = crate::domain::explain::explain_with(&dl, &s.handle.target.settings.conventions, 0);
    Some(one_line(&ex.fingerprint.summary, 120))
}

/// Declares the watch queue, binds it as the DLQ is bound, and consumes it (auto-ack: the
/// copies are Warren's own).
async fn tap_on(conn: &lapin::Connection, bindings: &[Binding]) -> lapin::Result<lapin::Consumer> {
    let ch = conn.create_channel().await?;
    let q = ch
        .queue_declare(
            "".into(),
            QueueDeclareOptions {
                exclusive: true,
                auto_delete: true,
                ..Default::default()
            },
            FieldTable::default(),
        )
        .await?;
    for b in bindings {
        let args =
            crate::domain::json::table_from_json(&serde_json::Value::Object(b.arguments.clone()));
        let args = amqp::table_to_amqp(&args).unwrap_or_default();
        let (Ok(x), Ok(rk)) = (
            amqp::short("the exchange name", &b.source),
            amqp::short("the routing key", &b.routing_key),
        ) else {
            continue;
        };
        ch.queue_bind(q.name().clone(), x, rk, QueueBindOptions::default(), args)
            .await?;
    }
    ch.basic_consume(
        q.name().clone(),
        "warren-canary".into(),
        BasicConsumeOptions {
            no_ack: true,
            exclusive: true,
            ..Default::default()
        },
        FieldTable::default(),
    )
    .await
}
