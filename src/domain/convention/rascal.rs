//! rascal's record: the `rascal` header table (the error, where the message was consumed, and
//! how it was recovered).

use super::{Convention, Fault, Reading, text, text_keep_empty};
use crate::domain::message::DeadLetter;
use crate::domain::value::{HeaderValue, Table};

/// rascal's record: the `rascal` table header, when it is one and names where the message was.
pub fn rascal_table(h: &Table) -> Option<&Table> {
    h.get("rascal")
        .and_then(HeaderValue::as_table)
        .filter(|t| t.contains_key("originalQueue") || t.contains_key("recovery"))
}

/// How rascal recovered a failed message from `queue`, as it recorded under `recovery.<queue>`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RascalRecovery {
    /// Republished to the queue this many times (the `republish` strategy).
    pub republished: Option<i64>,
    /// Forwarded to another publication this many times (`forward`: no `x-death`).
    pub forwarded: Option<i64>,
    /// Republished for an immediate nack: the broker then dead-lettered it.
    pub immediate_nack: bool,
}

pub fn rascal_recovery(h: &Table) -> RascalRecovery {
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
pub(super) fn rascal(dl: &DeadLetter) -> Reading {
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
