//! Groups by what matters now (`domain::grouping`): for one realistic message per convention,
//! what each grouping mode names — the exception type, the message type, the origin queue, the
//! broker's death reason and the replay endpoint — and that the keys behave as keys: the same
//! aspect gives the same key, "none recorded" is its own group per convention, a group is named
//! by its key or its value, and a note outlives its group only until a whole look finds it gone.
//! Header names and shapes as in `model_conventions.rs` (after `frameworks.md`).

use jiff::Timestamp;
use warren::domain::explain::{Explanation, explain};
use warren::domain::grouping::{self, GroupBy, GroupNote, WaitQueues, group_key, notes_gone};
use warren::domain::message::{DeadLetter, Delivery, Properties};
use warren::domain::selection::{GroupChoice, Selection};
use warren::domain::value::{HeaderValue, Table};

fn s(v: &str) -> HeaderValue {
    HeaderValue::string(v)
}

fn table(pairs: Vec<(&str, HeaderValue)>) -> Table {
    pairs.into_iter().map(|(k, v)| (k.to_string(), v)).collect()
}

fn death(count: i64, reason: &str, queue: &str, exchange: &str, key: &str) -> HeaderValue {
    HeaderValue::Table(table(vec![
        ("count", HeaderValue::I64(count)),
        ("reason", s(reason)),
        ("queue", s(queue)),
        ("time", HeaderValue::Timestamp(1_759_042_215)),
        ("exchange", s(exchange)),
        ("routing-keys", HeaderValue::Array(vec![s(key)])),
    ]))
}

fn deaths(list: Vec<HeaderValue>) -> HeaderValue {
    HeaderValue::Array(list)
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

fn masstransit(order: u32) -> DeadLetter {
    letter(
        "shipping-label_error",
        table(vec![
            ("MT-Reason", s("fault")),
            (
                "MT-Fault-ExceptionType",
                s("Shop.Shipping.CarrierUnavailableException"),
            ),
            (
                "MT-Fault-Message",
                s(&format!("Carrier unavailable for order {order}")),
            ),
            (
                "MT-Fault-InputAddress",
                s("rabbitmq://rabbitmq/shipping-label"),
            ),
            (
                "MT-Fault-MessageType",
                s("urn:message:Shop.Contracts:CreateShippingLabel"),
            ),
            ("MT-Fault-RetryCount", HeaderValue::I32(3)),
        ]),
        b"{}",
    )
}

fn masstransit_skipped() -> DeadLetter {
    let body = r#"{"messageType":["urn:message:Shop.Contracts:CancelShippingLabel"],"message":{}}"#;
    letter(
        "shipping-label_skipped",
        table(vec![("MT-Reason", s("skip"))]),
        body.as_bytes(),
    )
}

const SPRING_TRACE: &str = "org.springframework.amqp.rabbit.support.ListenerExecutionFailedException: Listener threw exception\n\tat x.y(Z.java:1)\nCaused by: com.acme.inventory.OutOfStockException: SKU A-0 is out of stock\n\tat com.acme.inventory.Reserver.reserve(Reserver.java:42)";

fn spring() -> DeadLetter {
    letter(
        "inventory-errors",
        table(vec![
            ("x-exception-message", s("SKU A-0 is out of stock")),
            ("x-exception-stacktrace", s(SPRING_TRACE)),
            ("x-original-exchange", s("inventory")),
            ("x-original-routingKey", s("inventory.reserve")),
            (
                "x-death",
                deaths(vec![death(
                    1,
                    "rejected",
                    "inventory.reserve",
                    "inventory",
                    "inventory.reserve",
                )]),
            ),
        ]),
        b"{}",
    )
}

fn nservicebus() -> DeadLetter {
    letter(
        "error",
        table(vec![
            (
                "NServiceBus.EnclosedMessageTypes",
                s("Shop.Messages.PlaceOrder, Shop.Messages, Version=1.0.0.0"),
            ),
            (
                "NServiceBus.ExceptionInfo.ExceptionType",
                s("System.InvalidOperationException"),
            ),
            (
                "NServiceBus.ExceptionInfo.Message",
                s("Order 1000 has no lines"),
            ),
            ("NServiceBus.FailedQ", s("Sales@SALES-01")),
            ("NServiceBus.Retries", HeaderValue::I64(2)),
        ]),
        b"{}",
    )
}

fn celery(task: &str) -> DeadLetter {
    let mut dl = letter(
        "work.dlq",
        table(vec![
            ("lang", s("py")),
            ("task", s(task)),
            ("id", s("5a2c8e2a-0000-4000-8000-000000000001")),
            ("retries", HeaderValue::I32(0)),
            (
                "x-death",
                deaths(vec![death(1, "rejected", "work", "", "work")]),
            ),
        ]),
        br#"[[0], {}, {}]"#,
    );
    dl.properties.content_type = Some("application/json".into());
    dl
}

fn dramatiq(actor: &str) -> DeadLetter {
    let body = format!(
        r#"{{"queue_name":"work","actor_name":"{actor}","args":[1],"kwargs":{{}},"options":{{"retries":1,"max_retries":1,"traceback":"Traceback (most recent call last):\n  File \"app.py\", line 9, in {actor}\nValueError: card declined\n"}},"message_id":"m-1","message_timestamp":1759042215000}}"#
    );
    letter("work.XQ", Table::new(), body.as_bytes())
}

fn rascal() -> DeadLetter {
    letter(
        "work.dlq",
        table(vec![
            (
                "rascal",
                HeaderValue::Table(table(vec![
                    (
                        "error",
                        HeaderValue::Table(table(vec![
                            ("message", s("boom")),
                            ("code", s("E_PAYMENT")),
                        ])),
                    ),
                    ("originalExchange", s("")),
                    ("originalQueue", s("work")),
                    ("originalRoutingKey", s("work")),
                ])),
            ),
            (
                "x-death",
                deaths(vec![death(1, "rejected", "work", "", "work")]),
            ),
        ]),
        br#"{"order":0}"#,
    )
}

fn wolverine() -> DeadLetter {
    letter(
        "wolverine-dead-letter-queue",
        table(vec![
            ("message-type", s("Shop.Orders.ShipOrder")),
            ("exception-type", s("System.TimeoutException")),
            ("exception-message", s("timed out after 30000 ms")),
            ("original-destination", s("rabbitmq://queue/orders")),
            ("attempts", HeaderValue::I32(3)),
        ]),
        b"{}",
    )
}

fn rebus() -> DeadLetter {
    letter(
        "error",
        table(vec![
            (
                "rbs2-msg-type",
                s("Shop.Messages.PlaceOrder, Shop.Messages"),
            ),
            (
                "rbs2-error-details",
                s(
                    "5 unhandled exceptions: 2025-09-28 08:50:15 +02:00: System.ApplicationException: Warehouse 7 offline\n   at X",
                ),
            ),
            ("rbs2-source-queue", s("orders")),
        ]),
        b"{}",
    )
}

fn sneakers() -> DeadLetter {
    let info = r#"{"error":"boom","num_attempts":5,"error_class":"Net::ReadTimeout","error_message":"Net::ReadTimeout"}"#;
    letter("mailer-error", table(vec![("retry_info", s(info))]), b"x")
}

fn easynetq() -> DeadLetter {
    let body = r#"{"RoutingKey":"","Exchange":"Shop.Messages.OrderPlaced, Shop.Messages","Queue":"billing","Exception":"System.InvalidOperationException: Invoice 1000 already exists\r\n   at Billing.Handle()","Message":"{}","DateTime":"2025-09-28T06:50:15Z","BasicProperties":{"Type":"Shop.Messages.OrderPlaced, Shop.Messages"}}"#;
    let mut dl = letter(
        "EasyNetQ_Default_Error_Queue",
        Table::new(),
        body.as_bytes(),
    );
    dl.properties.kind = Some("EasyNetQ.SystemMessages.Error, EasyNetQ".into());
    dl
}

/// The app copied its third failure into the DLQ itself: x-death says the wait queue expired it.
fn ladder() -> DeadLetter {
    letter(
        "orders.dlq",
        table(vec![
            ("x-retry-count", HeaderValue::I64(3)),
            ("x-last-error", s("TypeError: bad sku")),
            (
                "x-death",
                deaths(vec![death(3, "expired", "orders.wait", "wait", "orders")]),
            ),
        ]),
        b"{\"order\":17}",
    )
}

fn broker(reason: &str, queue: &str) -> DeadLetter {
    let mut dl = letter(
        "orders.dlq",
        table(vec![(
            "x-death",
            deaths(vec![death(1, reason, queue, "orders", "order.created")]),
        )]),
        b"{}",
    );
    dl.properties.kind = Some("OrderPlaced".into());
    dl
}

fn unknown() -> DeadLetter {
    letter("parking", Table::new(), b"?")
}

/// What each mode names for `dl`: its value ("" when none is recorded) and summary.
fn named(dl: &DeadLetter, by: GroupBy, waits: &WaitQueues) -> (String, String) {
    let k = group_key(by, dl, &explain(dl), waits);
    (k.value, k.summary)
}

fn value(dl: &DeadLetter, by: GroupBy) -> String {
    named(dl, by, &WaitQueues::default()).0
}

/// (label, message, convention, exception, type, origin, reason, endpoint)
type Case = (
    &'static str,
    DeadLetter,
    &'static str,
    &'static str,
    &'static str,
    &'static str,
    &'static str,
    &'static str,
);

#[test]
fn every_convention_names_each_aspect() {
    #[rustfmt::skip]
    let cases: Vec<Case> = vec![
        ("masstransit", masstransit(1), "masstransit",
            "Shop.Shipping.CarrierUnavailableException", "Shop.Contracts:CreateShippingLabel",
            "shipping-label", "", "shipping-label"),
        ("masstransit skipped", masstransit_skipped(), "masstransit",
            "", "Shop.Contracts:CancelShippingLabel", "shipping-label", "", "shipping-label"),
        ("spring", spring(), "spring",
            "com.acme.inventory.OutOfStockException", "", "inventory.reserve", "rejected",
            "inventory.reserve"),
        ("nservicebus", nservicebus(), "nservicebus",
            "System.InvalidOperationException", "Shop.Messages.PlaceOrder", "Sales", "", "Sales"),
        ("celery", celery("app.charge"), "celery",
            "", "app.charge", "work", "rejected", "work"),
        ("dramatiq", dramatiq("charge"), "dramatiq",
            "ValueError", "charge", "work", "", "work"),
        ("rascal", rascal(), "rascal",
            "E_PAYMENT", "", "work", "rejected", "work"),
        ("wolverine", wolverine(), "wolverine",
            "System.TimeoutException", "Shop.Orders.ShipOrder", "orders", "", "orders"),
        ("rebus", rebus(), "rebus",
            "System.ApplicationException", "Shop.Messages.PlaceOrder", "orders", "", "orders"),
        ("sneakers", sneakers(), "sneakers",
            "Net::ReadTimeout", "", "mailer", "", "mailer"),
        ("easynetq", easynetq(), "easynetq",
            "System.InvalidOperationException", "Shop.Messages.OrderPlaced", "billing", "",
            "billing"),
        ("ladder", ladder(), "ladder",
            "TypeError", "", "orders.wait", "expired", "orders.wait"),
        ("broker rejected", broker("rejected", "orders.process"), "broker",
            "", "OrderPlaced", "orders.process", "rejected", "orders.process"),
        ("broker maxlen", broker("maxlen", "orders.process"), "broker",
            "", "OrderPlaced", "orders.process", "maxlen", "orders.process"),
        ("broker delivery_limit", broker("delivery_limit", "invoices"), "broker",
            "", "OrderPlaced", "invoices", "delivery_limit", "invoices"),
        ("broker expired", broker("expired", "orders.wait"), "broker",
            "", "OrderPlaced", "orders.wait", "expired", "orders.wait"),
        ("unknown", unknown(), "unknown", "", "", "", "", ""),
    ];
    for (label, dl, conv, exception, kind, origin, reason, endpoint) in cases {
        let ex = explain(&dl);
        assert_eq!(ex.convention.as_str(), conv, "{label}");
        let got = [
            value(&dl, GroupBy::Exception),
            value(&dl, GroupBy::Type),
            value(&dl, GroupBy::Origin),
            value(&dl, GroupBy::Reason),
            value(&dl, GroupBy::Endpoint),
        ];
        assert_eq!(
            got,
            [exception, kind, origin, reason, endpoint].map(str::to_string),
            "{label}: exception, type, origin, reason, endpoint"
        );
        // The fingerprint mode is the fingerprint, unchanged.
        let fp = group_key(GroupBy::Fingerprint, &dl, &ex, &WaitQueues::default());
        assert_eq!(fp.key, ex.fingerprint.key, "{label}");
        assert_eq!(fp.summary, ex.fingerprint.summary, "{label}");
        for by in GroupBy::ALL {
            let k = group_key(by, &dl, &ex, &WaitQueues::default());
            // The key lists are grouped by is the group's own.
            assert_eq!(
                grouping::key_of(by, &dl, &ex, &WaitQueues::default()),
                k.key.as_str(),
                "{label} {by}"
            );
            assert_eq!(k.key.len(), 16, "{label} {by}");
            assert!(k.key.bytes().all(|b| b.is_ascii_hexdigit()), "{label} {by}");
            assert!(!k.summary.is_empty(), "{label} {by}");
        }
    }
}

#[test]
fn what_is_not_recorded_says_so_per_convention() {
    assert_eq!(
        named(
            &celery("app.charge"),
            GroupBy::Exception,
            &WaitQueues::default()
        )
        .1,
        "no exception type recorded (Celery)"
    );
    assert_eq!(
        named(&masstransit(1), GroupBy::Reason, &WaitQueues::default()).1,
        "not dead-lettered by the broker: republished (MassTransit)"
    );
    assert_eq!(
        named(&unknown(), GroupBy::Endpoint, &WaitQueues::default()).1,
        "no known origin: replay needs --to (unknown)"
    );
    // Two conventions without an exception type are two groups: two different fixes.
    let a = group_key(
        GroupBy::Exception,
        &celery("app.charge"),
        &explain(&celery("app.charge")),
        &WaitQueues::default(),
    );
    let b = group_key(
        GroupBy::Exception,
        &broker("rejected", "orders.process"),
        &explain(&broker("rejected", "orders.process")),
        &WaitQueues::default(),
    );
    assert_ne!(a.key, b.key);
}

#[test]
fn messages_that_differ_only_in_what_varies_share_every_group() {
    let (one, two) = (masstransit(1000), masstransit(2042));
    for by in GroupBy::ALL {
        let a = group_key(by, &one, &explain(&one), &WaitQueues::default());
        let b = group_key(by, &two, &explain(&two), &WaitQueues::default());
        assert_eq!(a.key, b.key, "{by}");
    }
    // Two Celery tasks: one origin, one reason, two types.
    let (charge, refund) = (celery("app.charge"), celery("app.refund"));
    let key = |dl: &DeadLetter, by| group_key(by, dl, &explain(dl), &WaitQueues::default()).key;
    assert_eq!(key(&charge, GroupBy::Origin), key(&refund, GroupBy::Origin));
    assert_eq!(key(&charge, GroupBy::Reason), key(&refund, GroupBy::Reason));
    assert_ne!(key(&charge, GroupBy::Type), key(&refund, GroupBy::Type));
}

#[test]
fn dramatiq_groups_name_the_actor() {
    let (charge, refund) = (dramatiq("charge"), dramatiq("refund"));
    let (a, b) = (explain(&charge), explain(&refund));
    assert_eq!(a.fingerprint.summary, "charge: ValueError: card declined");
    assert_eq!(b.fingerprint.summary, "refund: ValueError: card declined");
    assert_ne!(
        a.fingerprint.key, b.fingerprint.key,
        "the same error in two actors is two failures"
    );
    // By exception they are one group.
    let by_exception = |dl: &DeadLetter, ex: &Explanation| {
        group_key(GroupBy::Exception, dl, ex, &WaitQueues::default()).key
    };
    assert_eq!(by_exception(&charge, &a), by_exception(&refund, &b));
    // No traceback: still grouped by actor, not "no failure record".
    let body = r#"{"queue_name":"work","actor_name":"charge","args":[],"kwargs":{},"options":{"retries":1},"message_id":"m-2","message_timestamp":1}"#;
    let bare = letter("work.XQ", Table::new(), body.as_bytes());
    assert_eq!(
        explain(&bare).fingerprint.summary,
        "charge: no traceback recorded"
    );
}

#[test]
fn the_endpoint_is_past_the_wait_queue() {
    let waits = WaitQueues::from_pairs([("orders.wait".to_string(), "orders".to_string())]);
    let dl = ladder();
    let (v, summary) = named(&dl, GroupBy::Endpoint, &waits);
    assert_eq!(v, "orders");
    assert_eq!(summary, "orders (past the wait queue orders.wait)");
    // The origin stays where the record says it died.
    assert_eq!(named(&dl, GroupBy::Origin, &waits).0, "orders.wait");
    // Resting in one place is one group, however the plan reached it.
    let direct = broker("rejected", "orders");
    let k = |dl: &DeadLetter| group_key(GroupBy::Endpoint, dl, &explain(dl), &waits).key;
    assert_eq!(k(&dl), k(&direct));
}

#[test]
fn a_spring_message_without_a_queue_is_grouped_by_its_exchange() {
    let dl = letter(
        "inventory-errors",
        table(vec![
            ("x-exception-message", s("SKU A-0 is out of stock")),
            ("x-original-exchange", s("inventory")),
            ("x-original-routingKey", s("inventory.reserve")),
        ]),
        b"{}",
    );
    let (v, summary) = named(&dl, GroupBy::Endpoint, &WaitQueues::default());
    assert_eq!(v, "inventory");
    assert_eq!(
        summary,
        "exchange inventory key \"inventory.reserve\" (its bindings decide)"
    );
}

#[test]
fn a_group_is_selected_by_its_key_or_its_value() {
    let messages = [
        broker("rejected", "orders.process"),
        broker("maxlen", "orders.process"),
        celery("app.charge"),
        masstransit(1),
    ];
    let by_reason = |name: &str| {
        let sel = Selection::Group(GroupChoice {
            by: GroupBy::Reason,
            name: name.to_string(),
            waits: WaitQueues::default(),
        });
        messages
            .iter()
            .map(|dl| sel.selects(dl, &explain(dl), "k", None))
            .collect::<Vec<bool>>()
    };
    assert_eq!(by_reason("rejected"), [true, false, true, false]);
    let maxlen = group_key(
        GroupBy::Reason,
        &messages[1],
        &explain(&messages[1]),
        &WaitQueues::default(),
    );
    assert_eq!(by_reason(&maxlen.key), [false, true, false, false]);
    assert_eq!(by_reason("nothing"), [false; 4]);
    // The fingerprint as `--group FINGERPRINT` always meant.
    let fp = explain(&messages[3]).fingerprint.key;
    let sel = Selection::Group(GroupChoice::fingerprint(fp.clone()));
    assert!(sel.selects(&messages[3], &explain(&messages[3]), "k", None));
    assert!(!sel.selects(&messages[0], &explain(&messages[0]), "k", None));
    assert_eq!(sel.describe(), format!("group {fp}"));
}

#[test]
fn partitioned_groups_keep_their_members_in_order() {
    let messages = [
        celery("app.charge"),
        celery("app.refund"),
        celery("app.charge"),
    ];
    let explained: Vec<Explanation> = messages.iter().map(explain).collect();
    let keys = messages
        .iter()
        .zip(&explained)
        .map(|(dl, ex)| grouping::key_of(GroupBy::Type, dl, ex, &WaitQueues::default()));
    let shape: Vec<(String, Vec<usize>)> = grouping::partition(keys)
        .into_iter()
        .map(|(_, m)| {
            let first = &messages[m[0]];
            let k = group_key(
                GroupBy::Type,
                first,
                &explain(first),
                &WaitQueues::default(),
            );
            (k.value, m)
        })
        .collect();
    assert_eq!(
        shape,
        vec![
            ("app.charge".to_string(), vec![0, 2]),
            ("app.refund".to_string(), vec![1])
        ]
    );
}

#[test]
fn a_note_is_gone_with_its_group() {
    let at: Timestamp = "2026-12-01T10:00:00Z".parse().unwrap_or_default();
    let note = |by: GroupBy, dl: &DeadLetter| GroupNote {
        queue: "orders.dlq".into(),
        by,
        key: group_key(by, dl, &explain(dl), &WaitQueues::default()).key,
        text: "carrier outage, replay after 10:00".into(),
        author: "alice".into(),
        at,
    };
    let rejected = broker("rejected", "orders.process");
    let maxlen = broker("maxlen", "orders.process");
    let notes = vec![
        note(GroupBy::Reason, &rejected),
        note(GroupBy::Reason, &maxlen),
        note(GroupBy::Origin, &maxlen),
    ];
    let ex = explain(&rejected);
    let only_rejected = [grouping::Facets::of(&rejected, &ex)];
    let gone = notes_gone(&notes, &only_rejected, &WaitQueues::default());
    // The maxlen group is gone; the origin group lives on in the rejected message.
    assert_eq!(gone, vec![&notes[1]]);
    assert_eq!(notes_gone(&notes, &[], &WaitQueues::default()).len(), 3);
}
