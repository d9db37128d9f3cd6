//! Which messages a replay takes, through the real binary: a failure group and a filter move
//! exactly their messages and leave the rest in order; a full hold-back window stops the run and
//! says so; a DLQ refilled by a consumer that still has the bug does not keep the replay running.

use crate::common;
use crate::replay_util;

use std::time::Duration;

use common::amqp::{self as h, amqp_depth};
use common::{TestBroker, TestVhost};
use futures_util::StreamExt;
use lapin::options::{BasicConsumeOptions, BasicGetOptions, BasicRejectOptions};
use lapin::types::FieldTable;
use replay_util::{Home, dead_letter, message_ids, read_all, simple, warren};
use serde_json::Value;
use warren::domain::features::QueueType;

/// `orders` and `billing` both dead-letter into `dlq`; their deaths alternate in the DLQ.
async fn two_sources(conn: &lapin::Connection, per_source: u32) {
    let ch = h::confirm_channel(conn).await;
    h::declare(&ch, "dlq", QueueType::Classic, FieldTable::default()).await;
    for q in ["orders", "billing"] {
        h::declare(&ch, q, QueueType::Classic, h::dead_letter_to("dlq")).await;
        for i in 0..per_source {
            let (p, hd, b) = simple(q, i, &[]);
            h::publish(&ch, q, &p, &hd, &b).await;
        }
    }
    let get = conn.create_channel().await.expect("channel");
    for _ in 0..per_source {
        for q in ["orders", "billing"] {
            let m = get
                .basic_get(q.into(), BasicGetOptions::default())
                .await
                .expect("get")
                .expect("a message");
            m.delivery
                .reject(BasicRejectOptions { requeue: false })
                .await
                .expect("reject");
        }
    }
    h::wait_for_depth(
        conn,
        "dlq",
        u64::from(per_source) * 2,
        Duration::from_secs(10),
    )
    .await;
}

#[tokio::test]
async fn group_and_filter_move_exactly_their_messages_and_leave_the_rest_in_order() {
    const PER: u32 = 20;
    for broker in TestBroker::all() {
        let label = broker.label.clone();
        let vhost = TestVhost::new(&broker, "replay-select").await;
        let home = Home::new("replay-select");
        let conn = h::connect(&vhost).await;
        two_sources(&conn, PER).await;
        let before = message_ids(&h::peek(&conn, "dlq", 100).await);

        // The billing group's fingerprint, as `warren groups` shows it.
        let groups = warren(&vhost, &home, &["groups", "dlq", "--json"]).await;
        assert_eq!(groups.code, Some(0), "{groups}");
        let billing: Vec<Value> = groups
            .json()
            .into_iter()
            .filter(|g| g["source_queue"] == "billing")
            .collect();
        assert_eq!(billing.len(), 1, "{label}: {groups}");
        assert_eq!(billing[0]["count"], PER);
        let fp = billing[0]["fingerprint"]
            .as_str()
            .unwrap_or_default()
            .to_string();

        let run = warren(
            &vhost,
            &home,
            &["replay", "dlq", "--yes", "--json", "--group", &fp],
        )
        .await;
        assert_eq!(run.code, Some(0), "{label}: {run}");
        assert_eq!(run.summary_u64("moved"), u64::from(PER), "{label}: {run}");
        assert_eq!(
            run.summary_u64("held_back"),
            u64::from(PER),
            "{label}: {run}"
        );
        let moved = read_all(&conn, "billing", 100).await;
        assert_eq!(
            message_ids(&moved),
            (0..PER).map(|i| format!("billing-{i}")).collect::<Vec<_>>(),
            "{label}: the group, in order"
        );
        assert_eq!(amqp_depth(&conn, "orders").await, 0);
        let left = message_ids(&h::peek(&conn, "dlq", 100).await);
        let expected: Vec<String> = before
            .iter()
            .filter(|id| id.starts_with("orders-"))
            .cloned()
            .collect();
        assert_eq!(left, expected, "{label}: the rest stays in order");

        // A filter: only orders with an odd seq.
        let run = warren(
            &vhost,
            &home,
            &[
                "replay",
                "dlq",
                "--yes",
                "--json",
                "--filter",
                "queue:orders header:seq=1",
            ],
        )
        .await;
        assert_eq!(run.code, Some(0), "{label}: {run}");
        // seq values containing "1": 1, 10..19.
        let picked: Vec<String> = (0..PER)
            .filter(|i| i.to_string().contains('1'))
            .map(|i| format!("orders-{i}"))
            .collect();
        assert_eq!(
            run.summary_u64("moved"),
            picked.len() as u64,
            "{label}: {run}"
        );
        assert_eq!(
            message_ids(&read_all(&conn, "orders", 100).await),
            picked,
            "{label}"
        );
        let left = message_ids(&h::peek(&conn, "dlq", 100).await);
        let expected: Vec<String> = expected
            .into_iter()
            .filter(|id| !picked.contains(id))
            .collect();
        assert_eq!(left, expected, "{label}: the rest stays in order");
        let _ = conn.close(200, "done".into()).await;
        vhost.cleanup().await;
    }
}

/// The count a person confirms is the count that moves: a selection matched in the first
/// `--window` messages moves exactly those, and says that later matches were not looked at.
#[tokio::test]
async fn a_selection_moves_the_count_confirmed_and_says_later_matches_stay() {
    let vhost = TestVhost::new(&TestBroker::default_broker(), "replay-window").await;
    let home = Home::new("replay-window");
    let conn = h::connect(&vhost).await;
    let ch = h::confirm_channel(&conn).await;
    h::declare(&ch, "dlq", QueueType::Classic, FieldTable::default()).await;
    // One wanted message first, then 20 unwanted, then 9 wanted.
    let msgs: Vec<_> = (0..30)
        .map(|i| {
            let kind = if i == 0 || i >= 21 { "wanted" } else { "other" };
            simple("w", i, &[("kind", kind)])
        })
        .collect();
    dead_letter(&conn, "work", "dlq", &msgs).await;
    let before = message_ids(&h::peek(&conn, "dlq", 100).await);

    let run = warren(
        &vhost,
        &home,
        &[
            "replay",
            "dlq",
            "--yes",
            "--json",
            "--filter",
            "header:kind=wanted",
            "--window",
            "10",
        ],
    )
    .await;
    let plan = run.event("plan");
    assert_eq!(plan["selected"].as_u64(), Some(1), "{run}");
    assert!(
        plan["warnings"]
            .as_object()
            .is_some_and(|w| w.keys().any(|k| k.contains("first 10 of 30"))),
        "the plan says only the first 10 were matched: {run}"
    );
    assert_eq!(run.summary_u64("moved"), 1, "{run}");
    let stop = run.event("summary")["stop"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    assert!(stop.contains("limit"), "{run}");
    assert_eq!(
        message_ids(&read_all(&conn, "work", 100).await),
        vec!["w-0".to_string()]
    );
    let left = message_ids(&h::peek(&conn, "dlq", 100).await);
    assert_eq!(
        left,
        before[1..].to_vec(),
        "everything else stays, in order"
    );
    vhost.cleanup().await;
}

/// The consumer of `work` still has the bug: it rejects every message, which dead-letters it
/// straight back into the DLQ. The replay goes through what the DLQ held at the start and stops.
#[tokio::test]
async fn a_dlq_refilled_by_a_failing_consumer_does_not_keep_the_replay_running() {
    const N: u32 = 100;
    for broker in TestBroker::all() {
        let label = broker.label.clone();
        let vhost = TestVhost::new(&broker, "replay-refill").await;
        let home = Home::new("replay-refill");
        let conn = h::connect(&vhost).await;
        let ch = h::confirm_channel(&conn).await;
        h::declare(&ch, "dlq", QueueType::Classic, FieldTable::default()).await;
        let msgs: Vec<_> = (0..N).map(|i| simple("f", i, &[])).collect();
        dead_letter(&conn, "work", "dlq", &msgs).await;

        let buggy = conn.create_channel().await.expect("channel");
        let mut consumer = buggy
            .basic_consume(
                "work".into(),
                "buggy".into(),
                BasicConsumeOptions::default(),
                FieldTable::default(),
            )
            .await
            .expect("consume");
        let rejector = tokio::spawn(async move {
            let mut n = 0u32;
            while let Some(Ok(d)) = consumer.next().await {
                if d.reject(BasicRejectOptions { requeue: false })
                    .await
                    .is_err()
                {
                    break;
                }
                n += 1;
            }
            n
        });

        let run = warren(&vhost, &home, &["replay", "dlq", "--yes", "--json"]).await;
        assert_eq!(run.code, Some(0), "{label}: {run}");
        assert_eq!(run.summary_u64("moved"), u64::from(N), "{label}: {run}");
        assert!(
            run.event("summary")["stop"]
                .as_str()
                .is_some_and(|s| s.contains("held at the start")),
            "{label}: {run}"
        );
        // Everything came straight back, replayed once; none was lost, none replayed twice.
        h::wait_for_depth(&conn, "dlq", u64::from(N), Duration::from_secs(10)).await;
        let _ = buggy.close(200, "done".into()).await;
        assert_eq!(rejector.await.expect("rejector"), N, "{label}");
        let back = read_all(&conn, "dlq", N as usize + 10).await;
        assert_eq!(back.len(), N as usize);
        let mut ids = message_ids(&back);
        ids.sort();
        let mut want: Vec<String> = (0..N).map(|i| format!("f-{i}")).collect();
        want.sort();
        assert_eq!(ids, want, "{label}");
        assert!(
            back.iter()
                .all(|m| m.headers.get_i64("warren-replay-count") == Some(1)),
            "{label}: each was replayed exactly once"
        );
        let _ = conn.close(200, "done".into()).await;
        vhost.cleanup().await;
    }
}
