//! Symfony Messenger (5.4+): its failure transport's messages, read from Symfony's own stamps.
//!
//! After its last retry the worker *publishes* the message to the failure transport with the
//! headers of the delivery that failed (so its `x-death` is a copy of the delay queue's expiry,
//! not a verdict) and, as the routing key, the name of the queue it was consumed from. The record
//! is in the stamps: with Symfony's JSON serializer each is a header `X-Message-Stamp-<class>`
//! holding a JSON array; with the PhpSerializer the whole envelope is PHP-serialized text in the
//! body (`addslashes`-escaped), which is read here as text, bounded, and never unserialized.

use jiff::Timestamp;
use serde_json::Value;

use super::framework::{BASE, Framework, Replay, Rule};
use super::{Convention, Fault, Reading, parse_time, text};
use crate::domain::message::DeadLetter;
use crate::domain::target::ReplayWarning;
use crate::domain::value::{HeaderValue, Table};
use crate::domain::xdeath::value_text;

mod php;

pub(crate) const FRAMEWORK: Framework = Framework {
    convention: Convention::Symfony,
    name: "symfony",
    label: "Symfony Messenger",
    detect: |l| serializer(l.dl).is_some(),
    read: |l| read(l.dl, Reading::empty(Convention::Symfony)),
    retries_phrase: |dl, r| retries_phrase(dl, r.retries),
    replay: Replay {
        // Its retry count and error record (JSON serializer); `SentToFailureTransportStamp`
        // goes only when asked (`finish`).
        strips: &[Rule::Exact(REDELIVERY_HEADER), Rule::Exact(ERROR_HEADER)],
        // What it reads, the last `RedeliveryStamp`, may be in the body: `surviving` says.
        finish: failure_stamp,
        surviving: |dl, headers| {
            (!retry_count_reset(dl, headers)).then(|| "Symfony's last RedeliveryStamp".to_string())
        },
        ..BASE.replay
    },
    ..BASE
};

const STAMP: &str = "X-Message-Stamp-Symfony\\Component\\Messenger\\Stamp\\";
/// The JSON serializer's retry-count header: a replay removes it for a fresh budget.
pub const REDELIVERY_HEADER: &str =
    "X-Message-Stamp-Symfony\\Component\\Messenger\\Stamp\\RedeliveryStamp";
/// The JSON serializer's error header: it describes the failure before the replay.
pub const ERROR_HEADER: &str =
    "X-Message-Stamp-Symfony\\Component\\Messenger\\Stamp\\ErrorDetailsStamp";
/// The stamp that makes Symfony 5.4 drop a message that fails again instead of sending it to
/// the failure transport a second time; `--strip-failure-stamp` removes it (JSON only).
pub const FAILURE_HEADER: &str =
    "X-Message-Stamp-Symfony\\Component\\Messenger\\Stamp\\SentToFailureTransportStamp";
/// Longest text taken from one field.
pub(crate) const MAX_FIELD: usize = 16 * 1024;

/// How the message was serialized.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Serializer {
    /// Symfony's Serializer: stamps in `X-Message-Stamp-*` headers, the message class in `type`.
    Json,
    /// PhpSerializer: the envelope, stamps included, in the body.
    Php,
}

/// What Symfony recorded about one failed message.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Record {
    pub exception_class: Option<String>,
    pub exception_message: Option<String>,
    pub trace: Option<String>,
    /// Every `RedeliveryStamp`'s count, oldest first; the last is what Symfony reads.
    pub retry_counts: Vec<i64>,
    pub redelivered_at: Option<Timestamp>,
    /// `SentToFailureTransportStamp`'s original transport (receiver) name.
    pub transport: Option<String>,
    pub failed_before: bool,
    pub message_class: Option<String>,
}

/// The serializer of a Symfony Messenger envelope, when `dl` is one.
pub fn serializer(dl: &DeadLetter) -> Option<Serializer> {
    if dl.headers.keys().any(|k| k.starts_with(STAMP)) {
        return Some(Serializer::Json);
    }
    php::envelope(&dl.body).then_some(Serializer::Php)
}

/// A message in a Symfony failure transport: it carries `SentToFailureTransportStamp`.
pub fn is_failure_message(dl: &DeadLetter) -> bool {
    serializer(dl).is_some() && record(dl).failed_before
}

/// Symfony's record of `dl`, from its headers or its body.
pub fn record(dl: &DeadLetter) -> Record {
    match serializer(dl) {
        Some(Serializer::Json) => json_record(&dl.headers),
        Some(Serializer::Php) => php::record(&dl.body),
        None => Record::default(),
    }
}

/// The convention's reading: the exception from `ErrorDetailsStamp`, the retries (the most any
/// `RedeliveryStamp` counted: the failure transport's own stamp resets the last to 0), the
/// message class, and, for the failure transport's messages, the queue it failed in (the routing
/// key Symfony sent it here with).
fn read(dl: &DeadLetter, mut r: Reading) -> Reading {
    let rec = record(dl);
    if rec.exception_class.is_some() || rec.exception_message.is_some() {
        r.fault = Some(Fault {
            exception_type: rec.exception_class.clone(),
            message: rec.exception_message.clone(),
            stack_trace: rec.trace.clone(),
            message_type: rec.message_class.clone(),
            ..Fault::default()
        });
    }
    r.retries = rec.retry_counts.iter().copied().max();
    r.failed_at = rec.redelivered_at;
    r.message_type = rec.message_class;
    // Sent to the failure transport: routed by the failed queue's name, with a copy of the
    // failed delivery's headers. Otherwise (a worker without one, whose queue dead-letters the
    // rejected message) the broker's record says where it failed.
    if rec.failed_before {
        let key = dl.delivery.routing_key.trim();
        r.source.queue = (!key.is_empty() && key != dl.queue).then(|| key.to_string());
        r.deaths_copied = true;
    }
    r
}

fn json_record(h: &Table) -> Record {
    let stamps = |class: &str| -> Vec<Value> {
        h.get(&format!("{STAMP}{class}"))
            .and_then(value_text)
            .filter(|s| s.len() <= 1024 * 1024)
            .and_then(|s| serde_json::from_str::<Value>(&s).ok())
            .and_then(|v| v.as_array().cloned())
            .unwrap_or_default()
    };
    let field = |v: &Value, k: &str| v.get(k).and_then(Value::as_str).map(bounded);
    let errors = stamps("ErrorDetailsStamp");
    let error = errors.last();
    let redeliveries = stamps("RedeliveryStamp");
    let failure = stamps("SentToFailureTransportStamp");
    Record {
        exception_class: error.and_then(|e| field(e, "exceptionClass")),
        exception_message: error.and_then(|e| field(e, "exceptionMessage")),
        trace: error
            .and_then(|e| e.get("flattenException"))
            .and_then(|f| field(f, "asString").or_else(|| field(f, "traceAsString"))),
        retry_counts: redeliveries
            .iter()
            .filter_map(|r| r.get("retryCount").and_then(Value::as_i64))
            .collect(),
        redelivered_at: redeliveries
            .last()
            .and_then(|r| field(r, "redeliveredAt"))
            .and_then(|t| parse_time(&HeaderValue::string(t))),
        transport: failure
            .last()
            .and_then(|f| field(f, "originalReceiverName")),
        failed_before: !failure.is_empty(),
        message_class: text(h, "type").map(|t| bounded(&t)),
    }
}

fn bounded(s: &str) -> String {
    let mut end = s.len().min(MAX_FIELD);
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    s.get(..end).unwrap_or_default().trim().to_string()
}

/// The verdict's words for Symfony's retries and transport: "after 2 retries on transport async".
fn retries_phrase(dl: &DeadLetter, retries: Option<i64>) -> Option<String> {
    let transport = record(dl).transport;
    let mut s = match retries.unwrap_or(0) {
        0 => "without retries".to_string(),
        1 => "after 1 retry".to_string(),
        n => format!("after {n} retries"),
    };
    if let Some(t) = transport {
        s.push_str(&format!(" on transport {t}"));
    }
    Some(s)
}

/// Whether the retry count Symfony will read (the last `RedeliveryStamp`) is 0 once the plan's
/// `headers` go out: the JSON header removed, or the body's last stamp 0 (the failure transport
/// writes a `RedeliveryStamp(0)` itself).
fn retry_count_reset(dl: &DeadLetter, headers: &Table) -> bool {
    match serializer(dl) {
        Some(Serializer::Json) => !headers.contains_key(REDELIVERY_HEADER),
        Some(Serializer::Php) => php::record(&dl.body).retry_counts.last().copied() == Some(0),
        None => true,
    }
}

/// `SentToFailureTransportStamp`: removed when asked (`--strip-failure-stamp`) and it is a
/// header; otherwise the plan warns that Symfony drops the message should it fail again.
fn failure_stamp(
    dl: &DeadLetter,
    strip: bool,
    headers: &mut Table,
    removed: &mut Vec<String>,
    warnings: &mut Vec<ReplayWarning>,
) {
    let json = serializer(dl) == Some(Serializer::Json);
    if json && strip {
        if headers.remove(FAILURE_HEADER).is_some() {
            removed.push(FAILURE_HEADER.to_string());
        }
        return;
    }
    if record(dl).failed_before {
        warnings.push(ReplayWarning::SymfonyDropsOnFailure { strippable: json });
    }
}
