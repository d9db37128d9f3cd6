//! EasyNetQ: its error envelope is the body (the exception, where it was consumed, the original
//! properties), in `EasyNetQ_Default_Error_Queue`.

use serde_json::Value;

use super::framework::{BASE, Framework, Letter, Named, Replay, Role};
use super::{Convention, Fault, Reading, body_json, find_exception, parse_time};
use crate::domain::target::ReplayWarning;
use crate::domain::value::HeaderValue;

pub(crate) const FRAMEWORK: Framework = Framework {
    convention: Convention::EasyNetQ,
    name: "easynetq",
    label: "EasyNetQ",
    detect: |l| {
        l.dl.queue == "EasyNetQ_Default_Error_Queue"
            || l.dl
                .properties
                .kind
                .as_deref()
                .is_some_and(|k| k.starts_with("EasyNetQ.SystemMessages.Error"))
    },
    read,
    queue_name: |name| {
        (name == "EasyNetQ_Default_Error_Queue").then_some(Named {
            role: Role::Error,
            specific: true,
        })
    },
    replay: Replay {
        warn: |_, warnings| warnings.push(ReplayWarning::BodyIsEnvelope),
        ..BASE.replay
    },
    ..BASE
};

fn read(l: &Letter<'_>) -> Reading {
    let mut r = Reading::empty(Convention::EasyNetQ);
    let body = body_json(l.dl);
    let field = |k: &str| {
        body.as_ref()
            .and_then(|b| b.get(k))
            .and_then(Value::as_str)
            .map(str::to_string)
    };
    let exception = field("Exception");
    let parsed = exception.as_deref().and_then(find_exception);
    let message_type = body
        .as_ref()
        .and_then(|b| b.get("BasicProperties"))
        .and_then(|p| p.get("Type"))
        .and_then(Value::as_str)
        .map(|t| t.split(',').next().unwrap_or_default().trim().to_string())
        .filter(|t| !t.is_empty());
    if exception.is_some() {
        r.fault = Some(Fault {
            exception_type: parsed.as_ref().map(|(t, _)| t.clone()),
            message: parsed.and_then(|(_, m)| m),
            stack_trace: exception,
            consumer: None,
            message_type: message_type.clone(),
            inner_exception_type: None,
            host: None,
        });
    }
    r.source.queue = field("Queue").filter(|q| !q.is_empty());
    r.source.exchange = field("Exchange");
    r.source.routing_key = field("RoutingKey");
    r.failed_at = body
        .as_ref()
        .and_then(|b| b.get("DateTime"))
        .and_then(Value::as_str)
        .and_then(|s| parse_time(&HeaderValue::string(s)));
    r.message_type = message_type;
    r
}
