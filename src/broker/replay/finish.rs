//! What both shells (AMQP 0.9.1 and 1.0) do the same at a run's start and end: the summary
//! before anything moved, the engine's configuration, and the summary once the engine is done.

use std::time::Instant;

use crate::domain::amqp10::carrier::Carrier;
use crate::domain::engine::{Config, Limits, Source, Tally};

use super::{Driver, Job, Progress, Spool, StopReason, Summary, fill_progress};

impl Summary {
    /// A run's summary before anything moved: `depth_at_start` in the DLQ, of which the run
    /// takes at most its limit.
    pub(super) fn at_start(job: &Job, depth_at_start: u64, carrier: Carrier) -> Summary {
        Summary {
            progress: Progress {
                // Of the selection, like every later count: the run stops at its limit.
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
            carrier,
        }
    }
}

/// The engine's configuration for `job` with the consumer's `prefetch`.
pub(super) fn config(job: &Job, depth_at_start: u64, prefetch: usize, limits: &Limits) -> Config {
    Config {
        depth_at_start,
        limit: job.limit,
        window: job.window,
        prefetch,
        limits: limits.clone(),
        settle_lag: job.settle_lag,
        backlog: job.backlog.as_ref().map(|b| b.max),
        source: Source::Queue,
    }
}

/// Fills `summary` from the engine once it is done: the last moved ids, the counts, the stop,
/// and `left_in_dlq`, what the broker counts in the DLQ now (the messages the run did not look
/// at are never more than that: another consumer took some, or the queue was emptied).
pub(super) fn settle(
    summary: &mut Summary,
    drv: &mut Driver,
    job: &Job,
    started: Instant,
    left_in_dlq: Option<u64>,
    replayed_before: u64,
) {
    summary.moved_ids.append(drv.engine.take_moved());
    let t = drv.engine.tally();
    let depth = summary.depth_at_start;
    fill_progress(&mut summary.progress, t, started, depth, job.limit);
    summary.progress.eta = None;
    summary.progress.backlog = None;
    summary.left_in_dlq = left_in_dlq;
    if let Some(left) = left_in_dlq {
        summary.progress.remaining = summary.progress.remaining.min(left);
    }
    summary.counts = t.clone();
    summary.replayed_before = replayed_before;
    summary.stop = drv
        .engine
        .stop_reason()
        .cloned()
        .unwrap_or(StopReason::ReachedStartDepth);
}
