//! `warren demo` against real brokers: it builds real dead letters of every kind, twice with the
//! same result, each DLQ holds what the report promises, and Warren's own browse + explain read
//! them back with the conventions, reasons, verdicts and groups the demo is meant to show. It
//! refuses to replace a vhost it did not make.

use crate::common;

use std::collections::BTreeMap;
use std::time::Duration;

use common::amqp::amqp_depth;
use common::{TestBroker, TestVhost, enc, unique};
use warren::broker::browse::{BrowseRequest, browse};
use warren::config::{self, Config, Overrides, Target};
use warren::demo::{self, DemoError, DemoReport, QueueRole};
use warren::domain::convention::Convention;
use warren::domain::explain::{Explanation, explain};
use warren::domain::features::{BrokerVersion, QueueType, resolve_delivery_limit};
use warren::domain::message::DeadLetter;
use warren::domain::quorum::BrowsePolicy;
use warren::domain::xdeath::DeathReason;

fn target(b: &TestBroker) -> Target {
    let over = Overrides {
        amqp_url: Some(format!("amqp://guest:guest@{}:{}", b.host, b.amqp_port)),
        management_url: Some(format!("http://guest:guest@{}:{}", b.host, b.mgmt_port)),
        ..Overrides::default()
    };
    config::resolve(&Config::default(), &over, &|_| None).expect("test target resolves")
}

/// Deletes a demo vhost when the test ends, also when it panics (the demo creates the vhost
/// itself, so `TestVhost` cannot own it).
struct DemoVhost {
    broker: TestBroker,
    name: String,
}

impl Drop for DemoVhost {
    fn drop(&mut self) {
        common::delete_vhost_blocking(&self.broker, &self.name);
    }
}

async fn vhost_exists(b: &TestBroker, vhost: &str) -> bool {
    reqwest::Client::new()
        .get(format!("{}/api/vhosts/{}", b.mgmt_base(), enc(vhost)))
        .basic_auth("guest", Some("guest"))
        .send()
        .await
        .map(|r| r.status().is_success())
        .unwrap_or(false)
}

async fn version_of(b: &TestBroker) -> BrokerVersion {
    let v: serde_json::Value = reqwest::Client::new()
        .get(format!("{}/api/overview", b.mgmt_base()))
        .basic_auth("guest", Some("guest"))
        .send()
        .await
        .expect("overview")
        .json()
        .await
        .expect("overview json");
    let s = v
        .get("rabbitmq_version")
        .and_then(|s| s.as_str())
        .unwrap_or_default();
    BrokerVersion::parse(s).unwrap_or_else(|| panic!("unparsable version {s:?}"))
}

/// Every dead letter of one queue, read with Warren's browse (which hands them all back).
async fn read_queue(
    conn: &lapin::Connection,
    version: BrokerVersion,
    queue: &str,
) -> Vec<(DeadLetter, Explanation)> {
    let quorum = queue == "invoices.dlq";
    let (kind, policy) = if quorum {
        let limit = resolve_delivery_limit(version, &QueueType::Quorum, None, None);
        (
            QueueType::Quorum,
            BrowsePolicy::decide(version, &QueueType::Quorum, limit),
        )
    } else {
        (QueueType::Classic, BrowsePolicy::unrestricted())
    };
    let mut req = BrowseRequest::new(queue, kind, policy);
    req.body_cap = usize::MAX;
    req.idle_timeout = Duration::from_secs(5);
    let page = browse(conn, &req)
        .await
        .unwrap_or_else(|e| panic!("browse {queue}: {e}"));
    page.messages
        .into_iter()
        .map(|dl| {
            let ex = explain(&dl);
            (dl, ex)
        })
        .collect()
}

/// Fingerprint key → how many messages share it.
fn groups(messages: &[(DeadLetter, Explanation)]) -> BTreeMap<String, usize> {
    let mut out = BTreeMap::new();
    for (_, ex) in messages {
        *out.entry(ex.fingerprint.summary.clone()).or_insert(0) += 1;
    }
    out
}

async fn assert_depths(conn: &lapin::Connection, report: &DemoReport, label: &str) {
    for q in &report.queues {
        assert_eq!(
            amqp_depth(conn, &q.name).await,
            q.expected,
            "RabbitMQ {label}: depth of {}",
            q.name
        );
    }
}

async fn check_broker(b: &TestBroker) {
    let label = &b.label;
    let t = target(b);
    let vhost = unique("warren-demo-test");
    let _cleanup = DemoVhost {
        broker: b.clone(),
        name: vhost.clone(),
    };
    let first = demo::build(&t, &vhost)
        .await
        .unwrap_or_else(|e| panic!("RabbitMQ {label}: first build: {e}"));
    assert!(!first.replaced_previous);
    let second = demo::build(&t, &vhost)
        .await
        .unwrap_or_else(|e| panic!("RabbitMQ {label}: second build: {e}"));
    assert!(
        second.replaced_previous,
        "the second run replaces the first"
    );
    assert_eq!(first.queues, second.queues, "same result both times");
    println!(
        "RabbitMQ {label}: demo built in {:.2} s, rebuilt in {:.2} s\n{second}",
        first.elapsed.as_secs_f64(),
        second.elapsed.as_secs_f64()
    );
    // How long it took is a figure, printed above, not a test: under a loaded CI (3.10's
    // management API slowed by other tests' 10,000 queues) a rebuild took over 15 s.
    assert_eq!(second.dead_letter_queues().count(), 10);
    assert!(second.to_string().contains(&vhost));

    let conn = warren::broker::amqp::connect(&[b.amqp_url(&vhost)], &vhost, "guest", "guest", None)
        .await
        .expect("connect to the demo vhost");
    assert_depths(&conn, &second, label).await;
    let version = version_of(b).await;

    let mut read = BTreeMap::new();
    for q in second.dead_letter_queues() {
        let messages = read_queue(&conn, version, &q.name).await;
        assert_eq!(
            messages.len() as u64,
            q.expected,
            "RabbitMQ {label}: messages read from {}",
            q.name
        );
        read.insert(q.name.clone(), messages);
    }
    let get = |q: &str| read.get(q).map(Vec::as_slice).unwrap_or_default();

    // The retry ladder: the seed's shape and verdict.
    for (dl, ex) in get("orders.dlq") {
        assert_eq!(ex.convention, Convention::Broker);
        let e = &ex.deaths.entries;
        assert_eq!(e.len(), 2, "{label}: {:?}", dl.headers.get("x-death"));
        assert_eq!(e[0].queue.as_deref(), Some("orders.process"));
        assert_eq!(e[0].reason, Some(DeathReason::Rejected));
        assert_eq!(e[0].count, Some(3));
        assert_eq!(e[1].queue.as_deref(), Some("orders.retry.wait"));
        assert_eq!(e[1].reason, Some(DeathReason::Expired));
        assert_eq!(e[1].count, Some(2));
        assert_eq!(
            ex.verdict,
            "Rejected 3 times by orders.process after cycling through orders.retry.wait twice"
        );
        assert_eq!(ex.source.exchange.as_deref(), Some("orders"));
        assert_eq!(ex.source.routing_key.as_deref(), Some("order.created"));
    }
    assert_eq!(groups(get("orders.dlq")).len(), 1);

    // Plain rejections, one of them hostile and kept byte for byte.
    for (_, ex) in get("payments.dlq") {
        assert_eq!(ex.verdict, "Rejected once by payments.process");
    }
    let hostile: Vec<&DeadLetter> = get("payments.dlq")
        .iter()
        .map(|(dl, _)| dl)
        .filter(|dl| dl.properties.message_id.as_deref() == Some("pay_hostile"))
        .collect();
    assert_eq!(hostile.len(), 1);
    let h = hostile[0];
    assert!(h.headers.get_str("legacy-ref").is_none(), "not UTF-8");
    assert_eq!(
        h.headers.get("legacy-ref").and_then(|v| v.as_bytes()),
        Some(&[b'r', b'e', b'f', b'-', 0xc3, 0x28, 0xff, 0xfe, 0x00, b'!'][..])
    );
    assert!(
        h.headers
            .get_str("note")
            .is_some_and(|n| n.contains('\u{1b}'))
    );
    assert!(
        h.headers
            .get_str("customer")
            .is_some_and(|n| n.contains('\u{202e}'))
    );
    assert!(h.headers.keys().any(|k| k.contains('\u{1b}')));
    assert!(h.body.starts_with(b"\x89PNG"));
    assert!(std::str::from_utf8(&h.body).is_err(), "binary body");

    // Expiry: three by the queue's TTL, one by its own per-message TTL.
    let notes = get("notifications.dlq");
    let per_message: Vec<_> = notes
        .iter()
        .filter(|(_, ex)| ex.deaths.entries[0].original_expiration.is_some())
        .collect();
    assert_eq!(per_message.len(), 1, "{label}");
    assert_eq!(
        per_message[0].1.verdict,
        "Expired in notifications.email after its per-message TTL of 60 ms"
    );
    assert!(
        per_message[0].0.properties.expiration.is_none(),
        "the broker strips expiration"
    );
    for (_, ex) in notes {
        assert_eq!(ex.deaths.entries[0].reason, Some(DeathReason::Expired));
    }
    assert_eq!(
        notes
            .iter()
            .filter(|(_, ex)| ex.verdict
                == "Expired in notifications.email after the queue's message TTL")
            .count(),
        3
    );

    // Max-length: the seven oldest readings, oldest first.
    let telemetry = get("telemetry.dlq");
    for (_, ex) in telemetry {
        assert_eq!(ex.deaths.entries[0].reason, Some(DeathReason::MaxLen));
        assert_eq!(
            ex.verdict,
            "Dropped from telemetry.ingest by its max-length"
        );
    }
    let ids: Vec<_> = telemetry
        .iter()
        .filter_map(|(dl, _)| dl.properties.message_id.clone())
        .collect();
    assert_eq!(
        ids,
        (0..7).map(|i| format!("reading-{i}")).collect::<Vec<_>>()
    );

    // A quorum queue's delivery limit.
    for (_, ex) in get("invoices.dlq") {
        assert_eq!(
            ex.deaths.entries[0].reason,
            Some(DeathReason::DeliveryLimit),
            "{label}"
        );
        assert_eq!(
            ex.verdict,
            "Gave up after the delivery limit of invoices.process"
        );
    }

    // A dead-letter exchange from a policy.
    for (_, ex) in get("inventory.dlq") {
        assert_eq!(ex.verdict, "Rejected once by inventory");
        assert_eq!(ex.deaths.entries[0].exchange.as_deref(), Some(""));
    }

    // MassTransit: two failure groups in _error, a skip in _skipped.
    let mt = get("shipping-label_error");
    assert_eq!(
        groups(mt).into_iter().collect::<Vec<_>>(),
        vec![
            (
                "CarrierUnavailableException: Carrier DHL unavailable".to_string(),
                4
            ),
            (
                "InvalidOperationException: Order # has no shipping address".to_string(),
                2
            ),
        ]
    );
    for (dl, ex) in mt {
        assert_eq!(ex.convention, Convention::MassTransit);
        assert_eq!(ex.source.queue.as_deref(), Some("shipping-label"));
        assert_eq!(
            dl.properties.content_type.as_deref(),
            Some("application/vnd.masstransit+json")
        );
        let envelope: serde_json::Value =
            serde_json::from_slice(&dl.body).expect("a MassTransit envelope");
        assert_eq!(
            envelope.get("messageId").and_then(|v| v.as_str()),
            dl.properties.message_id.as_deref()
        );
        assert!(ex.failed_at.is_some());
    }
    let ids: std::collections::BTreeSet<_> = mt
        .iter()
        .map(|(dl, _)| dl.properties.message_id.clone())
        .collect();
    assert_eq!(ids.len(), 6, "every fault has its own message id");
    assert!(mt.iter().any(|(_, ex)| ex.verdict
        == "CarrierUnavailableException in CreateShippingLabelConsumer after 3 retries: Carrier DHL unavailable"));
    assert!(mt.iter().any(|(_, ex)| ex.verdict
        == "InvalidOperationException in CreateShippingLabelConsumer without retries: Order 10457 has no shipping address"));
    for (_, ex) in get("shipping-label_skipped") {
        assert!(ex.skipped);
        assert_eq!(
            ex.verdict,
            "No consumer on shipping-label handles Shipping.Contracts:CancelShippingLabel"
        );
    }

    // Spring: the root cause from "Caused by:", the original exchange, two groups.
    let spring = get("inventory.reserve.group.dlq");
    assert_eq!(groups(spring).len(), 2, "{:?}", groups(spring));
    for (_, ex) in spring {
        assert_eq!(ex.convention, Convention::Spring);
        assert_eq!(ex.source.exchange.as_deref(), Some("inventory.reserve"));
        assert_eq!(ex.source.queue.as_deref(), Some("inventory.reserve.group"));
        let fault = ex.fault.as_ref().expect("a Spring fault");
        assert!(
            fault
                .stack_trace
                .as_deref()
                .is_some_and(|t| t.contains("Caused by:"))
        );
        assert_eq!(
            fault.inner_exception_type.as_deref(),
            Some("org.springframework.amqp.rabbit.support.ListenerExecutionFailedException")
        );
    }
    assert_eq!(
        spring
            .iter()
            .filter(|(_, ex)| ex.verdict.starts_with(
                "InsufficientStockException in inventory.reserve.group after 3 retries: Insufficient stock for SKU A-"
            ))
            .count(),
        3,
        "{:?}",
        spring.iter().map(|(_, ex)| &ex.verdict).collect::<Vec<_>>()
    );

    // NServiceBus: FailedQ with @machine, two groups (deadlocks masked to one).
    let nsb = get("error");
    assert_eq!(groups(nsb).len(), 2, "{:?}", groups(nsb));
    for (_, ex) in nsb {
        assert_eq!(ex.convention, Convention::NServiceBus);
        assert_eq!(ex.source.queue.as_deref(), Some("Sales"));
        assert_eq!(
            ex.message_type.as_deref(),
            Some("Sales.Messages.PlaceOrder")
        );
        assert!(ex.failed_at.is_some());
    }
    assert_eq!(
        nsb.iter()
            .filter(|(_, ex)| ex.verdict.starts_with(
                "SqlException in Sales after 2 delayed retries: Transaction (Process ID"
            ))
            .count(),
        3
    );

    // Discovery (what the TUI lists) finds exactly the demo's DLQs, and sees the ladder as a
    // retry loop rather than a dead end.
    let mgmt = warren::broker::management::Management::new(&t).expect("management client");
    let found = warren::broker::discover::discover(&mgmt, &vhost, &[])
        .await
        .expect("discovery");
    let mut names: Vec<&str> = found
        .dead_letter_queues
        .iter()
        .map(|d| d.name.as_str())
        .collect();
    names.sort_unstable();
    let mut want: Vec<&str> = second
        .dead_letter_queues()
        .map(|q| q.name.as_str())
        .collect();
    want.sort_unstable();
    assert_eq!(names, want, "RabbitMQ {label}: discovered DLQs");
    let ladder = found
        .retry_loop_of("orders.process")
        .expect("the ladder is a retry loop");
    assert_eq!(ladder.wait_queue, "orders.retry.wait");
    assert_eq!(
        found.dlq("inventory.dlq").map(|d| d.feeders.clone()),
        Some(vec!["inventory".to_string()]),
        "the policy's dead-letter exchange is seen"
    );

    // Reading changed nothing.
    assert_depths(&conn, &second, label).await;
    let _ = conn.close(200, "done".into()).await;

    // The work queues the report lists are really there and hold what it says (checked above);
    // the DLQs come first.
    assert!(
        second
            .queues
            .iter()
            .skip_while(|q| q.role == QueueRole::DeadLetter)
            .all(|q| q.role == QueueRole::Work)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn demo_builds_real_dead_letters_twice_on_every_broker() {
    for b in TestBroker::all() {
        check_broker(&b).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn demo_refuses_to_replace_a_vhost_it_did_not_make() {
    for b in TestBroker::all() {
        let mine = TestVhost::new(&b, "demo-refuse").await;
        let conn = common::amqp::connect(&mine).await;
        let err = demo::build(&target(&b), &mine.name)
            .await
            .expect_err("an unmarked vhost is not replaced");
        assert!(
            matches!(&err, DemoError::NotADemoVhost { vhost } if *vhost == mine.name),
            "{err}"
        );
        assert!(err.to_string().contains("--vhost"), "{err}");
        assert!(vhost_exists(&b, &mine.name).await, "still there");
        assert!(conn.status().connected(), "nothing was closed");
        let _ = conn.close(200, "done".into()).await;
        mine.cleanup().await;

        // Read-only means read-only: nothing is created.
        let mut read_only = target(&b);
        read_only.read_only = true;
        let name = unique("warren-demo-test-ro");
        let err = demo::build(&read_only, &name)
            .await
            .expect_err("a read-only target builds nothing");
        assert!(matches!(err, DemoError::ReadOnly { .. }), "{err}");
        assert!(!vhost_exists(&b, &name).await);

        // The default vhost is never replaced, whatever it says about itself.
        let err = demo::build(&target(&b), "/")
            .await
            .expect_err("the default vhost is not replaced");
        assert!(matches!(err, DemoError::NotADemoVhost { .. }), "{err}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn demo_replaces_a_vhost_marked_by_an_earlier_demo() {
    let b = TestBroker::default_broker();
    // Not named warren-demo…: only the marker the first run writes allows the second.
    let vhost = unique("warren-test-demo-marked");
    let _cleanup = DemoVhost {
        broker: b.clone(),
        name: vhost.clone(),
    };
    let t = target(&b);
    let first = demo::build(&t, &vhost).await.expect("first build");
    assert!(!first.replaced_previous);
    let info: serde_json::Value = reqwest::Client::new()
        .get(format!("{}/api/vhosts/{}", b.mgmt_base(), enc(&vhost)))
        .basic_auth("guest", Some("guest"))
        .send()
        .await
        .expect("vhost")
        .json()
        .await
        .expect("vhost json");
    assert!(demo::is_demo_vhost(&vhost, &info), "{info}");
    let second = demo::build(&t, &vhost).await.expect("second build");
    assert!(second.replaced_previous);
}
