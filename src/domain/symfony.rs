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

use super::convention::{Fault, Reading, parse_time, text};
use super::message::DeadLetter;
use super::value::{HeaderValue, Table};
use super::xdeath::value_text;

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
/// The body's head that is read (the stamps come before the message in an envelope).
const READ_BODY: usize = 64 * 1024;
/// Longest text taken from one field.
const MAX_FIELD: usize = 16 * 1024;

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
    php_envelope(&dl.body).then_some(Serializer::Php)
}

/// A message in a Symfony failure transport: it carries `SentToFailureTransportStamp`.
pub fn is_failure_message(dl: &DeadLetter) -> bool {
    serializer(dl).is_some() && record(dl).failed_before
}

fn php_envelope(body: &[u8]) -> bool {
    let head: Vec<u8> = body
        .iter()
        .take(64)
        .copied()
        .filter(|b| *b != b'\\' && *b != b'"')
        .collect();
    head.starts_with(b"O:36:SymfonyComponentMessengerEnvelope")
}

/// Symfony's record of `dl`, from its headers or its body.
pub fn record(dl: &DeadLetter) -> Record {
    match serializer(dl) {
        Some(Serializer::Json) => json_record(&dl.headers),
        Some(Serializer::Php) => php_record(&dl.body),
        None => Record::default(),
    }
}

/// The convention's reading: the exception from `ErrorDetailsStamp`, the retries (the most any
/// `RedeliveryStamp` counted: the failure transport's own stamp resets the last to 0), the
/// message class, and the queue it failed in (the routing key Symfony sent it here with).
pub(crate) fn read(dl: &DeadLetter, mut r: Reading) -> Reading {
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
    let key = dl.delivery.routing_key.trim();
    r.source.queue = (!key.is_empty() && key != dl.queue).then(|| key.to_string());
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

/// The body's head as PHP's `serialize` wrote it, without `addslashes`' escapes.
fn php_text(body: &[u8]) -> Vec<u8> {
    let head = body.get(..READ_BODY).unwrap_or(body);
    let escaped = head.starts_with(b"O:36:\\\"");
    if !escaped {
        return head.to_vec();
    }
    let mut out = Vec::with_capacity(head.len());
    let mut it = head.iter().copied();
    while let Some(b) = it.next() {
        if b != b'\\' {
            out.push(b);
            continue;
        }
        match it.next() {
            Some(b'0') => out.push(0),
            Some(c) => out.push(c),
            None => {}
        }
    }
    out
}

fn php_record(body: &[u8]) -> Record {
    let t = php_text(body);
    let prop = |class: &str, name: &str| {
        let mut p = class.as_bytes().to_vec();
        p.push(0);
        p.extend_from_slice(name.as_bytes());
        p.extend_from_slice(b"\";");
        p
    };
    let error_class = prop("ErrorDetailsStamp", "exceptionClass");
    let error_message = prop("ErrorDetailsStamp", "exceptionMessage");
    let trace = prop("FlattenException", "traceAsString");
    let count = prop("RedeliveryStamp", "retryCount");
    let at = prop("RedeliveryStamp", "redeliveredAt");
    let transport = prop("SentToFailureTransportStamp", "originalReceiverName");
    let retry_counts = find_all(&t, &count)
        .filter_map(|i| php_int(t.get(i..)?))
        .collect();
    let exception_class = rfind(&t, &error_class).and_then(|i| php_string(t.get(i..)?));
    Record {
        exception_message: rfind(&t, &error_message).and_then(|i| php_string(t.get(i..)?)),
        trace: rfind(&t, &trace)
            .and_then(|i| php_string(t.get(i..)?))
            .map(|s| match &exception_class {
                Some(c) => format!("{c}\n{s}"),
                None => s,
            }),
        exception_class,
        retry_counts,
        redelivered_at: rfind(&t, &at).and_then(|i| php_date(t.get(i..)?)),
        transport: rfind(&t, &transport).and_then(|i| php_string(t.get(i..)?)),
        failed_before: rfind(&t, b"SentToFailureTransportStamp").is_some(),
        message_class: php_message_class(&t),
    }
}

fn find_all<'a>(hay: &'a [u8], needle: &'a [u8]) -> impl Iterator<Item = usize> + 'a {
    memchr::memmem::find_iter(hay, needle).map(move |i| i + needle.len())
}

fn rfind(hay: &[u8], needle: &[u8]) -> Option<usize> {
    memchr::memmem::rfind(hay, needle).map(|i| i + needle.len())
}

/// `s:N:"…";` at the start of `t`: the N bytes, as text.
fn php_string(t: &[u8]) -> Option<String> {
    let rest = t.strip_prefix(b"s:")?;
    let colon = rest.iter().position(|b| *b == b':')?;
    let n: usize = std::str::from_utf8(rest.get(..colon)?).ok()?.parse().ok()?;
    let start = colon.checked_add(2)?;
    if rest.get(colon + 1) != Some(&b'"') || n > MAX_FIELD {
        return None;
    }
    let bytes = rest.get(start..start.checked_add(n)?)?;
    Some(String::from_utf8_lossy(bytes).trim().to_string())
}

/// `i:N;` at the start of `t`.
fn php_int(t: &[u8]) -> Option<i64> {
    let rest = t.strip_prefix(b"i:")?;
    let end = rest.iter().take(24).position(|b| *b == b';')?;
    std::str::from_utf8(rest.get(..end)?).ok()?.parse().ok()
}

/// A `DateTimeImmutable` in UTC: `O:17:"DateTimeImmutable":3:{s:4:"date";s:26:"…";…"UTC";}`.
fn php_date(t: &[u8]) -> Option<Timestamp> {
    let window = t.get(..t.len().min(256))?;
    let date = rfind(window, b"s:4:\"date\";").and_then(|i| php_string(window.get(i..)?))?;
    let zone = rfind(window, b"s:8:\"timezone\";").and_then(|i| php_string(window.get(i..)?));
    matches!(zone.as_deref(), Some("UTC" | "+00:00"))
        .then(|| parse_time(&HeaderValue::string(date)))
        .flatten()
}

/// The envelope's message: `Envelope\0message";O:N:"Class"`.
fn php_message_class(t: &[u8]) -> Option<String> {
    let i = rfind(t, b"Envelope\0message\";O:")?;
    let rest = t.get(i..)?;
    let colon = rest.iter().take(8).position(|b| *b == b':')?;
    let quoted = rest.get(colon + 1..)?;
    let quoted = quoted.strip_prefix(b"\"")?;
    let end = quoted.iter().take(512).position(|b| *b == b'"')?;
    Some(String::from_utf8_lossy(quoted.get(..end)?).to_string())
}

/// The verdict's words for Symfony's retries and transport: "after 2 retries on transport async".
pub(crate) fn retries_phrase(dl: &DeadLetter, retries: Option<i64>) -> Option<String> {
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
pub(crate) fn retry_count_reset(dl: &DeadLetter, headers: &Table) -> bool {
    match serializer(dl) {
        Some(Serializer::Json) => !headers.contains_key(REDELIVERY_HEADER),
        Some(Serializer::Php) => php_record(&dl.body).retry_counts.last().copied() == Some(0),
        None => true,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn php_fields_are_read_bounded() {
        let body = br#"O:36:\"Symfony\\Component\\Messenger\\Envelope\":2:{s:44:\"\0Symfony\\Component\\Messenger\\Envelope\0stamps\";a:1:{s:1:\"x\";a:1:{i:0;O:1:\"E\":1:{s:67:\"\0Symfony\\Component\\Messenger\\Stamp\\ErrorDetailsStamp\0exceptionClass\";s:16:\"App\\CardDeclined\";s:61:\"\0Symfony\\Component\\Messenger\\Stamp\\RedeliveryStamp\0retryCount\";i:2;s:61:\"\0Symfony\\Component\\Messenger\\Stamp\\RedeliveryStamp\0retryCount\";i:0;}}}s:45:\"\0Symfony\\Component\\Messenger\\Envelope\0message\";O:14:\"App\\ChargeCard\":1:{}}"#;
        assert!(php_envelope(body));
        let r = php_record(body);
        assert_eq!(r.exception_class.as_deref(), Some("App\\CardDeclined"));
        assert_eq!(r.retry_counts, vec![2, 0]);
        assert_eq!(r.message_class.as_deref(), Some("App\\ChargeCard"));
        assert!(!r.failed_before);
        // Lengths that lie, cut bodies, junk: nothing, never a panic.
        for junk in [&b"s:99999:\"x\""[..], b"s:5:\"ab", b"s:-1:\"", b"i:;", b""] {
            assert_eq!(php_string(junk), None);
            assert_eq!(php_int(junk), None);
        }
        for cut in 0..body.len() {
            let _ = php_record(&body[..cut]);
        }
    }
}
