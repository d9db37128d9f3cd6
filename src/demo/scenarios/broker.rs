//! The failures the broker produces itself: a retry ladder, plain rejections (one message
//! hostile), queue and per-message TTL expiry, max-length overflow, a quorum queue's delivery
//! limit and a dead-letter exchange that only a policy sets.

use lapin::ExchangeKind::{Direct, Fanout, Topic};
use serde_json::json;

use super::{
    Binding, Fault, Ladder, Message, Scenario, dead_letters, dl_routing_key, dlx, json_props,
    message_ttl, s, table, work,
};
use crate::domain::discovery::Policy;
use crate::domain::message::Properties;
use crate::domain::value::HeaderValue;

/// TTL of the retry ladder's wait queue: short, so the demo is built in a few seconds.
pub const RETRY_WAIT_TTL_MS: i32 = 200;
/// Attempts the ladder's consumer makes before the last rejection parks the message.
pub const LADDER_ATTEMPTS: usize = 3;

const ORDERS: usize = 5;
const PAYMENTS: usize = 4;
const NOTIFICATIONS: usize = 3;
const NOTIFICATION_TTL_MS: i32 = 250;
const PER_MESSAGE_TTL_MS: &str = "60";
const TELEMETRY: usize = 12;
const TELEMETRY_MAX_LENGTH: usize = 5;
const INVOICES: usize = 3;
const INVOICE_DELIVERY_LIMIT: i64 = 2;
const INVENTORY: usize = 3;

/// Five orders rejected three times each by orders.process, waiting in orders.retry.wait (TTL)
/// between attempts: orders.process → orders.retry → orders.retry.wait → orders →
/// orders.process. Each ends with the x-death of a real ladder:
/// `[{rejected ×3, orders.process}, {expired ×2, orders.retry.wait}]`.
pub fn orders() -> Scenario {
    let messages: Vec<Message> = (0..ORDERS)
        .map(|i| {
            let id = 10_441 + i;
            let body = json!({
                "orderId": id,
                "customerId": format!("C-{}", 2_000 + i * 37),
                "lines": [{"sku": format!("A-{}", 1_000 + i * 11), "quantity": 1 + i % 3}],
                "currency": "EUR",
                "total": 19.9 + i as f64 * 12.5
            });
            let props = json_props(&format!("order-{id}"), Some("OrderPlaced"), "orders-api");
            Message::json("orders", "order.created", props, &body)
                .headers(table([("tenant", s("eu-west"))]))
        })
        .collect();
    Scenario {
        exchanges: vec![("orders", Topic), ("orders.retry", Topic)],
        queues: vec![
            dead_letters(
                "orders.dlq",
                messages.len(),
                "broker: rejected 3 times by orders.process, retried through orders.retry.wait (TTL)",
            ),
            work("orders.process", 0, "the ladder's work queue").with([dlx("orders.retry")]),
            work("orders.retry.wait", 0, "the ladder's wait queue")
                .with([dlx("orders"), message_ttl(RETRY_WAIT_TTL_MS)]),
        ],
        bindings: vec![
            Binding::queue("orders.process", "orders", "order.#"),
            Binding::queue("orders.retry.wait", "orders.retry", "#"),
        ],
        messages,
        fault: Fault::RetryLadder(Ladder {
            work: "orders.process",
            retry: "orders.retry",
            key: "#",
            wait: "orders.retry.wait",
            dlq: "orders.dlq",
            attempts: LADDER_ATTEMPTS,
        }),
        ..Scenario::default()
    }
}

/// Four payments rejected once through a fanout dead-letter exchange, and one hostile message:
/// escape sequences (colour, window title, clear screen), a bidi override, header bytes that
/// are not UTF-8 and a binary body. A terminal tool must show these, not obey them.
pub fn payments() -> Scenario {
    let mut messages: Vec<Message> = (0..PAYMENTS)
        .map(|i| {
            let id = 88_210 + i * 7;
            let body = json!({
                "paymentId": format!("pay_{id}"),
                "orderId": 10_441 + i,
                "amount": 49.5 + i as f64,
                "card": {"brand": "visa", "last4": format!("{:04}", 4_242 + i)}
            });
            let props = json_props(&format!("pay_{id}"), Some("CapturePayment"), "checkout");
            Message::json("payments", "payment.capture", props, &body)
        })
        .collect();
    let mut body: Vec<u8> = b"\x89PNG\r\n\x1a\n\x1b[31m".to_vec();
    body.extend((0..=255u8).rev());
    messages.push(Message {
        exchange: "payments",
        routing_key: "payment.capture".into(),
        properties: Properties {
            content_type: Some("application/octet-stream".into()),
            delivery_mode: Some(2),
            message_id: Some("pay_hostile".into()),
            correlation_id: Some("corr-\u{1b}[1mbold\u{1b}[0m".into()),
            app_id: Some("checkout".into()),
            ..Properties::default()
        },
        headers: table([
            (
                "note",
                s("\u{1b}[31mURGENT\u{1b}[0m refund approved \u{1b}]0;pwned\u{07}\u{1b}[2J\u{1b}[H"),
            ),
            ("customer", s("Mallory \u{202e}fdp.exe\u{202c} (bidi override)")),
            (
                "legacy-ref",
                HeaderValue::LongString(b"ref-\xc3\x28\xff\xfe\x00!".to_vec()),
            ),
            ("note\u{1b}[7m-name", s("a header whose name holds an escape")),
        ]),
        body,
    });
    Scenario {
        exchanges: vec![("payments", Direct), ("payments.dlx", Fanout)],
        queues: vec![
            dead_letters(
                "payments.dlq",
                messages.len(),
                "broker: rejected by payments.process (one message is hostile: escapes, bidi, bytes)",
            ),
            work("payments.process", 0, "work queue").with([dlx("payments.dlx")]),
        ],
        bindings: vec![
            Binding::queue("payments.process", "payments", "payment.capture"),
            Binding::queue("payments.dlq", "payments.dlx", ""),
        ],
        messages,
        fault: Fault::Rejected {
            queue: "payments.process",
        },
        ..Scenario::default()
    }
}

/// Three notifications the queue's TTL expires, and before them one with a shorter per-message
/// TTL (the broker strips `expiration` and records it as `original-expiration`). It goes first
/// because a classic queue expires messages at its head.
pub fn notifications() -> Scenario {
    let mail = |i: usize| {
        let body = json!({
            "to": format!("customer{}@example.com", 100 + i),
            "template": "order-confirmation",
            "orderId": 10_441 + i
        });
        let props = json_props(
            &format!("mail-{}", 10_440 + i),
            Some("SendEmail"),
            "notifier",
        );
        Message::json("", "notifications.email", props, &body)
    };
    let mut short_lived = mail(0);
    short_lived.properties.expiration = Some(PER_MESSAGE_TTL_MS.into());
    let messages: Vec<Message> = std::iter::once(short_lived)
        .chain((1..=NOTIFICATIONS).map(mail))
        .collect();
    Scenario {
        queues: vec![
            dead_letters(
                "notifications.dlq",
                messages.len(),
                "broker: expired in notifications.email (queue TTL; one per-message TTL)",
            ),
            work("notifications.email", 0, "work queue with a message TTL").with([
                dlx(""),
                dl_routing_key("notifications.dlq"),
                message_ttl(NOTIFICATION_TTL_MS),
            ]),
        ],
        messages,
        ..Scenario::default()
    }
}

/// Twelve readings into a queue that keeps five: the seven oldest are dead-lettered (maxlen).
pub fn telemetry() -> Scenario {
    let messages: Vec<Message> = (0..TELEMETRY)
        .map(|i| {
            let body = json!({"sensor": format!("dock-{}", i % 3), "seq": i, "celsius": 4.0 + i as f64 * 0.1});
            let props = json_props(&format!("reading-{i}"), Some("Reading"), "sensors");
            Message::json("", "telemetry.ingest", props, &body)
        })
        .collect();
    Scenario {
        queues: vec![
            dead_letters(
                "telemetry.dlq",
                TELEMETRY - TELEMETRY_MAX_LENGTH,
                "broker: pushed out of telemetry.ingest by its max-length (drop-head)",
            ),
            work(
                "telemetry.ingest",
                TELEMETRY_MAX_LENGTH,
                "keeps its newest messages up to max-length",
            )
            .with([
                dlx(""),
                dl_routing_key("telemetry.dlq"),
                (
                    "x-max-length",
                    HeaderValue::I32(TELEMETRY_MAX_LENGTH as i32),
                ),
                ("x-overflow", s("drop-head")),
            ]),
        ],
        messages,
        ..Scenario::default()
    }
}

/// Three invoices a consumer keeps handing back until the quorum queue's delivery limit
/// dead-letters them into a quorum DLQ.
pub fn invoices() -> Scenario {
    let messages: Vec<Message> = (0..INVOICES)
        .map(|i| {
            let body = json!({"invoice": format!("INV-2025-{:05}", 311 + i), "orderId": 10_441 + i, "pdf": true});
            let props = json_props(&format!("inv-{}", 311 + i), Some("RenderInvoice"), "billing");
            Message::json("", "invoices.process", props, &body)
        })
        .collect();
    Scenario {
        queues: vec![
            dead_letters(
                "invoices.dlq",
                messages.len(),
                "broker: delivery limit of quorum queue invoices.process reached",
            )
            .quorum(),
            work("invoices.process", 0, "quorum work queue")
                .quorum()
                .with([
                    dlx(""),
                    dl_routing_key("invoices.dlq"),
                    ("x-delivery-limit", HeaderValue::I64(INVOICE_DELIVERY_LIMIT)),
                ]),
        ],
        messages,
        fault: Fault::DeliveryLimit {
            queue: "invoices.process",
            dlq: "invoices.dlq",
        },
        ..Scenario::default()
    }
}

/// Three stock updates rejected by `inventory`, whose dead-letter exchange only a policy sets.
pub fn inventory() -> Scenario {
    let messages: Vec<Message> = (0..INVENTORY)
        .map(|i| {
            let body = json!({"sku": format!("A-{}", 1_042 + i), "warehouse": "AMS-1", "delta": -(i as i64) - 1});
            let props = json_props(&format!("stock-{}", 5_001 + i), Some("StockAdjusted"), "wms");
            Message::json("", "inventory", props, &body)
        })
        .collect();
    let mut definition = serde_json::Map::new();
    definition.insert("dead-letter-exchange".into(), json!("inventory.dlx"));
    Scenario {
        exchanges: vec![("inventory.dlx", Fanout)],
        queues: vec![
            dead_letters(
                "inventory.dlq",
                messages.len(),
                "broker: rejected by inventory, dead-letter exchange set by a policy",
            ),
            work("inventory", 0, "work queue"),
        ],
        bindings: vec![Binding::queue("inventory.dlq", "inventory.dlx", "")],
        policies: vec![Policy {
            name: "inventory-dead-letters".into(),
            pattern: "^inventory$".into(),
            apply_to: "queues".into(),
            priority: 0,
            definition,
        }],
        messages,
        fault: Fault::Rejected { queue: "inventory" },
    }
}
