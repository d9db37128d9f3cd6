//! Carrying a run on after node loss: reconnect, let the queue settle, add up the stretches.

use std::future::Future;
use std::time::{Duration, Instant};

use lapin::options::QueueDeclareOptions;
use lapin::types::FieldTable;
use tokio::sync::watch;

use crate::broker::amqp;
use crate::domain::engine::Limits;

use super::{Job, Progress, ReplayError, StopReason, Summary, run_with};

/// [`run_with`], carrying on after node loss: when a stretch ends because the connection was
/// lost or the broker stopped answering (not cancelled, not forced), `connect` is asked for a
/// new (consume, publish) pair — the next node of a cluster — and the replay goes on from the
/// queue as it is then, at most `max_reconnects` times. Counts, ids and duplicates add up over
/// the stretches; a failed reconnect ends the run with the counts so far.
pub async fn run_failover<C, Fut>(
    mut connect: C,
    job: &Job,
    limits: Limits,
    cancel: watch::Receiver<bool>,
    mut on_progress: impl FnMut(&Progress),
    max_reconnects: u32,
) -> Result<Summary, ReplayError>
where
    C: FnMut() -> Fut,
    Fut: Future<Output = Result<(lapin::Connection, lapin::Connection), String>>,
{
    let mut job = job.clone();
    let mut total: Option<Summary> = None;
    loop {
        let (consume, publish) = match connect().await {
            Ok(pair) => pair,
            Err(e) => {
                return match total {
                    Some(mut t) => {
                        t.stop = StopReason::ConnectionLost(format!(
                            "{}; reconnecting failed: {e}",
                            t.stop
                        ));
                        Ok(t)
                    }
                    None => Err(ReplayError::Channel(e)),
                };
            }
        };
        if total.is_some() {
            settle_in(&consume, &job.dlq, &limits).await;
        }
        let base = total
            .as_ref()
            .map(|t| t.progress.clone())
            .unwrap_or_default();
        // Right after a node loss the queue may not answer for itself yet (a quorum queue
        // electing a new leader reports nothing ready and delivers nothing): be patient before
        // calling it empty or stalled.
        let stretch = if total.is_some() {
            Limits {
                idle: limits.idle.max(Duration::from_secs(10)),
                stall: limits.stall.max(Duration::from_secs(20)),
                ..limits.clone()
            }
        } else {
            limits.clone()
        };
        let r = run_with(&consume, &publish, &job, stretch, cancel.clone(), |p| {
            on_progress(&add_progress(&base, p))
        })
        .await;
        for c in [&consume, &publish] {
            if c.status().connected() {
                let _ = tokio::time::timeout(
                    limits.step.min(Duration::from_secs(2)),
                    c.close(200, "replay done".into()),
                )
                .await;
            }
        }
        let seg = match (r, total.take()) {
            (Ok(seg), t) => match t {
                Some(t) => merge(t, seg),
                None => seg,
            },
            (Err(e), Some(mut t)) => {
                t.stop = StopReason::ConnectionLost(format!("{}; after reconnecting: {e}", t.stop));
                return Ok(t);
            }
            (Err(e), None) => return Err(e),
        };
        let lost = matches!(
            seg.stop,
            StopReason::ConnectionLost(_) | StopReason::NoAnswer(_)
        ) && seg.counts.forced.is_none();
        let moved_here = seg.progress.moved - base.moved;
        if let Some(l) = job.limit {
            job.limit = Some(l.saturating_sub(moved_here));
        }
        if !lost
            || seg.reconnected.len() >= max_reconnects as usize
            || *cancel.borrow()
            || job.limit == Some(0)
        {
            return Ok(seg);
        }
        let mut seg = seg;
        seg.reconnected.push(seg.stop.to_string());
        total = Some(seg);
    }
}

/// After a node loss, waits (at most 10 s) until `queue` reports ready messages on the new
/// connection: a quorum queue electing a new leader reports none meanwhile, and a run started
/// then would stop at once as "empty".
async fn settle_in(conn: &lapin::Connection, queue: &str, limits: &Limits) {
    let Ok(queue) = amqp::short("the queue name", queue) else {
        return;
    };
    let until = Instant::now() + Duration::from_secs(10);
    while Instant::now() < until {
        let Ok(Ok(ch)) = tokio::time::timeout(limits.step, conn.create_channel()).await else {
            return;
        };
        let declared = tokio::time::timeout(
            limits.step,
            ch.queue_declare(
                queue.clone(),
                QueueDeclareOptions {
                    passive: true,
                    ..Default::default()
                },
                FieldTable::default(),
            ),
        )
        .await;
        let _ = tokio::time::timeout(Duration::from_secs(1), ch.close(200, "checked".into())).await;
        // Ready messages: go on. No answer at all: the queue's node is not back; the run's own
        // deadlines decide from here rather than this wait.
        if matches!(&declared, Ok(Ok(d)) if d.message_count() > 0) || declared.is_err() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

pub(crate) fn add_progress(base: &Progress, p: &Progress) -> Progress {
    Progress {
        moved: base.moved + p.moved,
        returned: base.returned + p.returned,
        failed: base.failed + p.failed,
        ..p.clone()
    }
}

pub(crate) fn merge(mut t: Summary, s: Summary) -> Summary {
    t.progress = add_progress(&t.progress, &s.progress);
    t.counts.merge(s.counts);
    t.moved_ids.extend_from(&s.moved_ids);
    t.stop = s.stop;
    t.reconnected.extend(s.reconnected);
    t.replayed_before += s.replayed_before;
    t.planned_unread |= s.planned_unread;
    t.left_in_dlq = s.left_in_dlq;
    t.held_elsewhere = t.held_elsewhere.max(s.held_elsewhere);
    t.canary = t.canary.or(s.canary);
    t.carrier = s.carrier;
    t
}
