//! A look must never end a queue or its messages (issue 22).
//!
//! An auto-delete DLQ is deleted with every message when its last consumer cancels: every way
//! Warren reads it (`show`, `groups`, `export`, `watch --once`, `replay --dry-run`) leaves it
//! there with its 100 messages in order, with or without another consumer on it, and the runs
//! that consume (replay, archive, discard) refuse it before touching it.
//!
//! A header just under the frame limit becomes too large once the broker adds `x-death`: no
//! read can take it (lapin refuses a frame above the negotiated size and the connection dies),
//! Warren says so, and on a quorum DLQ with a delivery limit the failed reads are charged in the
//! read ledger until Warren refuses before touching the queue: every id is still there.

use crate::common;
use crate::replay_util;

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use common::amqp::{self as amqp_h, seqs};
use common::{TestBroker, TestVhost, enc};
use futures_util::StreamExt;
use lapin::options::{BasicConsumeOptions, BasicQosOptions, QueueDeclareOptions};
use lapin::types::{AMQPValue, FieldTable};
use replay_util::{Home, warren};
use serde_json::Value;
use warren::domain::features::QueueType;
use warren::domain::message::Properties;
use warren::domain::value::{HeaderValue, Table};

const DLQ: &str = "ad.dlq";
const MESSAGES: u32 = 100;

async fn declare_auto_delete(conn: &lapin::Connection) {
    let ch = conn.create_channel().await.expect("channel");
    ch.queue_declare(
        DLQ.into(),
        QueueDeclareOptions {
            durable: true,
            auto_delete: true,
            ..QueueDeclareOptions::default()
        },
        FieldTable::default(),
    )
    .await
    .expect("declare the auto-delete DLQ");
    let _ = ch.close(200, "ok".into()).await;
}

/// Whether the management API still knows the queue (a deleted one answers 404).
async fn exists(vhost: &TestVhost, queue: &str) -> bool {
    let path = format!("/api/queues/{}/{}", enc(&vhost.name), enc(queue));
    vhost
        .api(reqwest::Method::GET, &path, None)
        .await
        .status()
        .is_success()
}

/// The queue is there and holds every id, in order, counted with `basic.get` (no consumer).
async fn all_there(vhost: &TestVhost, conn: &lapin::Connection, after: &str) {
    assert!(
        exists(vhost, DLQ).await,
        "{}: {after} deleted the queue",
        vhost.broker.label
    );
    let ids = seqs(&amqp_h::peek(conn, DLQ, 1000).await);
    assert_eq!(
        ids,
        (0..i64::from(MESSAGES)).collect::<Vec<_>>(),
        "{}: after {after}",
        vhost.broker.label
    );
}

async fn auto_delete_looks(broker: TestBroker) {
    let vhost = TestVhost::new(&broker, "trust-reads-ad").await;
    let home = Home::new("trust-reads-ad");
    let conn = amqp_h::connect(&vhost).await;
    declare_auto_delete(&conn).await;
    amqp_h::dead_letter_by_reject(&conn, "ad.work", DLQ, MESSAGES).await;
    all_there(&vhost, &conn, "the setup").await;

    let export = home.dir.join("ad.jsonl");
    let export = export.to_string_lossy().into_owned();
    let looks: [(&str, Vec<&str>); 5] = [
        (
            "show",
            vec!["--read-only", "show", DLQ, "--limit", "5", "--json"],
        ),
        ("groups", vec!["--read-only", "groups", DLQ, "--json"]),
        ("export", vec!["--read-only", "export", DLQ, "-o", &export]),
        (
            "watch --once",
            vec!["--read-only", "watch", "--once", "--json"],
        ),
        (
            "replay --dry-run",
            vec!["--read-only", "replay", DLQ, "--dry-run", "--json"],
        ),
    ];
    for (what, args) in &looks {
        let run = warren(&vhost, &home, args).await;
        println!(
            "RabbitMQ {}: {what} exit {:?} in {:?}",
            broker.label, run.code, run.elapsed
        );
        match *what {
            "show" => {
                assert_eq!(run.code, Some(0), "{run}");
                let shown = run.json().len();
                assert_eq!(shown, 5, "{run}");
            }
            // The plan is refused: a replay of this queue would delete it.
            "replay --dry-run" => {
                assert_eq!(run.code, Some(1), "{run}");
                assert!(run.stderr.contains("auto-delete"), "{run}");
            }
            // watch exits 1 on an alert (a DLQ with messages may be one).
            "watch --once" => assert!(matches!(run.code, Some(0 | 1)), "{run}"),
            _ => assert_eq!(run.code, Some(0), "{what}: {run}"),
        }
        all_there(&vhost, &conn, what).await;
    }
    let lines = std::fs::read_to_string(&export).unwrap_or_default();
    assert_eq!(
        lines.lines().count(),
        MESSAGES as usize + 1,
        "a header and 100 messages"
    );

    // The runs that consume refuse before touching it.
    let snapshot = home.dir.join("discarded.jsonl");
    let snapshot = snapshot.to_string_lossy().into_owned();
    let runs: [(&str, Vec<&str>); 3] = [
        ("replay", vec!["replay", DLQ, "--yes", "--json"]),
        (
            "archive",
            vec!["archive", DLQ, "--yes", "--create-archive", "--json"],
        ),
        (
            "discard",
            vec!["discard", DLQ, "--yes", "-o", &snapshot, "--json"],
        ),
    ];
    for (what, args) in &runs {
        let run = warren(&vhost, &home, args).await;
        assert_ne!(run.code, Some(0), "{what}: {run}");
        assert!(run.stderr.contains("auto-delete"), "{what}: {run}");
        all_there(&vhost, &conn, what).await;
    }
    let _ = conn.close(200, "done".into()).await;
    vhost.cleanup().await;
}

#[tokio::test]
async fn looking_at_an_auto_delete_dlq_never_deletes_it() {
    futures_util::future::join_all(TestBroker::all().into_iter().map(auto_delete_looks)).await;
}

/// Another consumer already on the queue holds one message: Warren's read neither takes its
/// place nor ends the queue, and the held message plus the 99 others are all there.
async fn beside_a_consumer(broker: TestBroker) {
    let vhost = TestVhost::new(&broker, "trust-reads-ad2").await;
    let home = Home::new("trust-reads-ad2");
    let conn = amqp_h::connect(&vhost).await;
    declare_auto_delete(&conn).await;
    amqp_h::dead_letter_by_reject(&conn, "ad.work", DLQ, MESSAGES).await;
    let other = conn.create_channel().await.expect("channel");
    other
        .basic_qos(1, BasicQosOptions::default())
        .await
        .expect("qos");
    let mut consumer = other
        .basic_consume(
            DLQ.into(),
            "someone-else".into(),
            BasicConsumeOptions::default(),
            FieldTable::default(),
        )
        .await
        .expect("consume");
    let held = tokio::time::timeout(Duration::from_secs(10), consumer.next())
        .await
        .expect("a delivery")
        .expect("open")
        .expect("delivery");
    let held = warren::broker::amqp::dead_letter_from_delivery(DLQ, 0, held, usize::MAX);

    let run = warren(
        &vhost,
        &home,
        &["--read-only", "show", DLQ, "--limit", "5", "--json"],
    )
    .await;
    assert_eq!(run.code, Some(0), "{run}");
    assert_eq!(run.json().len(), 5, "{run}");
    assert!(exists(&vhost, DLQ).await, "{}: deleted", broker.label);
    let mut ids: BTreeSet<i64> = seqs(&amqp_h::peek(&conn, DLQ, 1000).await)
        .into_iter()
        .collect();
    assert_eq!(ids.len(), MESSAGES as usize - 1, "{}", broker.label);
    ids.extend(seqs(&[held]));
    assert_eq!(
        ids,
        (0..i64::from(MESSAGES)).collect::<BTreeSet<_>>(),
        "{}: the held one and the 99 others",
        broker.label
    );
    println!(
        "RabbitMQ {}: beside a consumer holding one message, show read 5 in {:?}; 99 + 1 ids after",
        broker.label, run.elapsed
    );
    let _ = conn.close(200, "done".into()).await;
    vhost.cleanup().await;
}

#[tokio::test]
async fn an_auto_delete_dlq_read_beside_another_consumer_stays() {
    futures_util::future::join_all(TestBroker::all().into_iter().map(beside_a_consumer)).await;
}

/// A header this long fits a 131,072-byte frame when published; with `x-death` it does not.
const PAD: usize = 130_900;
/// The poison message and this many behind it.
const BEHIND: u32 = 5;

/// `dlq` receives the poison message (seq 0) and `BEHIND` ordinary ones, dead-lettered by a
/// TTL of 0 on `work`.
async fn poisoned_dlq(conn: &lapin::Connection, work: &str, dlq: &str) {
    let ch = amqp_h::confirm_channel(conn).await;
    let mut args = amqp_h::dead_letter_to(dlq);
    args.insert("x-message-ttl".into(), AMQPValue::LongInt(0));
    amqp_h::declare(&ch, work, QueueType::Classic, args).await;
    for i in 0..=BEHIND {
        let mut h = Table::new();
        h.insert("seq", HeaderValue::I32(i as i32));
        if i == 0 {
            h.insert("pad", HeaderValue::LongString(vec![b'p'; PAD]));
        }
        let props = Properties {
            message_id: Some(format!("m-{i}")),
            delivery_mode: Some(2),
            ..Properties::default()
        };
        amqp_h::publish(&ch, work, &props, &h, format!("message-{i}").as_bytes()).await;
    }
    amqp_h::wait_for_depth(conn, dlq, u64::from(BEHIND) + 1, Duration::from_secs(10)).await;
}

/// Every message's `seq` and highest `x-delivery-count`, read through the management API (the
/// broker's own client has no frame limit), requeued: the end of a test.
async fn mgmt_ids(vhost: &TestVhost, queue: &str) -> (BTreeSet<i64>, i64) {
    let path = format!("/api/queues/{}/{}/get", enc(&vhost.name), enc(queue));
    let body = serde_json::json!({"count": 100, "ackmode": "ack_requeue_true", "encoding": "auto", "truncate": 50});
    let v: Value = vhost
        .api(reqwest::Method::POST, &path, Some(body))
        .await
        .json()
        .await
        .expect("json");
    let msgs = v.as_array().cloned().unwrap_or_default();
    let header = |m: &Value, k: &str| {
        m.pointer(&format!("/properties/headers/{k}"))
            .and_then(Value::as_i64)
    };
    let ids = msgs.iter().filter_map(|m| header(m, "seq")).collect();
    let count = msgs
        .iter()
        .filter_map(|m| header(m, "x-delivery-count"))
        .max()
        .unwrap_or(0);
    (ids, count)
}

fn every_id() -> BTreeSet<i64> {
    (0..=i64::from(BEHIND)).collect()
}

async fn frame_classic(broker: TestBroker) {
    let vhost = TestVhost::new(&broker, "trust-reads-frame").await;
    let home = Home::new("trust-reads-frame");
    let conn = amqp_h::connect(&vhost).await;
    let ch = conn.create_channel().await.expect("channel");
    amqp_h::declare(&ch, "big.dlq", QueueType::Classic, FieldTable::default()).await;
    poisoned_dlq(&conn, "big.work", "big.dlq").await;
    for round in 0..3 {
        let start = Instant::now();
        let run = warren(&vhost, &home, &["show", "big.dlq", "--json"]).await;
        assert_eq!(run.code, Some(1), "round {round}: {run}");
        assert!(
            run.stderr.contains("frame_max") && run.stderr.contains("131072"),
            "round {round}: {run}"
        );
        println!(
            "RabbitMQ {}: show of a DLQ headed by a too-large header failed as such in {:?}: {}",
            broker.label,
            start.elapsed(),
            run.stderr.trim()
        );
    }
    // A replay to a known target reads nothing first: its consumer meets the message.
    amqp_h::declare(&ch, "out", QueueType::Classic, FieldTable::default()).await;
    let run = warren(
        &vhost,
        &home,
        &["replay", "big.dlq", "--to", "out", "--yes", "--json"],
    )
    .await;
    assert_ne!(run.code, Some(0), "{run}");
    assert!(run.stderr.contains("closed under it"), "{run}");
    println!(
        "RabbitMQ {}: the replay stopped at it in {:?}",
        broker.label, run.elapsed
    );
    let (ids, _) = mgmt_ids(&vhost, "big.dlq").await;
    assert_eq!(ids, every_id(), "{}", broker.label);
    assert_eq!(
        amqp_h::amqp_depth(&conn, "out").await,
        0,
        "nothing moved past it"
    );
    let _ = conn.close(200, "done".into()).await;
    vhost.cleanup().await;
}

#[tokio::test]
async fn a_header_pushed_past_the_frame_by_x_death_is_said_and_kept() {
    futures_util::future::join_all(TestBroker::all().into_iter().map(frame_classic)).await;
}

/// 25 `show --read-again` on a quorum DLQ (limit 20) headed by the poison message: each read
/// dies with the connection and its page goes back by the close, one delivery each (on 4.3
/// too), so the ledger charges it before it starts and refuses once 15 are spent.
async fn frame_quorum(broker: TestBroker) {
    let vhost = TestVhost::new(&broker, "trust-reads-qframe").await;
    let home = Home::new("trust-reads-qframe");
    let conn = amqp_h::connect(&vhost).await;
    let ch = conn.create_channel().await.expect("channel");
    let mut args = FieldTable::default();
    args.insert("x-delivery-limit".into(), AMQPValue::LongLongInt(20));
    amqp_h::declare(&ch, "big.qdlq", QueueType::Quorum, args).await;
    poisoned_dlq(&conn, "big.work", "big.qdlq").await;
    let (mut failed, mut refused) = (0, 0);
    for round in 0..25 {
        let run = warren(
            &vhost,
            &home,
            &["show", "big.qdlq", "--json", "--read-again"],
        )
        .await;
        assert_eq!(run.code, Some(1), "round {round}: {run}");
        if run.stderr.contains("before touching the queue") {
            refused += 1;
        } else {
            assert!(run.stderr.contains("frame_max"), "round {round}: {run}");
            assert_eq!(refused, 0, "round {round}: a refusal lapsed: {run}");
            failed += 1;
        }
    }
    // The broker takes the dead connection's messages back on its own time.
    let got = common::wait::poll(Duration::from_secs(30), || async {
        let got = mgmt_ids(&vhost, "big.qdlq").await;
        if got.0 == every_id() {
            Ok(got)
        } else {
            Err(got)
        }
    })
    .await;
    let (Ok((ids, count)) | Err((ids, count))) = got;
    assert_eq!(ids, every_id(), "{}: every id is still there", broker.label);
    assert_eq!((failed, refused), (15, 10), "{}", broker.label);
    assert!(count <= 16, "{}: x-delivery-count {count}", broker.label);
    println!(
        "RabbitMQ {}: 25 shows of a quorum DLQ headed by a too-large header: {failed} failed, {refused} refused before touching it; 6 of 6 ids kept, highest x-delivery-count {count}",
        broker.label
    );
    emptied_then_refilled(&vhost, &home, &conn).await;
    let _ = conn.close(200, "done".into()).await;
    vhost.cleanup().await;
}

/// Waits (at most 45 s) until `queue` looks empty the way the read ledger looks before it
/// forgets (`ledger::forget_when_empty`): the management API reports no message, none
/// unacknowledged and no consumer, and a passive declare no ready message and no consumer. A look
/// taken earlier is not a look at an empty queue, and the ledger rightly keeps its record: the
/// second look then still refused. The management API's figures are periodic statistics that
/// need not move together (`consumers` was absent at one look and 0 at the next, `messages` 0 at
/// both), so waiting for `messages` alone was not waiting for what the ledger checks. And one
/// empty sample is not yet the queue's figures: a look right after it still found the queue not
/// empty once (a CI run on 4.3, after a purge), so the queue must look empty at every sample
/// across one statistics interval (5 s by default) before a look is taken.
async fn seen_empty(vhost: &TestVhost, conn: &lapin::Connection, queue: &str) {
    const ACROSS: Duration = Duration::from_millis(5_500);
    let path = format!("/api/queues/{}/{}", enc(&vhost.name), enc(queue));
    let what = format!(
        "{}: {queue} seen empty across {ACROSS:?}",
        vhost.broker.label
    );
    let since: std::cell::Cell<Option<Instant>> = std::cell::Cell::new(None);
    common::wait::until_ok(&what, Duration::from_secs(45), || async {
        let now = empty_now(vhost, conn, queue, &path).await;
        match now {
            Ok(()) => {
                let first = since.get().unwrap_or_else(Instant::now);
                since.set(Some(first));
                if first.elapsed() >= ACROSS {
                    Ok(())
                } else {
                    Err(format!("empty for {:?} only", first.elapsed()))
                }
            }
            Err(e) => {
                since.set(None);
                Err(e)
            }
        }
    })
    .await
}

/// One sample of what the ledger checks: `Err` says which figure was not empty.
async fn empty_now(
    vhost: &TestVhost,
    conn: &lapin::Connection,
    queue: &str,
    path: &str,
) -> Result<(), String> {
    let v = vhost.get_json(path).await;
    let zero = |k: &str| v.get(k).and_then(Value::as_u64).unwrap_or(0) == 0;
    let reported = v.get("messages").and_then(Value::as_u64) == Some(0)
        && zero("messages_unacknowledged")
        && zero("consumers");
    let ch = conn.create_channel().await.expect("channel");
    let declared = ch
        .queue_declare(
            queue.into(),
            QueueDeclareOptions {
                passive: true,
                ..QueueDeclareOptions::default()
            },
            FieldTable::default(),
        )
        .await
        .expect("passive declare");
    let _ = ch.close(200, "looked".into()).await;
    if reported && declared.message_count() == 0 && declared.consumer_count() == 0 {
        Ok(())
    } else {
        Err(format!(
            "management API {v}, declare {} ready, {} consumer(s)",
            declared.message_count(),
            declared.consumer_count()
        ))
    }
}

/// Purged, the queue is seen empty: the first look still refuses (the failed read is settled
/// at its worst case, not forgotten), the second forgets, and a refilled queue is read afresh.
async fn emptied_then_refilled(vhost: &TestVhost, home: &Home, conn: &lapin::Connection) {
    let label = &vhost.broker.label;
    let path = format!("/api/queues/{}/big.qdlq/contents", enc(&vhost.name));
    let r = vhost.api(reqwest::Method::DELETE, &path, None).await;
    assert!(r.status().is_success(), "purge: {}", r.status());
    let show = ["show", "big.qdlq", "--json", "--read-again"];
    seen_empty(vhost, conn, "big.qdlq").await;
    let first = warren(vhost, home, &show).await;
    assert_eq!(first.code, Some(1), "{label}: {first}");
    assert!(
        first.stderr.contains("before touching the queue"),
        "{first}"
    );
    seen_empty(vhost, conn, "big.qdlq").await;
    let second = warren(vhost, home, &show).await;
    assert_eq!(
        second.code,
        Some(0),
        "{label}: forgotten at the second look: {second}"
    );
    let ch = amqp_h::confirm_channel(conn).await;
    for i in 10..13 {
        let mut h = Table::new();
        h.insert("seq", HeaderValue::I32(i));
        amqp_h::publish(&ch, "big.work", &Properties::default(), &h, b"again").await;
    }
    amqp_h::wait_for_depth(conn, "big.qdlq", 3, Duration::from_secs(10)).await;
    // The second look read the empty queue: a read Warren knows of, so it is --read-again.
    let fresh = warren(vhost, home, &show).await;
    assert_eq!(fresh.code, Some(0), "{label}: read afresh: {fresh}");
    assert_eq!(fresh.json().len(), 3, "{fresh}");
    println!("RabbitMQ {label}: purged, the first look refused, the second forgot, 3 new read");
}

#[tokio::test]
async fn failed_reads_of_a_quorum_dlq_are_counted_until_refused() {
    futures_util::future::join_all(TestBroker::all().into_iter().map(frame_quorum)).await;
}
