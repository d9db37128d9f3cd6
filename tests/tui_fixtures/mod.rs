//! Fixtures shared by the TUI tests: dead letters as each convention writes them (header names
//! per frameworks.md), a discovered vhost, and a State with a fixed clock.
#![allow(dead_code)]

use jiff::Timestamp;
use ratatui::crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
use warren::domain::discovery::{
    Convention, Discovery, DlqInfo, DlqKind, QueueSummary, QueueType, RetryLoop,
};
use warren::domain::message::{DeadLetter, Delivery, Properties};
use warren::domain::value::{HeaderValue, Table};
use warren::tui::event::{Event, Overview, Reach, Report};
use warren::tui::{State, Theme, update};

/// 2025-09-28 12:24:15 UTC: 2h 14m after the orders ladder's first rejection.
pub const NOW: i64 = 1_759_042_215 + 2 * 3600 + 14 * 60;

pub fn now() -> Timestamp {
    Timestamp::from_second(NOW).unwrap()
}

pub fn s(v: &str) -> HeaderValue {
    HeaderValue::string(v)
}

fn table(pairs: Vec<(&str, HeaderValue)>) -> Table {
    pairs.into_iter().map(|(k, v)| (k.to_string(), v)).collect()
}

fn json_props(id: &str) -> Properties {
    Properties {
        content_type: Some("application/json".into()),
        delivery_mode: Some(2),
        message_id: Some(id.into()),
        ..Default::default()
    }
}

fn body(b: &[u8]) -> (Vec<u8>, u64) {
    (b.to_vec(), b.len() as u64)
}

/// The seed's orders.process retry ladder: rejected 3× in orders.process, expired 2× in
/// orders.retry.wait, now in orders.dlq.
pub fn broker_ladder(n: u64) -> DeadLetter {
    let id = format!("order-{}", 1000 + n);
    let (body, body_size) =
        body(format!(r#"{{"orderId":{},"sku":"A-0","qty":1}}"#, 1000 + n).as_bytes());
    DeadLetter {
        queue: "orders.dlq".into(),
        position: n,
        properties: json_props(&id),
        headers: table(vec![
            ("tenant", s("acme")),
            (
                "x-death",
                HeaderValue::Array(vec![
                    HeaderValue::Table(table(vec![
                        ("count", HeaderValue::I64(3)),
                        ("reason", s("rejected")),
                        ("queue", s("orders.process")),
                        ("time", HeaderValue::Timestamp(1_759_042_215)),
                        ("exchange", s("orders")),
                        ("routing-keys", HeaderValue::Array(vec![s("order.created")])),
                    ])),
                    HeaderValue::Table(table(vec![
                        ("count", HeaderValue::I64(2)),
                        ("reason", s("expired")),
                        ("queue", s("orders.retry.wait")),
                        ("time", HeaderValue::Timestamp(1_759_042_275)),
                        ("exchange", s("orders.retry")),
                        ("routing-keys", HeaderValue::Array(vec![s("order.created")])),
                    ])),
                ]),
            ),
            ("x-first-death-exchange", s("orders")),
            ("x-first-death-queue", s("orders.process")),
            ("x-first-death-reason", s("rejected")),
        ]),
        body,
        body_size,
        delivery: Delivery {
            exchange: "orders.dlx".into(),
            routing_key: "order.created".into(),
            ..Default::default()
        },
    }
}

/// A message that expired in the wait queue and went to the DLQ (a different failure group).
pub fn broker_expired(n: u64) -> DeadLetter {
    let mut dl = broker_ladder(n);
    dl.properties.message_id = Some(format!("order-exp-{n}"));
    dl.headers = table(vec![
        (
            "x-death",
            HeaderValue::Array(vec![HeaderValue::Table(table(vec![
                ("count", HeaderValue::I64(1)),
                ("reason", s("expired")),
                ("queue", s("orders.retry.wait")),
                ("time", HeaderValue::Timestamp(1_759_047_435)),
                ("exchange", s("orders.retry")),
                ("routing-keys", HeaderValue::Array(vec![s("order.created")])),
                ("original-expiration", s("60000")),
            ]))]),
        ),
        ("x-first-death-exchange", s("orders.retry")),
        ("x-first-death-queue", s("orders.retry.wait")),
        ("x-first-death-reason", s("expired")),
    ]);
    dl
}

pub fn masstransit() -> DeadLetter {
    let (body, body_size) = body(
        br#"{"messageId":"0b5e0000-5d4c-0015-3c1a-08dd00000001","messageType":["urn:message:Shipping:CreateLabel"],"message":{"orderId":1000,"carrier":"DHL"}}"#,
    );
    DeadLetter {
        queue: "shipping-label_error".into(),
        position: 0,
        properties: Properties {
            content_type: Some("application/vnd.masstransit+json".into()),
            message_id: Some("0b5e0000-5d4c-0015-3c1a-08dd00000001".into()),
            delivery_mode: Some(2),
            ..Default::default()
        },
        headers: table(vec![
            ("MT-Reason", s("fault")),
            (
                "MT-Fault-ExceptionType",
                s("System.InvalidOperationException"),
            ),
            (
                "MT-Fault-Message",
                s("Carrier DHL unavailable for order 1000"),
            ),
            (
                "MT-Fault-StackTrace",
                s(
                    "   at Shipping.CreateLabelConsumer.Consume(ConsumeContext`1 context) in /src/CreateLabelConsumer.cs:line 42\n   at MassTransit.DependencyInjection.ScopeConsumerFactory`1.Send[TMessage](ConsumeContext`1 context)\n   at MassTransit.Middleware.ConsumerMessageFilter`2.Send(ConsumeContext`1 context)",
                ),
            ),
            ("MT-Fault-Timestamp", s("2025-09-28T10:10:15.123Z")),
            (
                "MT-Fault-InputAddress",
                s("rabbitmq://localhost/shipping-label"),
            ),
            ("MT-Fault-ConsumerType", s("Shipping.CreateLabelConsumer")),
            ("MT-Fault-MessageType", s("Shipping.CreateLabel")),
            ("MT-Fault-RetryCount", HeaderValue::I32(3)),
            ("MT-Host-MachineName", s("worker-7")),
        ]),
        body,
        body_size,
        delivery: Delivery {
            exchange: "shipping-label_error".into(),
            ..Default::default()
        },
    }
}

pub fn spring() -> DeadLetter {
    let (body, body_size) = body(br#"{"sku":"A-0","qty":5}"#);
    DeadLetter {
        queue: "inventory.reserve.dlq".into(),
        position: 0,
        properties: json_props("inv-77"),
        headers: table(vec![
            (
                "x-exception-message",
                s("Listener method threw exception: insufficient stock for A-0"),
            ),
            (
                "x-exception-stacktrace",
                s(
                    "org.springframework.amqp.rabbit.support.ListenerExecutionFailedException: Listener method threw exception\n\tat org.springframework.amqp.rabbit.listener.AbstractMessageListenerContainer.wrapToListenerExecutionFailedExceptionIfNeeded(AbstractMessageListenerContainer.java:1786)\nCaused by: com.acme.inventory.OutOfStockException: insufficient stock for A-0\n\tat com.acme.inventory.ReserveListener.onMessage(ReserveListener.java:31)",
                ),
            ),
            ("x-original-exchange", s("inventory")),
            ("x-original-routingKey", s("inventory.reserve")),
            ("retry-count", HeaderValue::I32(3)),
        ]),
        body,
        body_size,
        delivery: Delivery {
            exchange: "DLX".into(),
            routing_key: "error.inventory.reserve".into(),
            ..Default::default()
        },
    }
}

pub fn nservicebus() -> DeadLetter {
    let (body, body_size) = body(br#"{"InvoiceId":"INV-9","Amount":120.5}"#);
    DeadLetter {
        queue: "error".into(),
        position: 0,
        properties: json_props("7d2e0000-0000-0000-0000-00000000009a"),
        headers: table(vec![
            (
                "NServiceBus.MessageId",
                s("7d2e0000-0000-0000-0000-00000000009a"),
            ),
            ("NServiceBus.FailedQ", s("Billing@WORKER-3")),
            (
                "NServiceBus.ExceptionInfo.ExceptionType",
                s("System.TimeoutException"),
            ),
            (
                "NServiceBus.ExceptionInfo.Message",
                s("The payment gateway did not answer within 30s"),
            ),
            (
                "NServiceBus.ExceptionInfo.StackTrace",
                s(
                    "System.TimeoutException: The payment gateway did not answer within 30s\n   at Billing.ChargeHandler.Handle(ChargeCard message, IMessageHandlerContext context)",
                ),
            ),
            (
                "NServiceBus.TimeOfFailure",
                s("2025-09-28 11:02:03:456789 Z"),
            ),
            ("NServiceBus.ProcessingEndpoint", s("Billing")),
            (
                "NServiceBus.EnclosedMessageTypes",
                s("Billing.Messages.ChargeCard, Billing.Messages"),
            ),
        ]),
        body,
        body_size,
        delivery: Delivery {
            exchange: "error".into(),
            ..Default::default()
        },
    }
}

/// Escape sequences everywhere a broker string can reach the screen.
pub fn hostile() -> DeadLetter {
    let mut b =
        b"{\"note\":\"ok\"} \x1b[31mRED\x1b[0m bell\x07 bidi\xe2\x80\xaegnp.exe c1:".to_vec();
    b.push(0x9b);
    b.extend_from_slice(b"2J end");
    let body_size = b.len() as u64;
    DeadLetter {
        queue: "orders.dlq".into(),
        position: 3,
        properties: Properties {
            content_type: Some("text/plain\x1b]0;pwned\x07".into()),
            message_id: Some("evil\x1b[2J\u{202e}1".into()),
            ..Default::default()
        },
        headers: table(vec![
            (
                "x-exception-message",
                s("boom \x1b[31mred\x1b[0m \u{202e}reversed\u{7} \u{9b}31m"),
            ),
            ("x-original-exchange", s("orders")),
            ("x-original-routingKey", s("order.created")),
            ("evil\x1b[1mname", s("value with BEL\x07 and ESC\x1b[5m")),
            (
                "raw",
                HeaderValue::LongString(vec![b'a', 0x9b, b'b', 0x1b, b'c']),
            ),
        ]),
        body: b,
        body_size,
        delivery: Delivery::default(),
    }
}

/// The vhost the fixtures' queues live in (as the worker names it on each queue).
pub const VHOST: &str = "/orders";

fn dlq(name: &str, kind: DlqKind, convention: Convention, depth: u64, feeders: &[&str]) -> DlqInfo {
    DlqInfo {
        context: String::new(),
        vhost: VHOST.into(),
        name: name.into(),
        kind,
        convention,
        depth: Some(depth),
        messages_ready: Some(depth),
        messages_unacknowledged: Some(0),
        consumers: Some(0),
        queue_type: QueueType::Classic,
        feeders: feeders.iter().map(|f| f.to_string()).collect(),
        feeders_uncertain: false,
        by_topology: !feeders.is_empty(),
        by_name: true,
        guessed: false,
        delivery_limit: None,
        delivery_limit_arg: None,
        dead_letter_exchange: None,
    }
}

pub fn discovery() -> Discovery {
    let mut invoices = dlq(
        "invoices.dlq",
        DlqKind::DeadLetter,
        Convention::Broker,
        2,
        &["invoices"],
    );
    invoices.queue_type = QueueType::Quorum;
    invoices.delivery_limit = Some(20);
    Discovery {
        dead_letter_queues: vec![
            dlq(
                "orders.dlq",
                DlqKind::DeadLetter,
                Convention::Broker,
                412,
                &["orders.process"],
            ),
            dlq(
                "payments.dlq",
                DlqKind::DeadLetter,
                Convention::Broker,
                5,
                &["payments"],
            ),
            dlq(
                "shipping-label_error",
                DlqKind::Error,
                Convention::MassTransit,
                7,
                &[],
            ),
            dlq(
                "shipping-label_skipped",
                DlqKind::Skipped,
                Convention::MassTransit,
                1,
                &[],
            ),
            dlq(
                "inventory.reserve.dlq",
                DlqKind::DeadLetter,
                Convention::Spring,
                3,
                &["inventory.reserve"],
            ),
            dlq("error", DlqKind::Error, Convention::NServiceBus, 1, &[]),
            invoices,
            dlq(
                "notifications.dlq",
                DlqKind::DeadLetter,
                Convention::Broker,
                0,
                &["notifications"],
            ),
        ],
        retry_loops: vec![RetryLoop {
            vhost: VHOST.into(),
            work_queue: "orders.process".into(),
            wait_queue: "orders.retry.wait".into(),
            ttl_ms: 60_000,
        }],
        other_queues: vec![
            QueueSummary {
                vhost: VHOST.into(),
                name: "orders.process".into(),
                queue_type: QueueType::Classic,
                depth: Some(12),
                consumers: Some(2),
                dead_letter_exchange: Some("orders.retry".into()),
            },
            QueueSummary {
                vhost: VHOST.into(),
                name: "orders.retry.wait".into(),
                queue_type: QueueType::Classic,
                depth: Some(0),
                consumers: Some(0),
                dead_letter_exchange: Some("orders".into()),
            },
        ],
        stuck: Vec::new(),
    }
}

pub fn overview() -> Overview {
    Overview {
        context: "prod-eu".into(),
        broker_version: "4.0.5".into(),
        user: "ops".into(),
        tags: vec!["management".into()],
        vhost: VHOST.into(),
        read_only: false,
        read_only_reason: String::new(),
        color: None,
        label: None,
        contexts: Vec::new(),
        snapshot: false,
        archive_question: None,
    }
}

pub fn key(code: KeyCode) -> Event {
    Event::Key(KeyEvent::new(code, KeyModifiers::NONE))
}

pub fn ch(c: char) -> Event {
    key(KeyCode::Char(c))
}

pub fn ctrl(c: char) -> Event {
    Event::Key(KeyEvent::new(KeyCode::Char(c), KeyModifiers::CONTROL))
}

/// A state with queues loaded.
pub fn loaded(read_only: bool, theme: Theme) -> State {
    let mut st = State::new(now(), read_only, theme);
    update(
        &mut st,
        Report::QueuesLoaded {
            overview: overview(),
            discovery: discovery(),
            ticket: Default::default(),
        },
    );
    st
}

/// A state with `messages` browsed from `queue`, focus on the message list.
pub fn browsed(read_only: bool, queue: &str, messages: Vec<DeadLetter>) -> State {
    let mut st = loaded(read_only, Theme::color());
    let idx = st
        .queue_rows()
        .iter()
        .position(|r| r.name() == queue)
        .unwrap_or(0);
    st.queues.cursor = idx;
    update(&mut st, key(KeyCode::Enter));
    let first_seen = messages
        .iter()
        .map(|_| Some(Timestamp::from_second(NOW - 3600).unwrap()))
        .collect();
    update(
        &mut st,
        Report::MessagesLoaded {
            vhost: VHOST.into(),
            queue: queue.into(),
            messages: packed(messages),
            first_seen,
            replays: vec![],
            authors: Default::default(),
            stop: "end of queue".into(),
            ticket: Default::default(),
        },
    );
    st
}

/// The worker's page of `messages` read from `queue`, none seen before.
pub fn messages_loaded(queue: &str, messages: Vec<DeadLetter>) -> Report {
    Report::MessagesLoaded {
        vhost: VHOST.into(),
        queue: queue.into(),
        first_seen: vec![None; messages.len()],
        messages: packed(messages),
        replays: vec![],
        authors: Default::default(),
        stop: "end of queue".into(),
        ticket: Default::default(),
    }
}

/// Messages as the worker hands them to the TUI.
pub fn packed(messages: Vec<DeadLetter>) -> Vec<warren::domain::packed::Packed> {
    messages.into_iter().map(Into::into).collect()
}

/// The orders.dlq mix: ladders, one expired.
pub fn orders_messages() -> Vec<DeadLetter> {
    let mut v: Vec<DeadLetter> = (0..5).map(broker_ladder).collect();
    v.push(broker_expired(5));
    v
}

/// The MassTransit fault with a gzip-compressed JSON body of 40 order lines (`content_encoding`
/// gzip): the pager's body, its search (every line holds "sku") and its stack trace.
pub fn gzipped_order() -> DeadLetter {
    use std::io::Write as _;
    let lines: Vec<String> = (0..40)
        .map(|i| format!(r#"{{"sku":"SKU-{i:03}","qty":{}}}"#, i % 5 + 1))
        .collect();
    let json = format!(r#"{{"orderId":1000,"lines":[{}]}}"#, lines.join(","));
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    gz.write_all(json.as_bytes()).unwrap();
    let packed = gz.finish().unwrap();
    let mut dl = masstransit();
    dl.properties.content_type = Some("application/json".into());
    dl.properties.content_encoding = Some("gzip".into());
    dl.body_size = packed.len() as u64;
    dl.body = packed;
    dl
}

/// `d` with the archive stream `warren.archive` among its queues, marked as the archive (as the
/// worker marks it).
pub fn with_archive(mut d: Discovery) -> Discovery {
    use warren::domain::discovery::{QueueSummary, QueueType};
    d.other_queues.push(QueueSummary {
        vhost: VHOST.into(),
        name: "warren.archive".into(),
        queue_type: QueueType::Stream,
        depth: Some(3),
        consumers: Some(0),
        dead_letter_exchange: None,
    });
    d.mark_archive("warren.archive");
    d
}

/// The archive listed with the DLQs, opened, holding `orders_messages`.
pub fn in_the_archive(read_only: bool) -> State {
    let mut st = State::new(now(), read_only, Theme::color());
    update(
        &mut st,
        Report::QueuesLoaded {
            overview: overview(),
            discovery: with_archive(discovery()),
            ticket: Default::default(),
        },
    );
    st.queues.cursor = st
        .queue_rows()
        .iter()
        .position(|r| r.name() == "warren.archive")
        .expect("the archive is in the queue list");
    let cmds = update(&mut st, key(KeyCode::Enter));
    assert!(
        matches!(cmds.as_slice(), [warren::tui::Command::Browse { queue, .. }] if queue == "warren.archive"),
        "opening it browses it: {cmds:?}"
    );
    update(
        &mut st,
        Report::MessagesLoaded {
            vhost: VHOST.into(),
            queue: "warren.archive".into(),
            messages: packed(orders_messages()),
            first_seen: vec![],
            replays: vec![],
            authors: Default::default(),
            stop: "end of queue".into(),
            ticket: Default::default(),
        },
    );
    st
}

/// The fixtures' discovery as the worker sends it for every vhost (`:vhost *`): the `/orders`
/// queues, and a second vhost `billing` holding an `orders.dlq` of its own (deeper, growing
/// nowhere) and an `invoices.dlq`.
pub fn every_vhost_discovery() -> Discovery {
    let mut d = discovery();
    let mut billing = Discovery {
        dead_letter_queues: vec![
            dlq(
                "orders.dlq",
                DlqKind::DeadLetter,
                Convention::Broker,
                900,
                &["orders.process"],
            ),
            dlq(
                "invoices.dlq",
                DlqKind::DeadLetter,
                Convention::Broker,
                4,
                &["invoices"],
            ),
        ],
        retry_loops: Vec::new(),
        other_queues: Vec::new(),
        stuck: Vec::new(),
    };
    billing.set_vhost("billing");
    d.dead_letter_queues.extend(billing.dead_letter_queues);
    d
}

/// The overview of a scope of every vhost.
pub fn every_vhost_overview() -> Overview {
    Overview {
        vhost: "*".into(),
        ..overview()
    }
}

/// A state with every vhost's queues loaded.
pub fn loaded_every_vhost(theme: Theme) -> State {
    loaded_with(theme, every_vhost_overview(), every_vhost_discovery())
}

/// What the worker sends for every context at once (`:ctx *`): `prod-eu` (the fixtures'
/// `/orders` queues), `staging` (read-only, on 4.3, an `orders.dlq` of its own in `/orders` too,
/// and `invoices.dlq` in `billing`, which is not its own vhost), and `gone`, unreached.
pub fn every_context_discovery() -> Discovery {
    let mut prod = discovery();
    prod.other_queues.clear();
    prod.retry_loops.clear();
    prod.set_context("prod-eu");
    let mut staging = Discovery {
        dead_letter_queues: vec![dlq(
            "orders.dlq",
            DlqKind::DeadLetter,
            Convention::Broker,
            900,
            &["orders.process"],
        )],
        retry_loops: Vec::new(),
        other_queues: Vec::new(),
        stuck: Vec::new(),
    };
    let mut billing = Discovery {
        dead_letter_queues: vec![dlq(
            "invoices.dlq",
            DlqKind::DeadLetter,
            Convention::Broker,
            4,
            &["invoices"],
        )],
        retry_loops: Vec::new(),
        other_queues: Vec::new(),
        stuck: Vec::new(),
    };
    billing.set_vhost("billing");
    staging
        .dead_letter_queues
        .extend(billing.dead_letter_queues);
    staging.set_context("staging");
    Discovery::merged(vec![prod, staging])
}

/// The reason the fixtures' `gone` context is not listed.
pub const GONE_WHY: &str = "connection refused (127.0.0.1:9)";

/// The overview of every context at once, as the worker sends it.
pub fn every_context_overview() -> Overview {
    Overview {
        context: "*".into(),
        vhost: String::new(),
        read_only: true,
        read_only_reason: "every context at once is for looking".into(),
        contexts: vec![
            Reach {
                context: "gone".into(),
                unreached: Some(GONE_WHY.into()),
                ..Reach::default()
            },
            Reach {
                context: "prod-eu".into(),
                label: None,
                vhost: VHOST.into(),
                broker_version: "4.0.5".into(),
                read_only: false,
                unreached: None,
            },
            Reach {
                context: "staging".into(),
                // Its rows show the label, not the name.
                label: Some("STG".into()),
                vhost: VHOST.into(),
                broker_version: "4.3.0".into(),
                read_only: true,
                unreached: None,
            },
        ],
        ..Overview::default()
    }
}

/// A state with every context's queues loaded.
pub fn loaded_every_context(theme: Theme) -> State {
    loaded_with(theme, every_context_overview(), every_context_discovery())
}

/// A state with this listing loaded.
fn loaded_with(theme: Theme, overview: Overview, discovery: Discovery) -> State {
    let mut st = State::new(now(), false, theme);
    update(
        &mut st,
        Report::QueuesLoaded {
            overview,
            discovery,
            ticket: Default::default(),
        },
    );
    st
}

/// The fixtures' queue `name`, by its identity (its vhost and name).
pub fn at(name: &str) -> warren::domain::discovery::QueueRef {
    warren::domain::discovery::QueueRef::new(VHOST, name)
}

/// `d` with `payments.work`, an at-least-once quorum queue holding 3 dead letters its
/// dead-letter exchange routes nowhere (as the worker lists it: also among the ordinary queues).
pub fn with_stuck(mut d: Discovery) -> Discovery {
    use warren::domain::discovery::stuck::{Stuck, Why};
    d.other_queues.push(QueueSummary {
        vhost: VHOST.into(),
        name: "payments.work".into(),
        queue_type: QueueType::Quorum,
        depth: Some(5),
        consumers: Some(1),
        dead_letter_exchange: Some("payments.dlx".into()),
    });
    d.stuck.push(Stuck {
        context: String::new(),
        vhost: VHOST.into(),
        queue: "payments.work".into(),
        count: 3,
        depth: Some(5),
        dead_letter_exchange: "payments.dlx".into(),
        why: Why::NoRoute { routing_key: None },
    });
    d
}

/// The fixtures' listing with the stuck `payments.work` (see [`with_stuck`]).
pub fn loaded_with_stuck(theme: Theme) -> State {
    loaded_with(theme, overview(), with_stuck(discovery()))
}

/// The screen `view` draws for `state` at `w`×`h`.
pub fn render(state: &State, w: u16, h: u16) -> ratatui::buffer::Buffer {
    let mut terminal =
        ratatui::Terminal::new(ratatui::backend::TestBackend::new(w, h)).expect("a test terminal");
    terminal
        .draw(|f| warren::tui::view(state, f))
        .expect("drawn");
    terminal.backend().buffer().clone()
}

/// A screen's text, a line per row, trailing blanks cut.
pub fn text(buf: &ratatui::buffer::Buffer) -> String {
    let area = buf.area;
    let mut out = String::new();
    for y in 0..area.height {
        let mut line = String::new();
        for x in 0..area.width {
            line.push_str(buf[(x, y)].symbol());
        }
        out.push_str(line.trim_end());
        out.push('\n');
    }
    out
}
