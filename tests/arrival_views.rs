//! One rule for when a dead letter reached its DLQ (`warren::domain::arrival`), in every view,
//! against real brokers: dead letters that died once two hours ago are two hours old for a
//! fresh Warren's `watch --once`, `queues`, `show` and the TUI's row, exactly; one that died
//! three times is a bound ("≥"), never shown as exact.

use crate::common;
use crate::replay_util;

use common::amqp::{self as h};
use common::{TestBroker, TestVhost};
use replay_util::{Home, message_ids, read_all, warren};
use warren::domain::features::QueueType;
use warren::domain::message::Properties;
use warren::domain::value::{HeaderValue, Table};

/// An `x-death` as the broker writes it: one entry, `count` deaths, the first at `time`.
fn x_death(count: i64, time: u64) -> Table {
    let mut d = Table::new();
    d.insert("count", HeaderValue::I64(count));
    d.insert("reason", HeaderValue::string("rejected"));
    d.insert("queue", HeaderValue::string("orders"));
    d.insert("time", HeaderValue::Timestamp(time));
    d.insert("exchange", HeaderValue::string(""));
    d.insert(
        "routing-keys",
        HeaderValue::Array(vec![HeaderValue::string("orders")]),
    );
    let mut h = Table::new();
    h.insert("x-death", HeaderValue::Array(vec![HeaderValue::Table(d)]));
    h
}

#[tokio::test]
async fn dead_letters_that_died_once_two_hours_ago_are_two_hours_old_everywhere() {
    for b in TestBroker::all() {
        let vh = TestVhost::new(&b, "arrival").await;
        let home = Home::new("arrival");
        let two_hours_ago = jiff::Timestamp::now().as_second() as u64 - 7200;
        let conn = h::connect(&vh).await;
        let ch = h::confirm_channel(&conn).await;
        h::declare(&ch, "orders.dlq", QueueType::Classic, Default::default()).await;
        // The DLQ's dead letters as the broker left them: two died once, one died three times
        // (its last death is not in the header).
        for (id, count) in [("a-0", 1), ("a-1", 1), ("a-2", 3)] {
            let p = Properties {
                message_id: Some(id.into()),
                delivery_mode: Some(2),
                ..Default::default()
            };
            h::publish(&ch, "orders.dlq", &p, &x_death(count, two_hours_ago), b"{}").await;
        }

        // A fresh store: the first look must not make them look new.
        let r = warren(&vh, &home, &["watch", "--once", "--json"]).await;
        assert_ne!(r.code, Some(3), "{}: {r}", b.label);
        let r = warren(&vh, &home, &["queues", "--json"]).await;
        assert_eq!(r.code, Some(0), "{}: {r}", b.label);
        let q = r
            .json()
            .into_iter()
            .find(|v| v["name"] == "orders.dlq")
            .unwrap_or_else(|| panic!("{}: orders.dlq listed: {r}", b.label));
        let age = q["oldest_age_secs"].as_u64().unwrap_or(0);
        assert!(
            (7190..7400).contains(&age),
            "{}: oldest {age} s: {q}",
            b.label
        );
        assert_eq!(q["oldest_is_lower_bound"], false, "{}: {q}", b.label);

        // `show`: the exact ones dated by their death, the other a bound.
        let r = warren(&vh, &home, &["show", "orders.dlq", "--json"]).await;
        assert_eq!(r.code, Some(0), "{}: {r}", b.label);
        let died = jiff::Timestamp::from_second(two_hours_ago as i64)
            .unwrap()
            .to_string();
        let msgs: Vec<_> = r
            .json()
            .into_iter()
            .filter(|v| v.get("dead_since").is_some())
            .collect();
        assert_eq!(msgs.len(), 3, "{}: {r}", b.label);
        for m in &msgs[..2] {
            assert_eq!(m["dead_since"], died.as_str(), "{}: {m}", b.label);
            assert_eq!(m["dead_since_exact"], true, "{}: {m}", b.label);
        }
        assert_eq!(
            msgs[2]["dead_since_exact"], false,
            "{}: {}",
            b.label, msgs[2]
        );
        assert_eq!(msgs[2]["arrived_after"], died.as_str(), "{}", b.label);
        let text = warren(&vh, &home, &["show", "orders.dlq"]).await;
        assert!(
            text.stdout.contains("it died once, then"),
            "{}: {text}",
            b.label
        );
        assert!(
            text.stdout.contains("at the latest (≥"),
            "{}: {text}",
            b.label
        );

        // The TUI's row, from the same messages as the broker delivers them.
        let read = read_all(&conn, "orders.dlq", 3).await;
        assert_eq!(message_ids(&read), ["a-0", "a-1", "a-2"], "{}", b.label);
        let now = jiff::Timestamp::now();
        let conventions = warren::domain::convention::Conventions::default();
        for (m, exact) in read.into_iter().zip([true, true, false]) {
            let row = warren::tui::state::Row::new(m, Some(now), &conventions);
            let age = row.arrival().age(now).expect("an age");
            if exact {
                assert!((7190..7400).contains(&age.secs), "{}: {age:?}", b.label);
                assert_eq!(age.prefix(), "", "{}", b.label);
            } else {
                assert_eq!((age.secs, age.prefix()), (0, "≥"), "{}", b.label);
            }
        }
        let _ = conn.close(200, "ok".into()).await;
        vh.cleanup().await;
    }
}
