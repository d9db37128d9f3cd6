//! Conversions from the management HTTP API's JSON into the domain model.
//!
//! The API loses AMQP types: every integer arrives as a JSON number (so longs, shorts and
//! timestamps look alike), tables as objects, and a message without properties as
//! `"properties": []`. A header string that is not UTF-8 arrives as the text
//! `"Not UTF-8, base64 is: …"`; we turn that back into the original bytes. Whatever the JSON holds,
//! nothing here panics.

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use serde_json::Value;

use super::message::{DeadLetter, Delivery, Properties};
use super::value::{HeaderValue, MAX_DEPTH, Table};

/// The prefix RabbitMQ's management plugin writes in front of a non-UTF-8 header value.
const NOT_UTF8_PREFIX: &str = "Not UTF-8, base64 is: ";

/// One JSON value as a header value. Integers become `I64` (the API does not say which width the
/// broker had; `u64` beyond `i64` becomes `F64`), other numbers `F64`, objects tables, `null` void.
/// A value nested deeper than [`MAX_DEPTH`] becomes `TooDeep` without bytes (the API does not
/// give them): shown as such, never republished from this form.
pub fn header_value_from_json(v: &Value) -> HeaderValue {
    value_at(v, 1)
}

fn value_at(v: &Value, level: usize) -> HeaderValue {
    match v {
        Value::Null => HeaderValue::Void,
        Value::Bool(b) => HeaderValue::Bool(*b),
        Value::Number(n) => match (n.as_i64(), n.as_f64()) {
            (Some(i), _) => HeaderValue::I64(i),
            (None, Some(f)) => HeaderValue::F64(f),
            // Not reachable with serde_json's number kinds, but keep the text rather than lose it.
            (None, None) => HeaderValue::string(n.to_string()),
        },
        Value::String(s) => string_value(s),
        Value::Array(_) | Value::Object(_) if level > MAX_DEPTH => HeaderValue::TooDeep {
            depth: level - 1 + json_depth(v),
            raw: Vec::new(),
        },
        Value::Array(items) => {
            HeaderValue::Array(items.iter().map(|v| value_at(v, level + 1)).collect())
        }
        Value::Object(map) => HeaderValue::Table(
            map.iter()
                .map(|(k, v)| (k.clone(), value_at(v, level + 1)))
                .collect(),
        ),
    }
}

/// How many levels of arrays and objects a JSON value has, counted without recursion.
fn json_depth(v: &Value) -> usize {
    let mut deepest = 0;
    let mut stack = vec![(v, 0usize)];
    while let Some((v, level)) = stack.pop() {
        match v {
            Value::Array(a) => {
                deepest = deepest.max(level + 1);
                stack.extend(a.iter().map(|c| (c, level + 1)));
            }
            Value::Object(m) => {
                deepest = deepest.max(level + 1);
                stack.extend(m.values().map(|c| (c, level + 1)));
            }
            _ => {}
        }
    }
    deepest
}

/// A JSON string as a header string, undoing the management plugin's base64 escape for
/// non-UTF-8 values. A malformed escape is kept as the literal text.
fn string_value(s: &str) -> HeaderValue {
    if let Some(encoded) = s.strip_prefix(NOT_UTF8_PREFIX)
        && let Ok(bytes) = STANDARD.decode(encoded.trim())
    {
        return HeaderValue::LongString(bytes);
    }
    HeaderValue::string(s)
}

/// A JSON object as a table, in the object's order. Anything else (the API's `[]` for "none",
/// `null`, a stray scalar) is an empty table.
pub fn table_from_json(v: &Value) -> Table {
    match v {
        Value::Object(map) => map
            .iter()
            .map(|(k, v)| (k.clone(), value_at(v, 1)))
            .collect(),
        _ => Table::new(),
    }
}

/// The `properties` object of a `/get` result: the basic properties and the headers. `[]` (what
/// the API writes for a message without properties) and any other non-object mean "none".
pub fn properties_from_json(v: &Value) -> (Properties, Table) {
    let Value::Object(map) = v else {
        return (Properties::default(), Table::new());
    };
    let text = |key: &str| -> Option<String> {
        match map.get(key)? {
            Value::String(s) => Some(s.clone()),
            Value::Number(n) => Some(n.to_string()),
            _ => None,
        }
    };
    let small = |key: &str| -> Option<u8> {
        map.get(key)
            .and_then(Value::as_u64)
            .and_then(|n| u8::try_from(n).ok())
    };
    let props = Properties {
        content_type: text("content_type"),
        content_encoding: text("content_encoding"),
        delivery_mode: small("delivery_mode"),
        priority: small("priority"),
        correlation_id: text("correlation_id"),
        reply_to: text("reply_to"),
        expiration: text("expiration"),
        message_id: text("message_id"),
        timestamp: map.get("timestamp").and_then(Value::as_u64),
        kind: text("type"),
        user_id: text("user_id"),
        app_id: text("app_id"),
        cluster_id: text("cluster_id"),
    };
    let headers = map.get("headers").map(table_from_json).unwrap_or_default();
    (props, headers)
}

/// One element of the `POST /api/queues/{vhost}/{queue}/get` response as a dead letter read from
/// `queue` at `position`. Fails only when the payload cannot be read at all (missing, or base64
/// that does not decode); the message says which.
pub fn dead_letter_from_mgmt(
    queue: &str,
    position: u64,
    msg: &Value,
) -> Result<DeadLetter, String> {
    let Value::Object(map) = msg else {
        return Err(format!(
            "message {position} from {queue}: the management API returned {} instead of an object",
            kind_of(msg)
        ));
    };
    let payload = match map.get("payload") {
        Some(Value::String(s)) => s.as_str(),
        Some(other) => {
            return Err(format!(
                "message {position} from {queue}: payload is {} instead of a string",
                kind_of(other)
            ));
        }
        None => {
            return Err(format!(
                "message {position} from {queue}: no payload in the management API response"
            ));
        }
    };
    let body = match map.get("payload_encoding").and_then(Value::as_str) {
        Some("base64") => STANDARD.decode(payload.trim()).map_err(|e| {
            format!("message {position} from {queue}: the base64 payload does not decode ({e})")
        })?,
        // "string", or absent on old versions: the payload is the body as text.
        _ => payload.as_bytes().to_vec(),
    };
    let body_size = map
        .get("payload_bytes")
        .and_then(Value::as_u64)
        .unwrap_or(body.len() as u64);
    let (properties, headers) = map
        .get("properties")
        .map(properties_from_json)
        .unwrap_or_default();
    let str_field = |key: &str| {
        map.get(key)
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string()
    };
    let delivery = Delivery {
        exchange: str_field("exchange"),
        routing_key: str_field("routing_key"),
        redelivered: map
            .get("redelivered")
            .and_then(Value::as_bool)
            .unwrap_or(false),
        // Quorum queues add the count as a header on delivery; the API shows it among the headers.
        delivery_count: headers
            .get_i64("x-delivery-count")
            .and_then(|n| u64::try_from(n).ok()),
        stream_offset: headers
            .get_i64("x-stream-offset")
            .and_then(|n| u64::try_from(n).ok()),
    };
    Ok(DeadLetter {
        queue: queue.to_string(),
        position,
        properties,
        headers,
        body,
        body_size,
        delivery,
    })
}

fn kind_of(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn values_keep_what_json_can_say() {
        assert_eq!(header_value_from_json(&json!(3)), HeaderValue::I64(3));
        assert_eq!(header_value_from_json(&json!(1.5)), HeaderValue::F64(1.5));
        assert_eq!(
            header_value_from_json(&json!(u64::MAX)),
            HeaderValue::F64(u64::MAX as f64)
        );
        assert_eq!(header_value_from_json(&json!(null)), HeaderValue::Void);
        assert_eq!(header_value_from_json(&json!("a")).as_str(), Some("a"));
        let nested = header_value_from_json(&json!({"a": [1, {"b": true}]}));
        let inner = nested
            .as_table()
            .and_then(|t| t.get("a"))
            .and_then(HeaderValue::as_array);
        assert_eq!(inner.map(<[HeaderValue]>::len), Some(2));
    }

    #[test]
    fn not_utf8_escape_becomes_bytes() {
        let v = header_value_from_json(&json!("Not UTF-8, base64 is: /wD+"));
        assert_eq!(v, HeaderValue::LongString(vec![0xff, 0x00, 0xfe]));
        // A broken escape stays text rather than vanishing.
        let broken = header_value_from_json(&json!("Not UTF-8, base64 is: !!!"));
        assert_eq!(broken.as_str(), Some("Not UTF-8, base64 is: !!!"));
    }

    #[test]
    fn empty_properties_array() {
        let (p, h) = properties_from_json(&json!([]));
        assert_eq!(p, Properties::default());
        assert!(h.is_empty());
    }

    #[test]
    fn malformed_messages_are_errors_not_panics() {
        assert!(dead_letter_from_mgmt("q", 0, &json!([])).is_err());
        assert!(dead_letter_from_mgmt("q", 0, &json!({})).is_err());
        assert!(dead_letter_from_mgmt("q", 0, &json!({"payload": 3})).is_err());
        let bad = json!({"payload": "%%%", "payload_encoding": "base64"});
        let err = dead_letter_from_mgmt("q", 4, &bad)
            .err()
            .unwrap_or_default();
        assert!(err.contains("base64"), "{err}");
        let minimal = dead_letter_from_mgmt("q", 1, &json!({"payload": "x"}));
        assert_eq!(minimal.map(|d| d.body), Ok(b"x".to_vec()));
    }
}
