//! Why an AMQP 1.0 consumer dead-lettered a message: the `x-opt-` message annotations it
//! attached to its `modified` outcome (`delivery-failed`, `undeliverable-here`), which RabbitMQ
//! 4 hands a 0.9.1 reader as headers (strings, integers and booleans only). The names are the
//! ones RabbitMQ's documentation shows (`x-opt-dead-letter-reason`, `x-opt-exception`) and their
//! plain variants; no configuration. Read by `convention::read` for any convention that recorded
//! no fault of its own: not a convention of its own, so not in the registry. Here rather than in
//! `amqp10`, which then needs nothing of `convention`.

use super::{Fault, python_exception_line};
use crate::domain::value::{HeaderValue, Table};

/// Annotations naming the failure (an exception, `Type: message` or a type alone).
pub const EXCEPTION_KEYS: &[&str] = &["x-opt-exception", "x-opt-exception-type", "x-opt-error"];
/// Annotations saying what went wrong in words.
pub const REASON_KEYS: &[&str] = &[
    "x-opt-dead-letter-reason",
    "x-opt-reason",
    "x-opt-exception-message",
    "x-opt-error-message",
];
/// Annotations holding a stack trace.
pub const STACK_KEYS: &[&str] = &["x-opt-stack-trace", "x-opt-stacktrace", "x-opt-traceback"];

/// Longest failure text taken as the exception when it names no type, in characters: a group
/// name, not a document.
const LABEL_CHARS: usize = 200;

/// The failure the consumer annotated, and the annotations it was read from (which a replay
/// removes: they describe the failure before it). `None` when there is none.
pub fn failure(h: &Table) -> Option<(Fault, Vec<String>)> {
    let mut used = Vec::new();
    let mut first = |keys: &[&str]| {
        keys.iter().find_map(|&k| {
            let t = text(h.get(k)?)?;
            used.push(k.to_string());
            Some(t)
        })
    };
    let exception = first(EXCEPTION_KEYS);
    let reason = first(REASON_KEYS);
    let stack = first(STACK_KEYS);
    if exception.is_none() && reason.is_none() {
        return None;
    }
    // A multi-line exception is a trace: Python's ends with `Type: message`, others begin so.
    let (line, trace) = match exception.as_deref() {
        Some(e) if e.lines().count() > 1 => {
            let python = e.trim_start().starts_with("Traceback");
            let pick = if python {
                e.lines().rev().find(|l| !l.trim().is_empty())
            } else {
                e.lines().find(|l| !l.trim().is_empty())
            };
            (pick.map(str::to_string), Some(e.to_string()))
        }
        Some(e) => (Some(e.to_string()), None),
        None => (None, None),
    };
    let parsed = line.as_deref().and_then(python_exception_line);
    let (exception_type, said) = match (parsed, line) {
        (Some((t, m)), _) => (t, m),
        // Free text: it is what the consumer called its failure, so it names the group.
        (None, Some(l)) => (label(&l), None),
        (None, None) => (label(reason.as_deref().unwrap_or_default()), None),
    };
    let message = match (said, reason) {
        (Some(m), Some(r)) if m != r && !exception_type.eq(&r) => Some(format!("{m} ({r})")),
        (Some(m), _) => Some(m),
        (None, Some(r)) if r != exception_type => Some(r),
        (None, _) => None,
    };
    Some((
        Fault {
            exception_type: Some(exception_type),
            message,
            stack_trace: stack.or(trace),
            ..Fault::default()
        },
        used,
    ))
}

/// A header as trimmed text: a string, or an integer or boolean as RabbitMQ keeps it.
fn text(v: &HeaderValue) -> Option<String> {
    let t = match v {
        HeaderValue::ShortString(b) | HeaderValue::LongString(b) => {
            String::from_utf8_lossy(b).trim().to_string()
        }
        HeaderValue::Bool(b) => b.to_string(),
        other => other.as_i64()?.to_string(),
    };
    (!t.is_empty()).then_some(t)
}

/// The first line of `s`, at most [`LABEL_CHARS`] characters.
fn label(s: &str) -> String {
    s.lines()
        .find(|l| !l.trim().is_empty())
        .unwrap_or_default()
        .trim()
        .chars()
        .take(LABEL_CHARS)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(pairs: &[(&str, &str)]) -> Table {
        let mut h = Table::new();
        for (k, v) in pairs {
            h.insert(*k, HeaderValue::string(*v));
        }
        h
    }

    #[test]
    fn exception_and_reason() {
        let h = headers(&[
            ("x-opt-exception", "ValueError: bad price"),
            ("x-opt-dead-letter-reason", "price below zero"),
        ]);
        let (f, used) = failure(&h).unwrap();
        assert_eq!(f.exception_type.as_deref(), Some("ValueError"));
        assert_eq!(f.message.as_deref(), Some("bad price (price below zero)"));
        assert_eq!(used, ["x-opt-exception", "x-opt-dead-letter-reason"]);
    }

    #[test]
    fn a_type_alone_and_a_reason() {
        let h = headers(&[
            ("x-opt-exception", "com.shop.CarrierTimeout"),
            ("x-opt-dead-letter-reason", "carrier did not answer"),
        ]);
        let (f, _) = failure(&h).unwrap();
        assert_eq!(f.exception_type.as_deref(), Some("com.shop.CarrierTimeout"));
        assert_eq!(f.message.as_deref(), Some("carrier did not answer"));
    }

    #[test]
    fn a_reason_alone_names_the_failure() {
        let h = headers(&[("x-opt-dead-letter-reason", "price below zero")]);
        let (f, used) = failure(&h).unwrap();
        assert_eq!(f.exception_type.as_deref(), Some("price below zero"));
        assert_eq!(f.message, None);
        assert_eq!(used, ["x-opt-dead-letter-reason"]);
    }

    #[test]
    fn a_python_traceback() {
        let tb = "Traceback (most recent call last):\n  File \"w.py\", line 3\nKeyError: 'sku'";
        let (f, _) = failure(&headers(&[("x-opt-exception", tb)])).unwrap();
        assert_eq!(f.exception_type.as_deref(), Some("KeyError"));
        assert_eq!(f.message.as_deref(), Some("'sku'"));
        assert_eq!(f.stack_trace.as_deref(), Some(tb));
    }

    #[test]
    fn flattened_values_and_nothing() {
        let mut h = Table::new();
        h.insert("x-opt-exception", HeaderValue::I64(404));
        assert_eq!(
            failure(&h).unwrap().0.exception_type.as_deref(),
            Some("404")
        );
        assert_eq!(failure(&headers(&[("x-opt-other", "x")])), None);
        assert_eq!(failure(&headers(&[("x-opt-exception", "   ")])), None);
        let long = "x ".repeat(1000);
        let (f, _) = failure(&headers(&[("x-opt-dead-letter-reason", &long)])).unwrap();
        assert!(f.exception_type.unwrap().chars().count() <= LABEL_CHARS);
    }
}
