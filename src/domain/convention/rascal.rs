//! rascal (Node)'s record: the `rascal` header table (the error, where the message was
//! consumed, and how it was recovered: republished and nacked, so `x-death`, or forwarded).

use super::framework::{BASE, Counter, Framework, Letter, Replay, Rule, after};
use super::{Convention, Fault, Reading, text, text_keep_empty};
use crate::domain::message::DeadLetter;
use crate::domain::value::{HeaderValue, Table};

pub(crate) const FRAMEWORK: Framework = Framework {
    convention: Convention::Rascal,
    name: "rascal",
    label: "rascal",
    detect: |l| rascal_table(&l.dl.headers).is_some(),
    read: |l: &Letter<'_>| rascal(l.dl),
    retries_phrase,
    replay: Replay {
        // Its forwards carry `CC`, which the broker routes by on publish: a replay through the
        // default exchange would copy the message to a queue named like it. Its record is the
        // `rascal` table, trimmed by `reset` rather than removed.
        strips: &[Rule::Exact("CC")],
        counters: &[
            Counter::Nested("rascal", "recovery"),
            Counter::Nested("rascal", "redeliveries"),
        ],
        reset,
        ..BASE.replay
    },
    ..BASE
};

/// The parts of rascal's table a replay removes: the error, the redelivery count and the recovery
/// record, whose stored `xDeath` rascal (since v20.1) compares with `x-death` to spot a message it
/// already nacked; with `x-death` gone and the stored copy kept, it would nack the replay straight
/// back. Where the message was consumed, its routing and encryption stay.
const TRIMMED: &[&str] = &["recovery", "error", "redeliveries"];

fn reset(headers: &mut Table, removed: &mut Vec<String>) {
    let Some(HeaderValue::Table(mut t)) = headers.get("rascal").cloned() else {
        return;
    };
    for key in TRIMMED {
        if t.remove(key).is_some() {
            removed.push(format!("rascal.{key}"));
        }
    }
    headers.insert("rascal", HeaderValue::Table(t));
}

fn retries_phrase(dl: &DeadLetter, _: &Reading) -> Option<String> {
    let rec = rascal_recovery(&dl.headers);
    match (rec.forwarded, rec.republished) {
        (Some(f), _) if f > 1 => Some(format!("(forwarded here by rascal, {f} times)")),
        (Some(_), _) => Some("(forwarded here by rascal)".to_string()),
        (None, Some(r)) => Some(after(r, "republish", "republishes")),
        (None, None) if rec.immediate_nack => Some("(nacked by rascal)".to_string()),
        (None, None) => None,
    }
}

/// rascal's record: the `rascal` table header, when it is one and names where the message was.
fn rascal_table(h: &Table) -> Option<&Table> {
    h.get("rascal")
        .and_then(HeaderValue::as_table)
        .filter(|t| t.contains_key("originalQueue") || t.contains_key("recovery"))
}

/// How rascal recovered a failed message from `queue`, as it recorded under `recovery.<queue>`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
struct RascalRecovery {
    /// Republished to the queue this many times (the `republish` strategy).
    republished: Option<i64>,
    /// Forwarded to another publication this many times (`forward`: no `x-death`).
    forwarded: Option<i64>,
    /// Republished for an immediate nack: the broker then dead-lettered it.
    immediate_nack: bool,
}

fn rascal_recovery(h: &Table) -> RascalRecovery {
    let Some(t) = rascal_table(h) else {
        return RascalRecovery::default();
    };
    let queue = text(t, "originalQueue").unwrap_or_default();
    let Some(r) = t
        .get("recovery")
        .and_then(HeaderValue::as_table)
        .and_then(|r| r.get(&queue))
        .and_then(HeaderValue::as_table)
    else {
        return RascalRecovery::default();
    };
    RascalRecovery {
        republished: r.get_i64("republished"),
        forwarded: r.get_i64("forwarded"),
        immediate_nack: r
            .get("immediateNack")
            .is_some_and(|v| *v == HeaderValue::Bool(true)),
    }
}

/// rascal writes the error's message (and code, when it has one) and where the message was
/// consumed; the recovery counters say how often it tried again.
fn rascal(dl: &DeadLetter) -> Reading {
    let mut r = Reading::empty(Convention::Rascal);
    let Some(t) = rascal_table(&dl.headers) else {
        return r;
    };
    let error = t.get("error").and_then(HeaderValue::as_table);
    let message = error.and_then(|e| text(e, "message"));
    let code = error.and_then(|e| text(e, "code"));
    if message.is_some() || code.is_some() {
        r.fault = Some(Fault {
            exception_type: code,
            message,
            ..Fault::default()
        });
    }
    r.source.queue = text(t, "originalQueue");
    r.source.exchange = text_keep_empty(t, "originalExchange");
    r.source.routing_key = text_keep_empty(t, "originalRoutingKey");
    let rec = rascal_recovery(&dl.headers);
    r.retries = rec.republished.or(rec.forwarded);
    r
}
