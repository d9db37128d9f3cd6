//! The dead-letter model on realistic messages, one per convention and per broker death reason:
//! detection, what is read, the verdict, the fingerprint and the replay plan. Header names and
//! shapes follow `frameworks.md` and the seeds (the x-death article, the MassTransit article).

mod part2;

use jiff::Timestamp;
use warren::domain::convention::Convention;
use warren::domain::explain::{Explanation, explain};
use warren::domain::identity::message_key;
use warren::domain::message::{DeadLetter, Delivery, Properties};
use warren::domain::replay::{
    self, Attempts, BodyBudget, BudgetLimit, ReplayOptions, ReplayPlan, ReplayTarget, ReplayWarning,
};
use warren::domain::value::{HeaderValue, Table};
use warren::domain::xdeath::DeathReason;

fn s(v: &str) -> HeaderValue {
    HeaderValue::string(v)
}

fn table(pairs: Vec<(&str, HeaderValue)>) -> Table {
    pairs.into_iter().map(|(k, v)| (k.to_string(), v)).collect()
}

fn death(
    count: i64,
    reason: &str,
    queue: &str,
    exchange: &str,
    keys: &[&str],
    time: u64,
) -> HeaderValue {
    HeaderValue::Table(table(vec![
        ("count", HeaderValue::I64(count)),
        ("reason", s(reason)),
        ("queue", s(queue)),
        ("time", HeaderValue::Timestamp(time)),
        ("exchange", s(exchange)),
        (
            "routing-keys",
            HeaderValue::Array(keys.iter().map(|k| s(k)).collect()),
        ),
    ]))
}

fn letter(queue: &str, headers: Table, body: &[u8]) -> DeadLetter {
    DeadLetter {
        queue: queue.to_string(),
        position: 0,
        properties: Properties {
            message_id: Some("msg-1".into()),
            ..Properties::default()
        },
        headers,
        body: body.to_vec(),
        body_size: body.len() as u64,
        delivery: Delivery {
            exchange: "dlx".into(),
            routing_key: "order.created".into(),
            ..Delivery::default()
        },
    }
}

fn now() -> Timestamp {
    "2025-10-01T12:00:00Z"
        .parse()
        .unwrap_or(Timestamp::UNIX_EPOCH)
}

fn opts() -> ReplayOptions {
    ReplayOptions {
        keep_attempts: false,
        clear_expiry: false,
        strip_failure_stamp: false,
        target_queue: None,
        now: now(),
        run_id: None,
    }
}

fn plan_of(dl: &DeadLetter, ex: &Explanation) -> ReplayPlan {
    replay::plan(dl, ex, &opts())
}

fn direct(q: &str) -> ReplayTarget {
    ReplayTarget {
        exchange: String::new(),
        routing_key: q.into(),
        expected_queue: Some(q.into()),
    }
}

/// The header names of the planned table.
fn names(p: &ReplayPlan) -> Vec<&str> {
    p.headers.keys().collect()
}

fn assert_warren_headers(p: &ReplayPlan, from: &str, count: i64) {
    assert_eq!(p.headers.get_str("warren-replayed-from"), Some(from));
    assert_eq!(
        p.headers.get_str("warren-replayed-at"),
        Some("2025-10-01T12:00:00Z")
    );
    assert_eq!(
        p.headers.get("warren-replay-count"),
        Some(&HeaderValue::I64(count))
    );
    assert_eq!(p.replay_count, count);
    assert!(p.added.iter().all(|(k, _)| !k.starts_with("x-")));
}

// ---- broker dead-lettering -------------------------------------------------------------------

/// The seed article's example, verbatim.
fn seed_xdeath() -> DeadLetter {
    let headers = table(vec![
        ("tenant", s("acme")),
        (
            "x-death",
            HeaderValue::Array(vec![
                death(
                    3,
                    "rejected",
                    "orders.process",
                    "orders",
                    &["order.created"],
                    1_759_042_215,
                ),
                death(
                    2,
                    "expired",
                    "orders.retry.wait",
                    "orders.retry",
                    &["order.created"],
                    1_759_042_155,
                ),
            ]),
        ),
        ("x-first-death-exchange", s("orders")),
        ("x-first-death-queue", s("orders.process")),
        ("x-first-death-reason", s("rejected")),
    ]);
    letter("orders.dlq", headers, b"{\"orderId\":1000}")
}

#[test]
fn seed_example_verdict_and_plan() {
    let dl = seed_xdeath();
    let ex = explain(&dl);
    assert_eq!(ex.convention, Convention::Broker);
    assert_eq!(ex.convention.as_str(), "broker");
    assert_eq!(ex.deaths.entries.len(), 2);
    assert!(ex.deaths.problems.is_empty());
    assert_eq!(
        ex.deaths.first.as_ref().and_then(|f| f.reason.clone()),
        Some(DeathReason::Rejected)
    );
    assert!(
        ex.verdict.to_lowercase().starts_with(
            "rejected 3 times by orders.process after cycling through orders.retry.wait"
        ),
        "{}",
        ex.verdict
    );
    assert_eq!(ex.source.queue.as_deref(), Some("orders.process"));
    assert_eq!(ex.source.exchange.as_deref(), Some("orders"));
    assert_eq!(ex.source.routing_key.as_deref(), Some("order.created"));
    assert_eq!(ex.retries, Some(3));
    assert_eq!(ex.failed_at.map(|t| t.as_second()), Some(1_759_042_215));
    assert_eq!(ex.fingerprint.summary, "rejected in orders.process");

    let p = plan_of(&dl, &ex);
    // Back to the queue it failed in, through the default exchange, never through "orders".
    assert_eq!(p.target, Some(direct("orders.process")));
    assert_eq!(
        p.removed,
        vec![
            "x-death",
            "x-first-death-exchange",
            "x-first-death-queue",
            "x-first-death-reason"
        ]
    );
    assert_eq!(
        names(&p),
        vec![
            "tenant",
            "warren-replayed-from",
            "warren-replayed-at",
            "warren-replay-count"
        ]
    );
    assert_warren_headers(&p, "orders.dlq", 1);
    assert!(p.warnings.is_empty(), "{:?}", p.warnings);
}

#[test]
fn measured_three_cycle_ladder() {
    let headers = table(vec![
        (
            "x-death",
            HeaderValue::Array(vec![
                death(
                    2,
                    "expired",
                    "orders.retry.wait",
                    "orders.retry",
                    &["order.created"],
                    1_759_042_155,
                ),
                death(
                    2,
                    "rejected",
                    "orders.process",
                    "orders",
                    &["order.created"],
                    1_759_042_095,
                ),
            ]),
        ),
        ("x-first-death-exchange", s("orders")),
        ("x-first-death-queue", s("orders.process")),
        ("x-first-death-reason", s("rejected")),
        ("x-last-death-exchange", s("orders.retry")),
        ("x-last-death-queue", s("orders.retry.wait")),
        ("x-last-death-reason", s("expired")),
    ]);
    let dl = letter("orders.dlq", headers, b"{}");
    let ex = explain(&dl);
    assert_eq!(
        ex.verdict,
        "Rejected twice by orders.process after cycling through orders.retry.wait twice, then sent here on attempt 3"
    );
    let p = plan_of(&dl, &ex);
    assert_eq!(p.target, Some(direct("orders.process")));
    assert_eq!(p.removed.len(), 7);
}

#[test]
fn expired_with_per_message_ttl() {
    let mut entry = table(vec![
        ("count", HeaderValue::I64(1)),
        ("reason", s("expired")),
        ("queue", s("orders.process")),
        ("time", HeaderValue::Timestamp(1_759_042_215)),
        ("exchange", s("orders")),
        ("routing-keys", HeaderValue::Array(vec![s("order.created")])),
    ]);
    entry.insert("original-expiration", s("60000"));
    let headers = table(vec![(
        "x-death",
        HeaderValue::Array(vec![HeaderValue::Table(entry)]),
    )]);
    let dl = letter("orders.dlq", headers, b"");
    let ex = explain(&dl);
    assert_eq!(
        ex.verdict,
        "Expired in orders.process after its per-message TTL of 60000 ms"
    );
    let p = plan_of(&dl, &ex);
    assert_eq!(p.target, Some(direct("orders.process")));
    assert!(
        p.warnings
            .contains(&ReplayWarning::ExpirationNotRestored { ms: "60000".into() })
    );
    // Not restored as a property either: the plan has no properties at all, and no TTL header.
    assert!(!p.headers.keys().any(|k| k.contains("expiration")));
}

#[test]
fn maxlen_delivery_limit_and_unknown_reasons() {
    let one = |reason: &str, queue: &str| {
        let headers = table(vec![(
            "x-death",
            HeaderValue::Array(vec![death(1, reason, queue, "ex", &["k"], 1_759_042_215)]),
        )]);
        explain(&letter("dlq", headers, b""))
    };
    assert_eq!(
        one("maxlen", "telemetry").verdict,
        "Dropped from telemetry by its max-length"
    );
    let limit = one("delivery_limit", "invoices");
    assert_eq!(
        limit.verdict,
        "Gave up after the delivery limit of invoices"
    );
    assert_eq!(limit.fingerprint.summary, "delivery_limit in invoices");
    let odd = one("poisoned", "q1");
    assert_eq!(
        odd.verdict,
        "Dead-lettered from q1 once (reason \"poisoned\")"
    );
    assert_eq!(
        odd.deaths.entries.first().and_then(|d| d.reason.clone()),
        Some(DeathReason::Other("poisoned".into()))
    );
    // Different reasons or queues never share a group.
    assert_ne!(
        one("maxlen", "a").fingerprint.key,
        one("rejected", "a").fingerprint.key
    );
    assert_ne!(
        one("maxlen", "a").fingerprint.key,
        one("maxlen", "b").fingerprint.key
    );
    assert_eq!(
        one("maxlen", "a").fingerprint,
        one("maxlen", "a").fingerprint
    );
}

#[test]
fn malformed_death_headers_explain_what_they_can() {
    let mut broken = table(vec![
        ("reason", s("rejected")),
        ("queue", s("orders.process")),
    ]);
    broken.insert("count", s("three"));
    let headers = table(vec![
        (
            "x-death",
            HeaderValue::Array(vec![HeaderValue::Bool(true), HeaderValue::Table(broken)]),
        ),
        ("x-first-death-queue", HeaderValue::I32(7)),
    ]);
    let dl = letter("orders.dlq", headers, b"");
    let ex = explain(&dl);
    assert_eq!(ex.convention, Convention::Broker);
    assert_eq!(ex.deaths.entries.len(), 1);
    assert_eq!(ex.deaths.problems.len(), 3, "{:?}", ex.deaths.problems);
    assert_eq!(
        ex.verdict,
        "Rejected once by orders.process (x-death partly unreadable)"
    );
    assert_eq!(plan_of(&dl, &ex).target, Some(direct("orders.process")));

    let only_first = table(vec![
        ("x-death", s("garbage")),
        ("x-first-death-queue", s("orders.process")),
    ]);
    let ex = explain(&letter("dlq", only_first, b""));
    assert_eq!(ex.deaths.problems.len(), 1);
    assert_eq!(
        ex.verdict,
        "Dead-lettered from orders.process (no reason recorded)"
    );
}

#[test]
fn nothing_recorded_has_no_target_without_to() {
    let dl = letter("mystery.dlq", Table::new(), b"hello");
    let ex = explain(&dl);
    assert_eq!(ex.convention, Convention::Unknown);
    assert!(ex.verdict.contains("mystery.dlq"), "{}", ex.verdict);
    let p = plan_of(&dl, &ex);
    assert!(!p.is_publishable());
    assert_eq!(p.warnings, vec![ReplayWarning::UnknownOrigin]);

    let to = ReplayOptions {
        target_queue: Some("orders.process".into()),
        ..opts()
    };
    let p = replay::plan(&dl, &ex, &to);
    assert_eq!(p.target, Some(direct("orders.process")));
    assert!(p.warnings.is_empty());
}

#[test]
fn keeping_attempts_changes_nothing_but_warrens_headers() {
    let dl = seed_xdeath();
    let ex = explain(&dl);
    let keep = ReplayOptions {
        keep_attempts: true,
        ..opts()
    };
    let p = replay::plan(&dl, &ex, &keep);
    assert!(p.removed.is_empty());
    let mut expected = dl.headers.clone();
    for (k, v) in &p.added {
        expected.insert(k.clone(), v.clone());
    }
    assert_eq!(p.headers, expected);
    assert!(p.warnings.contains(&ReplayWarning::AttemptsKept));
}

#[test]
fn a_replayed_message_that_failed_again() {
    let mut dl = seed_xdeath();
    dl.headers
        .insert("warren-replay-count", HeaderValue::I64(2));
    dl.headers.insert("warren-replayed-from", s("orders.dlq"));
    let ex = explain(&dl);
    assert_eq!(ex.replay_count, 2);
    assert!(
        ex.verdict.ends_with("; failed again after 2 replays"),
        "{}",
        ex.verdict
    );
    let p = plan_of(&dl, &ex);
    assert_warren_headers(&p, "orders.dlq", 3);
    assert!(
        p.warnings
            .contains(&ReplayWarning::ReplayedBefore { count: 2 })
    );
    // Replaced in place, not duplicated.
    assert_eq!(
        p.headers
            .keys()
            .filter(|k| *k == "warren-replay-count")
            .count(),
        1
    );
}

// ---- MassTransit -----------------------------------------------------------------------------

fn mt_host() -> Vec<(&'static str, HeaderValue)> {
    vec![
        ("MT-Host-MachineName", s("shipping-7f9c")),
        ("MT-Host-ProcessName", s("Shop.Shipping")),
        ("MT-Host-ProcessId", HeaderValue::I32(1)),
        ("MT-Host-Assembly", s("Shop.Shipping")),
        ("MT-Host-AssemblyVersion", s("1.4.0.0")),
        ("MT-Host-MassTransitVersion", s("8.3.0.0")),
        ("MT-Host-FrameworkVersion", s("8.0.10")),
        ("MT-Host-OperatingSystemVersion", s("Unix 6.1.0.0")),
    ]
}

const MT_ENVELOPE: &str = r#"{"messageId":"0e000000-1a2b-3c4d-5e6f-08dcd1a2b3c4","conversationId":"0e000000-1a2b-3c4d-5e6f-08dcd1a2b3c5","sourceAddress":"rabbitmq://rabbitmq/web","destinationAddress":"rabbitmq://rabbitmq/Shop.Contracts:CreateShippingLabel","messageType":["urn:message:Shop.Contracts:CreateShippingLabel"],"message":{"orderId":1000,"carrier":"DHL"}}"#;

fn masstransit_fault(message: &str) -> DeadLetter {
    let mut pairs = vec![
        (
            "MT-OriginalMessageId",
            s("0e000000-1a2b-3c4d-5e6f-08dcd1a2b3c4"),
        ),
        ("MT-Reason", s("fault")),
        (
            "MT-Fault-ExceptionType",
            s("Shop.Shipping.CarrierUnavailableException"),
        ),
        ("MT-Fault-Message", s(message)),
        (
            "MT-Fault-StackTrace",
            s(
                "   at Shop.Shipping.CreateShippingLabelConsumer.Consume(ConsumeContext`1 context) in /src/CreateShippingLabelConsumer.cs:line 31",
            ),
        ),
        ("MT-Fault-Timestamp", s("2025-09-28T06:50:15.1234567Z")),
        (
            "MT-Fault-InputAddress",
            s("rabbitmq://rabbitmq/shipping-label"),
        ),
        (
            "MT-Fault-ConsumerType",
            s("Shop.Shipping.CreateShippingLabelConsumer"),
        ),
        (
            "MT-Fault-MessageType",
            s("Shop.Contracts.CreateShippingLabel"),
        ),
        ("MT-Fault-RetryCount", HeaderValue::I32(3)),
    ];
    pairs.extend(mt_host());
    let mut dl = letter("shipping-label_error", table(pairs), MT_ENVELOPE.as_bytes());
    dl.properties.content_type = Some("application/vnd.masstransit+json".into());
    dl
}

#[test]
fn masstransit_error_queue() {
    let dl = masstransit_fault("Carrier DHL unavailable");
    let ex = explain(&dl);
    assert_eq!(ex.convention.as_str(), "masstransit");
    assert_eq!(
        ex.verdict,
        "CarrierUnavailableException in CreateShippingLabelConsumer after 3 retries: Carrier DHL unavailable"
    );
    let f = ex.fault.clone().unwrap_or_default();
    assert_eq!(
        f.exception_type.as_deref(),
        Some("Shop.Shipping.CarrierUnavailableException")
    );
    assert_eq!(f.host.as_deref(), Some("shipping-7f9c"));
    assert!(f.stack_trace.is_some_and(|t| t.contains("line 31")));
    assert_eq!(
        ex.message_type.as_deref(),
        Some("Shop.Contracts.CreateShippingLabel")
    );
    assert_eq!(ex.source.queue.as_deref(), Some("shipping-label"));
    assert_eq!(ex.retries, Some(3));
    assert_eq!(ex.failed_at.map(|t| t.as_second()), Some(1_759_042_215));
    assert!(!ex.skipped);
    assert_eq!(
        ex.fingerprint.summary,
        "CarrierUnavailableException: Carrier DHL unavailable"
    );

    let p = plan_of(&dl, &ex);
    assert_eq!(
        p.target,
        Some(ReplayTarget {
            exchange: "shipping-label".into(),
            routing_key: String::new(),
            expected_queue: Some("shipping-label".into()),
        })
    );
    assert_eq!(p.removed.len(), 9 + 8, "{:?}", p.removed);
    assert_eq!(
        names(&p),
        vec![
            "MT-OriginalMessageId",
            "warren-replayed-from",
            "warren-replayed-at",
            "warren-replay-count"
        ]
    );
    assert_warren_headers(&p, "shipping-label_error", 1);
    assert!(p.warnings.is_empty());
}

#[test]
fn masstransit_redeliveries_and_grouping() {
    let mut dl = masstransit_fault("Carrier 42 unavailable");
    dl.headers
        .insert("MT-Redelivery-Count", HeaderValue::I32(2));
    let ex = explain(&dl);
    assert_eq!(
        ex.verdict,
        "CarrierUnavailableException in CreateShippingLabelConsumer after 3 retries and 2 redeliveries: Carrier 42 unavailable"
    );
    assert_eq!(
        ex.fingerprint.summary,
        "CarrierUnavailableException: Carrier # unavailable"
    );
    let other = explain(&masstransit_fault("Carrier 43 unavailable"));
    assert_eq!(ex.fingerprint.key, other.fingerprint.key);
    let different = explain(&masstransit_fault("Carrier DHL unavailable"));
    assert_ne!(ex.fingerprint.key, different.fingerprint.key);
    assert!(
        plan_of(&dl, &ex)
            .removed
            .iter()
            .any(|k| k == "MT-Redelivery-Count")
    );

    // No retries ran: MassTransit leaves the counter out.
    dl.headers.remove("MT-Fault-RetryCount");
    dl.headers.remove("MT-Redelivery-Count");
    let ex = explain(&dl);
    assert_eq!(ex.retries, Some(0));
    assert!(
        ex.verdict
            .contains("CreateShippingLabelConsumer without retries:"),
        "{}",
        ex.verdict
    );
}

#[test]
fn masstransit_skipped_queue() {
    for reason in ["skip", "dead-letter"] {
        let mut pairs = vec![("MT-Reason", s(reason))];
        pairs.extend(mt_host());
        let envelope = MT_ENVELOPE.replace(
            "Shop.Contracts:CreateShippingLabel\"]",
            "Shop.Contracts:Foo\"]",
        );
        let dl = letter("shipping-label_skipped", table(pairs), envelope.as_bytes());
        let ex = explain(&dl);
        assert_eq!(ex.convention, Convention::MassTransit);
        assert!(ex.skipped);
        assert_eq!(
            ex.verdict,
            "No consumer on shipping-label handles Shop.Contracts:Foo"
        );
        let p = plan_of(&dl, &ex);
        assert_eq!(
            p.target.as_ref().map(|t| t.exchange.as_str()),
            Some("shipping-label")
        );
        assert_eq!(
            p.warnings,
            vec![ReplayWarning::Skipped {
                endpoint: Some("shipping-label".into())
            }]
        );
        assert!(p.warnings[0].to_string().contains("skips it again"));
        // To an endpoint that has the consumer, the skip warning no longer applies.
        let elsewhere = ReplayOptions {
            target_queue: Some("shipping-label-v2".into()),
            ..opts()
        };
        let p = replay::plan(&dl, &ex, &elsewhere);
        assert_eq!(p.target, Some(direct("shipping-label-v2")));
        assert!(p.warnings.is_empty());
        assert!(!p.headers.contains_key("MT-Reason"));
    }
}

// ---- Spring ----------------------------------------------------------------------------------

const SPRING_TRACE: &str = "org.springframework.amqp.rabbit.support.ListenerExecutionFailedException: Listener method 'reserve' threw exception\n\tat org.springframework.amqp.rabbit.listener.AbstractMessageListenerContainer.wrapToListenerExecutionFailedExceptionIfNeeded(AbstractMessageListenerContainer.java:1707)\n\tat org.springframework.amqp.rabbit.listener.AbstractMessageListenerContainer.doInvokeListener(AbstractMessageListenerContainer.java:1611)\nCaused by: com.acme.inventory.OutOfStockException: SKU A-0 is out of stock\n\tat com.acme.inventory.Reserver.reserve(Reserver.java:42)\n\t... 12 common frames omitted\n";

#[test]
fn spring_republish_message_recoverer() {
    let headers = table(vec![
        ("x-exception-message", s("SKU A-0 is out of stock")),
        ("x-exception-stacktrace", s(SPRING_TRACE)),
        ("x-original-exchange", s("inventory")),
        ("x-original-routingKey", s("inventory.reserve")),
        ("retry-count", HeaderValue::I64(3)),
        ("traceparent", s("00-abc-def-01")),
    ]);
    let dl = letter("inventory-errors", headers, b"{}");
    let ex = explain(&dl);
    assert_eq!(ex.convention.as_str(), "spring");
    let f = ex.fault.clone().unwrap_or_default();
    assert_eq!(
        f.exception_type.as_deref(),
        Some("com.acme.inventory.OutOfStockException")
    );
    assert_eq!(
        f.inner_exception_type.as_deref(),
        Some("org.springframework.amqp.rabbit.support.ListenerExecutionFailedException")
    );
    assert_eq!(
        ex.verdict,
        "OutOfStockException (from exchange inventory, key inventory.reserve) after 3 retries: SKU A-0 is out of stock"
    );
    assert_eq!(
        ex.fingerprint.summary,
        "OutOfStockException: SKU A-# is out of stock"
    );

    let p = plan_of(&dl, &ex);
    assert_eq!(
        p.target,
        Some(ReplayTarget {
            exchange: "inventory".into(),
            routing_key: "inventory.reserve".into(),
            expected_queue: None,
        })
    );
    assert_eq!(
        p.warnings,
        vec![ReplayWarning::MayFanOut {
            exchange: "inventory".into()
        }]
    );
    assert_eq!(
        names(&p),
        vec![
            "traceparent",
            "warren-replayed-from",
            "warren-replayed-at",
            "warren-replay-count"
        ]
    );
}

#[test]
fn spring_message_without_trace_reads_a_qualified_type_carefully() {
    let headers = table(vec![
        (
            "x-exception-message",
            s("java.lang.IllegalStateException: no warehouse for EU"),
        ),
        ("x-original-exchange", s("")),
        ("x-original-routingKey", s("inventory.reserve")),
    ]);
    let dl = letter("inventory-errors", headers, b"");
    let ex = explain(&dl);
    assert_eq!(
        ex.fault.as_ref().and_then(|f| f.exception_type.as_deref()),
        Some("java.lang.IllegalStateException")
    );
    // Published to the default exchange: the routing key is the queue, no fan-out.
    let p = plan_of(&dl, &ex);
    assert_eq!(p.target, Some(direct("inventory.reserve")));
    assert!(p.warnings.is_empty());

    let plain = table(vec![("x-exception-message", s("Order 12: no lines"))]);
    let ex = explain(&letter("inventory-errors", plain, b""));
    assert_eq!(
        ex.fault.as_ref().and_then(|f| f.exception_type.clone()),
        None
    );
    assert_eq!(ex.verdict, "A failure: Order 12: no lines");
}

#[test]
fn spring_cloud_stream_binder_dlq() {
    let headers = table(vec![
        (
            "x-death",
            HeaderValue::Array(vec![death(
                1,
                "rejected",
                "orders.group",
                "orders",
                &["order.created"],
                1_759_042_215,
            )]),
        ),
        ("x-first-death-exchange", s("orders")),
        ("x-first-death-queue", s("orders.group")),
        ("x-first-death-reason", s("rejected")),
        ("x-exception-message", s("Payment declined for order 1000")),
        (
            "x-exception-stacktrace",
            s(
                "org.springframework.messaging.MessagingException: Payment declined for order 1000\n\tat x.Y.z(Y.java:1)\n",
            ),
        ),
        ("x-original-exchange", s("orders")),
        ("x-original-routingKey", s("order.created")),
        ("retry-count", HeaderValue::I64(2)),
        ("contentType", s("application/json")),
    ]);
    let dl = letter("orders.group.dlq", headers, b"{}");
    let ex = explain(&dl);
    assert_eq!(ex.convention, Convention::Spring);
    assert_eq!(ex.source.queue.as_deref(), Some("orders.group"));
    assert_eq!(
        ex.verdict,
        "MessagingException in orders.group after 2 retries: Payment declined for order 1000"
    );
    let p = plan_of(&dl, &ex);
    assert_eq!(
        p.target,
        Some(ReplayTarget {
            exchange: "orders".into(),
            routing_key: "order.created".into(),
            expected_queue: Some("orders.group".into()),
        })
    );
    assert!(matches!(
        p.warnings.as_slice(),
        [ReplayWarning::MayFanOut { .. }]
    ));
    assert_eq!(
        names(&p),
        vec![
            "contentType",
            "warren-replayed-from",
            "warren-replayed-at",
            "warren-replay-count"
        ]
    );

    // Binder naming alone, when the message has no x-death.
    let mut no_death = dl.clone();
    no_death
        .headers
        .retain(|k, _| !k.starts_with("x-death") && !k.starts_with("x-first"));
    let ex = explain(&no_death);
    assert_eq!(ex.source.queue.as_deref(), Some("orders.group"));
}

// ---- NServiceBus -----------------------------------------------------------------------------

fn nsb(failed_q: Option<&str>) -> DeadLetter {
    let p = "NServiceBus.ExceptionInfo.";
    let mut pairs = vec![
        (
            "NServiceBus.MessageId",
            s("a1b2c3d4-0000-1111-2222-333344445555"),
        ),
        (
            "NServiceBus.CorrelationId",
            s("a1b2c3d4-0000-1111-2222-333344445555"),
        ),
        (
            "NServiceBus.EnclosedMessageTypes",
            s(
                "Shop.Messages.PlaceOrder, Shop.Messages, Version=1.0.0.0, Culture=neutral, PublicKeyToken=null;Shop.Messages.IOrderCommand, Shop.Messages",
            ),
        ),
        ("NServiceBus.Retries", HeaderValue::I64(2)),
        (
            "NServiceBus.Retries.Timestamp",
            s("2025-09-28 06:40:15:000000 Z"),
        ),
        (
            "NServiceBus.TimeOfFailure",
            s("2025-09-28 06:50:15:123456 Z"),
        ),
        ("NServiceBus.ProcessingEndpoint", s("Sales")),
        ("NServiceBus.ProcessingMachine", s("SALES-01")),
        ("ServiceControl.Retry.UniqueMessageId", s("abc")),
    ];
    let owned: Vec<(String, HeaderValue)> = vec![
        (
            format!("{p}ExceptionType"),
            s("System.InvalidOperationException"),
        ),
        (
            format!("{p}InnerExceptionType"),
            s("System.Data.SqlClient.SqlException"),
        ),
        (format!("{p}Message"), s("Order 1000 has no lines")),
        (
            format!("{p}StackTrace"),
            s(
                "System.InvalidOperationException: Order 1000 has no lines\n   at Sales.PlaceOrderHandler.Handle()",
            ),
        ),
        (format!("{p}Source"), s("Sales")),
        (format!("{p}HelpLink"), s("")),
        (
            format!("{p}Data.Message type"),
            s("Shop.Messages.PlaceOrder"),
        ),
    ];
    if let Some(q) = failed_q {
        pairs.push(("NServiceBus.FailedQ", s(q)));
    }
    let mut headers = table(pairs);
    for (k, v) in owned {
        headers.insert(k, v);
    }
    letter("error", headers, b"<PlaceOrder/>")
}

#[test]
fn nservicebus_with_machine_suffix() {
    let dl = nsb(Some("Sales@SALES-01"));
    let ex = explain(&dl);
    assert_eq!(ex.convention.as_str(), "nservicebus");
    assert_eq!(ex.source.queue.as_deref(), Some("Sales"));
    assert_eq!(ex.message_type.as_deref(), Some("Shop.Messages.PlaceOrder"));
    assert_eq!(
        ex.fault
            .as_ref()
            .and_then(|f| f.inner_exception_type.as_deref()),
        Some("System.Data.SqlClient.SqlException")
    );
    assert_eq!(ex.failed_at.map(|t| t.as_second()), Some(1_759_042_215));
    assert_eq!(
        ex.verdict,
        "InvalidOperationException in Sales after 2 delayed retries: Order 1000 has no lines"
    );
    let p = plan_of(&dl, &ex);
    assert_eq!(p.target, Some(direct("Sales")));
    assert!(p.warnings.is_empty());
    // Ids stay; every failure and retry header goes, Retries.Timestamp included.
    assert_eq!(
        names(&p),
        vec![
            "NServiceBus.MessageId",
            "NServiceBus.CorrelationId",
            "NServiceBus.EnclosedMessageTypes",
            "NServiceBus.ProcessingEndpoint",
            "NServiceBus.ProcessingMachine",
            "warren-replayed-from",
            "warren-replayed-at",
            "warren-replay-count",
        ]
    );
}

#[test]
fn nservicebus_poison_message_without_failedq() {
    let dl = nsb(None);
    let ex = explain(&dl);
    assert_eq!(ex.convention, Convention::NServiceBus);
    assert!(
        ex.verdict
            .starts_with("Poison message, no source queue recorded: InvalidOperationException"),
        "{}",
        ex.verdict
    );
    let p = plan_of(&dl, &ex);
    assert!(!p.is_publishable());
    assert_eq!(p.warnings, vec![ReplayWarning::PoisonWithoutFailedQ]);
    assert!(p.warnings[0].to_string().contains("--to"));
}

// ---- Wolverine, Rebus, Sneakers, dramatiq, EasyNetQ ------------------------------------------

#[test]
fn wolverine_interop() {
    let headers = table(vec![
        ("id", s("018f2a4e-0000-0000-0000-000000000001")),
        ("message-type", s("Shop.Orders.ShipOrder")),
        ("exception-type", s("System.TimeoutException")),
        (
            "exception-message",
            s("The operation has timed out after 30000 ms"),
        ),
        (
            "exception-stack",
            s("   at Shop.Orders.ShipOrderHandler.Handle()"),
        ),
        ("failed-at", s("2025-09-28T06:50:15Z")),
        ("original-destination", s("rabbitmq://queue/orders")),
        ("attempts", HeaderValue::I32(3)),
    ]);
    let dl = letter("wolverine-dead-letter-queue", headers, b"{}");
    let ex = explain(&dl);
    assert_eq!(ex.convention.as_str(), "wolverine");
    assert_eq!(
        ex.verdict,
        "TimeoutException in orders after 3 attempts: The operation has timed out after 30000 ms"
    );
    assert_eq!(ex.message_type.as_deref(), Some("Shop.Orders.ShipOrder"));
    let p = plan_of(&dl, &ex);
    assert_eq!(p.target, Some(direct("orders")));
    assert_eq!(
        names(&p),
        vec![
            "id",
            "message-type",
            "warren-replayed-from",
            "warren-replayed-at",
            "warren-replay-count"
        ]
    );
}

#[test]
fn rebus_error_queue() {
    let headers = table(vec![
        ("rbs2-msg-id", s("5e0b1c9e-0000-0000-0000-000000000002")),
        (
            "rbs2-msg-type",
            s("Shop.Messages.PlaceOrder, Shop.Messages"),
        ),
        (
            "rbs2-error-details",
            s(
                "5 unhandled exceptions: 2025-09-28 08:50:15 +02:00: System.ApplicationException: Warehouse 7 offline\n   at Shop.Handlers.PlaceOrderHandler.Handle()",
            ),
        ),
        ("rbs2-source-queue", s("orders")),
        ("rbs2-delivery-count", s("5")),
        ("rbs2-defer-count", HeaderValue::I32(1)),
    ]);
    let dl = letter("error", headers, b"{}");
    let ex = explain(&dl);
    assert_eq!(ex.convention.as_str(), "rebus");
    assert_eq!(
        ex.verdict,
        "ApplicationException in orders after 5 deliveries: Warehouse 7 offline"
    );
    assert_eq!(ex.message_type.as_deref(), Some("Shop.Messages.PlaceOrder"));
    let p = plan_of(&dl, &ex);
    assert_eq!(p.target, Some(direct("orders")));
    assert_eq!(
        names(&p),
        vec![
            "rbs2-msg-id",
            "rbs2-msg-type",
            "warren-replayed-from",
            "warren-replayed-at",
            "warren-replay-count"
        ]
    );
}

#[test]
fn sneakers_maxretry() {
    let info = r#"{"error":"boom","num_attempts":5,"failed_at":"2025-09-28T06:50:15Z","error_class":"Net::ReadTimeout","error_message":"Net::ReadTimeout with #<TCPSocket:(closed)>","backtrace":["app/workers/mailer.rb:12:in `work'","lib/sneakers/worker.rb:40"]}"#;
    let headers = table(vec![("retry_info", s(info))]);
    let dl = letter("mailer-error", headers, b"payload");
    let ex = explain(&dl);
    assert_eq!(ex.convention.as_str(), "sneakers");
    assert_eq!(ex.source.queue.as_deref(), Some("mailer"));
    assert_eq!(ex.retries, Some(5));
    assert_eq!(ex.failed_at.map(|t| t.as_second()), Some(1_759_042_215));
    assert!(
        ex.verdict
            .starts_with("ReadTimeout in mailer after 5 attempts: Net::ReadTimeout with"),
        "{}",
        ex.verdict
    );
    let p = plan_of(&dl, &ex);
    assert_eq!(
        p.target,
        Some(ReplayTarget {
            exchange: "mailer-retry-requeue".into(),
            routing_key: "order.created".into(),
            expected_queue: Some("mailer".into()),
        })
    );
    assert_eq!(p.removed, vec!["retry_info"]);
}

#[test]
fn dramatiq_dead_letter_queue() {
    let body = r#"{"queue_name":"default","actor_name":"send_welcome_email","args":[42],"kwargs":{},"options":{"retries":20,"traceback":"Traceback (most recent call last):\n  File \"app.py\", line 9, in send_welcome_email\n    raise smtplib.SMTPServerDisconnected('Connection unexpectedly closed')\nsmtplib.SMTPServerDisconnected: Connection unexpectedly closed\n"},"message_id":"b7c2…","message_timestamp":1759042215000}"#;
    let dl = letter("default.XQ", Table::new(), body.as_bytes());
    let ex = explain(&dl);
    assert_eq!(ex.convention.as_str(), "dramatiq");
    assert_eq!(
        ex.verdict,
        "SMTPServerDisconnected in send_welcome_email after 20 retries: Connection unexpectedly closed"
    );
    let p = plan_of(&dl, &ex);
    assert_eq!(p.target, Some(direct("default")));
    assert_eq!(
        p.warnings,
        vec![ReplayWarning::RetryBudget(BodyBudget {
            framework: "dramatiq",
            counter: "options.retries",
            limit_name: "max_retries",
            retries: Some(20),
            limit: BudgetLimit::Default(20),
        })]
    );
    assert_eq!(
        p.warnings[0].to_string(),
        "dramatiq will not retry it if it fails again, unless its actor allows more than dramatiq's default max_retries of 20 (the message states none): options.retries is 20 in the body, which a replay leaves untouched"
    );
}

#[test]
fn easynetq_error_queue() {
    let body = r#"{"RoutingKey":"","Exchange":"Shop.Messages.OrderPlaced, Shop.Messages","Queue":"Shop.Messages.OrderPlaced, Shop.Messages_billing","Exception":"System.InvalidOperationException: Invoice 1000 already exists\r\n   at Billing.Handle()","Message":"{\"OrderId\":1000}","DateTime":"2025-09-28T06:50:15Z","BasicProperties":{"Type":"Shop.Messages.OrderPlaced, Shop.Messages"}}"#;
    let mut dl = letter(
        "EasyNetQ_Default_Error_Queue",
        Table::new(),
        body.as_bytes(),
    );
    dl.properties.kind = Some("EasyNetQ.SystemMessages.Error, EasyNetQ".into());
    let ex = explain(&dl);
    assert_eq!(ex.convention.as_str(), "easynetq");
    assert_eq!(
        ex.verdict,
        "InvalidOperationException in Shop.Messages.OrderPlaced, Shop.Messages_billing: Invoice 1000 already exists"
    );
    assert_eq!(
        ex.message_type.as_deref(),
        Some("Shop.Messages.OrderPlaced")
    );
    let p = plan_of(&dl, &ex);
    assert_eq!(
        p.target,
        Some(direct("Shop.Messages.OrderPlaced, Shop.Messages_billing"))
    );
    assert_eq!(p.warnings, vec![ReplayWarning::BodyIsEnvelope]);
}

/// The dramatiq plan for a body with these options, as its attempts and its budget sentence.
fn dramatiq_budget(options: &str) -> (Attempts, String) {
    let body = format!(
        r#"{{"queue_name":"default","actor_name":"a","args":[],"kwargs":{{}},"options":{options},"message_id":"m"}}"#
    );
    let mut dl = letter("default.XQ", Table::new(), body.as_bytes());
    dl.properties.message_id = None;
    let p = plan_of(&dl, &explain(&dl));
    let budget: Vec<String> = p
        .warnings
        .iter()
        .filter(|w| matches!(w, ReplayWarning::RetryBudget(_)))
        .map(ToString::to_string)
        .collect();
    assert_eq!(budget.len(), 1, "{:?}", p.warnings);
    (p.attempts, budget[0].clone())
}
