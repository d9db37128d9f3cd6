//! Sneakers' Maxretry handler: `retry_info` (JSON) on a message in `<queue>-error`; back through
//! the `<queue>-retry-requeue` exchange it binds to the queue.

use serde_json::Value;

use super::framework::{
    BASE, Counter, Framework, Letter, Named, Replay, Role, Rule, Told, after, has_stem,
};
use super::{Convention, Fault, Reading, parse_time, text};
use crate::domain::json::table_from_json;
use crate::domain::target::{ReplayTarget, ReplayWarning};
use crate::domain::value::{HeaderValue, Table};
use crate::domain::xdeath::value_text;

pub(crate) const FRAMEWORK: Framework = Framework {
    convention: Convention::Sneakers,
    name: "sneakers",
    label: "Sneakers",
    detect: |l| l.dl.headers.contains_key("retry_info"),
    read,
    queue_name: |name| {
        has_stem(name, "-error").then_some(Named {
            role: Role::Error,
            specific: true,
        })
    },
    retries_phrase: |_, r| r.retries.map(|n| after(n, "attempt", "attempts")),
    replay: Replay {
        strips: &[Rule::Exact("retry_info")],
        counters: &[Counter::Header("retry_info")],
        target,
        ..BASE.replay
    },
    ..BASE
};

fn read(l: &Letter<'_>) -> Reading {
    let dl = l.dl;
    let mut r = Reading::empty(Convention::Sneakers);
    // retry_info is JSON text as Sneakers writes it; accept a table too.
    let info = match dl.headers.get("retry_info") {
        Some(HeaderValue::Table(t)) => t.clone(),
        Some(v) => value_text(v)
            .and_then(|s| serde_json::from_str::<Value>(&s).ok())
            .map(|j| table_from_json(&j))
            .unwrap_or_default(),
        None => Table::new(),
    };
    let backtrace = match info.get("backtrace") {
        Some(HeaderValue::Array(lines)) => Some(
            lines
                .iter()
                .filter_map(value_text)
                .collect::<Vec<_>>()
                .join("\n"),
        ),
        Some(v) => value_text(v),
        None => None,
    };
    let exception_type = text(&info, "error_class");
    let message = text(&info, "error_message").or_else(|| text(&info, "error"));
    if exception_type.is_some() || message.is_some() {
        r.fault = Some(Fault {
            exception_type,
            message,
            stack_trace: backtrace,
            consumer: None,
            message_type: None,
            inner_exception_type: None,
            host: None,
        });
    }
    r.source.queue = dl
        .queue
        .strip_suffix("-error")
        .filter(|q| !q.is_empty())
        .map(str::to_string);
    r.source.routing_key = Some(dl.delivery.routing_key.clone());
    r.retries = info.get_i64("num_attempts");
    r.failed_at = info.get("failed_at").and_then(parse_time);
    r
}

/// Maxretry binds `<q>-retry-requeue` (a topic exchange, key `#`) to the queue.
fn target(t: &Told<'_>, warnings: &mut Vec<ReplayWarning>) -> Option<ReplayTarget> {
    match t.source.queue.as_deref().filter(|q| !q.is_empty()) {
        Some(q) => Some(ReplayTarget {
            exchange: format!("{q}-retry-requeue"),
            routing_key: t
                .source
                .routing_key
                .clone()
                .unwrap_or_else(|| t.dl.delivery.routing_key.clone()),
            expected_queue: Some(q.to_string()),
        }),
        None => {
            warnings.push(ReplayWarning::UnknownOrigin);
            None
        }
    }
}
