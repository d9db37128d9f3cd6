//! Spring AMQP's `RepublishMessageRecoverer` (the `x-exception-*` and `x-original-*` headers) and
//! the Spring Cloud Stream binder's `<destination>.<group>.dlq`; back to the original exchange
//! and routing key, which may fan out.

use super::framework::{BASE, Counter, Framework, Letter, Named, Replay, Role, Rule, Told, after};
use super::{
    Convention, Fault, Reading, java_trace_types, qualified_type_prefix, text, text_keep_empty,
};
use crate::domain::target::{ReplayTarget, ReplayWarning};

pub(crate) const FRAMEWORK: Framework = Framework {
    convention: Convention::Spring,
    name: "spring",
    label: "Spring AMQP",
    detect,
    read,
    queue_name,
    retries_phrase: |_, r| r.retries.map(|n| after(n, "retry", "retries")),
    replay: Replay {
        strips: &[
            Rule::Prefix("x-exception-"),
            Rule::Prefix("x-original-"),
            Rule::Exact("retry-count"),
        ],
        counters: &[Counter::Header("retry-count")],
        target,
        ..BASE.replay
    },
    ..BASE
};

fn detect(l: &Letter<'_>) -> bool {
    let h = &l.dl.headers;
    h.contains_key("x-exception-message")
        || h.contains_key("x-exception-stacktrace")
        || h.contains_key("x-original-exchange")
        || h.contains_key("x-original-routingKey")
}

/// The binder's DLQ; a plain `orders.dlq` is the generic broker shape, not Spring's.
fn queue_name(name: &str) -> Option<Named> {
    spring_binder_queue(name).map(|_| Named {
        role: Role::DeadLetter,
        specific: false,
    })
}

fn read(l: &Letter<'_>) -> Reading {
    let (dl, deaths) = (l.dl, l.deaths);
    let h = &dl.headers;
    let mut r = Reading::empty(Convention::Spring);
    let message = text(h, "x-exception-message");
    let stack = text(h, "x-exception-stacktrace");
    let (top, root) = stack.as_deref().map(java_trace_types).unwrap_or_default();
    // The root cause is what went wrong; the top is usually Spring's ListenerExecutionFailedException.
    let chosen = root.clone().or(top.clone());
    let mut exception_type = chosen.as_ref().map(|(t, _)| t.clone());
    let mut fault_message = message
        .clone()
        .or_else(|| chosen.as_ref().and_then(|(_, m)| m.clone()));
    if exception_type.is_none()
        && let Some((t, m)) = message.as_deref().and_then(qualified_type_prefix)
    {
        exception_type = Some(t);
        fault_message = Some(m);
    }
    let wrapper = match (&top, &root) {
        (Some((t, _)), Some((rt, _))) if t != rt => Some(t.clone()),
        _ => None,
    };
    if exception_type.is_some() || fault_message.is_some() || stack.is_some() {
        r.fault = Some(Fault {
            exception_type,
            message: fault_message,
            stack_trace: stack,
            consumer: None,
            message_type: None,
            // For Spring this holds the wrapping exception (the trace's first line).
            inner_exception_type: wrapper,
            host: None,
        });
    }
    r.source.exchange = text_keep_empty(h, "x-original-exchange");
    r.source.routing_key = text_keep_empty(h, "x-original-routingKey");
    r.source.queue = deaths
        .origin_queue()
        .map(str::to_string)
        .or_else(|| spring_binder_queue(&dl.queue));
    r.retries = h.get_i64("retry-count");
    r
}

/// The queue a Spring Cloud Stream binder DLQ belongs to: `<dest>.<group>.dlq` → `<dest>.<group>`.
pub fn spring_binder_queue(dlq: &str) -> Option<String> {
    dlq.strip_suffix(".dlq")
        .filter(|q| q.contains('.'))
        .map(str::to_string)
}

/// The original exchange and key, as the recoverer recorded them; the default exchange (`""`)
/// routes by queue name, to exactly one queue.
fn target(t: &Told<'_>, warnings: &mut Vec<ReplayWarning>) -> Option<ReplayTarget> {
    let source_queue = t.source.queue.as_deref().filter(|q| !q.is_empty());
    let queue = match t.source.exchange.as_deref() {
        Some("") => t
            .source
            .routing_key
            .as_deref()
            .filter(|k| !k.is_empty())
            .or(source_queue),
        Some(exchange) => {
            warnings.push(ReplayWarning::MayFanOut {
                exchange: exchange.to_string(),
            });
            return Some(ReplayTarget {
                exchange: exchange.to_string(),
                routing_key: t.source.routing_key.clone().unwrap_or_default(),
                expected_queue: source_queue.map(str::to_string),
            });
        }
        None => source_queue,
    };
    match queue {
        Some(q) => Some(ReplayTarget::queue(q)),
        None => {
            warnings.push(ReplayWarning::UnknownOrigin);
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn binder_queues() {
        assert_eq!(
            spring_binder_queue("orders.group.dlq").as_deref(),
            Some("orders.group")
        );
        assert_eq!(spring_binder_queue("orders.dlq"), None);
    }
}
