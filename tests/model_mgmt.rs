//! The management API's `/get` JSON, as captured from real brokers (3.10.8 and 4.0.5: a rejected
//! message with properties and nested headers, a per-message-TTL expiry with a binary body, and a
//! message without properties), read into dead letters and explained.
//!
//! The fixtures were made by dead-lettering real messages in a throwaway vhost through the
//! management API (publish to a queue with a dead-letter exchange, then `get` with
//! `reject_requeue_false`, or let a 50 ms expiration run out) and saving the DLQ's `/get` response.

use serde_json::{Value, json};
use warren::domain::convention::Convention;
use warren::domain::explain::explain;
use warren::domain::json::{dead_letter_from_mgmt, header_value_from_json, properties_from_json};
use warren::domain::message::{DeadLetter, Properties};
use warren::domain::replay::{self, ReplayOptions, ReplayWarning};
use warren::domain::value::HeaderValue;
use warren::domain::xdeath::DeathReason;

const FIXTURE_3_10: &str = include_str!("fixtures/mgmt_get_3.10.json");
const FIXTURE_4_0: &str = include_str!("fixtures/mgmt_get_4.0.json");

fn letters(fixture: &str) -> Vec<DeadLetter> {
    let v: Value = serde_json::from_str(fixture).expect("the fixture is JSON");
    let items = v.as_array().cloned().unwrap_or_default();
    assert_eq!(items.len(), 3, "the fixture holds three messages");
    items
        .iter()
        .enumerate()
        .map(|(i, m)| dead_letter_from_mgmt("orders.dlq", i as u64, m))
        .collect::<Result<Vec<_>, _>>()
        .expect("every captured message reads")
}

fn options() -> ReplayOptions {
    ReplayOptions {
        keep_attempts: false,
        clear_expiry: false,
        strip_failure_stamp: false,
        target_queue: None,
        now: jiff::Timestamp::UNIX_EPOCH,
        run_id: None,
    }
}

fn check_fixture(fixture: &str, has_last_death: bool) {
    let all = letters(fixture);
    let [rejected, expired, bare] = all.as_slice() else {
        panic!("expected three dead letters, got {}", all.len());
    };

    // 1: rejected, with properties and typed headers as far as JSON keeps them.
    assert_eq!(rejected.queue, "orders.dlq");
    assert_eq!(rejected.position, 0);
    assert_eq!(rejected.body, b"{\"orderId\":1000}");
    assert_eq!(rejected.body_size, 16);
    assert_eq!(rejected.delivery.exchange, "dlx");
    assert_eq!(rejected.delivery.routing_key, "order.created");
    let p = &rejected.properties;
    assert_eq!(p.message_id.as_deref(), Some("order-1000"));
    assert_eq!(p.correlation_id.as_deref(), Some("corr-1"));
    assert_eq!(p.content_type.as_deref(), Some("application/json"));
    assert_eq!(p.kind.as_deref(), Some("OrderCreated"));
    assert_eq!(p.app_id.as_deref(), Some("shop"));
    assert_eq!(p.delivery_mode, Some(2));
    assert_eq!(p.timestamp, Some(1_759_042_215));
    let h = &rejected.headers;
    assert_eq!(h.get("attempt"), Some(&HeaderValue::I64(3)));
    assert_eq!(h.get("flag"), Some(&HeaderValue::Bool(true)));
    assert_eq!(h.get("ratio"), Some(&HeaderValue::F64(1.5)));
    assert_eq!(h.get_str("tenant"), Some("acme"));
    assert!(
        h.get("nested")
            .and_then(HeaderValue::as_table)
            .is_some_and(|t| t.len() == 2)
    );

    let ex = explain(rejected);
    assert_eq!(ex.convention, Convention::Broker);
    assert!(ex.deaths.problems.is_empty(), "{:?}", ex.deaths.problems);
    assert_eq!(ex.deaths.last.is_some(), has_last_death);
    let entry = ex.deaths.entries.first().cloned().unwrap_or_default();
    assert_eq!(entry.reason, Some(DeathReason::Rejected));
    assert_eq!(entry.count, Some(1));
    assert_eq!(entry.routing_keys, vec!["order.created".to_string()]);
    // The API writes the AMQP timestamp as a plain integer; it is still a time.
    assert!(entry.time.is_some());
    assert_eq!(ex.verdict, "Rejected once by orders.process");
    let plan = replay::plan(rejected, &ex, &options());
    assert_eq!(
        plan.target
            .as_ref()
            .map(|t| (t.exchange.as_str(), t.routing_key.as_str())),
        Some(("", "orders.process"))
    );
    assert_eq!(plan.removed.len(), if has_last_death { 7 } else { 4 });
    assert!(plan.headers.keys().all(|k| !k.starts_with("x-")));
    assert!(plan.headers.contains_key("tenant") && plan.headers.contains_key("nested"));

    // 2: expired by its per-message TTL; the body was binary and came back as base64.
    assert_eq!(expired.body, vec![0xff, 0x00, 0xfe, 0x01]);
    assert_eq!(expired.body_size, 4);
    assert_eq!(
        expired.properties.expiration, None,
        "the broker strips the expiration"
    );
    let ex = explain(expired);
    assert_eq!(
        ex.verdict,
        "Expired in orders.process after its per-message TTL of 50 ms"
    );
    let plan = replay::plan(expired, &ex, &options());
    assert!(
        plan.warnings
            .contains(&ReplayWarning::ExpirationNotRestored { ms: "50".into() })
    );

    // 3: no properties at all: the API writes `"properties": []`.
    assert_eq!(bare.properties, Properties::default());
    assert!(bare.headers.is_empty());
    assert_eq!(bare.body, b"plain");
    let ex = explain(bare);
    assert_eq!(ex.convention, Convention::Unknown);
    assert!(!replay::plan(bare, &ex, &options()).is_publishable());
}

#[test]
fn real_get_response_from_3_10() {
    check_fixture(FIXTURE_3_10, false);
}

#[test]
fn real_get_response_from_4_0() {
    check_fixture(FIXTURE_4_0, true);
}

#[test]
fn not_utf8_header_values_come_back_as_bytes() {
    let msg = json!({
        "payload_bytes": 2,
        "redelivered": true,
        "exchange": "",
        "routing_key": "orders.dlq",
        "message_count": 0,
        "properties": {
            "headers": {
                "blob": "Not UTF-8, base64 is: gP8=",
                "x-death": [{"count": 1, "reason": "rejected", "queue": "Not UTF-8, base64 is: b3Jk/w==", "time": 1759042215}],
                "x-delivery-count": 4
            }
        },
        "payload": "aGk=",
        "payload_encoding": "base64"
    });
    let dl = dead_letter_from_mgmt("orders.dlq", 7, &msg).expect("reads");
    assert_eq!(dl.position, 7);
    assert!(dl.delivery.redelivered);
    assert_eq!(dl.delivery.delivery_count, Some(4));
    assert_eq!(dl.body, b"hi");
    assert_eq!(
        dl.headers.get("blob"),
        Some(&HeaderValue::LongString(vec![0x80, 0xff]))
    );
    // A queue name with a bad byte is still explained (lossily), not dropped.
    let ex = explain(&dl);
    assert_eq!(ex.deaths.entries.len(), 1);
    assert_eq!(ex.source.queue.as_deref(), Some("ord\u{fffd}"));
    let plan = replay::plan(&dl, &ex, &options());
    assert!(!plan.headers.contains_key("x-delivery-count"));
    assert_eq!(
        plan.headers.get("blob"),
        Some(&HeaderValue::LongString(vec![0x80, 0xff]))
    );
}

#[test]
fn odd_json_never_panics() {
    for v in [
        json!(null),
        json!([]),
        json!("x"),
        json!({"headers": 5}),
        json!({"priority": 300}),
    ] {
        let (p, h) = properties_from_json(&v);
        assert!(h.is_empty());
        assert_eq!(p.priority, None);
    }
    assert_eq!(header_value_from_json(&json!([[[]]])).type_name(), "array");
    assert!(dead_letter_from_mgmt("q", 0, &json!({"payload": "x", "properties": "oops"})).is_ok());
}
