//! `warren groups --by` and group notes through the real binary, on every broker version: a DLQ
//! holding mixed failures (rejections from two work queues, a max-length overflow, an expiry, and
//! MassTransit faults republished by the framework) groups by exception, type, origin, reason and
//! endpoint; a note is kept on a group (by its value or its key), shown with it, and forgotten
//! once a read of the whole queue finds the group gone; `replay --by … --group` moves exactly
//! that group and the audit names it.

use crate::common;
use crate::replay_util;

use std::collections::BTreeMap;
use std::time::Duration;

use common::amqp::{self as h, amqp_depth};
use common::{TestBroker, TestVhost};
use lapin::types::{AMQPValue, FieldTable};
use replay_util::{Home, Run, dead_letter, simple, warren};
use serde_json::Value;
use warren::domain::features::QueueType;
use warren::domain::message::Properties;
use warren::domain::value::{HeaderValue, Table};

/// Summary → count, from `groups --json`.
fn counts(run: &Run) -> BTreeMap<String, u64> {
    run.json()
        .iter()
        .map(|g| {
            (
                g["summary"].as_str().unwrap_or_default().to_string(),
                g["count"].as_u64().unwrap_or(0),
            )
        })
        .collect()
}

fn group<'a>(groups: &'a [Value], summary: &str) -> &'a Value {
    groups
        .iter()
        .find(|g| g["summary"] == summary)
        .unwrap_or_else(|| panic!("no group {summary} in {groups:?}"))
}

fn typed(prefix: &str, i: u32, kind: &str) -> replay_util::Msg {
    let (mut p, hd, body) = simple(prefix, i, &[]);
    p.kind = Some(kind.into());
    (p, hd, body)
}

/// What MassTransit republishes to `shipping-label_error`-style queues, here straight into `dlq`.
fn masstransit_fault(i: u32) -> (Properties, Table) {
    let mut hd = Table::new();
    for (k, v) in [
        ("MT-Reason", "fault"),
        (
            "MT-Fault-ExceptionType",
            "Shop.Shipping.CarrierUnavailableException",
        ),
        ("MT-Fault-Message", "Carrier DHL unavailable"),
        (
            "MT-Fault-InputAddress",
            "rabbitmq://localhost/shipping-label",
        ),
        (
            "MT-Fault-MessageType",
            "urn:message:Shop.Contracts:CreateShippingLabel",
        ),
    ] {
        hd.insert(k, HeaderValue::string(v));
    }
    let p = Properties {
        message_id: Some(format!("mt-{i}")),
        delivery_mode: Some(2),
        ..Properties::default()
    };
    (p, hd)
}

/// dlq: 3 rejected in `orders` (OrderPlaced), 2 rejected in `payments` (PaymentCaptured), 1
/// dropped from `stock` by its length limit, 1 expired in `holding`, 2 MassTransit faults.
async fn mixed_failures(conn: &lapin::Connection) {
    let ch = h::confirm_channel(conn).await;
    h::declare(&ch, "dlq", QueueType::Classic, FieldTable::default()).await;
    let orders: Vec<_> = (0..3).map(|i| typed("order", i, "OrderPlaced")).collect();
    dead_letter(conn, "orders", "dlq", &orders).await;
    let payments: Vec<_> = (0..2)
        .map(|i| typed("payment", i, "PaymentCaptured"))
        .collect();
    dead_letter(conn, "payments", "dlq", &payments).await;
    // A length limit of one: the second publish pushes the first out (reason maxlen).
    let mut stock = h::dead_letter_to("dlq");
    stock.insert("x-max-length".into(), AMQPValue::LongInt(1));
    h::declare(&ch, "stock", QueueType::Classic, stock).await;
    for i in 0..2 {
        let (p, hd, body) = simple("stock", i, &[]);
        h::publish(&ch, "stock", &p, &hd, &body).await;
    }
    // A short TTL and no consumer (reason expired).
    let mut holding = h::dead_letter_to("dlq");
    holding.insert("x-message-ttl".into(), AMQPValue::LongInt(20));
    h::declare(&ch, "holding", QueueType::Classic, holding).await;
    let (p, hd, body) = simple("held", 0, &[]);
    h::publish(&ch, "holding", &p, &hd, &body).await;
    for i in 0..2 {
        let (p, hd) = masstransit_fault(i);
        h::publish(&ch, "dlq", &p, &hd, b"{}").await;
    }
    h::wait_for_depth(conn, "dlq", 9, Duration::from_secs(20)).await;
    let _ = ch.close(200, "ok".into()).await;
}

fn map(pairs: &[(&str, u64)]) -> BTreeMap<String, u64> {
    pairs.iter().map(|(k, v)| (k.to_string(), *v)).collect()
}

#[tokio::test]
async fn groups_by_what_matters_now_with_notes_until_the_group_is_gone() {
    for broker in TestBroker::all() {
        let label = broker.label.clone();
        let vhost = TestVhost::new(&broker, "groups-by").await;
        let home = Home::new("groups-by");
        let conn = h::connect(&vhost).await;
        mixed_failures(&conn).await;
        let groups = |by: &'static str| {
            let (vhost, home) = (&vhost, &home);
            async move {
                let run = warren(vhost, home, &["groups", "dlq", "--by", by, "--json"]).await;
                assert_eq!(run.code, Some(0), "{by}: {run}");
                for g in run.json() {
                    assert_eq!(g["by"], by, "{g}");
                    assert_eq!(g["key"].as_str().map(str::len), Some(16), "{g}");
                }
                run
            }
        };

        let by_reason = groups("reason").await;
        assert_eq!(
            counts(&by_reason),
            map(&[
                ("rejected", 5),
                ("maxlen", 1),
                ("expired", 1),
                (
                    "not dead-lettered by the broker: republished (MassTransit)",
                    2
                ),
            ]),
            "{label}: {by_reason}"
        );
        assert_eq!(
            counts(&groups("origin").await),
            map(&[
                ("orders", 3),
                ("payments", 2),
                ("stock", 1),
                ("holding", 1),
                ("shipping-label", 2),
            ]),
            "{label}"
        );
        assert_eq!(
            counts(&groups("exception").await),
            map(&[
                ("Shop.Shipping.CarrierUnavailableException", 2),
                ("no exception type recorded (RabbitMQ dead-lettering)", 7),
            ]),
            "{label}"
        );
        assert_eq!(
            counts(&groups("type").await),
            map(&[
                ("OrderPlaced", 3),
                ("PaymentCaptured", 2),
                ("Shop.Contracts:CreateShippingLabel", 2),
                ("no message type recorded (RabbitMQ dead-lettering)", 2),
            ]),
            "{label}"
        );
        assert_eq!(
            counts(&groups("endpoint").await),
            map(&[
                ("orders", 3),
                ("payments", 2),
                ("stock", 1),
                ("holding", 1),
                ("shipping-label", 2),
            ]),
            "{label}"
        );
        // The default is today's fingerprint.
        let plain = warren(&vhost, &home, &["groups", "dlq", "--json"]).await;
        assert_eq!(plain.code, Some(0), "{label}: {plain}");
        for g in plain.json() {
            assert_eq!(g["by"], "fingerprint");
            assert_eq!(g["key"], g["fingerprint"], "{g}");
        }
        let bad = warren(&vhost, &home, &["groups", "dlq", "--by", "colour"]).await;
        assert_eq!(bad.code, Some(2), "{label}: {bad}");

        // A note by the group's value, another by its key.
        let note = "carrier outage, replay after 10:00";
        let run = warren(
            &vhost,
            &home,
            &[
                "groups", "dlq", "--by", "reason", "--note", "rejected", note,
            ],
        )
        .await;
        assert_eq!(run.code, Some(0), "{label}: {run}");
        assert!(
            run.stdout.contains(&format!("note: {note}")),
            "{label}: {run}"
        );
        let maxlen_key = group(&by_reason.json(), "maxlen")["key"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        let run = warren(
            &vhost,
            &home,
            &[
                "groups",
                "dlq",
                "--by",
                "reason",
                "--note",
                &maxlen_key,
                "stock is full",
            ],
        )
        .await;
        assert_eq!(run.code, Some(0), "{label}: {run}");
        let missing = warren(
            &vhost,
            &home,
            &["groups", "dlq", "--by", "reason", "--note", "nothing", "x"],
        )
        .await;
        assert_eq!(missing.code, Some(1), "{label}: {missing}");
        assert!(
            missing.stderr.contains("no group 'nothing'"),
            "{label}: {missing}"
        );

        let listed = groups("reason").await.json();
        assert_eq!(group(&listed, "rejected")["note"]["text"], note, "{label}");
        assert_eq!(group(&listed, "maxlen")["note"]["text"], "stock is full");
        assert!(group(&listed, "expired")["note"].is_null());
        // A note belongs to its grouping.
        assert!(
            groups("origin")
                .await
                .json()
                .iter()
                .all(|g| g["note"].is_null())
        );

        // Replay one origin's group: exactly its two messages move; the audit names the group.
        let run = warren(
            &vhost,
            &home,
            &[
                "replay", "dlq", "--by", "origin", "--group", "payments", "--yes", "--json",
            ],
        )
        .await;
        assert_eq!(run.code, Some(0), "{label}: {run}");
        assert_eq!(run.summary_u64("moved"), 2, "{label}: {run}");
        assert_eq!(amqp_depth(&conn, "payments").await, 2, "{label}");
        assert_eq!(amqp_depth(&conn, "dlq").await, 7, "{label}");
        let audit = warren(&vhost, &home, &["audit", "--json"]).await;
        assert_eq!(
            audit.json()[0]["group"],
            "origin:payments",
            "{label}: {audit}"
        );
        let listed = groups("reason").await.json();
        assert_eq!(group(&listed, "rejected")["count"], 3, "{label}");
        assert_eq!(group(&listed, "rejected")["note"]["text"], note, "{label}");

        // The rest of the rejected group: once a look at the whole queue finds it empty, its
        // note is forgotten, and a new rejection starts a group without it.
        let run = warren(
            &vhost,
            &home,
            &[
                "replay", "dlq", "--by", "reason", "--group", "rejected", "--yes", "--json",
            ],
        )
        .await;
        assert_eq!(run.code, Some(0), "{label}: {run}");
        assert_eq!(run.summary_u64("moved"), 3, "{label}: {run}");
        let listed = groups("reason").await.json();
        assert!(listed.iter().all(|g| g["summary"] != "rejected"), "{label}");
        assert_eq!(group(&listed, "maxlen")["note"]["text"], "stock is full");
        dead_letter(&conn, "orders", "dlq", &[typed("order", 9, "OrderPlaced")]).await;
        let listed = groups("reason").await.json();
        assert_eq!(group(&listed, "rejected")["count"], 1, "{label}");
        assert!(
            group(&listed, "rejected")["note"].is_null(),
            "{label}: the note was forgotten"
        );

        // An empty text removes a note.
        let run = warren(
            &vhost,
            &home,
            &["groups", "dlq", "--by", "reason", "--note", "maxlen", ""],
        )
        .await;
        assert_eq!(run.code, Some(0), "{label}: {run}");
        assert!(group(&groups("reason").await.json(), "maxlen")["note"].is_null());

        conn.close(200, "done".into()).await.ok();
        vhost.cleanup().await;
    }
}
