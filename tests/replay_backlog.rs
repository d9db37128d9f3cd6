//! `warren replay --max-backlog`: the replay is paced by its target's consumer. 300 dead letters
//! go back to `orders.process`, where a real consumer (prefetch 1, 20 ms a message, then the
//! ack) works them off; the target's ready count, sampled every 50 ms, stays at about the cap,
//! the CLI says why it waits, every id is handled exactly once and the DLQ ends empty.

use crate::backlog_util;
use crate::common;
use crate::replay_util;

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use backlog_util::{
    Consumer, MAX, N, Sampler, TARGET, WORK, assert_once, assert_paced, dead_letters,
};
use common::amqp::{self as h, amqp_depth};
use common::{TestBroker, TestVhost};
use replay_util::{Home, message_ids, read_all, warren};
use serde_json::Value;

#[tokio::test]
async fn the_target_backlog_stays_at_the_cap_and_every_id_arrives_once() {
    TestBroker::each(|broker| async move {
        let label = broker.label.clone();
        let vhost = TestVhost::new(&broker, "replay-backlog").await;
        let home = Home::new("replay-backlog");
        let conn = h::connect(&vhost).await;
        let expected = dead_letters(&conn, "dlq", N).await;
        let before: BTreeSet<String> = message_ids(&read_all(&conn, "dlq", N as usize + 10).await)
            .into_iter()
            .collect();
        assert_eq!(before, expected, "{label}: every id in the DLQ before");

        let consumer = Consumer::start(&conn, WORK).await;
        let sampler = Sampler::start(&conn, Duration::from_millis(50)).await;
        let started = Instant::now();
        let run = warren(
            &vhost,
            &home,
            &["replay", "dlq", "--max-backlog", "20", "--yes", "--json"],
        )
        .await;
        let replay_took = run.elapsed;
        let handled = consumer
            .finish(&vhost, &conn, N as usize, Duration::from_secs(20))
            .await;
        let all_took = started.elapsed();
        let samples = sampler.finish().await;

        assert_eq!(run.code, Some(0), "{label}: {run}");
        assert_eq!(run.summary_u64("moved"), u64::from(N), "{label}: {run}");
        let waits: Vec<Value> = run
            .json()
            .into_iter()
            .filter(|v| v["event"] == "progress" && !v["waiting_for_backlog"].is_null())
            .map(|v| v["waiting_for_backlog"].clone())
            .collect();
        assert!(
            !waits.is_empty(),
            "{label}: the progress says it waits: {run}"
        );
        assert!(
            waits
                .iter()
                .all(|w| w["queue"] == TARGET && w["max"] == MAX),
            "{label}: {waits:?}"
        );
        let max = assert_paced(&label, &samples);
        assert!(
            replay_took >= WORK * (N - MAX as u32 - 5),
            "{label}: the consumer set the pace: {replay_took:?}"
        );
        assert_once(&label, &handled, &expected);
        assert_eq!(
            amqp_depth(&conn, "dlq").await,
            0,
            "{label}: the DLQ is empty"
        );
        assert_eq!(amqp_depth(&conn, TARGET).await, 0, "{label}");
        println!(
            "{label}: {N} replayed with --max-backlog {MAX} in {replay_took:?} (all handled after {all_took:?}); target ready: max {max}, {} samples",
            samples.len()
        );

        text_progress_says_why_it_waits(&label, &vhost, &home, &conn).await;
        let _ = conn.close(200, "done".into()).await;
        vhost.cleanup().await;
    })
    .await;
}

/// Without `--json` the progress line on stderr says why the run waits.
async fn text_progress_says_why_it_waits(
    label: &str,
    vhost: &TestVhost,
    home: &Home,
    conn: &lapin::Connection,
) {
    const M: u32 = 60;
    let ch = h::confirm_channel(conn).await;
    let msgs: Vec<_> = (0..M).map(|i| replay_util::simple("tx", i, &[])).collect();
    replay_util::dead_letter(conn, TARGET, "dlq", &msgs).await;
    let _ = ch.close(200, "ok".into()).await;
    let consumer = Consumer::start(conn, WORK).await;
    let run = warren(
        vhost,
        home,
        &["replay", "dlq", "--max-backlog", "20", "--yes"],
    )
    .await;
    let handled = consumer
        .finish(vhost, conn, M as usize, Duration::from_secs(10))
        .await;
    assert_eq!(run.code, Some(0), "{label}: {run}");
    assert!(
        run.stderr.contains("waiting: orders.process holds ")
            && run.stderr.contains(" ready, max 20"),
        "{label}: {run}"
    );
    let expected = (0..M).map(|i| format!("tx-{i}")).collect();
    assert_once(label, &handled, &expected);
}
