//! Wolverine: the `exception-*` headers, in `wolverine-dead-letter-queue` or the endpoint's own.

use super::framework::{BASE, Counter, Framework, Letter, Named, Replay, Role, Rule, after};
use super::{Convention, Fault, Reading, last_path_segment, parse_time, text};

pub(crate) const FRAMEWORK: Framework = Framework {
    convention: Convention::Wolverine,
    name: "wolverine",
    label: "Wolverine",
    detect: |l| {
        l.dl.headers.contains_key("exception-type") || l.dl.queue == "wolverine-dead-letter-queue"
    },
    read,
    queue_name: |name| {
        (name == "wolverine-dead-letter-queue").then_some(Named {
            role: Role::DeadLetter,
            specific: true,
        })
    },
    retries_phrase: |_, r| r.retries.map(|n| after(n, "attempt", "attempts")),
    replay: Replay {
        strips: &[
            Rule::Prefix("exception-"),
            Rule::Exact("failed-at"),
            Rule::Prefix("original-"),
            Rule::Exact("attempts"),
        ],
        counters: &[Counter::Header("attempts")],
        ..BASE.replay
    },
    ..BASE
};

fn read(l: &Letter<'_>) -> Reading {
    let h = &l.dl.headers;
    let mut r = Reading::empty(Convention::Wolverine);
    let exception_type = text(h, "exception-type");
    let message = text(h, "exception-message");
    if exception_type.is_some() || message.is_some() {
        r.fault = Some(Fault {
            exception_type,
            message,
            stack_trace: text(h, "exception-stack"),
            consumer: None,
            message_type: text(h, "message-type"),
            inner_exception_type: None,
            host: None,
        });
    }
    // A Wolverine destination is a URI such as rabbitmq://queue/orders.
    r.source.queue = text(h, "original-destination").map(|d| {
        if d.contains("://") {
            last_path_segment(&d).unwrap_or(d)
        } else {
            d
        }
    });
    r.retries = h.get_i64("attempts");
    r.failed_at = h.get("failed-at").and_then(parse_time);
    r
}
