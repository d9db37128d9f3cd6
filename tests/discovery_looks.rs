//! A look reads no application queue (issue 38): `warren queues`, `watch --once`, `groups` and
//! `show` of a DLQ, run again and again against a vhost with a classic queue holding messages
//! and nothing consuming it, and a queue a live consumer works through, take no message from
//! either — the management API counts no `get` and no `redeliver` there, and the consumer gets
//! every message once, never redelivered. Symfony's failure transport is still listed, found by
//! topology with no read; a queue declared a moment ago shows its consumer at once (counted
//! over AMQP, not from the management API's statistics, which lag).

use crate::common;
use crate::framework_util::wait_for;
use crate::replay_util;

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::amqp as h;
use common::{TestBroker, TestVhost, enc};
use futures_util::StreamExt;
use lapin::options::{BasicAckOptions, BasicConsumeOptions, BasicQosOptions};
use lapin::types::FieldTable;
use replay_util::{Home, dead_letter, fill, simple, warren};
use serde_json::Value;
use warren::domain::features::QueueType;

const LIVE_IDS: u32 = 300;

/// Publishes one more message (`{prefix}-0`) to `queue` and returns the management API's
/// `message_stats` once they count it: newer than every look before it. The channel stays open
/// until then: a channel closed at once can take its last publishes' figures with it when the
/// statistics are collected after it is gone (seen under CI load: "never counted").
async fn stats_after_one_more(
    vh: &TestVhost,
    conn: &lapin::Connection,
    queue: &str,
    prefix: &str,
) -> Value {
    let path = format!("/api/queues/{}/{}", enc(&vh.name), enc(queue));
    let count = |v: &Value| v["message_stats"]["publish"].as_u64().unwrap_or(0);
    let before = count(&vh.get_json(&path).await);
    let ch = h::confirm_channel(conn).await;
    let (p, hd, body) = simple(prefix, 0, &[]);
    h::publish(&ch, queue, &p, &hd, &body).await;
    let got = wait_for(Duration::from_secs(90), || async {
        let v = vh.get_json(&path).await;
        (count(&v) > before).then(|| v["message_stats"].clone())
    })
    .await;
    let _ = ch.close(200, "counted".into()).await;
    got.unwrap_or_else(|| {
        panic!(
            "{}: {queue}: the statistics never counted a publish past {before}",
            vh.broker.label
        )
    })
}

fn reads(stats: &Value) -> (u64, u64, u64) {
    let n = |k: &str| stats[k].as_u64().unwrap_or(0);
    (n("get"), n("get_no_ack"), n("redeliver"))
}

/// Every delivery a consumer of `queue` took: (message id, redelivered), acked slowly enough
/// that the queue keeps ready messages while it works.
fn consume(ch: lapin::Channel, mut consumer: lapin::Consumer) -> Arc<Mutex<Vec<(String, bool)>>> {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let out = seen.clone();
    tokio::spawn(async move {
        let _ch = ch;
        while let Some(Ok(d)) = consumer.next().await {
            let id = d
                .properties
                .message_id()
                .as_ref()
                .map(|s| s.to_string())
                .unwrap_or_default();
            out.lock().unwrap().push((id, d.redelivered));
            // Time, not an event: a slow consumer, so ready messages stay while it works.
            tokio::time::sleep(Duration::from_millis(5)).await;
            let _ = d.ack(BasicAckOptions::default()).await;
        }
    });
    seen
}

#[tokio::test]
async fn a_look_takes_no_message_from_an_application_queue() {
    TestBroker::each(|b| async move {
        let vh = TestVhost::new(&b, "looks").await;
        let home = Home::new("looks");
        let conn = h::connect(&vh).await;
        let ch = h::confirm_channel(&conn).await;
        for q in ["idle", "live", "orders.dlq"] {
            h::declare(&ch, q, QueueType::Classic, FieldTable::default()).await;
        }
        fill(&conn, "idle", "idle", 5).await;
        dead_letter(&conn, "orders", "orders.dlq", &[simple("o", 0, &[])]).await;
        let cch = conn.create_channel().await.expect("channel");
        cch.basic_qos(1, BasicQosOptions::default())
            .await
            .expect("qos");
        let consumer = cch
            .basic_consume(
                "live".into(),
                "app".into(),
                BasicConsumeOptions::default(),
                FieldTable::default(),
            )
            .await
            .expect("consume");
        let seen = consume(cch, consumer);
        // The consumer works through a backlog while Warren looks.
        let publisher = {
            let conn = h::connect(&vh).await;
            tokio::spawn(async move {
                fill(&conn, "live", "live", LIVE_IDS).await;
                conn
            })
        };
        let looks: [&[&str]; 6] = [
            &["queues"],
            &["queues", "--all", "--json"],
            &["watch", "--once"],
            &["groups", "orders.dlq"],
            &["show", "orders.dlq"],
            &["queues", "--all"],
        ];
        for _ in 0..3 {
            for args in looks {
                let r = warren(&vh, &home, args).await;
                assert!(matches!(r.code, Some(0 | 1)), "{args:?}: {r}");
            }
        }
        let _publisher_conn = publisher.await.expect("publisher");
        let all = wait_for(Duration::from_secs(60), || async {
            (seen.lock().unwrap().len() >= LIVE_IDS as usize).then_some(())
        })
        .await;
        assert!(
            all.is_some(),
            "{}: the consumer got {}",
            b.label,
            seen.lock().unwrap().len()
        );
        let mut by_id: BTreeMap<String, (u32, bool)> = BTreeMap::new();
        for (id, redelivered) in seen.lock().unwrap().iter() {
            let e = by_id.entry(id.clone()).or_default();
            e.0 += 1;
            e.1 |= redelivered;
        }
        assert_eq!(by_id.len(), LIVE_IDS as usize, "{}", b.label);
        for (id, (n, redelivered)) in &by_id {
            assert_eq!((*n, *redelivered), (1, false), "{}: {id}", b.label);
        }
        // One more publish to each, so the statistics read are newer than every look.
        let idle = stats_after_one_more(&vh, &conn, "idle", "late").await;
        let live = stats_after_one_more(&vh, &conn, "live", "late").await;
        assert_eq!(reads(&idle), (0, 0, 0), "{}: idle {idle}", b.label);
        assert_eq!(reads(&live), (0, 0, 0), "{}: live {live}", b.label);
        // The idle queue's head was never handed out.
        let head = h::peek(&conn, "idle", 1).await;
        assert_eq!(head.len(), 1);
        assert!(!head[0].delivery.redelivered, "{}", b.label);
        let _ = conn.close(200, "ok".into()).await;
        vh.cleanup().await;
    })
    .await;
}

/// Symfony's topology as its AMQP transport declares it (tests/fixtures/symfony_worker.php does
/// the same with the real worker): the `async` transport's exchange and queue, the `delays`
/// exchange, and the failure transport's exchange and queue holding failed messages.
#[tokio::test]
async fn symfony_s_failure_transport_is_listed_without_a_read() {
    TestBroker::each(|b| async move {
        let vh = TestVhost::new(&b, "looks-symfony").await;
        let home = Home::new("looks-symfony");
        let conn = h::connect(&vh).await;
        let ch = h::confirm_channel(&conn).await;
        for (x, kind) in [
            ("messages", lapin::ExchangeKind::Fanout),
            ("failed", lapin::ExchangeKind::Fanout),
            ("delays", lapin::ExchangeKind::Direct),
        ] {
            ch.exchange_declare(
                x.into(),
                kind,
                lapin::options::ExchangeDeclareOptions {
                    durable: true,
                    ..Default::default()
                },
                FieldTable::default(),
            )
            .await
            .expect("exchange");
        }
        for q in ["messages", "failed"] {
            h::declare(&ch, q, QueueType::Classic, FieldTable::default()).await;
            ch.queue_bind(
                q.into(),
                q.into(),
                "".into(),
                Default::default(),
                FieldTable::default(),
            )
            .await
            .expect("bind");
        }
        fill(&conn, "failed", "failed", 3).await;
        // Messages waiting in the work queue with nothing consuming: never read either.
        fill(&conn, "messages", "waiting", 2).await;
        for _ in 0..3 {
            let r = warren(&vh, &home, &["queues", "--all", "--json"]).await;
            assert_eq!(r.code, Some(0), "{r}");
            let listed: BTreeMap<String, Value> = r
                .json()
                .into_iter()
                .map(|q| (q["name"].as_str().unwrap_or_default().to_string(), q))
                .collect();
            assert_eq!(listed["failed"]["kind"], "error", "{r}");
            assert_eq!(listed["failed"]["convention"], "symfony", "{r}");
            assert_eq!(listed["messages"]["kind"], "queue", "{r}");
            let w = warren(&vh, &home, &["watch", "--once"]).await;
            assert!(matches!(w.code, Some(0 | 1)), "{w}");
        }
        // `watch` reads the DLQs it lists (the failure transport among them), never `messages`.
        let m = stats_after_one_more(&vh, &conn, "messages", "late").await;
        assert_eq!(reads(&m), (0, 0, 0), "{}: messages {m}", b.label);
        let _ = conn.close(200, "ok".into()).await;
        vh.cleanup().await;
    })
    .await;
}

/// A work queue declared a moment ago with one consumer: `queues --json` says 1 at once (the
/// management API has no figure, or 0, for seconds yet).
#[tokio::test]
async fn a_fresh_queue_s_consumer_is_counted_at_once() {
    TestBroker::each(|b| async move {
        let vh = TestVhost::new(&b, "looks-fresh").await;
        let home = Home::new("looks-fresh");
        let conn = h::connect(&vh).await;
        let ch = h::confirm_channel(&conn).await;
        h::declare(&ch, "fresh.dlq", QueueType::Classic, FieldTable::default()).await;
        h::declare(
            &ch,
            "fresh",
            QueueType::Classic,
            h::dead_letter_to("fresh.dlq"),
        )
        .await;
        let cch = conn.create_channel().await.expect("channel");
        let _held = cch
            .basic_consume(
                "fresh".into(),
                "app".into(),
                BasicConsumeOptions::default(),
                FieldTable::default(),
            )
            .await
            .expect("consume");
        let r = warren(&vh, &home, &["queues", "--json"]).await;
        assert_eq!(r.code, Some(0), "{r}");
        let dlq = r.json().into_iter().find(|v| v["name"] == "fresh.dlq");
        let dlq = dlq.unwrap_or_else(|| panic!("fresh.dlq not listed: {r}"));
        assert_eq!(dlq["origin_consumers"], 1, "{}: {dlq}", b.label);
        assert_eq!(dlq["consumers"], 0, "{}: {dlq}", b.label);
        let _ = conn.close(200, "ok".into()).await;
        vh.cleanup().await;
    })
    .await;
}
