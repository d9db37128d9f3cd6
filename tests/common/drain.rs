//! "Nothing came back twice" as an event, not a pause: [`until_quiet`] waits until the queues a
//! check is about have stopped moving — the consumer (the test's own or an application's) has
//! handled nothing new for a settle period, and the management API, in two samples a statistics
//! interval apart, counts the same messages, nothing unacknowledged and the same publish,
//! delivery and ack totals. A duplicate published before the wait began is in the second
//! sample's totals, so it is waited for (and handled, and counted) before the test counts; a
//! fixed 300–500 ms pause let one arriving later pass.
#![allow(dead_code)]

use std::time::{Duration, Instant};

use super::{TestVhost, enc};

/// How often the management API's figures move: RabbitMQ emits queue statistics every 5 s
/// (`collect_statistics_interval`, left at its default on the test brokers), so two samples this
/// far apart that agree mean nothing happened in between that it has not counted.
pub const STATS_INTERVAL: Duration = Duration::from_secs(5);

/// After the last delivery, how long nothing new may arrive before the queue counts as quiet.
pub const SETTLE: Duration = Duration::from_millis(500);

/// One queue as the management API and a passive declare see it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct QueueFigures {
    pub queue: String,
    /// Ready + unacknowledged, as the management API counts them.
    pub messages: Option<u64>,
    pub unacked: Option<u64>,
    /// The `message_stats` totals, where the broker reports them (not before the first event).
    pub publish: Option<u64>,
    pub deliver_get: Option<u64>,
    pub ack: Option<u64>,
    pub redeliver: Option<u64>,
    /// Ready, by passive declare (no statistics lag); `None` when the queue does not exist.
    pub ready: Option<u64>,
}

async fn figures(vhost: &TestVhost, conn: &lapin::Connection, queue: &str) -> QueueFigures {
    let v = vhost
        .get_json(&format!("/api/queues/{}/{}", enc(&vhost.name), enc(queue)))
        .await;
    let n = |k: &str| v.get(k).and_then(serde_json::Value::as_u64);
    let stat = |k: &str| {
        v.get("message_stats")
            .and_then(|s| s.get(k))
            .and_then(serde_json::Value::as_u64)
    };
    let ready = crate::framework_util::queue_state(conn, queue)
        .await
        .map(|(ready, _)| u64::from(ready));
    QueueFigures {
        queue: queue.to_string(),
        messages: n("messages"),
        unacked: n("messages_unacknowledged"),
        publish: stat("publish"),
        deliver_get: stat("deliver_get"),
        ack: stat("ack"),
        redeliver: stat("redeliver"),
        ready,
    }
}

/// The figures with the one that does not lag (the passive declare) left out, for comparing
/// two management samples.
fn counted(f: &[QueueFigures]) -> Vec<QueueFigures> {
    f.iter()
        .cloned()
        .map(|mut q| {
            q.ready = None;
            q
        })
        .collect()
}

/// Waits until `queues` are quiet and returns what `handled()` counted then: `handled()` (the
/// deliveries the queues' consumer has finished: a test's own consumer, or an application's
/// record of what it ran) has not moved for [`SETTLE`] since its last change, and two
/// management samples [`STATS_INTERVAL`] apart, both taken in that quiet, agree on every figure
/// with nothing unacknowledged, the later one matching a passive declare's ready count. Any
/// change starts the wait again, so a late duplicate is handled before this returns. Fails the
/// test after `within`, with the last figures.
pub async fn until_quiet(
    vhost: &TestVhost,
    conn: &lapin::Connection,
    queues: &[&str],
    handled: impl Fn() -> usize,
    within: Duration,
) -> usize {
    // Quiet is an event: a loaded broker's statistics lag, and a short bound failed a run whose
    // figures were merely late (seen under CI with 10 s); the wait still ends once quiet.
    let within = within.max(Duration::from_secs(60));
    let mut tries = super::wait::Tries::new(format!("{queues:?} to settle"), within);
    let mut last_handled = handled();
    let mut last_change = Instant::now();
    // The first sample of the current quiet stretch, and when it was taken.
    let mut first: Option<(Instant, Vec<QueueFigures>)> = None;
    loop {
        let now_handled = handled();
        if now_handled != last_handled {
            last_handled = now_handled;
            last_change = Instant::now();
            first = None;
        }
        let seen = if last_change.elapsed() >= SETTLE {
            let mut now = Vec::new();
            for q in queues {
                now.push(figures(vhost, conn, q).await);
            }
            let settled = now.iter().all(|f| f.unacked.unwrap_or(0) == 0);
            match &first {
                _ if !settled || handled() != last_handled => first = None,
                Some((at, before)) if counted(before) == counted(&now) => {
                    if at.elapsed() >= STATS_INTERVAL
                        && now
                            .iter()
                            .all(|f| f.ready == f.messages.map(|m| m - f.unacked.unwrap_or(0)))
                    {
                        return last_handled;
                    }
                }
                _ => first = Some((Instant::now(), now.clone())),
            }
            format!("{last_handled} handled, the queues now {now:?}")
        } else {
            format!("still handling messages ({last_handled} so far)")
        };
        tries.next(seen).await;
    }
}
