//! The dead-letter model on realistic messages, one per convention and per broker death reason:
//! detection, what is read, the verdict, the fingerprint and the replay plan. Header names and
//! shapes follow `frameworks.md` and the seeds (the x-death article, the MassTransit article).

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

#[test]
fn dramatiq_attempts_are_never_called_reset_and_the_plan_says_what_is_left() {
    let body_counter = Attempts::NotReset(vec!["options.retries in the body".into()]);
    // max_retries sent with the message (`send_with_options`): exact.
    let (a, s) = dramatiq_budget(r#"{"max_retries":1,"retries":1}"#);
    assert_eq!(a, body_counter);
    assert_eq!(
        s,
        "dramatiq will not retry it if it fails again: options.retries is 1 of max_retries 1 (in the body, which a replay leaves untouched); attempts are not reset"
    );
    let (_, s) = dramatiq_budget(r#"{"max_retries":5,"retries":2}"#);
    assert!(
        s.starts_with("dramatiq will retry it 3 more times if it fails again: options.retries is 2 of max_retries 5"),
        "{s}"
    );
    let (_, s) = dramatiq_budget(r#"{"max_retries":3,"retries":2}"#);
    assert!(
        s.starts_with("dramatiq will retry it 1 more time if"),
        "{s}"
    );
    // Counted past the limit (the limit was lowered): nothing left, never a negative count.
    let (_, s) = dramatiq_budget(r#"{"max_retries":2,"retries":9}"#);
    assert!(s.starts_with("dramatiq will not retry it"), "{s}");
    // No limit in the message: the actor's, unknown here; dramatiq's default, said as such.
    let (a, s) = dramatiq_budget(r#"{"retries":3}"#);
    assert_eq!(a, body_counter);
    assert_eq!(
        s,
        "dramatiq will retry it up to 20 − 3 = 17 more times if it fails again (dramatiq's default max_retries; the message states none, and its actor may set its own): options.retries is 3 in the body, which a replay leaves untouched"
    );
    // A counter at zero is a whole budget, but still not one Warren reset.
    let (a, s) = dramatiq_budget(r#"{}"#);
    assert_eq!(a, body_counter);
    assert!(s.contains("up to 20 − 0 = 20 more times"), "{s}");
    // `max_retries: null` is dramatiq's "no limit".
    let (_, s) = dramatiq_budget(r#"{"max_retries":null,"retries":4}"#);
    assert_eq!(
        s,
        "dramatiq retries it without limit (max_retries is none): options.retries is 4 in the body, which a replay leaves untouched"
    );
    for options in [r#"{"max_retries":1,"retries":1}"#, r#"{"retries":3}"#, "{}"] {
        let (_, s) = dramatiq_budget(options);
        assert!(!s.contains("attempts reset"), "{s}");
    }
}

#[test]
fn a_dramatiq_body_cut_at_a_browse_cap_is_still_dramatiq_and_its_budget_honest() {
    // Arguments far beyond the preview's cap: the head names the actor and the id, but the
    // options (the retry count) lie past the cut.
    let big = "x".repeat(100_000);
    let whole = format!(
        r#"{{"queue_name":"work","actor_name":"charge","args":["{big}"],"kwargs":{{}},"options":{{"retries":1,"max_retries":1}},"message_id":"m-9","message_timestamp":1}}"#
    );
    let mut dl = letter("work.XQ", Table::new(), whole.as_bytes());
    dl.properties.message_id = None;
    let mut cut = dl.clone();
    cut.body.truncate(64 * 1024);
    assert!(!cut.body_complete());
    assert_eq!(message_key(&cut), message_key(&dl));
    let ex = explain(&cut);
    assert_eq!(ex.convention.as_str(), "dramatiq");
    assert_eq!(ex.message_type.as_deref(), Some("charge"));
    let p = plan_of(&cut, &ex);
    assert_ne!(p.attempts, Attempts::Reset);
    assert!(
        p.warnings.iter().any(|w| w.to_string()
            == "dramatiq keeps its retry count (options.retries) in the body, which a replay leaves untouched, past the part read here: what is left of its max_retries is not known; attempts are not reset"),
        "{:?}",
        p.warnings
    );
    // Read whole (as the replay itself reads it): the exact budget.
    let p = plan_of(&dl, &explain(&dl));
    assert!(
        p.warnings.iter().any(|w| w.to_string().starts_with(
            "dramatiq will not retry it if it fails again: options.retries is 1 of max_retries 1"
        )),
        "{:?}",
        p.warnings
    );
    // Small arguments: a cut after the options still reads them.
    let small = r#"{"queue_name":"work","actor_name":"charge","args":[1],"kwargs":{},"options":{"retries":2,"max_retries":5},"message_id":"m-8","message_timestamp":1}"#;
    let mut dl = letter("work.XQ", Table::new(), small.as_bytes());
    dl.body_size = 1_000_000;
    assert!(!dl.body_complete());
    let ex = explain(&dl);
    assert_eq!(ex.retries, Some(2));
    let p = plan_of(&dl, &ex);
    assert!(
        p.warnings.iter().any(|w| w
            .to_string()
            .starts_with("dramatiq will retry it 3 more times")),
        "{:?}",
        p.warnings
    );
}

#[test]
fn an_audited_replay_counts_when_warrens_headers_were_lost() {
    // dramatiq's own retry republished the replayed message without Warren's headers.
    let body = r#"{"queue_name":"work","actor_name":"charge","args":[0],"kwargs":{},"options":{"retries":3},"message_id":"m-4","message_timestamp":1}"#;
    let mut dl = letter("work.XQ", Table::new(), body.as_bytes());
    dl.properties.message_id = None;
    assert_eq!(explain(&dl).replay_count, 0);
    let ex = warren::domain::explain::explain_with(&dl, &Default::default(), 1);
    assert_eq!(ex.replay_count, 1);
    assert!(
        ex.verdict.ends_with("failed again after 1 replay"),
        "{}",
        ex.verdict
    );
    let p = plan_of(&dl, &ex);
    assert_eq!(p.replay_count, 2, "the next replay is its second");
    assert!(
        p.warnings
            .contains(&ReplayWarning::ReplayedBefore { count: 1 })
    );
    // The larger count wins: the header may know of replays from another store.
    dl.headers
        .insert("warren-replay-count", HeaderValue::I64(3));
    assert_eq!(
        warren::domain::explain::explain_with(&dl, &Default::default(), 1).replay_count,
        3
    );
    assert_eq!(
        warren::domain::explain::explain_with(&dl, &Default::default(), -5).replay_count,
        3
    );
}

#[test]
fn dramatiq_is_keyed_by_its_body_message_id() {
    let body = r#"{"queue_name":"work","actor_name":"charge","args":[0],"kwargs":{},"options":{"retries":1},"message_id":"878bb499-7995-48dd-88c4-3c8139f97820","message_timestamp":1}"#;
    let mut dl = letter("work.XQ", Table::new(), body.as_bytes());
    dl.properties.message_id = None;
    assert_eq!(
        message_key(&dl),
        "body:message_id:878bb499-7995-48dd-88c4-3c8139f97820"
    );
    // The replayed message, failed again: Warren's headers and a new death; the same key.
    let ex = explain(&dl);
    let mut again = dl.clone();
    again.headers = plan_of(&dl, &ex).headers;
    again.headers.insert(
        "x-death",
        HeaderValue::Array(vec![HeaderValue::Table(Table::new())]),
    );
    assert_eq!(message_key(&again), message_key(&dl));
    let ex = explain(&again);
    assert_eq!(ex.replay_count, 1);
    assert!(
        ex.verdict.ends_with("failed again after 1 replay"),
        "{}",
        ex.verdict
    );
}

const TASK_ID: &str = "ab9e6f14-cda2-4e2b-a0f5-f302ebd4825d";

/// A Celery 5.7 task as its real worker left it after `Reject(requeue=False)` (headers as the
/// management API showed them on 3.10; `None` values are voids).
fn celery_task(retries: i32, expires: Option<&str>) -> DeadLetter {
    let void = HeaderValue::Void;
    let mut hd = table(vec![
        ("argsrepr", s("[0]")),
        ("eta", void.clone()),
        ("expires", expires.map_or(void.clone(), s)),
        ("group", void.clone()),
        ("group_index", void.clone()),
        ("id", s(TASK_ID)),
        ("ignore_result", HeaderValue::Bool(false)),
        ("kwargsrepr", s("{}")),
        ("lang", s("py")),
        ("origin", s("gen28323@vm")),
        ("parent_id", void.clone()),
        ("replaced_task_nesting", HeaderValue::I32(0)),
        ("retries", HeaderValue::I32(retries)),
        ("root_id", s(TASK_ID)),
        ("shadow", void.clone()),
        ("stamped_headers", void.clone()),
        ("stamps", HeaderValue::Table(Table::new())),
        ("task", s("app.charge")),
        (
            "timelimit",
            HeaderValue::Array(vec![void.clone(), void.clone()]),
        ),
        ("x-first-death-exchange", s("")),
        ("x-first-death-queue", s("work")),
        ("x-first-death-reason", s("rejected")),
    ]);
    let mut d = match death(1, "rejected", "work", "", &["work"], 1_759_042_215) {
        HeaderValue::Table(t) => t,
        _ => Table::new(),
    };
    d.insert("original-expiration", s("4000"));
    hd.insert("x-death", HeaderValue::Array(vec![HeaderValue::Table(d)]));
    let body = br#"[[0], {}, {"callbacks": null, "errbacks": null, "chain": null, "chord": null}]"#;
    let mut dl = letter("work.dlq", hd, body);
    dl.properties = Properties {
        correlation_id: Some(TASK_ID.into()),
        reply_to: Some("5e59332f-c5c6-39e9-b278-2e8997242c4b".into()),
        content_type: Some("application/json".into()),
        content_encoding: Some("utf-8".into()),
        delivery_mode: Some(2),
        priority: Some(0),
        ..Properties::default()
    };
    dl
}

#[test]
fn celery_task_is_named_with_its_tries_and_grouped_by_task() {
    let dl = celery_task(0, None);
    let ex = explain(&dl);
    assert_eq!(ex.convention, Convention::Celery);
    assert_eq!(ex.message_type.as_deref(), Some("app.charge"));
    assert_eq!(ex.retries, Some(0));
    assert_eq!(ex.source.queue.as_deref(), Some("work"));
    assert_eq!(ex.deadline, None);
    assert_eq!(
        ex.verdict,
        "Celery task app.charge: rejected once by work, on its first try"
    );
    assert_eq!(ex.fingerprint.summary, "app.charge: rejected in work");
    let retried = explain(&celery_task(3, None));
    assert_eq!(
        retried.verdict,
        "Celery task app.charge: rejected once by work, after 3 retries"
    );
    // Same task, same death: one group, whatever the retries; another task is another group.
    assert_eq!(retried.fingerprint, ex.fingerprint);
    let mut other = celery_task(0, None);
    other.headers.insert("task", s("app.refund"));
    assert_ne!(explain(&other).fingerprint.key, ex.fingerprint.key);
    // A plain broker death in the same queue is not grouped with the task.
    let mut plain = dl.clone();
    plain.headers.retain(|k, _| k.starts_with("x-"));
    assert_ne!(explain(&plain).fingerprint.key, ex.fingerprint.key);
}

#[test]
fn celery_task_id_is_its_identity() {
    let dl = celery_task(2, None);
    assert_eq!(message_key(&dl), format!("header:id:{TASK_ID}"));
    // The replayed message, as it comes back after failing again, keeps the key.
    let p = plan_of(&dl, &explain(&dl));
    let mut back = dl.clone();
    back.headers = p.headers.clone();
    assert_eq!(message_key(&back), message_key(&dl));
}

#[test]
fn celery_retries_is_set_to_zero_not_removed() {
    let dl = celery_task(2, None);
    let ex = explain(&dl);
    let p = plan_of(&dl, &ex);
    assert_eq!(p.target, Some(direct("work")));
    assert_eq!(p.reset, vec!["retries"]);
    // Celery's own integer type, zero.
    assert_eq!(p.headers.get("retries"), Some(&HeaderValue::I32(0)));
    assert_eq!(p.attempts, Attempts::Reset);
    for kept in [
        "id", "task", "lang", "root_id", "argsrepr", "eta", "expires",
    ] {
        assert!(p.headers.contains_key(kept), "{kept} kept");
    }
    assert!(!p.headers.contains_key("x-death"));
    assert_eq!(
        p.removed,
        vec![
            "x-first-death-exchange",
            "x-first-death-queue",
            "x-first-death-reason",
            "x-death"
        ]
    );
    // Already zero: nothing to reset, and still "reset".
    let p0 = plan_of(&celery_task(0, None), &explain(&celery_task(0, None)));
    assert!(p0.reset.is_empty());
    assert_eq!(p0.attempts, Attempts::Reset);
    // Kept attempts keep the counter, and say so.
    let keep = ReplayOptions {
        keep_attempts: true,
        ..opts()
    };
    let pk = replay::plan(&dl, &ex, &keep);
    assert_eq!(pk.headers.get("retries"), Some(&HeaderValue::I32(2)));
    assert_eq!(pk.attempts, Attempts::Kept);
}

#[test]
fn celery_expires_in_the_past_keeps_the_task_in_the_dlq() {
    // now() is 2025-10-01T12:00:00Z.
    let past = celery_task(0, Some("2025-10-01T11:59:59.999999+00:00"));
    let future = celery_task(0, Some("2025-10-01T12:00:01+00:00"));
    let ex = explain(&past);
    assert_eq!(
        ex.deadline,
        "2025-10-01T11:59:59.999999Z".parse::<Timestamp>().ok()
    );
    let p = plan_of(&past, &ex);
    let why = p.held_back().expect("held back");
    assert!(why.contains("`expires` has passed"), "{why}");
    assert!(why.contains("--clear-expiry"), "{why}");
    assert!(p.headers.contains_key("expires"));
    assert!(p.removed_properties.is_empty());
    // The same task a second later, with its deadline still ahead: it goes, deadline and all.
    let pf = plan_of(&future, &explain(&future));
    assert_eq!(pf.expired, None);
    assert_eq!(pf.held_back(), None);
    assert!(pf.headers.contains_key("expires"));
    // The clock is the one passed in: at 11:00 the first one has not expired yet.
    let earlier = ReplayOptions {
        now: "2025-10-01T11:00:00Z"
            .parse()
            .unwrap_or(Timestamp::UNIX_EPOCH),
        ..opts()
    };
    assert_eq!(replay::plan(&past, &ex, &earlier).held_back(), None);
}

#[test]
fn clear_expiry_removes_the_deadline_and_the_expiration_property() {
    let mut dl = celery_task(1, Some("2025-10-01T11:00:00+00:00"));
    dl.properties.expiration = Some("4000".into());
    let ex = explain(&dl);
    let clear = ReplayOptions {
        clear_expiry: true,
        strip_failure_stamp: false,
        ..opts()
    };
    let p = replay::plan(&dl, &ex, &clear);
    assert_eq!(p.held_back(), None);
    assert!(p.expired.as_ref().is_some_and(|e| e.cleared));
    assert!(!p.headers.contains_key("expires"));
    assert!(p.removed.iter().any(|r| r == "expires"));
    assert_eq!(p.removed_properties, vec!["expiration"]);
    assert_eq!(p.headers.get("retries"), Some(&HeaderValue::I32(0)));
    // A deadline still ahead is not touched by --clear-expiry.
    let ahead = celery_task(0, Some("2025-10-01T13:00:00+00:00"));
    let pa = replay::plan(&ahead, &explain(&ahead), &clear);
    assert!(pa.headers.contains_key("expires"));
    assert_eq!(pa.expired, None);
}

#[test]
fn expiry_notice_words() {
    assert_eq!(
        replay::expiry_notice("Celery", "expires", 2, 7, false),
        "Celery will discard 2 of 7 on arrival: their `expires` has passed; they stay in the DLQ (--clear-expiry removes the deadline and replays them)"
    );
    assert_eq!(
        replay::expiry_notice("Celery", "expires", 1, 7, false),
        "Celery will discard 1 of 7 on arrival: its `expires` has passed; it stays in the DLQ (--clear-expiry removes the deadline and replays it)"
    );
    assert!(replay::expiry_notice("Celery", "expires", 2, 7, true).contains("so Celery runs them"));
}

#[test]
fn an_id_and_a_task_header_without_lang_py_is_not_celery() {
    let mut dl = celery_task(0, None);
    dl.headers.remove("lang");
    let ex = explain(&dl);
    assert_eq!(ex.convention, Convention::Broker);
    assert!(message_key(&dl).starts_with("hash:"));
}

/// rascal 21's table, as its real subscriber left it (see `frameworks.md`).
fn rascal_table(queue: &str, error: &str, recovery: Table) -> HeaderValue {
    HeaderValue::Table(table(vec![
        (
            "error",
            HeaderValue::Table(table(vec![("message", s(error))])),
        ),
        ("originalExchange", s("")),
        ("originalQueue", s(queue)),
        ("originalRoutingKey", s(queue)),
        ("originalVhost", s("shop")),
        (
            "recovery",
            HeaderValue::Table(table(vec![(queue, HeaderValue::Table(recovery))])),
        ),
        ("redeliveries", HeaderValue::I32(0)),
        ("restoreRoutingHeaders", HeaderValue::Bool(true)),
    ]))
}

/// Republished with `immediateNack`, then nacked: the broker dead-lettered it (`x-death`) and
/// rascal's stored copy of x-death is the empty one.
fn rascal_nacked(error: &str) -> DeadLetter {
    let stored = table(vec![
        ("immediateNack", HeaderValue::Bool(true)),
        (
            "xDeath",
            HeaderValue::Table(table(vec![
                ("count", HeaderValue::I32(0)),
                (
                    "time",
                    HeaderValue::Table(table(vec![("value", HeaderValue::I32(0))])),
                ),
            ])),
        ),
    ]);
    let hd = table(vec![
        ("rascal", rascal_table("work", error, stored)),
        (
            "x-death",
            HeaderValue::Array(vec![death(
                1,
                "rejected",
                "work",
                "",
                &["work"],
                1_796_145_549,
            )]),
        ),
        ("x-first-death-exchange", s("")),
        ("x-first-death-queue", s("work")),
        ("x-first-death-reason", s("rejected")),
    ]);
    letter("work.dlq", hd, br#"{"order":0}"#)
}

fn rascal_forwarded() -> DeadLetter {
    let hd = table(vec![
        ("CC", HeaderValue::Array(vec![s("mail.mail")])),
        (
            "rascal",
            rascal_table(
                "mail",
                "smtp refused",
                table(vec![("forwarded", HeaderValue::I32(1))]),
            ),
        ),
    ]);
    letter("mail.dead", hd, br#"{"mail":0}"#)
}

#[test]
fn rascal_nacked_message_reads_the_error_and_groups_by_it() {
    let dl = rascal_nacked("card declined for order 17");
    let ex = explain(&dl);
    assert_eq!(ex.convention, Convention::Rascal);
    assert_eq!(ex.source.queue.as_deref(), Some("work"));
    assert_eq!(
        ex.verdict,
        "A failure in work (nacked by rascal): card declined for order 17"
    );
    assert_eq!(ex.fingerprint.summary, "card declined for order #");
    // Same error, another order: one group; another error: another group, although the broker
    // recorded the same death for both.
    let same = explain(&rascal_nacked("card declined for order 18"));
    assert_eq!(same.fingerprint, ex.fingerprint);
    let other = explain(&rascal_nacked("gateway timeout"));
    assert_ne!(other.fingerprint.key, ex.fingerprint.key);
    // rascal's publications set message_id: that is the identity.
    assert_eq!(message_key(&dl), "id:msg-1");
}

#[test]
fn rascal_replay_strips_its_stored_x_death_with_x_death() {
    let dl = rascal_nacked("card declined");
    let p = plan_of(&dl, &explain(&dl));
    assert_eq!(p.target, Some(direct("work")));
    assert!(!p.headers.contains_key("x-death"));
    let t = p
        .headers
        .get("rascal")
        .and_then(HeaderValue::as_table)
        .expect("the rascal table stays");
    // Without the stored copy (and the immediate-nack mark) rascal runs the handler.
    assert!(!t.contains_key("recovery"), "{t:?}");
    assert!(!t.contains_key("error"));
    assert!(!t.contains_key("redeliveries"));
    for kept in [
        "originalQueue",
        "originalExchange",
        "originalRoutingKey",
        "originalVhost",
        "restoreRoutingHeaders",
    ] {
        assert!(t.contains_key(kept), "{kept} kept");
    }
    for removed in [
        "rascal.recovery",
        "rascal.error",
        "rascal.redeliveries",
        "x-death",
    ] {
        assert!(
            p.removed.iter().any(|r| r == removed),
            "{removed}: {:?}",
            p.removed
        );
    }
    assert_eq!(p.attempts, Attempts::Reset);
    // Keeping attempts keeps both x-death and rascal's copy, which then still agree.
    let keep = ReplayOptions {
        keep_attempts: true,
        ..opts()
    };
    let pk = replay::plan(&dl, &explain(&dl), &keep);
    assert_eq!(pk.headers.get("rascal"), dl.headers.get("rascal"));
    assert!(pk.headers.contains_key("x-death"));
    assert_eq!(pk.attempts, Attempts::Kept);
}

#[test]
fn rascal_forwarded_message_is_explained_from_its_table() {
    let dl = rascal_forwarded();
    let ex = explain(&dl);
    assert_eq!(ex.convention, Convention::Rascal);
    assert!(ex.deaths.is_empty());
    assert_eq!(
        ex.verdict,
        "A failure in mail (forwarded here by rascal): smtp refused"
    );
    assert_eq!(ex.retries, Some(1));
    let p = plan_of(&dl, &ex);
    assert_eq!(p.target, Some(direct("mail")));
    // CC would route a copy to a queue named "mail.mail" through the default exchange.
    assert!(!p.headers.contains_key("CC"));
    assert!(p.removed.iter().any(|r| r == "CC"));
    assert_eq!(p.attempts, Attempts::Reset);
}

#[test]
fn a_rascal_header_that_is_not_a_table_is_not_rascal() {
    let dl = letter(
        "q.dlq",
        table(vec![("rascal", s("originalQueue=work"))]),
        b"{}",
    );
    assert_eq!(explain(&dl).convention, Convention::Unknown);
}

#[test]
fn convention_names_are_stable() {
    let names: Vec<&str> = Convention::ALL.iter().map(Convention::as_str).collect();
    assert_eq!(
        names,
        vec![
            "broker",
            "masstransit",
            "spring",
            "nservicebus",
            "wolverine",
            "rebus",
            "sneakers",
            "dramatiq",
            "easynetq",
            "celery",
            "rascal",
            "symfony",
            "ladder",
            "unknown"
        ]
    );
    for c in Convention::ALL {
        assert_eq!(Convention::parse(c.as_str()), Some(c));
    }
}

/// A hand-rolled amqplib ladder's last try, copied into the DLQ by the app: its counter and error
/// text, and the wait queue's expiry as the newest death.
fn ladder_letter(counter: HeaderValue, error: &str) -> DeadLetter {
    letter(
        "orders.dlq",
        table(vec![
            ("x-retry-count", counter),
            ("x-last-error", s(error)),
            (
                "x-death",
                HeaderValue::Array(vec![death(
                    3,
                    "expired",
                    "orders.wait",
                    "wait",
                    &["orders"],
                    1_759_300_000,
                )]),
            ),
            ("x-first-death-queue", s("orders.wait")),
            ("x-first-death-reason", s("expired")),
        ]),
        b"{\"order\":17}",
    )
}

#[test]
fn a_ladder_is_read_by_its_counter_and_error_text() {
    let dl = ladder_letter(HeaderValue::I32(3), "TypeError: card declined for order 17");
    let ex = explain(&dl);
    assert_eq!(ex.convention, Convention::Ladder);
    assert_eq!(ex.retries, Some(3));
    let f = ex.fault.as_ref().expect("the error text is the fault");
    assert_eq!(f.exception_type.as_deref(), Some("TypeError"));
    assert_eq!(f.message.as_deref(), Some("card declined for order 17"));
    assert_eq!(
        ex.verdict,
        "TypeError after 3 retries (x-retry-count): card declined for order 17 (copied here from wait queue orders.wait)"
    );
    // Grouped by the error text, with what varies masked.
    let other_order = explain(&ladder_letter(
        HeaderValue::I32(3),
        "TypeError: card declined for order 912",
    ));
    assert_eq!(ex.fingerprint.key, other_order.fingerprint.key);
    // A JavaScript error's stack: the first line is the error, the rest the trace.
    let stack = explain(&ladder_letter(
        HeaderValue::I32(3),
        "RangeError: amount out of range\n    at charge (/app/pay.js:12:9)\n    at main (/app/index.js:3:1)",
    ));
    let f = stack.fault.expect("fault");
    assert_eq!(f.exception_type.as_deref(), Some("RangeError"));
    assert_eq!(f.message.as_deref(), Some("amount out of range"));
    assert!(f.stack_trace.is_some_and(|t| t.contains("pay.js:12")));
    let other_error = explain(&ladder_letter(
        HeaderValue::I32(3),
        "stock service timed out",
    ));
    assert_ne!(ex.fingerprint.key, other_error.fingerprint.key);
    assert_eq!(
        other_error.fault.and_then(|f| f.message).as_deref(),
        Some("stock service timed out")
    );
}

#[test]
fn a_ladders_replay_resets_its_counter_in_its_own_type_and_drops_its_error_text() {
    for (counter, zero) in [
        (HeaderValue::I32(3), HeaderValue::I32(0)),
        (HeaderValue::I64(3), HeaderValue::I64(0)),
        (HeaderValue::F64(3.0), HeaderValue::F64(0.0)),
        (s("3"), s("0")),
    ] {
        let dl = ladder_letter(counter.clone(), "boom");
        let ex = explain(&dl);
        let p = plan_of(&dl, &ex);
        assert_eq!(p.reset, vec!["x-retry-count"], "{counter:?}");
        assert_eq!(p.headers.get("x-retry-count"), Some(&zero), "{counter:?}");
        assert!(p.removed.iter().any(|r| r == "x-last-error"));
        assert!(!p.headers.contains_key("x-last-error"));
        assert!(p.removed.iter().any(|r| r == "x-death"));
        assert_eq!(p.attempts, Attempts::Reset);
        // The wait queue the death names; the preflight follows it to where it routes back.
        assert_eq!(p.target, Some(direct("orders.wait")));
    }
    // A counter Warren cannot zero goes.
    let dl = ladder_letter(s("many"), "boom");
    let p = plan_of(&dl, &explain(&dl));
    assert!(p.reset.is_empty());
    assert!(p.removed.iter().any(|r| r == "x-retry-count"));
    assert_eq!(p.attempts, Attempts::Reset);
    // Kept attempts keep the counter, and say so.
    let dl = ladder_letter(HeaderValue::I32(3), "boom");
    let keep = ReplayOptions {
        keep_attempts: true,
        ..opts()
    };
    let p = replay::plan(&dl, &explain(&dl), &keep);
    assert_eq!(p.attempts, Attempts::Kept);
    assert_eq!(p.headers.get("x-retry-count"), Some(&HeaderValue::I32(3)));
    assert!(p.warnings.contains(&ReplayWarning::AttemptsKept));
}

#[test]
fn a_teams_own_header_names_are_read_when_configured() {
    use warren::domain::convention::Conventions;
    use warren::domain::explain::explain_with;
    let dl = letter(
        "payments.dlq",
        table(vec![
            ("retry_attempt", HeaderValue::I64(2)),
            ("failure", s("gateway said no")),
        ]),
        b"{}",
    );
    // With the default names nothing marks it.
    assert_eq!(explain(&dl).convention, Convention::Unknown);
    let own = Conventions {
        retry_counter_headers: vec!["retry_attempt".into()],
        error_text_headers: vec!["failure".into()],
    };
    let ex = explain_with(&dl, &own, 0);
    assert_eq!(ex.convention, Convention::Ladder);
    assert_eq!(ex.retries, Some(2));
    assert_eq!(
        ex.verdict,
        "A failure after 2 retries (retry_attempt): gateway said no"
    );
    let p = plan_of(&dl, &ex);
    assert_eq!(p.reset, vec!["retry_attempt"]);
    assert_eq!(p.headers.get("retry_attempt"), Some(&HeaderValue::I64(0)));
    assert!(p.removed.iter().any(|r| r == "failure"));
    assert_eq!(p.attempts, Attempts::Reset);
    // A framework's own record still wins over a ladder header it happens to carry.
    let mut spring = dl.clone();
    spring.headers = table(vec![
        ("x-retry-count", HeaderValue::I64(1)),
        ("x-exception-message", s("boom")),
    ]);
    assert_eq!(explain(&spring).convention, Convention::Spring);
}

#[test]
fn a_ladder_that_nacks_on_its_last_try_failed_in_the_work_queue() {
    let mut dl = ladder_letter(HeaderValue::I64(2), "ValueError: bad sku");
    dl.headers = table(vec![
        ("x-retry-count", HeaderValue::I64(2)),
        ("x-last-error", s("ValueError: bad sku")),
        (
            "x-death",
            HeaderValue::Array(vec![
                death(1, "rejected", "orders", "", &["orders"], 1_759_300_010),
                death(
                    2,
                    "expired",
                    "orders.wait",
                    "wait",
                    &["orders"],
                    1_759_300_000,
                ),
            ]),
        ),
    ]);
    let ex = explain(&dl);
    assert_eq!(
        ex.verdict,
        "ValueError in orders after 2 retries (x-retry-count): bad sku"
    );
    assert_eq!(plan_of(&dl, &ex).target, Some(direct("orders")));
}

#[test]
fn a_configured_counter_on_a_framework_message_is_reset_too() {
    // Spring recorded the failure; the team's own counter rides along and is reset with it.
    let dl = letter(
        "orders.group.dlq",
        table(vec![
            ("x-exception-message", s("boom")),
            ("x-retry-count", HeaderValue::I32(4)),
        ]),
        b"{}",
    );
    let ex = explain(&dl);
    assert_eq!(ex.convention, Convention::Spring);
    let p = plan_of(&dl, &ex);
    assert_eq!(p.reset, vec!["x-retry-count"]);
    assert_eq!(p.headers.get("x-retry-count"), Some(&HeaderValue::I32(0)));
    assert_eq!(p.attempts, Attempts::Reset);
}

// Symfony Messenger 5.4: headers and bodies as Symfony's real Worker wrote them into the failure
// transport (captured from `tests/fixtures/symfony_worker.php` on 3.10.8, shortened).

const SF_STAMP: &str = "X-Message-Stamp-Symfony\\Component\\Messenger\\Stamp\\";

fn sf_letter(headers: Table, body: &[u8]) -> DeadLetter {
    let mut dl = letter("failed_payments", headers, body);
    dl.properties.message_id = None;
    dl.delivery = Delivery {
        exchange: "failed_payments".into(),
        routing_key: "payments".into(),
        ..Delivery::default()
    };
    dl
}

/// The JSON serializer's message after 2 retries (`retried`) or an unrecoverable failure.
fn symfony_json(retried: bool) -> DeadLetter {
    let redeliveries = if retried {
        r#"[{"retryCount":1,"exceptionMessage":"2026-12-03T11:35:28+00:00","flattenException":null,"redeliveredAt":"2026-12-03T11:35:28+00:00"},{"retryCount":2,"exceptionMessage":"2026-12-03T11:35:28+00:00","flattenException":null,"redeliveredAt":"2026-12-03T11:35:28+00:00"},{"retryCount":0,"exceptionMessage":null,"flattenException":null,"redeliveredAt":"2026-12-03T11:35:29+00:00"}]"#
    } else {
        r#"[{"retryCount":0,"exceptionMessage":null,"flattenException":null,"redeliveredAt":"2026-12-03T11:35:29+00:00"}]"#
    };
    let mut h = vec![
        (
            format!("{SF_STAMP}DelayStamp"),
            s(r#"[{"delay":200},{"delay":200},{"delay":0}]"#),
        ),
        (
            format!("{SF_STAMP}ErrorDetailsStamp"),
            s(
                r#"[{"exceptionClass":"App\\CardDeclined","exceptionCode":0,"exceptionMessage":"card declined for order order-0001","flattenException":{"class":"App\\CardDeclined","message":"card declined for order order-0001","asString":"App\\CardDeclined: card declined for order order-0001 in \/app\/worker.php:98\nStack trace:\n#0 {main}"}}]"#,
            ),
        ),
        (format!("{SF_STAMP}RedeliveryStamp"), s(redeliveries)),
        (
            format!("{SF_STAMP}SentToFailureTransportStamp"),
            s(r#"[{"originalReceiverName":"async"}]"#),
        ),
        ("type".to_string(), s("App\\ChargeCard")),
    ];
    if retried {
        h.push((
            "x-death".into(),
            HeaderValue::Array(vec![death(
                2,
                "expired",
                "delay_payments_payments_200_retry",
                "delays",
                &["delay_payments_payments_200_retry"],
                1_796_297_728,
            )]),
        ));
        h.push((
            "x-first-death-queue".into(),
            s("delay_payments_payments_200_retry"),
        ));
        h.push(("x-first-death-reason".into(), s("expired")));
    }
    sf_letter(h.into_iter().collect(), br#"{"orderId":"order-0001"}"#)
}

/// PHP's `serialize` of a string, as `s:N:"…";`.
fn php_s(v: &str) -> String {
    format!("s:{}:\"{v}\";", v.len())
}

/// A private property's name as PHP serializes it: `\0Class\0name`.
fn php_p(class: &str, name: &str) -> String {
    php_s(&format!("\0Symfony\\Component\\{class}\0{name}"))
}

/// The PhpSerializer's body: `addslashes(serialize($envelope))`.
fn symfony_php() -> DeadLetter {
    let stamp = |n: &str| format!("Symfony\\Component\\Messenger\\Stamp\\{n}");
    let redelivery = |n: i64| {
        format!(
            "O:49:\"{}\":2:{{{}i:{n};{}O:17:\"DateTimeImmutable\":3:{{s:4:\"date\";s:26:\"2026-12-03 11:45:4{n}.579671\";s:13:\"timezone_type\";i:3;s:8:\"timezone\";s:3:\"UTC\";}}}}",
            stamp("RedeliveryStamp"),
            php_p("Messenger\\Stamp\\RedeliveryStamp", "retryCount"),
            php_p("Messenger\\Stamp\\RedeliveryStamp", "redeliveredAt"),
        )
    };
    let raw = format!(
        "O:36:\"Symfony\\Component\\Messenger\\Envelope\":2:{{{}a:3:{{{}a:1:{{i:0;O:51:\"{}\":2:{{{}{}{}{}}}}}{}a:3:{{i:0;{}i:1;{}i:2;{}}}{}a:1:{{i:0;O:61:\"{}\":1:{{{}{}}}}}}}{}O:14:\"App\\ChargeCard\":1:{{s:7:\"orderId\";s:10:\"order-0001\";}}}}",
        php_p("Messenger\\Envelope", "stamps"),
        php_s(&stamp("ErrorDetailsStamp")),
        stamp("ErrorDetailsStamp"),
        php_p("Messenger\\Stamp\\ErrorDetailsStamp", "exceptionClass"),
        php_s("App\\CardDeclined"),
        php_p("Messenger\\Stamp\\ErrorDetailsStamp", "exceptionMessage"),
        php_s("card declined for order order-0001"),
        php_s(&stamp("RedeliveryStamp")),
        redelivery(1),
        redelivery(2),
        redelivery(0),
        php_s(&stamp("SentToFailureTransportStamp")),
        stamp("SentToFailureTransportStamp"),
        php_p(
            "Messenger\\Stamp\\SentToFailureTransportStamp",
            "originalReceiverName"
        ),
        php_s("async"),
        php_p("Messenger\\Envelope", "message"),
    );
    let mut body = String::new();
    for c in raw.chars() {
        match c {
            '\0' => body.push_str("\\0"),
            '"' | '\\' | '\'' => {
                body.push('\\');
                body.push(c);
            }
            c => body.push(c),
        }
    }
    sf_letter(Table::new(), body.as_bytes())
}

#[test]
fn symfony_failures_are_read_from_their_stamps_not_the_copied_x_death() {
    for (dl, retries) in [
        (symfony_json(true), 2),
        (symfony_json(false), 0),
        (symfony_php(), 2),
    ] {
        let ex = explain(&dl);
        assert_eq!(ex.convention, Convention::Symfony, "{dl:?}");
        let f = ex.fault.clone().expect("the exception");
        assert_eq!(f.exception_type.as_deref(), Some("App\\CardDeclined"));
        assert_eq!(
            f.message.as_deref(),
            Some("card declined for order order-0001")
        );
        assert_eq!(ex.retries, Some(retries));
        assert_eq!(ex.message_type.as_deref(), Some("App\\ChargeCard"));
        // The queue it failed in is the routing key Symfony sent it with, not the delay queue.
        assert_eq!(ex.source.queue.as_deref(), Some("payments"));
        let after = if retries == 0 {
            "without retries".to_string()
        } else {
            format!("after {retries} retries")
        };
        assert_eq!(
            ex.verdict,
            format!(
                "App\\CardDeclined in payments {after} on transport async: card declined for order order-0001"
            )
        );
        assert!(ex.failed_at.is_some(), "{dl:?}");
        // The delay queue's expiry, carried over: shown, never the arrival or the verdict.
        assert_eq!(ex.deaths.copied, !ex.deaths.is_empty());
        assert_eq!(warren::domain::arrival::exact_death(&ex.deaths), None);
        assert!(
            ex.fingerprint
                .summary
                .starts_with("App\\CardDeclined: card declined")
        );
        let p = plan_of(&dl, &ex);
        assert_eq!(p.target, Some(direct("payments")));
        assert_eq!(p.attempts, Attempts::Reset, "{p:?}");
        let json = dl.headers.keys().any(|k| k.starts_with(SF_STAMP));
        assert!(
            p.warnings
                .contains(&ReplayWarning::SymfonyDropsOnFailure { strippable: json }),
            "{:?}",
            p.warnings
        );
        assert!(!names(&p).iter().any(|n| n.starts_with("x-")), "{p:?}");
    }

    // Without ErrorDetailsStamp (a worker without that listener) the copied expiry is still not
    // the verdict nor the group.
    let mut bare = symfony_json(true);
    bare.headers.remove(&format!("{SF_STAMP}ErrorDetailsStamp"));
    let ex = explain(&bare);
    assert_eq!(
        ex.verdict,
        "Symfony Messenger put it here without recording the failure (from payments)"
    );
    assert!(
        !ex.fingerprint.summary.contains("delay_"),
        "{:?}",
        ex.fingerprint
    );

    // A Symfony worker without a failure transport whose queue dead-letters what it rejects: the
    // broker's x-death is real there and says where it failed; Symfony's stamps say why.
    let mut rejected = symfony_json(true);
    rejected
        .headers
        .remove(&format!("{SF_STAMP}SentToFailureTransportStamp"));
    rejected.headers.insert(
        "x-death",
        HeaderValue::Array(vec![death(
            1,
            "rejected",
            "payments",
            "payments",
            &[""],
            1_796_297_729,
        )]),
    );
    rejected.delivery.routing_key = String::new();
    let ex = explain(&rejected);
    assert_eq!(ex.convention, Convention::Symfony);
    assert!(!ex.deaths.copied);
    assert_eq!(ex.source.queue.as_deref(), Some("payments"));
    assert_eq!(
        ex.verdict,
        "App\\CardDeclined in payments after 2 retries: card declined for order order-0001"
    );
    let p = plan_of(&rejected, &ex);
    assert_eq!(p.target, Some(direct("payments")));
    assert!(
        !p.warnings
            .iter()
            .any(|w| matches!(w, ReplayWarning::SymfonyDropsOnFailure { .. }))
    );

    // JSON: the retry count and the error go; the failure stamp only when asked.
    let dl = symfony_json(true);
    let ex = explain(&dl);
    let kept = plan_of(&dl, &ex);
    let failure = format!("{SF_STAMP}SentToFailureTransportStamp");
    assert!(kept.removed.contains(&format!("{SF_STAMP}RedeliveryStamp")));
    assert!(
        kept.removed
            .contains(&format!("{SF_STAMP}ErrorDetailsStamp"))
    );
    assert!(kept.headers.contains_key(&failure));
    assert!(kept.headers.contains_key(&format!("{SF_STAMP}DelayStamp")));
    assert_eq!(kept.headers.get_str("type"), Some("App\\ChargeCard"));
    let stripped = replay::plan(
        &dl,
        &ex,
        &ReplayOptions {
            strip_failure_stamp: true,
            ..opts()
        },
    );
    assert!(!stripped.headers.contains_key(&failure));
    assert!(stripped.removed.contains(&failure));
    assert!(
        !stripped
            .warnings
            .iter()
            .any(|w| matches!(w, ReplayWarning::SymfonyDropsOnFailure { .. })),
        "{:?}",
        stripped.warnings
    );
    // PhpSerializer: the body is never changed; Symfony reads the last RedeliveryStamp, which
    // its failure transport set to 0, so the budget is fresh; the stamp cannot be stripped.
    let dl = symfony_php();
    let ex = explain(&dl);
    let p = replay::plan(
        &dl,
        &ex,
        &ReplayOptions {
            strip_failure_stamp: true,
            ..opts()
        },
    );
    assert_eq!(p.attempts, Attempts::Reset);
    assert!(
        p.warnings
            .contains(&ReplayWarning::SymfonyDropsOnFailure { strippable: false })
    );
}
