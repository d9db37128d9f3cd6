//! The canary (issue 25), with a real consumer on real brokers and every id counted.
//!
//! - A consumer that still rejects (the bug): `replay --canary 10` of 200 moves 10, sees all 10
//!   come back (exactly, by the run's id, through a watch queue on the dead-letter exchange),
//!   stops with exit 1 and says why; the other 190 are untouched, in place and in order.
//! - After the fix, the same command replays all 200, each handled exactly once, while fresh
//!   failures of live traffic (20 other ids) arrive in the same DLQ during the canary: they do
//!   not count as the canary's, and stay in the DLQ.
//! - Through the default exchange the canary estimates from the DLQ's growth and says so; with
//!   no consumer at all, it stops as "not consumed" when its wait is up.
//! - The TUI's worker goes through the same home: its canary stops the same way.

use crate::common;
use crate::replay_util;

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::amqp::{self as h, amqp_depth};
use common::drain::until_quiet;
use common::{TestBroker, TestVhost};
use futures_util::StreamExt;
use lapin::options::{
    BasicAckOptions, BasicConsumeOptions, BasicQosOptions, BasicRejectOptions,
    ExchangeDeclareOptions, QueueBindOptions,
};
use lapin::types::{AMQPValue, FieldTable};
use replay_util::{Home, message_ids, read_all, reject_all, simple, warren};
use warren::domain::features::QueueType;

/// Who handled what: ids acked (handled) and ids rejected (failed), in order.
#[derive(Default)]
struct Handled {
    acked: Vec<String>,
    rejected: Vec<String>,
}

/// A consumer of `queue` that rejects (the bug) while `broken` is set, and always rejects ids
/// starting with "live" (live traffic that fails for its own reasons).
async fn consumer(
    conn: &lapin::Connection,
    queue: &str,
    broken: Arc<AtomicBool>,
) -> Arc<Mutex<Handled>> {
    let ch = conn.create_channel().await.unwrap();
    ch.basic_qos(10, BasicQosOptions::default()).await.unwrap();
    let mut c = ch
        .basic_consume(
            queue.into(),
            "test-consumer".into(),
            BasicConsumeOptions::default(),
            FieldTable::default(),
        )
        .await
        .unwrap();
    let handled = Arc::new(Mutex::new(Handled::default()));
    let h2 = handled.clone();
    tokio::spawn(async move {
        let _ch = ch;
        while let Some(Ok(d)) = c.next().await {
            let id = d
                .properties
                .message_id()
                .as_ref()
                .map(|s| s.to_string())
                .unwrap_or_default();
            if broken.load(Ordering::SeqCst) || id.starts_with("live") {
                d.reject(BasicRejectOptions { requeue: false })
                    .await
                    .unwrap();
                h2.lock().unwrap().rejected.push(id);
            } else {
                d.ack(BasicAckOptions::default()).await.unwrap();
                h2.lock().unwrap().acked.push(id);
            }
        }
    });
    handled
}

/// `orders` dead-letters through the exchange `dlx` into `orders.dlq`; 200 dead letters
/// `o-0`..`o-199` in order.
async fn named_exchange_topology(conn: &lapin::Connection) {
    let ch = h::confirm_channel(conn).await;
    ch.exchange_declare(
        "dlx".into(),
        lapin::ExchangeKind::Direct,
        ExchangeDeclareOptions {
            durable: true,
            ..Default::default()
        },
        FieldTable::default(),
    )
    .await
    .unwrap();
    h::declare(&ch, "orders.dlq", QueueType::Classic, FieldTable::default()).await;
    ch.queue_bind(
        "orders.dlq".into(),
        "dlx".into(),
        "orders".into(),
        QueueBindOptions::default(),
        FieldTable::default(),
    )
    .await
    .unwrap();
    let mut args = FieldTable::default();
    args.insert(
        "x-dead-letter-exchange".into(),
        AMQPValue::LongString("dlx".into()),
    );
    h::declare(&ch, "orders", QueueType::Classic, args).await;
    fill_and_fail(conn, &ch, "orders", "orders.dlq", "o", 200).await;
}

/// Publishes `n` messages `{prefix}-{i}` to `work` and rejects each into `dlq`.
async fn fill_and_fail(
    conn: &lapin::Connection,
    ch: &lapin::Channel,
    work: &str,
    dlq: &str,
    prefix: &str,
    n: u32,
) {
    let before = amqp_depth(conn, dlq).await;
    for i in 0..n {
        let (p, hd, body) = simple(prefix, i, &[]);
        h::publish(ch, work, &p, &hd, &body).await;
    }
    reject_all(conn, work, n as usize).await;
    h::wait_for_depth(conn, dlq, before + u64::from(n), Duration::from_secs(20)).await;
}

fn counts(ids: &[String]) -> BTreeMap<String, usize> {
    let mut m = BTreeMap::new();
    for id in ids {
        *m.entry(id.clone()).or_insert(0) += 1;
    }
    m
}

fn o_ids(range: std::ops::Range<u32>) -> Vec<String> {
    range.map(|i| format!("o-{i}")).collect()
}

#[tokio::test]
async fn a_canary_stops_a_replay_into_a_consumer_that_still_fails_and_goes_ahead_after_the_fix() {
    TestBroker::each(|b| async move {
        let vh = TestVhost::new(&b, "canary-exact").await;
        let home = Home::new("canary-exact");
        let conn = h::connect(&vh).await;
        named_exchange_topology(&conn).await;
        let broken = Arc::new(AtomicBool::new(true));
        let handled = consumer(&conn, "orders", broken.clone()).await;

        let args = ["replay", "orders.dlq", "--canary", "10", "--yes", "--json"];
        let r = warren(&vh, &home, &args).await;
        assert_eq!(r.code, Some(1), "{}: {r}", b.label);
        let sum = r.event("summary");
        let canary = &sum["canary"];
        assert_eq!(canary["decision"], "came_back", "{}: {r}", b.label);
        assert_eq!(canary["moved"], 10, "{}: {r}", b.label);
        assert_eq!(canary["came_back"], 10, "{}: {r}", b.label);
        assert_eq!(canary["exact"], true, "{}: {r}", b.label);
        assert_eq!(canary["left_untouched"], 190, "{}: {r}", b.label);
        assert_eq!(sum["moved"], 10, "{}: {r}", b.label);
        let outcome = sum["outcome"].as_str().unwrap_or_default();
        assert!(
            outcome.contains("10 of 10 came back") && outcome.contains("190 left in orders.dlq"),
            "{}: {outcome}",
            b.label
        );
        // The 190 never moved, in their order; the 10 came back behind them.
        let dlq = message_ids(&read_all(&conn, "orders.dlq", 200).await);
        let mut want = o_ids(10..200);
        want.extend(o_ids(0..10));
        assert_eq!(dlq, want, "{}", b.label);
        assert_eq!(
            handled.lock().unwrap().rejected,
            o_ids(0..10),
            "{}",
            b.label
        );

        // The fix is out; live traffic keeps failing for its own reasons meanwhile.
        broken.store(false, Ordering::SeqCst);
        let live = {
            let conn = h::connect(&vh).await;
            tokio::spawn(async move {
                let ch = h::confirm_channel(&conn).await;
                for i in 0..20 {
                    let (p, hd, body) = simple("live", i, &[]);
                    h::publish(&ch, "orders", &p, &hd, &body).await;
                    // Time, not an event: live traffic spread over the canary's wait.
                    tokio::time::sleep(Duration::from_millis(150)).await;
                }
                let _ = conn.close(200, "ok".into()).await;
            })
        };
        let r = warren(&vh, &home, &args).await;
        live.await.unwrap();
        assert_eq!(r.code, Some(0), "{}: {r}", b.label);
        let sum = r.event("summary");
        assert_eq!(sum["canary"]["decision"], "went_ahead", "{}: {r}", b.label);
        assert_eq!(
            sum["canary"]["came_back"], 0,
            "{}: live failures are not the canary's: {r}",
            b.label
        );
        // Live failures that reached the DLQ before the plan are in its count too: they are
        // replayed, fail again for their own reasons and come back.
        let moved = sum["moved"].as_u64().unwrap_or_default();
        assert!((200..=220).contains(&moved), "{}: {r}", b.label);
        h::wait_for_depth(&conn, "orders", 0, Duration::from_secs(20)).await;
        h::wait_for_depth(&conn, "orders.dlq", 20, Duration::from_secs(20)).await;
        // "Each once" is counted once nothing moves any more: a late duplicate is in the count.
        until_quiet(
            &vh,
            &conn,
            &["orders", "orders.dlq"],
            || {
                let h = handled.lock().unwrap();
                h.acked.len() + h.rejected.len()
            },
            Duration::from_secs(60),
        )
        .await;
        let acked = counts(&handled.lock().unwrap().acked);
        let all = o_ids(0..200);
        assert_eq!(acked.len(), 200, "{}: {acked:?}", b.label);
        assert!(
            all.iter().all(|id| acked.get(id) == Some(&1)),
            "{}: each handled once: {acked:?}",
            b.label
        );
        let mut dlq = message_ids(&read_all(&conn, "orders.dlq", 20).await);
        dlq.sort();
        let mut live_ids: Vec<String> = (0..20).map(|i| format!("live-{i}")).collect();
        live_ids.sort();
        assert_eq!(
            dlq, live_ids,
            "{}: only the live failures are left",
            b.label
        );
        let _ = conn.close(200, "ok".into()).await;
        vh.cleanup().await;
    })
    .await;
}

#[tokio::test]
async fn through_the_default_exchange_the_canary_estimates_and_without_a_consumer_it_is_not_consumed()
 {
    TestBroker::each(|b| async move {
        let vh = TestVhost::new(&b, "canary-estimate").await;
        let home = Home::new("canary-estimate");
        let conn = h::connect(&vh).await;
        let ch = h::confirm_channel(&conn).await;
        h::declare(&ch, "jobs.dlq", QueueType::Classic, FieldTable::default()).await;
        h::declare(
            &ch,
            "jobs",
            QueueType::Classic,
            h::dead_letter_to("jobs.dlq"),
        )
        .await;
        let mut seq = 0;
        for i in 0..60 {
            let (p, hd, body) = simple("o", i, &[]);
            h::publish(&ch, "jobs", &p, &hd, &body).await;
            seq += 1;
        }
        reject_all(&conn, "jobs", seq).await;

        // Nobody consumes `jobs`: the canary waits its time, then nothing more moves.
        let args = [
            "replay",
            "jobs.dlq",
            "--canary",
            "5",
            "--canary-wait",
            "3s",
            "--yes",
            "--json",
        ];
        let r = warren(&vh, &home, &args).await;
        assert_eq!(r.code, Some(1), "{}: {r}", b.label);
        let plan = r.event("plan");
        assert_eq!(plan["canary"]["exact"], false, "{}: {r}", b.label);
        assert!(
            plan["canary"]["estimate_because"]
                .as_str()
                .is_some_and(|w| w.contains("default exchange")),
            "{}: {r}",
            b.label
        );
        let sum = r.event("summary");
        assert_eq!(
            sum["canary"]["decision"], "not_consumed",
            "{}: {r}",
            b.label
        );
        assert_eq!(amqp_depth(&conn, "jobs").await, 5, "{}", b.label);
        assert_eq!(amqp_depth(&conn, "jobs.dlq").await, 55, "{}", b.label);

        // A consumer that rejects: the DLQ grows by the canary's 5, and the canary stops.
        let handled = consumer(&conn, "jobs", Arc::new(AtomicBool::new(true))).await;
        h::wait_for_depth(&conn, "jobs.dlq", 60, Duration::from_secs(20)).await;
        let r = warren(&vh, &home, &args).await;
        assert_eq!(r.code, Some(1), "{}: {r}", b.label);
        let sum = r.event("summary");
        assert_eq!(sum["canary"]["decision"], "came_back", "{}: {r}", b.label);
        assert_eq!(sum["canary"]["came_back"], 5, "{}: {r}", b.label);
        h::wait_for_depth(&conn, "jobs.dlq", 60, Duration::from_secs(20)).await;
        let ids = message_ids(&read_all(&conn, "jobs.dlq", 60).await);
        assert_eq!(counts(&ids).len(), 60, "{}: every id once", b.label);
        assert_eq!(handled.lock().unwrap().rejected.len(), 10, "{}", b.label);
        let _ = conn.close(200, "ok".into()).await;
        vh.cleanup().await;
    })
    .await;
}

/// The TUI's replay with a canary, through its worker and the same home: the consumer still
/// fails, so 10 move, 10 come back and the other 50 stay; the outcome says so, and the Replays
/// view's run carries the canary's record.
async fn tui_canary(b: TestBroker) {
    use warren::config::Overrides;
    use warren::domain::canary::{CanaryDecision, CanaryRule};
    use warren::tui::{Command, ReplayRequest, Report};
    let vh = TestVhost::new(&b, "canary-tui").await;
    let home = Home::new("canary-tui-config");
    let conn = h::connect(&vh).await;
    let ch = h::confirm_channel(&conn).await;
    h::declare(&ch, "orders.dlq", QueueType::Classic, FieldTable::default()).await;
    let mut args = FieldTable::default();
    args.insert(
        "x-dead-letter-exchange".into(),
        AMQPValue::LongString("".into()),
    );
    args.insert(
        "x-dead-letter-routing-key".into(),
        AMQPValue::LongString("orders.dlq".into()),
    );
    h::declare(&ch, "orders", QueueType::Classic, args).await;
    fill_and_fail(&conn, &ch, "orders", "orders.dlq", "o", 60).await;
    let handled = consumer(&conn, "orders", Arc::new(AtomicBool::new(true))).await;
    let overrides = Overrides {
        config_path: Some(home.dir.join("config.toml")),
        management_url: Some(vh.broker.mgmt_url_with_creds()),
        amqp_url: Some(vh.amqp_url()),
        vhost: Some(vh.name.clone()),
        ..Default::default()
    };
    let (cmd_tx, mut rx, worker) = common::spawn_worker(overrides);
    cmd_tx
        .send(Command::Replay(ReplayRequest {
            vhost: vh.name.clone(),
            queue: "orders.dlq".into(),
            selection: warren::domain::selection::Selection::All,
            expected: 60,
            typed: true,
            canary: Some(CanaryRule {
                size: 10,
                wait: Duration::from_secs(20),
                tolerance: 0,
            }),
            ..Default::default()
        }))
        .await
        .unwrap();
    let mut waited = false;
    let end = common::worker_until(
        &mut rx,
        &b.label,
        |e| matches!(e, Report::ReplayFinished(_)),
        |e| {
            if let Report::ReplayProgress(p) = e {
                waited |= p.canary.is_some();
            }
        },
    )
    .await;
    let Report::ReplayFinished(o) = end else {
        unreachable!()
    };
    assert_eq!(o.progress.moved, 10, "{}: {o:?}", b.label);
    let error = o.error.clone().unwrap_or_default();
    assert!(
        error.contains("canary: about 10 of 10 came back"),
        "{}: {o:?}",
        b.label
    );
    assert!(
        error.contains("50 left in orders.dlq untouched"),
        "{}: {o:?}",
        b.label
    );
    assert!(waited, "{}: the progress said the canary waits", b.label);
    h::wait_for_depth(&conn, "orders.dlq", 60, Duration::from_secs(20)).await;
    assert_eq!(handled.lock().unwrap().rejected.len(), 10, "{}", b.label);
    let ids = message_ids(&read_all(&conn, "orders.dlq", 60).await);
    assert_eq!(counts(&ids).len(), 60, "{}: every id once", b.label);

    cmd_tx.send(Command::LoadReplays).await.unwrap();
    let loaded = common::worker_until(
        &mut rx,
        &b.label,
        |e| matches!(e, Report::ReplaysLoaded { .. }),
        |_| {},
    )
    .await;
    let Report::ReplaysLoaded { runs, .. } = loaded else {
        unreachable!()
    };
    let run = runs
        .iter()
        .find(|r| r.vhost == vh.name)
        .unwrap_or_else(|| panic!("{}: the run is in the Replays view", b.label));
    let c = run.canary.as_ref().expect("the canary is on the record");
    assert_eq!(c.decision, CanaryDecision::CameBack, "{}", b.label);
    assert_eq!(
        (c.moved, c.came_back, c.left_untouched),
        (10, 10, 50),
        "{}",
        b.label
    );
    cmd_tx.send(Command::Quit).await.unwrap();
    let _ = worker.await;
    let _ = conn.close(200, "ok".into()).await;
    vh.cleanup().await;
}

#[tokio::test]
async fn the_tui_s_canary_goes_through_the_same_home_and_is_on_the_record() {
    let home = Home::new("canary-tui-store");
    // The worker opens Warren's store (the audit) from the environment.
    // SAFETY: set before any thread of this test reads the environment.
    unsafe {
        std::env::set_var("WARREN_STORE", home.store());
    }
    for b in TestBroker::all() {
        tui_canary(b).await;
    }
}
