//! Helpers for the `--max-backlog` tests: dead letters whose one way back is `orders.process`,
//! a real consumer there (prefetch 1, a fixed time per message, then the ack) that records each
//! id it handled, and a sampler of the queue's ready count.
#![allow(dead_code)]

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures_util::StreamExt;
use lapin::options::{BasicAckOptions, BasicConsumeOptions, BasicQosOptions, QueueDeclareOptions};
use lapin::types::FieldTable;
use tokio::sync::watch;
use tokio::task::JoinHandle;

use crate::common::amqp as h;
use crate::common::drain::until_quiet;
use crate::common::{TestVhost, unique};
use crate::replay_util::{dead_letter, simple};

/// The queue the dead letters came from, and go back to.
pub const TARGET: &str = "orders.process";
/// How many dead letters, and the replay's backlog cap.
pub const N: u32 = 300;
pub const MAX: u64 = 20;
/// The consumer's time per message: 50 a second, so 300 take at least 6 s.
pub const WORK: Duration = Duration::from_millis(20);
/// Over the cap a sample may read: Warren never publishes past the cap by its own count, but
/// that count and the samples are taken at different moments (a sample can land between a
/// publish the broker has routed and its confirm, which Warren counts as perhaps not there yet),
/// so a few more are allowed; without the cap the backlog reaches hundreds.
pub const SLACK: u64 = 10;

/// `n` dead letters in `dlq` (ids `bl-0` …), each rejected by `orders.process` for real, so
/// discovery names that queue as the way back.
pub async fn dead_letters(conn: &lapin::Connection, dlq: &str, n: u32) -> BTreeSet<String> {
    let ch = h::confirm_channel(conn).await;
    h::declare(
        &ch,
        dlq,
        warren::domain::features::QueueType::Classic,
        FieldTable::default(),
    )
    .await;
    let msgs: Vec<_> = (0..n).map(|i| simple("bl", i, &[])).collect();
    dead_letter(conn, TARGET, dlq, &msgs).await;
    let _ = ch.close(200, "ok".into()).await;
    (0..n).map(|i| format!("bl-{i}")).collect()
}

/// A consumer on `TARGET` as a real service is: prefetch 1, `work` per message, then the ack.
/// Each id handled is recorded, in order; it runs until `stop` says so.
pub struct Consumer {
    pub handled: Arc<Mutex<Vec<String>>>,
    stop: watch::Sender<bool>,
    task: JoinHandle<()>,
}

impl Consumer {
    pub async fn start(conn: &lapin::Connection, work: Duration) -> Consumer {
        let ch = conn.create_channel().await.expect("channel");
        ch.basic_qos(1, BasicQosOptions::default())
            .await
            .expect("qos");
        let mut deliveries = ch
            .basic_consume(
                TARGET.into(),
                unique("backlog-consumer").as_str().into(),
                BasicConsumeOptions::default(),
                FieldTable::default(),
            )
            .await
            .expect("consume");
        let handled = Arc::new(Mutex::new(Vec::new()));
        let (stop, mut stopped) = watch::channel(false);
        let seen = handled.clone();
        let task = tokio::spawn(async move {
            loop {
                let d = tokio::select! {
                    _ = stopped.changed() => break,
                    d = deliveries.next() => d,
                };
                let Some(Ok(d)) = d else { break };
                // Time, not an event: the service's work per message sets the pace the backlog
                // cap is measured against.
                tokio::time::sleep(work).await;
                let id = d
                    .properties
                    .message_id()
                    .as_ref()
                    .map(|s| s.to_string())
                    .unwrap_or_default();
                d.ack(BasicAckOptions::default()).await.expect("ack");
                seen.lock().expect("ids").push(id);
            }
            let _ = ch.close(200, "done".into()).await;
        });
        Consumer {
            handled,
            stop,
            task,
        }
    }

    pub fn count(&self) -> usize {
        self.handled.lock().expect("ids").len()
    }

    /// Waits (at most `within`) until `n` were handled, then until `TARGET` is quiet (see
    /// [`until_quiet`]: a duplicate the broker has counted is handled too), stops and returns
    /// every id handled.
    pub async fn finish(
        self,
        vhost: &TestVhost,
        conn: &lapin::Connection,
        n: usize,
        within: Duration,
    ) -> Vec<String> {
        let _ = crate::replay_util::eventually(within, || async { self.count() >= n }).await;
        until_quiet(vhost, conn, &[TARGET], || self.count(), within).await;
        let _ = self.stop.send(true);
        let _ = self.task.await;
        self.handled.lock().expect("ids").clone()
    }
}

/// The ready count of `TARGET` every `every`, by passive declare on a channel of its own.
pub struct Sampler {
    stop: watch::Sender<bool>,
    task: JoinHandle<Vec<u64>>,
}

impl Sampler {
    pub async fn start(conn: &lapin::Connection, every: Duration) -> Sampler {
        let ch = conn.create_channel().await.expect("channel");
        let (stop, stopped) = watch::channel(false);
        let task = tokio::spawn(async move {
            let mut samples = Vec::new();
            while !*stopped.borrow() {
                let q = ch
                    .queue_declare(
                        TARGET.into(),
                        QueueDeclareOptions {
                            passive: true,
                            ..Default::default()
                        },
                        FieldTable::default(),
                    )
                    .await
                    .expect("passive declare");
                samples.push(u64::from(q.message_count()));
                // Time, not an event: a sample every `every` is the series the test reads.
                tokio::time::sleep(every).await;
            }
            let _ = ch.close(200, "done".into()).await;
            samples
        });
        Sampler { stop, task }
    }

    pub async fn finish(self) -> Vec<u64> {
        let _ = self.stop.send(true);
        self.task.await.expect("sampler")
    }
}

/// The target's ready count stayed at about the cap, and reached it (the replay was paced to
/// the cap, not trickled). Returns the largest sample.
pub fn assert_paced(label: &str, samples: &[u64]) -> u64 {
    let max = samples.iter().copied().max().unwrap_or(0);
    assert!(
        max <= MAX + SLACK,
        "{label}: the target held {max} ready (samples {samples:?})"
    );
    assert!(max >= MAX / 2, "{label}: at most {max} ready: {samples:?}");
    max
}

/// Every id handled exactly once: none missing, none twice.
pub fn assert_once(label: &str, handled: &[String], expected: &BTreeSet<String>) {
    let got: BTreeSet<String> = handled.iter().cloned().collect();
    assert_eq!(
        handled.len(),
        got.len(),
        "{label}: {} handled twice",
        handled.len() - got.len()
    );
    let missing: Vec<_> = expected.difference(&got).take(5).collect();
    let extra: Vec<_> = got.difference(expected).take(5).collect();
    assert!(
        missing.is_empty() && extra.is_empty(),
        "{label}: missing {missing:?}, unexpected {extra:?}"
    );
}
