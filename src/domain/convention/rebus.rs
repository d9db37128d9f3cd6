//! Rebus: `rbs2-error-details` (free text naming the exception) on a message in its error queue.

use super::framework::{BASE, Counter, Framework, Letter, Replay, Rule, after};
use super::{Convention, Fault, Reading, find_exception, text};

pub(crate) const FRAMEWORK: Framework = Framework {
    convention: Convention::Rebus,
    name: "rebus",
    label: "Rebus",
    detect: |l| l.dl.headers.contains_key("rbs2-error-details"),
    read,
    retries_phrase: |_, r| r.retries.map(|n| after(n, "delivery", "deliveries")),
    replay: Replay {
        strips: &[
            Rule::Exact("rbs2-error-details"),
            Rule::Exact("rbs2-source-queue"),
            Rule::Exact("rbs2-delivery-count"),
            Rule::Exact("rbs2-defer-count"),
        ],
        counters: &[Counter::Header("rbs2-delivery-count")],
        ..BASE.replay
    },
    ..BASE
};

fn read(l: &Letter<'_>) -> Reading {
    let h = &l.dl.headers;
    let mut r = Reading::empty(Convention::Rebus);
    let details = text(h, "rbs2-error-details");
    let parsed = details.as_deref().and_then(find_exception);
    r.fault = Some(Fault {
        exception_type: parsed.as_ref().map(|(t, _)| t.clone()),
        message: parsed.and_then(|(_, m)| m).or_else(|| {
            details
                .as_deref()
                .and_then(|d| d.lines().next())
                .map(str::to_string)
        }),
        stack_trace: details,
        consumer: None,
        message_type: text(h, "rbs2-msg-type")
            .map(|t| t.split(',').next().unwrap_or_default().trim().to_string()),
        inner_exception_type: None,
        host: None,
    });
    r.source.queue = text(h, "rbs2-source-queue");
    r.retries = h.get_i64("rbs2-delivery-count");
    r
}
