//! What several conventions' records share: header text, a JSON body, exception lines in Java,
//! Python and .NET shape, type names, and times as frameworks write them.

use std::sync::LazyLock;

use jiff::Timestamp;
use regex::Regex;
use serde_json::Value;

use crate::domain::message::DeadLetter;
use crate::domain::value::{HeaderValue, Table};
use crate::domain::xdeath::{timestamp_from_value, value_text};

/// The body as JSON, when it is complete and parses. Frameworks that keep their record in the
/// body write JSON; anything else is not theirs.
pub(crate) fn body_json(dl: &DeadLetter) -> Option<Value> {
    if !dl.body_complete() || dl.body.first().is_none_or(|b| *b != b'{') {
        return None;
    }
    serde_json::from_slice(&dl.body).ok()
}

/// A header as trimmed text, `None` when absent, not a string, or blank.
pub(crate) fn text(h: &Table, key: &str) -> Option<String> {
    nonempty(h.get(key).and_then(value_text))
}

/// Like `text`, but an empty string is a real value (the default exchange is `""`).
pub(crate) fn text_keep_empty(h: &Table, key: &str) -> Option<String> {
    h.get(key).and_then(value_text)
}

fn nonempty(s: Option<String>) -> Option<String> {
    s.map(|s| s.trim().to_string()).filter(|s| !s.is_empty())
}

/// The last path segment of an address such as `rabbitmq://host/vhost/shipping-label?bind=true`.
pub(crate) fn last_path_segment(address: &str) -> Option<String> {
    let without_query = address.split(['?', '#']).next().unwrap_or_default();
    let path = without_query
        .split_once("://")
        .map_or(without_query, |(_, rest)| rest);
    let seg = path
        .trim_end_matches('/')
        .rsplit('/')
        .next()
        .unwrap_or_default();
    // The scheme's host alone is not an endpoint.
    (!seg.is_empty() && path.contains('/')).then(|| seg.to_string())
}

/// Java class-name shape: dotted identifiers (`$` allowed for nested classes).
pub(crate) fn is_java_type(s: &str) -> bool {
    !s.is_empty()
        && s.split('.').all(|part| {
            let mut chars = part.chars();
            chars
                .next()
                .is_some_and(|c| c.is_alphabetic() || c == '_' || c == '$')
                && chars.all(|c| c.is_alphanumeric() || c == '_' || c == '$')
        })
}

/// `Type: message` or `Type` from one line of a Java stack trace.
fn java_exception_line(line: &str) -> Option<(String, Option<String>)> {
    let line = line.trim();
    let (t, m) = match line.split_once(": ") {
        Some((t, m)) => (
            t.trim(),
            Some(m.trim().to_string()).filter(|m| !m.is_empty()),
        ),
        None => (line.strip_suffix(':').unwrap_or(line), None),
    };
    is_java_type(t).then(|| (t.to_string(), m))
}

/// An exception's type and, when it has one, its message.
pub(crate) type TypeAndMessage = (String, Option<String>);

/// The top exception (first line) and the root cause (last `Caused by:`) of a Java stack trace.
pub(crate) fn java_trace_types(trace: &str) -> (Option<TypeAndMessage>, Option<TypeAndMessage>) {
    let top = trace
        .lines()
        .find(|l| !l.trim().is_empty())
        .and_then(java_exception_line);
    let root = trace
        .lines()
        .filter_map(|l| l.trim_start().strip_prefix("Caused by:"))
        .filter_map(java_exception_line)
        .next_back();
    (top, root)
}

/// "com.acme.OutOfStockException: SKU A-0 is out of stock" → type and message, only when the
/// prefix is a fully qualified class name ending like an exception, so "Order 12: bad" or
/// "Error: x" are not mistaken for types.
pub(crate) fn qualified_type_prefix(message: &str) -> Option<(String, String)> {
    let (t, m) = message.split_once(": ")?;
    let t = t.trim();
    let ends_like_exception = ["Exception", "Error", "Throwable", "Fault"]
        .iter()
        .any(|s| t.ends_with(s));
    (t.contains('.') && is_java_type(t) && ends_like_exception)
        .then(|| (t.to_string(), m.trim().to_string()))
}

/// A Python traceback's last line: `ValueError: boom` or `pkg.errors.Oops: boom`.
pub(crate) fn python_exception_line(line: &str) -> Option<TypeAndMessage> {
    let line = line.trim();
    let (t, m) = line.split_once(':').map_or((line, None), |(t, m)| {
        (
            t.trim(),
            Some(m.trim().to_string()).filter(|m| !m.is_empty()),
        )
    });
    is_java_type(t).then(|| (t.to_string(), m))
}

static DOTNET_EXCEPTION: LazyLock<Option<Regex>> = LazyLock::new(|| {
    Regex::new(r"\b((?:[A-Za-z_][A-Za-z0-9_]*\.)+[A-Za-z_][A-Za-z0-9_]*(?:Exception|Error|Fault))\b(?::[ \t]*([^\r\n]*))?")
        .ok()
});

/// The first .NET-style exception in free text (Rebus error details, EasyNetQ's `Exception`).
pub(crate) fn find_exception(text: &str) -> Option<TypeAndMessage> {
    let re = DOTNET_EXCEPTION.as_ref()?;
    let caps = re.captures(text)?;
    let t = caps.get(1)?.as_str().to_string();
    let m = caps
        .get(2)
        .map(|m| m.as_str().trim().to_string())
        .filter(|m| !m.is_empty());
    Some((t, m))
}

/// The short name of a type: `Shop.Shipping.CarrierUnavailableException` →
/// `CarrierUnavailableException`, without an assembly qualification or nesting prefix.
pub fn short_type(t: &str) -> &str {
    // A type has no spaces: text that has them (an AMQP 1.0 consumer's annotated reason) is
    // shown whole.
    if t.split(',')
        .next()
        .unwrap_or(t)
        .trim()
        .contains(char::is_whitespace)
    {
        return t.trim();
    }
    let t = t.split(',').next().unwrap_or(t).trim();
    let t = t.rsplit(['.', '+', ':']).next().unwrap_or(t);
    if t.is_empty() { "?" } else { t }
}

static NSB_TIME: LazyLock<Option<Regex>> =
    LazyLock::new(|| Regex::new(r"^(\d{4}-\d{2}-\d{2}) (\d{2}:\d{2}:\d{2}):(\d{1,9}) Z$").ok());

/// A failure time as frameworks write it: an AMQP timestamp, Unix seconds or milliseconds, RFC
/// 3339, a .NET round-trip string without offset (taken as UTC), or NServiceBus's
/// `yyyy-MM-dd HH:mm:ss:ffffff Z`.
pub fn parse_time(v: &HeaderValue) -> Option<Timestamp> {
    match v {
        HeaderValue::ShortString(_) | HeaderValue::LongString(_) => {
            let s = value_text(v)?;
            let s = s.trim();
            if let Ok(n) = s.parse::<i64>() {
                return time_from_number(n);
            }
            if let Ok(t) = s.parse::<Timestamp>() {
                return Some(t);
            }
            if let Some(c) = NSB_TIME.as_ref().and_then(|re| re.captures(s)) {
                let (d, t, f) = (c.get(1)?.as_str(), c.get(2)?.as_str(), c.get(3)?.as_str());
                return format!("{d}T{t}.{f}Z").parse().ok();
            }
            let spaced = s.replacen(' ', "T", 1);
            if let Ok(t) = spaced.parse::<Timestamp>() {
                return Some(t);
            }
            spaced
                .parse::<jiff::civil::DateTime>()
                .ok()
                .and_then(|dt| jiff::tz::Offset::UTC.to_timestamp(dt).ok())
        }
        HeaderValue::Timestamp(_) => timestamp_from_value(v),
        other => other.as_i64().and_then(time_from_number),
    }
}

/// Seconds, or milliseconds when the number is too large to be seconds of this era.
fn time_from_number(n: i64) -> Option<Timestamp> {
    if n.unsigned_abs() > 100_000_000_000 {
        Timestamp::from_millisecond(n).ok()
    } else {
        Timestamp::from_second(n).ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn java_traces() {
        let trace = "org.springframework.amqp.rabbit.support.ListenerExecutionFailedException: Listener failed\n\tat x.y(Z.java:1)\nCaused by: java.lang.IllegalStateException: wrapped\n\tat a\nCaused by: com.acme.OutOfStockException: SKU A-0\n\t... 12 more";
        let (top, root) = java_trace_types(trace);
        assert_eq!(
            top.map(|t| t.0).as_deref(),
            Some("org.springframework.amqp.rabbit.support.ListenerExecutionFailedException")
        );
        assert_eq!(
            root,
            Some((
                "com.acme.OutOfStockException".to_string(),
                Some("SKU A-0".to_string())
            ))
        );
    }

    #[test]
    fn type_prefix_is_careful() {
        assert!(qualified_type_prefix("Order 12: bad").is_none());
        assert!(qualified_type_prefix("Error: bad").is_none());
        assert!(qualified_type_prefix("see http://x: y").is_none());
        assert_eq!(
            qualified_type_prefix("java.lang.IllegalStateException: no"),
            Some(("java.lang.IllegalStateException".into(), "no".into()))
        );
    }

    #[test]
    fn times() {
        let want: Timestamp = "2025-09-28T06:50:15Z"
            .parse()
            .unwrap_or(Timestamp::UNIX_EPOCH);
        for s in [
            "2025-09-28T06:50:15Z",
            "2025-09-28T06:50:15.0000000Z",
            "2025-09-28T06:50:15",
            "2025-09-28 06:50:15:000000 Z",
            "2025-09-28T08:50:15+02:00",
            "1759042215",
        ] {
            assert_eq!(parse_time(&HeaderValue::string(s)), Some(want), "{s}");
        }
        assert_eq!(parse_time(&HeaderValue::I64(1_759_042_215_000)), Some(want));
        assert_eq!(
            parse_time(&HeaderValue::Timestamp(1_759_042_215)),
            Some(want)
        );
        assert_eq!(parse_time(&HeaderValue::string("yesterday")), None);
        assert_eq!(parse_time(&HeaderValue::I64(i64::MAX)), None);
    }

    #[test]
    fn addresses_and_names() {
        assert_eq!(
            last_path_segment("rabbitmq://rabbitmq/shipping-label").as_deref(),
            Some("shipping-label")
        );
        assert_eq!(
            last_path_segment("rabbitmq://host/vh/shipping-label?bind=true").as_deref(),
            Some("shipping-label")
        );
        assert_eq!(last_path_segment("rabbitmq://host"), None);
        assert_eq!(
            short_type("Shop.Shipping.CarrierUnavailableException"),
            "CarrierUnavailableException"
        );
        assert_eq!(
            short_type("Shop.Messages.PlaceOrder, Shop.Messages"),
            "PlaceOrder"
        );
        assert_eq!(short_type("Shop.Contracts:Foo"), "Foo");
        assert_eq!(short_type(""), "?");
        assert_eq!(
            find_exception(
                "2 unhandled exceptions: 2025-01-01 10:00:00 +01:00: System.ApplicationException: boom\n   at X"
            ),
            Some(("System.ApplicationException".into(), Some("boom".into())))
        );
    }
}
