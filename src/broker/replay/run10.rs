//! A replay over AMQP 1.0: the engine's loop of [`super::run_with`], on [`Shell10`].

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::time::{Duration, Instant};

use futures_util::stream::FuturesUnordered;

use crate::broker::amqp10::{self as a10, Endpoint10};
use crate::domain::amqp10::carrier::Carrier;
use crate::domain::engine::{Engine, Limits};

use super::shell10::Shell10;
use super::wait::{CancelWatch, Pacer};
use super::{
    Driver, Job, Progress, ReplayError, SPOOL_BATCH, StopReason, Summary, fill_progress, finish,
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
    let mut summary = Summary::at_start(job, depth_at_start, Carrier::Amqp10);
    if depth_at_start == 0 {
        summary.stop = StopReason::QueueEmpty;
        return Ok(summary);
    }
    let mut shell = open(depth_conn, ep, job, step).await?;
    let started = Instant::now();
    let mut drv = Driver {
        engine: Engine::new(
            finish::config(job, depth_at_start, shell.prefetch as usize, &limits),
            started,
        ),
        fx: VecDeque::new(),
        cancel: CancelWatch {
            rx: cancel,
            open: true,
        },
    };
    drive(
        &mut shell,
        &mut drv,
        &mut summary,
        started,
        &mut on_progress,
    )
    .await;
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
    let left = match left {
        Some(counted) => counted,
        None => left_in(depth_conn, &job.dlq).await,
    };
    finish::settle(&mut summary, &mut drv, job, started, left, replayed_before);
    on_progress(&summary.progress);
    Ok(summary)
}

/// The run's connection, its receiver on the DLQ taking up to the prefetch, and the shell.
async fn open<'a>(
    depth_conn: &'a lapin::Connection,
    ep: &Endpoint10,
    job: &'a Job,
    step: Duration,
) -> Result<Shell10<'a>, ReplayError> {
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
    Ok(Shell10 {
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
        depth_ch: None,
    })
}

/// The engine's loop: carries out its effects and feeds it what the broker says, until it is
/// done; reports progress a few times a second.
async fn drive(
    shell: &mut Shell10<'_>,
    drv: &mut Driver,
    summary: &mut Summary,
    started: Instant,
    on_progress: &mut impl FnMut(&Progress),
) {
    let (depth_at_start, limit) = (summary.depth_at_start, shell.job.limit);
    let mut last_progress = Instant::now();
    super::drive::drive(shell, drv, |drv| {
        if drv.engine.tally().moved_ids.len() >= SPOOL_BATCH {
            summary.moved_ids.append(drv.engine.take_moved());
        }
        if last_progress.elapsed() >= Duration::from_millis(200) {
            last_progress = Instant::now();
            let t = drv.engine.tally();
            fill_progress(&mut summary.progress, t, started, depth_at_start, limit);
            on_progress(&summary.progress);
        }
    })
    .await;
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
