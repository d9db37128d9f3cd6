//! A replay over AMQP 1.0: the engine's loop of [`super::run_with`], on [`Shell10`].

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::time::{Duration, Instant};

use futures_util::stream::FuturesUnordered;

use crate::broker::amqp10::{self as a10, Endpoint10};
use crate::domain::engine::{Config, Effect, Engine, Limits, Tally};

use super::shell10::Shell10;
use super::wait::{CancelWatch, Pacer};
use super::{
    Driver, Job, Progress, ReplayError, SPOOL_BATCH, Spool, StopReason, Summary, fill_progress,
    left_in, prefetch_for,
};

/// Runs `job` over AMQP 1.0 at `ep`; depths are asked on `depth_conn` (AMQP 0.9.1).
pub(super) async fn run(
    depth_conn: &lapin::Connection,
    ep: &Endpoint10,
    job: &Job,
    limits: Limits,
    cancel: tokio::sync::watch::Receiver<bool>,
    mut on_progress: impl FnMut(&Progress),
) -> Result<Summary, ReplayError> {
    let step = limits.step;
    let depth_at_start = left_in(depth_conn, &job.dlq)
        .await
        .ok_or_else(|| ReplayError::Queue {
            queue: job.dlq.clone(),
            reason: "the broker did not say how many messages it holds".into(),
        })?;
    let mut summary = Summary {
        progress: Progress {
            remaining: job.limit.map_or(depth_at_start, |l| l.min(depth_at_start)),
            ..Default::default()
        },
        depth_at_start,
        counts: Tally::default(),
        moved_ids: Spool::default(),
        stop: StopReason::ReachedStartDepth,
        reconnected: Vec::new(),
        replayed_before: 0,
        planned_unread: false,
        left_in_dlq: None,
        held_elsewhere: 0,
        canary: None,
        carrier: crate::domain::amqp10::carrier::Carrier::Amqp10,
    };
    if depth_at_start == 0 {
        summary.stop = StopReason::QueueEmpty;
        return Ok(summary);
    }
    let mut link = a10::open(ep, "replay", step.max(Duration::from_secs(5)))
        .await
        .map_err(ReplayError::Channel)?;
    let prefetch = u32::from(prefetch_for(job, None));
    let receiver = match Shell10::receiver(&mut link, job, prefetch).await {
        Ok(r) => r,
        Err(reason) => {
            link.close(step).await;
            return Err(ReplayError::Queue {
                queue: job.dlq.clone(),
                reason,
            });
        }
    };
    let mut shell = Shell10 {
        job,
        depth_conn,
        link,
        receiver,
        senders: HashMap::new(),
        unsettled: BTreeMap::new(),
        next_tag: 0,
        outgoing: None,
        inflight: FuturesUnordered::new(),
        pacer: Pacer::new(job.rate),
        step,
        prefetch,
        replayed_before: 0,
        unresponsive: false,
        left: None,
        stopped: false,
    };
    let started = Instant::now();
    let mut drv = Driver {
        engine: Engine::new(
            Config {
                depth_at_start,
                limit: job.limit,
                window: job.window,
                prefetch: shell.prefetch as usize,
                limits: limits.clone(),
                settle_lag: job.settle_lag,
                backlog: job.backlog.as_ref().map(|b| b.max),
            },
            started,
        ),
        fx: VecDeque::new(),
        cancel: CancelWatch {
            rx: cancel,
            open: true,
        },
    };
    let mut last_progress = Instant::now();
    'run: loop {
        while let Some(effect) = drv.fx.pop_front() {
            if matches!(effect, Effect::Finish) {
                break 'run;
            }
            let Some(ev) = shell.perform(effect, &mut drv).await else {
                continue;
            };
            if drv.engine.is_done() {
                break 'run;
            }
            let e = drv.engine.on(Instant::now(), ev);
            drv.fx.extend(e);
        }
        let Some(ev) = shell.next_event(&mut drv).await else {
            continue;
        };
        let e = drv.engine.on(Instant::now(), ev);
        drv.fx.extend(e);
        if drv.engine.tally().moved_ids.len() >= SPOOL_BATCH {
            summary.moved_ids.append(drv.engine.take_moved());
        }
        if last_progress.elapsed() >= Duration::from_millis(200) {
            last_progress = Instant::now();
            let t = drv.engine.tally();
            fill_progress(&mut summary.progress, t, started, depth_at_start, job.limit);
            on_progress(&summary.progress);
        }
    }
    let forced = drv.engine.tally().forced.is_some();
    let Shell10 {
        receiver,
        link,
        left,
        replayed_before,
        ..
    } = shell;
    let close_limit = if forced {
        Duration::from_millis(1)
    } else {
        step
    };
    let _ = tokio::time::timeout(close_limit, receiver.close()).await;
    link.close(close_limit).await;

    summary.moved_ids.append(drv.engine.take_moved());
    let t = drv.engine.tally();
    fill_progress(&mut summary.progress, t, started, depth_at_start, job.limit);
    summary.progress.eta = None;
    summary.left_in_dlq = match left {
        Some(counted) => counted,
        None => left_in(depth_conn, &job.dlq).await,
    };
    if let Some(left) = summary.left_in_dlq {
        summary.progress.remaining = summary.progress.remaining.min(left);
    }
    summary.counts = t.clone();
    summary.replayed_before = replayed_before;
    summary.stop = drv
        .engine
        .stop_reason()
        .cloned()
        .unwrap_or(StopReason::ReachedStartDepth);
    on_progress(&summary.progress);
    Ok(summary)
}

/// Whether the DLQ's head message came from an AMQP 1.0 client (`domain::amqp10::carrier::sign`),
/// for a run whose plan read nothing: read with `basic.get` and handed straight back, on a
/// connection of its own (a message the broker cannot send closes it). Only where handing a
/// message back spends no delivery (the plan checks).
pub(crate) async fn head_is_10(conn: &lapin::Connection, dlq: &str, limit: Duration) -> bool {
    use lapin::options::{BasicGetOptions, BasicNackOptions};
    let look = async {
        let name = crate::broker::amqp::short("the queue name", dlq).ok()?;
        let ch = conn.create_channel().await.ok()?;
        let got = ch
            .basic_get(name, BasicGetOptions { no_ack: false })
            .await
            .ok()
            .flatten();
        let sign = got.map(|m| {
            let tag = m.delivery.delivery_tag;
            let dl = crate::broker::amqp::dead_letter_from_delivery(dlq, 0, m.delivery, 0);
            (tag, crate::domain::amqp10::carrier::sign(&dl).is_some())
        });
        if let Some((tag, _)) = sign {
            let requeue = BasicNackOptions {
                multiple: false,
                requeue: true,
            };
            let _ = ch.basic_nack(tag, requeue).await;
        }
        let _ = ch.close(200, "looked at the head".into()).await;
        sign.map(|(_, s)| s)
    };
    matches!(tokio::time::timeout(limit, look).await, Ok(Some(true)))
}
