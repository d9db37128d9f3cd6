//! A read says "all" only when what it read is what the queue held (issue 38, item 2: a read of
//! a million began while an earlier read's million were still coming back, took the 786,432
//! then ready, and said "all 786432 messages").
//!
//! On real brokers: a queue that grows while it is read, and a queue where another consumer
//! holds a message unacknowledged, are read to the end of what was ready, and neither the
//! read's judged end nor the TUI's status line says "all"; a queue that held what was read
//! still does.

use crate::common;
use crate::replay_util;

use std::time::{Duration, Instant};

use common::amqp as amqp_h;
use common::{TestBroker, TestVhost, enc};
use futures_util::StreamExt;
use lapin::options::{BasicConsumeOptions, BasicQosOptions};
use lapin::types::FieldTable;
use lapin::{BasicProperties, Channel};
use replay_util::Home;
use warren::broker::browse::{self, BrowseRequest, StopReason};
use warren::config::Overrides;
use warren::domain::features::QueueType;
use warren::domain::quorum::BrowsePolicy;
use warren::domain::read_end::ReadEnd;
use warren::worker::protocol::{Command, Report};

const DLQ: &str = "orders.dlq";

async fn publish_n(ch: &Channel, from: u32, n: u32) {
    for i in from..from + n {
        let props = BasicProperties::default().with_message_id(format!("m-{i:05}").into());
        amqp_h::publish_raw(ch, "", DLQ, props, format!("{{\"n\": {i}}}").as_bytes()).await;
    }
}

/// The browse's own figures: messages published while the read runs are in the queue at its
/// end, and the read that took every message ready at its start is not "all".
async fn grew_during_the_read(broker: TestBroker, queue_type: QueueType) {
    const N: u32 = 300;
    const MORE: u32 = 25;
    let label = format!("{} {}", broker.label, queue_type.as_str());
    let vhost = TestVhost::new(&broker, "read-end-grew").await;
    let conn = amqp_h::connect(&vhost).await;
    let ch = amqp_h::confirm_channel(&conn).await;
    amqp_h::declare(&ch, DLQ, queue_type.clone(), FieldTable::default()).await;
    publish_n(&ch, 0, N).await;
    amqp_h::wait_for_depth(&conn, DLQ, u64::from(N), Duration::from_secs(30)).await;

    // A receiver of one: the read waits on each message until the test takes it, so the
    // publishing below happens while the read is under way, by construction.
    let (to, mut from) = tokio::sync::mpsc::channel(1);
    let mut req = BrowseRequest::new(DLQ, queue_type, BrowsePolicy::unrestricted());
    req.limit = 10_000;
    let read = tokio::spawn({
        let conn = amqp_h::connect(&vhost).await;
        async move {
            let page = browse::browse_to(&conn, &req, Some(to)).await;
            let _ = conn.close(200, "read".into()).await;
            page
        }
    });
    let first = tokio::time::timeout(Duration::from_secs(30), from.recv())
        .await
        .unwrap_or_else(|_| panic!("{label}: a first message within 30 s"))
        .expect("the read sends");
    assert_eq!(first.properties.message_id.as_deref(), Some("m-00000"));
    publish_n(&ch, N, MORE).await;
    let mut got = 1;
    while from.recv().await.is_some() {
        got += 1;
    }
    let page = read.await.expect("joined").expect("the read");
    assert_eq!(got, N, "{label}: what was ready at the start");
    assert_eq!(page.stopped, StopReason::Exhausted, "{label}");
    assert_eq!(page.queue_depth_at_start, u64::from(N), "{label}");
    assert_eq!(page.held_at_end, Some(u64::from(N + MORE)), "{label}");
    let end = page.end();
    let text = end.text();
    println!("{label}: {text}");
    assert!(!end.whole(), "{label}: {text}");
    assert!(matches!(end, ReadEnd::Changed { n, .. } if n == u64::from(N)));
    assert!(!text.contains("all "), "{label}: {text}");
    assert!(
        text.contains(&format!("the queue held {} by the end", N + MORE)),
        "{label}: {text}"
    );
    amqp_h::wait_for_depth(&conn, DLQ, u64::from(N + MORE), Duration::from_secs(30)).await;
    vhost.cleanup().await;
}

#[tokio::test]
async fn a_queue_that_grew_during_the_read_is_not_said_to_be_read_whole() {
    let runs = TestBroker::all().into_iter().flat_map(|b| {
        [
            grew_during_the_read(b.clone(), QueueType::Classic),
            grew_during_the_read(b, QueueType::Quorum),
        ]
    });
    futures_util::future::join_all(runs).await;
}

/// Waits until the management API has sampled `unacked` unacknowledged messages in the queue.
async fn mgmt_unacked(vhost: &TestVhost, queue: &str, unacked: i64, label: &str) {
    let path = format!("/api/queues/{}/{}", enc(&vhost.name), enc(queue));
    common::wait::until_ok(
        &format!("{label}: the management API to count {unacked} unacknowledged"),
        Duration::from_secs(30),
        || async {
            let v = vhost.get_json(&path).await;
            if v.get("messages_unacknowledged").and_then(|m| m.as_i64()) == Some(unacked) {
                Ok(())
            } else {
                Err(v)
            }
        },
    )
    .await
}

/// The TUI's read (the worker, its status line): another consumer holds one message
/// unacknowledged, so the read gets what was ready and says it is not the whole queue.
async fn held_by_another_consumer(broker: TestBroker) {
    const N: u32 = 10;
    let label = broker.label.clone();
    let vhost = TestVhost::new(&broker, "read-end-held").await;
    let home = Home::new("read-end-held");
    let conn = amqp_h::connect(&vhost).await;
    let ch = amqp_h::confirm_channel(&conn).await;
    amqp_h::declare(&ch, DLQ, QueueType::Classic, FieldTable::default()).await;
    publish_n(&ch, 0, N).await;
    // Another application's consumer takes one message and does not settle it.
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
    let held = tokio::time::timeout(Duration::from_secs(30), consumer.next())
        .await
        .unwrap_or_else(|_| panic!("{label}: the other consumer gets one within 30 s"))
        .expect("a delivery")
        .expect("delivered");
    amqp_h::wait_for_depth(&conn, DLQ, u64::from(N - 1), Duration::from_secs(30)).await;
    mgmt_unacked(&vhost, DLQ, 1, &label).await;

    let (cmd_tx, mut rx, worker) = common::spawn_worker(Overrides {
        config_path: Some(home.dir.join("config.toml")),
        amqp_url: Some(vhost.amqp_url()),
        management_url: Some(vhost.broker.mgmt_url_with_creds()),
        vhost: Some(vhost.name.clone()),
        ..Default::default()
    });
    cmd_tx
        .send(Command::Browse {
            vhost: vhost.name.clone(),
            queue: DLQ.into(),
            limit: 500,
            read_again: false,
            restart: false,
        })
        .await
        .expect("send");
    let loaded = common::worker_until(
        &mut rx,
        &label,
        |r| matches!(r, Report::MessagesLoaded { .. }),
        |_| {},
    )
    .await;
    let Report::MessagesLoaded { messages, stop, .. } = loaded else {
        unreachable!()
    };
    println!("{label}: {stop}");
    assert_eq!(messages.len(), (N - 1) as usize, "{label}: {stop}");
    assert!(!stop.contains("all "), "{label}: {stop}");
    assert!(
        stop.contains("1 more held unacknowledged by another consumer"),
        "{label}: {stop}"
    );
    drop(cmd_tx);
    let _ = tokio::time::timeout(Duration::from_secs(10), worker).await;
    // Settled by its owner, the held message goes back: nothing was lost.
    drop(held);
    let _ = other.close(200, "done".into()).await;
    amqp_h::wait_for_depth(&conn, DLQ, u64::from(N), Duration::from_secs(30)).await;
    vhost.cleanup().await;
}

#[tokio::test]
async fn a_message_held_by_another_consumer_keeps_the_status_line_from_saying_all() {
    futures_util::future::join_all(TestBroker::all().into_iter().map(held_by_another_consumer))
        .await;
}

/// A queue that held what was read is still read whole.
async fn held_what_was_read(broker: TestBroker) {
    const N: u32 = 40;
    let label = broker.label.clone();
    let vhost = TestVhost::new(&broker, "read-end-all").await;
    let conn = amqp_h::connect(&vhost).await;
    let ch = amqp_h::confirm_channel(&conn).await;
    amqp_h::declare(&ch, DLQ, QueueType::Classic, FieldTable::default()).await;
    publish_n(&ch, 0, N).await;
    let mut req = BrowseRequest::new(DLQ, QueueType::Classic, BrowsePolicy::unrestricted());
    req.limit = 500;
    let page = browse::browse(&conn, &req).await.expect("read");
    assert_eq!(page.held_at_end, Some(u64::from(N)), "{label}");
    assert_eq!(page.end(), ReadEnd::All { n: u64::from(N) }, "{label}");
    assert_eq!(page.end().text(), format!("all {N} messages"));
    vhost.cleanup().await;
}

#[tokio::test]
async fn a_queue_that_held_what_was_read_is_read_whole() {
    futures_util::future::join_all(TestBroker::all().into_iter().map(held_what_was_read)).await;
}

/// A measurement, not a check (run by name with `--ignored`): how a streamed read's nack makes
/// its messages ready again, seen by a second connection polling the ready count. Prints the
/// distinct counts seen and how long the return took. `READ_END_N` messages of 1 KiB (100,000).
/// Measured on 3.10 and 4.3 (2 shared cores): the count rises 8,192 at a time, one streamed
/// chunk's consumer after another; 100,000 came back in 1.2 s; on 4.3 a million in 69.7 s
/// (786,432 ready at 43.3 s, 123 steps, the longest pause between two 2.5 s).
#[tokio::test]
#[ignore]
async fn measure_how_a_read_is_handed_back() {
    let n: u32 = std::env::var("READ_END_N")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(100_000);
    // `READ_END_BROKER=4.3`: that broker only.
    let only = std::env::var("READ_END_BROKER").ok();
    for broker in TestBroker::all() {
        if only.as_ref().is_some_and(|o| *o != broker.label) {
            continue;
        }
        let label = broker.label.clone();
        let vhost = TestVhost::new(&broker, "read-end-measure").await;
        let conn = amqp_h::connect(&vhost).await;
        let ch = amqp_h::confirm_channel(&conn).await;
        amqp_h::declare(&ch, DLQ, QueueType::Classic, FieldTable::default()).await;
        let body = vec![b'x'; 1024];
        let filled = Instant::now();
        let mut pending = Vec::new();
        for i in 0..n {
            let props = BasicProperties::default().with_message_id(format!("m-{i:07}").into());
            let c = ch
                .basic_publish("".into(), DLQ.into(), Default::default(), &body, props)
                .await
                .expect("publish");
            pending.push(c);
            if pending.len() >= 2000 {
                for c in pending.drain(..) {
                    c.await.expect("confirm");
                }
            }
        }
        for c in pending {
            c.await.expect("confirm");
        }
        amqp_h::wait_for_depth(&conn, DLQ, u64::from(n), Duration::from_secs(120)).await;
        println!("{label}: {n} published in {:?}", filled.elapsed());

        let (to, mut from) = tokio::sync::mpsc::channel(1024);
        let mut req = BrowseRequest::new(DLQ, QueueType::Classic, BrowsePolicy::unrestricted());
        req.limit = n as usize;
        let read_conn = amqp_h::connect(&vhost).await;
        let started = Instant::now();
        let read = tokio::spawn(async move {
            let page = browse::browse_to(&read_conn, &req, Some(to)).await;
            let _ = read_conn.close(200, "read".into()).await;
            page
        });
        let mut got = 0u64;
        while got < u64::from(n) && from.recv().await.is_some() {
            got += 1;
        }
        let all_sent = started.elapsed();
        // Every message is here and held: the read now hands them back, and a second
        // connection watches the ready count rise while it does.
        let poll = conn.create_channel().await.expect("channel");
        let mut seen: Vec<(u64, Duration)> = Vec::new();
        let watch = Instant::now();
        while watch.elapsed() < Duration::from_secs(180) && !read.is_finished() {
            let q = poll
                .queue_declare(
                    DLQ.into(),
                    lapin::options::QueueDeclareOptions {
                        passive: true,
                        ..Default::default()
                    },
                    FieldTable::default(),
                )
                .await
                .expect("declare");
            let ready = u64::from(q.message_count());
            if seen.last().is_none_or(|(r, _)| *r != ready) {
                seen.push((ready, watch.elapsed()));
            }
            // Time, not an event: the ready count sampled every 5 ms, as it rises, is the
            // series this prints.
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        let handed_back = watch.elapsed();
        let page = read.await.expect("joined").expect("read");
        println!(
            "{label}: read {got} in {all_sent:?}, handed back in {handed_back:?} more; page {:?}, held at end {:?}, whole read {:?}",
            page.stopped,
            page.held_at_end,
            started.elapsed()
        );
        let steps: Vec<String> = seen
            .iter()
            .map(|(r, t)| format!("{r}@{}ms", t.as_millis()))
            .collect();
        println!(
            "{label}: ready counts seen ({}): {}",
            steps.len(),
            steps.join(" ")
        );
        let of_8192 = seen.iter().filter(|(r, _)| r % 8192 == 0).count();
        println!("{label}: {of_8192} of them multiples of 8192");
        vhost.cleanup().await;
    }
}
