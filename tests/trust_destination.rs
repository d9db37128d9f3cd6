//! Never replay into a loss: a confirm from the first queue proves nothing when that queue is
//! capped (overflow drop-head drops the oldest) or is a wait queue whose way back reaches no
//! queue. The preflight follows each target to where it comes to rest and refuses (or sends the
//! messages straight to the consuming queue); every message id is counted before and after.

use crate::common;
use crate::replay_util;

use std::collections::BTreeSet;
use std::time::Duration;

use common::amqp as h;
use common::{TestBroker, TestVhost};
use futures_util::StreamExt;
use lapin::options::{
    BasicAckOptions, BasicConsumeOptions, BasicPublishOptions, ExchangeDeclareOptions,
    QueueBindOptions,
};
use lapin::types::{AMQPValue, FieldTable, LongString};
use lapin::{BasicProperties, ExchangeKind};
use replay_util::{Home, message_ids, read_all, warren};
use serde_json::{Value, json};
use warren::domain::features::QueueType;

fn ids(v: &[String]) -> BTreeSet<String> {
    v.iter().cloned().collect()
}

async fn capped(broker: TestBroker, overflow: &'static str) {
    let vhost = TestVhost::new(&broker, "trust-dest-capped").await;
    let home = Home::new("trust-dest-capped");
    let conn = h::connect(&vhost).await;
    let ch = h::confirm_channel(&conn).await;
    h::declare(&ch, "dlq", QueueType::Classic, FieldTable::default()).await;
    h::dead_letter_by_reject(&conn, "work", "dlq", 100).await;
    // The work queue gets a length limit after the fact, as an operator's policy would.
    let mut def =
        json!({"max-length": 30, "dead-letter-exchange": "", "dead-letter-routing-key": "dlq"});
    if overflow != "drop-head" {
        def["overflow"] = json!(overflow);
    }
    vhost.policy("cap", "^work$", "queues", def).await;
    vhost.wait_policy("work", "cap").await;
    let all: BTreeSet<String> = (0..100).map(|i| format!("m-{i}")).collect();

    let run = warren(&vhost, &home, &["replay", "dlq", "--yes", "--json"]).await;
    let label = format!("{} {overflow}", broker.label);
    match overflow {
        "reject-publish" => {
            // Allowed with a warning: the broker refuses what does not fit, it stays in the DLQ.
            let plan = run.event("plan");
            assert!(
                plan["warnings"]
                    .as_object()
                    .is_some_and(|w| w.keys().any(|k| k.contains("reject-publish"))),
                "{label}: {run}"
            );
            assert_ne!(
                run.code,
                Some(0),
                "{label}: refused publishes are not a success: {run}"
            );
            let moved = run.summary_u64("moved");
            assert!(moved <= 30, "{label}: {run}");
            let in_work = message_ids(&read_all(&conn, "work", 100).await);
            let in_dlq = message_ids(&read_all(&conn, "dlq", 100).await);
            assert_eq!(in_work.len() as u64, moved, "{label}");
            let mut both = ids(&in_work);
            both.extend(in_dlq.iter().cloned());
            assert_eq!(both, all, "{label}: every id in the DLQ or the target");
            assert_eq!(in_work.len() + in_dlq.len(), 100, "{label}: no copies");
        }
        _ => {
            assert_eq!(run.code, Some(1), "{label}: {run}");
            assert!(
                run.stderr.contains(overflow) && run.stderr.contains("--limit 30"),
                "{label}: {run}"
            );
            assert_eq!(
                h::amqp_depth(&conn, "work").await,
                0,
                "{label}: nothing moved"
            );
            assert_eq!(
                ids(&message_ids(&read_all(&conn, "dlq", 100).await)),
                all,
                "{label}"
            );
            // What fits, moves.
            let run = warren(
                &vhost,
                &home,
                &["replay", "dlq", "--yes", "--json", "--limit", "30"],
            )
            .await;
            assert_eq!(run.code, Some(0), "{label}: {run}");
            assert_eq!(run.summary_u64("moved"), 30, "{label}: {run}");
            let in_work = message_ids(&read_all(&conn, "work", 100).await);
            let in_dlq = message_ids(&read_all(&conn, "dlq", 100).await);
            assert_eq!((in_work.len(), in_dlq.len()), (30, 70), "{label}");
            let mut both = ids(&in_work);
            both.extend(in_dlq);
            assert_eq!(both, all, "{label}");
        }
    }
    let _ = conn.close(200, "done".into()).await;
    vhost.cleanup().await;
}

#[tokio::test]
async fn a_capped_target_is_never_overfilled() {
    let runs = TestBroker::all().into_iter().flat_map(|b| {
        ["drop-head", "reject-publish-dlx", "reject-publish"].map(|o| capped(b.clone(), o))
    });
    futures_util::future::join_all(runs).await;
}

fn long(s: &str) -> AMQPValue {
    AMQPValue::LongString(LongString::from(s))
}

/// A hand-rolled ladder as amqplib apps build it: the app publishes a failed message to the
/// `wait` exchange with its work key; `orders.wait` (TTL, dead-letter exchange `retry`, no
/// dead-letter routing key) sends it back through `retry` with that key. After its last try the
/// app copies the message, x-death and all, into `orders.dlq`. The newest death says
/// "expired in orders.wait"; publishing there under the wait queue's own name would be dropped.
async fn ladder(broker: TestBroker, route_back: bool) {
    let vhost = TestVhost::new(&broker, "trust-dest-ladder").await;
    let home = Home::new("trust-dest-ladder");
    let conn = h::connect(&vhost).await;
    let ch = h::confirm_channel(&conn).await;
    for x in ["wait", "retry"] {
        ch.exchange_declare(
            x.into(),
            ExchangeKind::Direct,
            ExchangeDeclareOptions {
                durable: true,
                ..Default::default()
            },
            FieldTable::default(),
        )
        .await
        .expect("exchange");
    }
    let mut wait_args = FieldTable::default();
    wait_args.insert("x-message-ttl".into(), AMQPValue::LongLongInt(200));
    wait_args.insert("x-dead-letter-exchange".into(), long("retry"));
    h::declare(&ch, "orders.wait", QueueType::Classic, wait_args).await;
    h::declare(&ch, "orders", QueueType::Classic, FieldTable::default()).await;
    h::declare(&ch, "orders.dlq", QueueType::Classic, FieldTable::default()).await;
    let bind = |q: &'static str, x: &'static str| {
        let ch = ch.clone();
        async move {
            ch.queue_bind(
                q.into(),
                x.into(),
                "orders".into(),
                QueueBindOptions::default(),
                FieldTable::default(),
            )
            .await
            .expect("bind")
        }
    };
    bind("orders.wait", "wait").await;
    bind("orders", "retry").await;
    let n = 5;
    for i in 0..n {
        let props = BasicProperties::default().with_message_id(format!("m-{i}").into());
        h::publish_raw(
            &ch,
            "wait",
            "orders",
            props,
            format!("order {i}").as_bytes(),
        )
        .await;
    }
    h::wait_for_depth(&conn, "orders", n, Duration::from_secs(20)).await;
    // The app's last try: copy each message into the DLQ with every header, then ack.
    let app = conn.create_channel().await.expect("channel");
    let mut consumer = app
        .basic_consume(
            "orders".into(),
            "app".into(),
            BasicConsumeOptions::default(),
            FieldTable::default(),
        )
        .await
        .expect("consume");
    for _ in 0..n {
        let d = tokio::time::timeout(Duration::from_secs(5), consumer.next())
            .await
            .expect("delivery")
            .expect("open")
            .expect("ok");
        h::publish_raw(&ch, "", "orders.dlq", d.properties.clone(), &d.data).await;
        app.basic_ack(d.delivery_tag, BasicAckOptions::default())
            .await
            .expect("ack");
    }
    let _ = app.close(200, "app stops".into()).await;
    if !route_back {
        // A ladder whose way back was removed: the wait queue would drop what it is given.
        ch.queue_unbind(
            "orders".into(),
            "retry".into(),
            "orders".into(),
            FieldTable::default(),
        )
        .await
        .expect("unbind");
    }
    // The app is gone and its copies are in: `orders` has no consumer and nothing ready, the
    // DLQ holds the n copies.
    let settled = crate::framework_util::wait_for(Duration::from_secs(20), || async {
        let orders = crate::framework_util::queue_state(&conn, "orders").await?;
        let dlq = crate::framework_util::queue_state(&conn, "orders.dlq").await?;
        (orders == (0, 0) && u64::from(dlq.0) == n).then_some(())
    })
    .await;
    assert!(
        settled.is_some(),
        "{}: the app's copies did not settle: orders {:?}, orders.dlq {:?}",
        broker.label,
        crate::framework_util::queue_state(&conn, "orders").await,
        crate::framework_util::queue_state(&conn, "orders.dlq").await
    );
    let all: BTreeSet<String> = (0..n).map(|i| format!("m-{i}")).collect();
    let run = warren(&vhost, &home, &["replay", "orders.dlq", "--yes", "--json"]).await;
    let label = format!("{} route_back={route_back}", broker.label);
    if route_back {
        assert_eq!(run.code, Some(0), "{label}: {run}");
        assert_eq!(run.summary_u64("moved"), n, "{label}: {run}");
        // Nothing was read first (the app copied them in: no queue dead-letters into the
        // DLQ), so the wait queue was checked when the run met it, and its messages went to
        // and are counted under the consuming queue.
        let plan = run.event("plan");
        assert_eq!(plan["checked_as_met"], json!(true), "{label}: {run}");
        assert_eq!(
            run.event("summary")["targets"],
            json!({"orders": n}),
            "{label}: the consuming queue is the target: {run}"
        );
        // Straight to the work queue, not through the wait queue's TTL.
        assert_eq!(
            ids(&message_ids(&read_all(&conn, "orders", 10).await)),
            all,
            "{label}"
        );
        assert_eq!(h::amqp_depth(&conn, "orders.wait").await, 0, "{label}");
    } else {
        assert_eq!(run.code, Some(1), "{label}: {run}");
        // Held back when the run met the wait queue, with why, in the summary's problems.
        let problems = run.event("summary")["problems"].to_string();
        assert!(
            (problems.contains("reaches no queue") || problems.contains("drops"))
                && problems.contains("stay in the DLQ"),
            "{label}: {run}"
        );
        assert_eq!(run.summary_u64("failed"), n, "{label}: {run}");
        assert_eq!(
            h::amqp_depth(&conn, "orders.wait").await,
            0,
            "{label}: nothing published"
        );
        assert_eq!(
            ids(&message_ids(&read_all(&conn, "orders.dlq", 10).await)),
            all,
            "{label}"
        );
    }
    let _ = conn.close(200, "done".into()).await;
    vhost.cleanup().await;
}

#[tokio::test]
async fn a_wait_queue_is_never_the_target() {
    let runs = TestBroker::all()
        .into_iter()
        .flat_map(|b| [ladder(b.clone(), true), ladder(b, false)]);
    futures_util::future::join_all(runs).await;
    let _ = BasicPublishOptions::default();
}

/// A DLQ with one broker feeder (`orders`, so a plan reads nothing first) that an app's retry
/// ladder also copies messages into (past its wait queue): the default replay moves them all,
/// each to where its plan says, following the wait queue as a plan that reads does — none is
/// refused as "not checked before the run" (issue 24). Every id is counted.
#[tokio::test]
async fn messages_an_app_copied_into_a_dlq_with_one_feeder_are_replayed_past_the_wait_queue() {
    for b in TestBroker::all() {
        let vh = TestVhost::new(&b, "trust-dest-copied").await;
        let home = Home::new("trust-dest-copied");
        let conn = h::connect(&vh).await;
        let ch = h::confirm_channel(&conn).await;
        h::declare(
            &ch,
            "payments.dlq",
            QueueType::Classic,
            FieldTable::default(),
        )
        .await;
        h::dead_letter_by_reject(&conn, "orders", "payments.dlq", 1).await;
        h::retry_ladder(
            &conn,
            "payments",
            "payments.retry.1500ms",
            "payments.dlq",
            3,
            2,
        )
        .await;
        let before = ids(&message_ids(&read_all(&conn, "payments.dlq", 3).await));
        assert_eq!(before.len(), 3, "{}", b.label);

        let r = warren(&vh, &home, &["replay", "payments.dlq", "--yes", "--json"]).await;
        assert_eq!(r.code, Some(0), "{}: {r}", b.label);
        assert_eq!(r.summary_u64("moved"), 3, "{}: {r}", b.label);
        assert_eq!(h::amqp_depth(&conn, "payments.dlq").await, 0, "{}", b.label);
        assert_eq!(
            h::amqp_depth(&conn, "payments.retry.1500ms").await,
            0,
            "{}",
            b.label
        );
        let in_payments = ids(&message_ids(&read_all(&conn, "payments", 2).await));
        let in_orders = ids(&message_ids(&read_all(&conn, "orders", 1).await));
        assert_eq!(
            in_payments.len(),
            2,
            "{}: the ladder's two, past the wait queue",
            b.label
        );
        assert_eq!(in_orders.len(), 1, "{}: the broker's one", b.label);
        let after: BTreeSet<String> = in_payments.union(&in_orders).cloned().collect();
        assert_eq!(after, before, "{}: every id once", b.label);
        let _ = conn.close(200, "ok".into()).await;
        vh.cleanup().await;
    }
}

/// A wait queue without a dead-letter routing key sends each message on with the key it came
/// in with (`refunds.later` → exchange `shop`, key `refunds` → `refunds`; named like no wait
/// queue, and nothing consumes `refunds` when Warren looks): `show` names where a replay comes
/// to rest by the same rule as the plan and the run, not the wait queue (issue 24, the
/// ladder's second defect).
#[tokio::test]
async fn show_the_plan_and_the_run_agree_where_a_replay_past_a_keyed_wait_queue_rests() {
    for b in TestBroker::all() {
        let vh = TestVhost::new(&b, "trust-dest-keyed").await;
        let home = Home::new("trust-dest-keyed");
        let conn = h::connect(&vh).await;
        let ch = h::confirm_channel(&conn).await;
        for (x, kind) in [
            ("shop", ExchangeKind::Direct),
            ("retry", ExchangeKind::Fanout),
        ] {
            ch.exchange_declare(x.into(), kind, Default::default(), FieldTable::default())
                .await
                .unwrap();
        }
        h::declare(
            &ch,
            "refunds.dlq",
            QueueType::Classic,
            FieldTable::default(),
        )
        .await;
        h::declare(&ch, "refunds", QueueType::Classic, FieldTable::default()).await;
        let mut wait = FieldTable::default();
        wait.insert("x-message-ttl".into(), AMQPValue::LongInt(100));
        wait.insert(
            "x-dead-letter-exchange".into(),
            AMQPValue::LongString(LongString::from("shop")),
        );
        h::declare(&ch, "refunds.later", QueueType::Classic, wait).await;
        for (q, x, k) in [
            ("refunds", "shop", "refunds"),
            ("refunds.later", "retry", ""),
        ] {
            ch.queue_bind(
                q.into(),
                x.into(),
                k.into(),
                QueueBindOptions::default(),
                FieldTable::default(),
            )
            .await
            .unwrap();
        }
        // Into the wait queue with its own key; expired on to `refunds`; the app copies it
        // into the DLQ with every header, as a ladder's last step does.
        let props = BasicProperties::default().with_message_id("refund-1".into());
        h::publish_raw(&ch, "retry", "refunds", props, b"refund 1").await;
        h::wait_for_depth(&conn, "refunds", 1, Duration::from_secs(10)).await;
        let got = ch
            .basic_get("refunds".into(), Default::default())
            .await
            .unwrap()
            .expect("the expired message");
        h::publish_raw(
            &ch,
            "",
            "refunds.dlq",
            got.delivery.properties.clone(),
            &got.delivery.data,
        )
        .await;
        got.delivery.ack(BasicAckOptions::default()).await.unwrap();

        let shown = warren(&vh, &home, &["show", "refunds.dlq", "--json"]).await;
        assert_eq!(shown.code, Some(0), "{}: {shown}", b.label);
        let target = &shown.json()[0]["replay_target"];
        assert_eq!(target["rests_in"], "refunds", "{}: {shown}", b.label);
        let plan = warren(
            &vh,
            &home,
            &["replay", "refunds.dlq", "--dry-run", "--json"],
        )
        .await;
        let planned = plan.event("plan");
        let rests: Vec<Value> = planned["targets"]
            .as_object()
            .map(|t| t.values().map(|v| v["rests_in"].clone()).collect())
            .unwrap_or_default();
        assert_eq!(rests, [json!("refunds")], "{}: {plan}", b.label);
        let run = warren(&vh, &home, &["replay", "refunds.dlq", "--yes", "--json"]).await;
        assert_eq!(run.code, Some(0), "{}: {run}", b.label);
        let ids = message_ids(&read_all(&conn, "refunds", 1).await);
        assert_eq!(ids, ["refund-1"], "{}: it rests in refunds", b.label);
        assert_eq!(
            h::amqp_depth(&conn, "refunds.later").await,
            0,
            "{}",
            b.label
        );
        let _ = conn.close(200, "ok".into()).await;
        vh.cleanup().await;
    }
}
