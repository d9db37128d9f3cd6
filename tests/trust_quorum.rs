//! Looking must never cost a message its life. A quorum DLQ whose reads cost deliveries (4.0's
//! default limit of 20, 3.10 with `x-delivery-limit 20`) is shown 30 times and opened in the
//! TUI's worker again and again: every message is still there afterwards, and the delivery
//! count says what Warren spent. 4.3 (free returns) reads every time.

use crate::common;
use crate::replay_util;

use std::time::Duration;

use common::amqp::{self as amqp_h, seqs};
use common::{TestBroker, TestVhost};
use futures_util::StreamExt;
use lapin::options::{BasicAckOptions, BasicConsumeOptions, BasicQosOptions};
use lapin::types::{AMQPValue, FieldTable};
use replay_util::{Home, warren};
use tokio::sync::mpsc;
use warren::config::Overrides;
use warren::domain::features::QueueType;
use warren::domain::selection::Selection;
use warren::worker::protocol::{Command, Report};

const MESSAGES: u32 = 12;

/// A quorum DLQ with 12 real dead letters; the limit argument only on 3.x (4.x has 20 by default).
async fn quorum_dlq(vhost: &TestVhost, conn: &lapin::Connection) {
    let ch = conn.create_channel().await.expect("channel");
    let mut args = FieldTable::default();
    if vhost.broker.label == "3.10" {
        args.insert("x-delivery-limit".into(), AMQPValue::LongLongInt(20));
    }
    amqp_h::declare(&ch, "orders.dlq", QueueType::Quorum, args).await;
    amqp_h::dead_letter_by_reject(conn, "orders.process", "orders.dlq", MESSAGES).await;
}

/// Takes every message out (consume and ack), returning each one's `seq` and the highest
/// `x-delivery-count` seen: the end of a test, so it may settle.
async fn drain(conn: &lapin::Connection) -> (Vec<i64>, u64) {
    let ch = conn.create_channel().await.expect("channel");
    ch.basic_qos(100, BasicQosOptions::default())
        .await
        .expect("qos");
    let mut consumer = ch
        .basic_consume(
            "orders.dlq".into(),
            "test-drain".into(),
            BasicConsumeOptions::default(),
            FieldTable::default(),
        )
        .await
        .expect("consume");
    let mut out = Vec::new();
    while let Ok(Some(Ok(d))) = tokio::time::timeout(Duration::from_secs(3), consumer.next()).await
    {
        let tag = d.delivery_tag;
        out.push(warren::broker::amqp::dead_letter_from_delivery(
            "orders.dlq",
            out.len() as u64,
            d,
            usize::MAX,
        ));
        ch.basic_ack(tag, BasicAckOptions::default())
            .await
            .expect("ack");
    }
    let max = out
        .iter()
        .filter_map(|m| m.delivery.delivery_count)
        .max()
        .unwrap_or(0);
    let mut s = seqs(&out);
    s.sort_unstable();
    (s, max)
}

fn costly(label: &str) -> bool {
    label != "4.3"
}

async fn thirty_shows(broker: TestBroker) {
    let vhost = TestVhost::new(&broker, "trust-quorum-show").await;
    let home = Home::new("trust-quorum-show");
    let conn = amqp_h::connect(&vhost).await;
    quorum_dlq(&vhost, &conn).await;

    // Without consent a second read is refused at once, touching nothing.
    let first = warren(&vhost, &home, &["show", "orders.dlq", "--json"]).await;
    assert_eq!(first.code, Some(0), "{first}");
    assert_eq!(first.json().len(), MESSAGES as usize, "{first}");
    let second = warren(&vhost, &home, &["show", "orders.dlq", "--json"]).await;
    if costly(&broker.label) {
        assert_eq!(second.code, Some(1), "{}: {second}", broker.label);
        assert!(second.stderr.contains("--read-again"), "{second}");
        assert!(second.json().is_empty(), "nothing was read: {second}");
    } else {
        assert_eq!(second.code, Some(0), "4.3 reads are free: {second}");
    }

    // With consent every time: reads stop before the margin, then refuse without touching.
    let (mut read, mut refused) = (1, 0);
    for round in 0..29 {
        let run = warren(
            &vhost,
            &home,
            &["show", "orders.dlq", "--json", "--read-again"],
        )
        .await;
        match run.code {
            Some(0) => {
                assert_eq!(run.json().len(), MESSAGES as usize, "round {round}: {run}");
                read += 1;
            }
            Some(1) => {
                assert!(
                    run.stderr.contains("before touching the queue"),
                    "round {round}: {run}"
                );
                refused += 1;
            }
            other => panic!("round {round}: exit {other:?}: {run}"),
        }
    }
    let (ids, max_count) = drain(&conn).await;
    assert_eq!(
        ids,
        (0..i64::from(MESSAGES)).collect::<Vec<_>>(),
        "{}: every message is still there",
        broker.label
    );
    if costly(&broker.label) {
        // 20 - margin 5: 15 reads, the 16th is refused from the ledger.
        assert_eq!((read, refused), (15, 15), "{}", broker.label);
        assert!(
            max_count <= 15,
            "{}: delivery count {max_count}",
            broker.label
        );
    } else {
        assert_eq!((read, refused), (30, 0));
        assert!(
            max_count <= 1,
            "4.3: explicit returns are free, count {max_count}"
        );
    }
    println!(
        "RabbitMQ {}: {read} shows read, {refused} refused without touching; highest x-delivery-count afterwards {max_count}",
        broker.label
    );
    let _ = conn.close(200, "done".into()).await;
    vhost.cleanup().await;
}

#[tokio::test]
async fn thirty_shows_of_a_quorum_dlq_lose_nothing() {
    futures_util::future::join_all(TestBroker::all().into_iter().map(thirty_shows)).await;
}

/// Waits for the next event the test cares about.
async fn next_event(rx: &mut mpsc::Receiver<Report>) -> Report {
    loop {
        let e = tokio::time::timeout(Duration::from_secs(30), rx.recv())
            .await
            .expect("an event within 30 s")
            .expect("the worker is alive");
        match e {
            Report::MessagesLoaded { .. }
            | Report::ReplayPreview(_)
            | Report::Error(_)
            | Report::ReadCost { .. } => return e,
            _ => {}
        }
    }
}

/// The TUI's worker, driven as a person would: open the queue, Ctrl-R (which reuses what was
/// read), open and cancel the replay modal (a plan each time) many times. One read in all.
async fn tui_session(broker: TestBroker) {
    let vhost = TestVhost::new(&broker, "trust-quorum-tui").await;
    let home = Home::new("trust-quorum-tui");
    let conn = amqp_h::connect(&vhost).await;
    quorum_dlq(&vhost, &conn).await;
    let overrides = Overrides {
        config_path: Some(home.dir.join("config.toml")),
        amqp_url: Some(vhost.amqp_url()),
        management_url: Some(vhost.broker.mgmt_url_with_creds()),
        vhost: Some(vhost.name.clone()),
        ..Default::default()
    };
    let (cmd_tx, mut ev_rx, worker) = common::spawn_worker(overrides);
    let browse = Command::Browse {
        vhost: vhost.name.clone(),
        queue: "orders.dlq".into(),
        limit: 500,
        read_again: false,
        restart: false,
    };
    for round in 0..10 {
        cmd_tx.send(browse.clone()).await.expect("send");
        match next_event(&mut ev_rx).await {
            Report::MessagesLoaded { messages, .. } => {
                assert_eq!(messages.len(), MESSAGES as usize, "round {round}")
            }
            other => panic!("round {round}: {other:?}"),
        }
        for keep_attempts in [false, true] {
            cmd_tx
                .send(Command::PreviewReplay {
                    vhost: vhost.name.clone(),
                    queue: "orders.dlq".into(),
                    selection: Selection::All,
                    keep_attempts,
                    edited: None,
                    strip_failure_stamp: false,
                })
                .await
                .expect("send");
            match next_event(&mut ev_rx).await {
                Report::ReplayPreview(p) => assert_eq!(p.count, u64::from(MESSAGES)),
                other => panic!("round {round}: {other:?}"),
            }
        }
    }
    cmd_tx.send(Command::Quit).await.expect("quit");
    let _ = worker.await;
    let (ids, max_count) = drain(&conn).await;
    assert_eq!(
        ids,
        (0..i64::from(MESSAGES)).collect::<Vec<_>>(),
        "{}",
        broker.label
    );
    // 4.0 and 3.10: one read's worth. 4.3 reports x-delivery-count 1 after the first return of
    // any kind and never more for explicit returns (30 shows leave it at 1 too).
    assert_eq!(
        max_count, 1,
        "{}: ten browses and twenty plans cost one read",
        broker.label
    );
    println!(
        "RabbitMQ {}: 10 browses + 20 plans in the TUI worker; highest x-delivery-count afterwards {max_count}",
        broker.label
    );
    let _ = conn.close(200, "done".into()).await;
    vhost.cleanup().await;
}

#[tokio::test]
async fn the_tui_reads_a_quorum_dlq_once_per_session() {
    let home = Home::new("trust-quorum-store");
    // The worker opens Warren's store from the environment; this binary's tests share one file
    // (each test has its own vhost, so their records never meet).
    // SAFETY: set before any thread of this test reads the environment.
    unsafe { std::env::set_var("WARREN_STORE", home.store()) };
    futures_util::future::join_all(TestBroker::all().into_iter().map(tui_session)).await;
}

/// `warren protect` lifts the limit with a policy that keeps the keys of the policy it
/// outranks; after it, reading is free and nothing is refused or lost. Read-only refuses.
async fn protect(broker: TestBroker) {
    let vhost = TestVhost::new(&broker, "trust-quorum-protect").await;
    let home = Home::new("trust-quorum-protect");
    let conn = amqp_h::connect(&vhost).await;
    vhost
        .policy(
            "ops",
            "^orders",
            "queues",
            serde_json::json!({"max-length": 100000}),
        )
        .await;
    quorum_dlq(&vhost, &conn).await;
    vhost.wait_policy("orders.dlq", "ops").await;

    let ro = warren(
        &vhost,
        &home,
        &["--read-only", "protect", "orders.dlq", "--yes"],
    )
    .await;
    let policies = vhost
        .get_json(&format!("/api/policies/{}", common::enc(&vhost.name)))
        .await;
    assert!(
        policies
            .as_array()
            .is_some_and(|ps| ps.iter().all(|p| p["name"] != "warren-protect-orders.dlq")),
        "read-only set nothing: {ro}"
    );
    if broker.label == "3.10" {
        // 3.x refuses delivery-limit -1 in a policy: Warren says so and the way out.
        assert_eq!(ro.code, Some(1), "{ro}");
        let run = warren(&vhost, &home, &["protect", "orders.dlq", "--yes"]).await;
        assert_eq!(run.code, Some(1), "{run}");
        assert!(run.stderr.contains("no policy can lift"), "{run}");
        let _ = conn.close(200, "done".into()).await;
        vhost.cleanup().await;
        return;
    }
    if broker.label == "4.3" {
        // Reads are already free there; protect still works as a policy change.
        let run = warren(&vhost, &home, &["protect", "orders.dlq", "--yes"]).await;
        assert_eq!(run.code, Some(0), "{run}");
    } else {
        assert_eq!(ro.code, Some(1), "{ro}");
        assert!(ro.stderr.contains("read-only"), "{ro}");
        let run = warren(&vhost, &home, &["protect", "orders.dlq", "--yes"]).await;
        assert_eq!(run.code, Some(0), "{}: {run}", broker.label);
    }
    let p = vhost
        .get_json(&format!(
            "/api/policies/{}/warren-protect-orders.dlq",
            common::enc(&vhost.name)
        ))
        .await;
    assert_eq!(
        p["definition"]["delivery-limit"],
        serde_json::json!(-1),
        "{p}"
    );
    assert_eq!(
        p["definition"]["max-length"],
        serde_json::json!(100000),
        "keeps the outranked policy's keys: {p}"
    );
    vhost
        .wait_policy("orders.dlq", "warren-protect-orders.dlq")
        .await;
    for round in 0..22 {
        let run = warren(
            &vhost,
            &home,
            &["show", "orders.dlq", "--json", "--read-again"],
        )
        .await;
        assert_eq!(run.code, Some(0), "{} round {round}: {run}", broker.label);
        assert_eq!(
            run.json().len(),
            MESSAGES as usize,
            "{} round {round}",
            broker.label
        );
    }
    let (ids, max_count) = drain(&conn).await;
    assert_eq!(
        ids,
        (0..i64::from(MESSAGES)).collect::<Vec<_>>(),
        "{}",
        broker.label
    );
    println!(
        "RabbitMQ {}: protected; 22 more shows, all read; highest x-delivery-count {max_count}",
        broker.label
    );
    let _ = conn.close(200, "done".into()).await;
    vhost.cleanup().await;
}

#[tokio::test]
async fn protect_makes_a_quorum_dlq_free_to_read() {
    futures_util::future::join_all(TestBroker::all().into_iter().map(protect)).await;
}
