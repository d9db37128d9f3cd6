//! NServiceBus: the `NServiceBus.ExceptionInfo.*` headers on a message in its `error` queue;
//! back to `NServiceBus.FailedQ` through the default exchange.

use super::framework::{
    BASE, Counter, Framework, Letter, Named, Replay, Role, Rule, Story, Told, after,
};
use super::{Convention, Fault, Reading, parse_time, text};
use crate::domain::target::{ReplayTarget, ReplayWarning};
use crate::domain::value::Table;

pub(crate) const FRAMEWORK: Framework = Framework {
    convention: Convention::NServiceBus,
    name: "nservicebus",
    label: "NServiceBus",
    detect: |l| {
        let h = &l.dl.headers;
        h.keys()
            .any(|k| k.starts_with("NServiceBus.ExceptionInfo."))
            || h.contains_key("NServiceBus.FailedQ")
    },
    read,
    // Rebus uses the same name: the message headers settle which.
    queue_name: |name| {
        (name == "error").then_some(Named {
            role: Role::Error,
            specific: true,
        })
    },
    retries_phrase: |_, r| {
        r.retries
            .filter(|n| *n > 0)
            .map(|n| after(n, "delayed retry", "delayed retries"))
    },
    story: Story {
        poison_without_source: true,
        ..BASE.story
    },
    replay: Replay {
        // As ServiceControl does, by prefix: `NServiceBus.Retries` also takes
        // `NServiceBus.Retries.Timestamp`, which otherwise stops delayed retries for a message
        // more than a day old.
        strips: &[
            Rule::Prefix("NServiceBus.Retries"),
            Rule::Exact("NServiceBus.FailedQ"),
            Rule::Exact("NServiceBus.TimeOfFailure"),
            Rule::Prefix("NServiceBus.ExceptionInfo."),
            Rule::Prefix("ServiceControl."),
        ],
        counters: &[Counter::Header("NServiceBus.Retries")],
        target,
        ..BASE.replay
    },
    ..BASE
};

fn read(l: &Letter<'_>) -> Reading {
    let h = &l.dl.headers;
    let mut r = Reading::empty(Convention::NServiceBus);
    let p = "NServiceBus.ExceptionInfo.";
    let message_type = text(h, "NServiceBus.EnclosedMessageTypes").and_then(|t| {
        // "Ns.Type, Assembly, Version=…;Ns.IInterface, …": the first type, without the assembly.
        let first = t.split(';').next()?.split(',').next()?.trim().to_string();
        (!first.is_empty()).then_some(first)
    });
    r.fault = Some(Fault {
        exception_type: text(h, &format!("{p}ExceptionType")),
        message: text(h, &format!("{p}Message")),
        stack_trace: text(h, &format!("{p}StackTrace")),
        consumer: text(h, "NServiceBus.ProcessingEndpoint"),
        message_type: message_type.clone(),
        inner_exception_type: text(h, &format!("{p}InnerExceptionType")),
        host: text(h, "NServiceBus.ProcessingMachine"),
    });
    r.source.queue = nservicebus_failed_queue(h);
    r.retries = h.get_i64("NServiceBus.Retries");
    r.failed_at = h.get("NServiceBus.TimeOfFailure").and_then(parse_time);
    r.message_type = message_type;
    r
}

/// `NServiceBus.FailedQ` without the `@machine` old versions append.
pub fn nservicebus_failed_queue(h: &Table) -> Option<String> {
    let q = text(h, "NServiceBus.FailedQ")?;
    let q = q.split('@').next().unwrap_or_default().trim();
    (!q.is_empty()).then(|| q.to_string())
}

/// `FailedQ` through the default exchange; without it, a poison message, which the plan says.
fn target(t: &Told<'_>, warnings: &mut Vec<ReplayWarning>) -> Option<ReplayTarget> {
    if nservicebus_failed_queue(&t.dl.headers).is_none() {
        warnings.push(ReplayWarning::PoisonWithoutFailedQ);
    }
    t.source
        .queue
        .as_deref()
        .filter(|q| !q.is_empty())
        .map(ReplayTarget::queue)
}
