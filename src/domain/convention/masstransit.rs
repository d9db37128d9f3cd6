//! MassTransit: the `MT-Fault-*` headers on a message in `<endpoint>_error` (or `_skipped`, no
//! consumer for its type); back through the endpoint's exchange.

use serde_json::Value;

use super::framework::{
    BASE, Counter, Framework, Letter, Named, Replay, Role, Rule, Story, Told, after, has_stem,
    plural,
};
use super::{Convention, Fault, Reading, body_json, last_path_segment, parse_time, text};
use crate::domain::message::DeadLetter;
use crate::domain::target::{ReplayTarget, ReplayWarning};

pub(crate) const FRAMEWORK: Framework = Framework {
    convention: Convention::MassTransit,
    name: "masstransit",
    label: "MassTransit",
    detect,
    read,
    queue_name,
    retries_phrase,
    story: Story {
        consumer_is_type: true,
        ..BASE.story
    },
    replay: Replay {
        strips: &[
            Rule::Exact("MT-Reason"),
            Rule::Prefix("MT-Fault-"),
            Rule::Exact("MT-Redelivery-Count"),
            Rule::Prefix("MT-Host-"),
        ],
        counters: &[
            Counter::Header("MT-Fault-RetryCount"),
            Counter::Header("MT-Redelivery-Count"),
        ],
        target,
        ..BASE.replay
    },
    ..BASE
};

fn detect(l: &Letter<'_>) -> bool {
    let h = &l.dl.headers;
    let queue = l.dl.queue.as_str();
    let has_prefix = |p: &str| h.keys().any(|k| k.starts_with(p));
    has_prefix("MT-Fault-")
        || h.contains_key("MT-Reason")
        || ((queue.ends_with("_error") || queue.ends_with("_skipped")) && has_prefix("MT-"))
}

fn queue_name(name: &str) -> Option<Named> {
    let role = if has_stem(name, "_error") {
        Role::Error
    } else if has_stem(name, "_skipped") {
        Role::Skipped
    } else {
        return None;
    };
    Some(Named {
        role,
        specific: true,
    })
}

fn read(l: &Letter<'_>) -> Reading {
    let dl = l.dl;
    let h = &dl.headers;
    let mut r = Reading::empty(Convention::MassTransit);
    let reason = text(h, "MT-Reason");
    r.skipped = matches!(reason.as_deref(), Some("skip" | "dead-letter"))
        || (reason.is_none() && dl.queue.ends_with("_skipped"));
    let envelope_type = body_json(dl).and_then(|b| {
        let t = b.get("messageType")?;
        let first = match t {
            Value::Array(a) => a.first()?.as_str()?,
            Value::String(s) => s.as_str(),
            _ => return None,
        };
        Some(first.to_string())
    });
    let message_type = text(h, "MT-Fault-MessageType").or(envelope_type).map(|t| {
        t.strip_prefix("urn:message:")
            .map(str::to_string)
            .unwrap_or(t)
    });
    let endpoint = text(h, "MT-Fault-InputAddress")
        .and_then(|a| last_path_segment(&a))
        .or_else(|| {
            dl.queue
                .strip_suffix("_error")
                .or_else(|| dl.queue.strip_suffix("_skipped"))
                .filter(|s| !s.is_empty())
                .map(str::to_string)
        });
    r.source.queue = endpoint;
    let exception_type = text(h, "MT-Fault-ExceptionType");
    if exception_type.is_some() || text(h, "MT-Fault-Message").is_some() {
        r.fault = Some(Fault {
            exception_type,
            message: text(h, "MT-Fault-Message"),
            stack_trace: text(h, "MT-Fault-StackTrace"),
            consumer: text(h, "MT-Fault-ConsumerType"),
            message_type: message_type.clone(),
            inner_exception_type: None,
            host: text(h, "MT-Host-MachineName"),
        });
        // The header is only written when retries ran.
        r.retries = Some(h.get_i64("MT-Fault-RetryCount").unwrap_or(0));
    } else if let Some(n) = h.get_i64("MT-Fault-RetryCount") {
        r.retries = Some(n);
    }
    r.failed_at = h.get("MT-Fault-Timestamp").and_then(parse_time);
    r.message_type = message_type;
    r
}

/// Its retries and the broker's redeliveries, each counted where it is recorded.
fn retries_phrase(dl: &DeadLetter, r: &Reading) -> Option<String> {
    let redeliveries = dl.headers.get_i64("MT-Redelivery-Count").filter(|r| *r > 0);
    Some(match (r.retries.unwrap_or(0), redeliveries) {
        (0, None) => "without retries".to_string(),
        (0, Some(d)) => after(d, "redelivery", "redeliveries"),
        (n, None) => after(n, "retry", "retries"),
        (n, Some(d)) => format!(
            "{} and {}",
            after(n, "retry", "retries"),
            plural(d, "redelivery", "redeliveries")
        ),
    })
}

/// The endpoint's exchange has the endpoint's name and is bound to its queue; the message
/// type's exchange would reach every subscribing endpoint.
fn target(t: &Told<'_>, warnings: &mut Vec<ReplayWarning>) -> Option<ReplayTarget> {
    match t.source.queue.as_deref().filter(|q| !q.is_empty()) {
        Some(endpoint) => Some(ReplayTarget {
            exchange: endpoint.to_string(),
            routing_key: String::new(),
            expected_queue: Some(endpoint.to_string()),
        }),
        None => {
            warnings.push(ReplayWarning::UnknownOrigin);
            None
        }
    }
}
