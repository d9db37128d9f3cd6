//! The snapshot format: a lossless copy of a dead-letter queue's messages — every property, typed
//! headers, body bytes — one JSON object per line, so a DLQ can be attached to an incident and
//! opened elsewhere (`warren export`, `warren open`).
//!
//! Line 1 is a header: `{"warren_snapshot": 1, "queue": …, "vhost": …, "exported_at": …, "source": …}`.
//! Every other line is one message: `{"position", "properties", "headers", "body_base64",
//! "body_size", "delivery"}`. Header values carry their AMQP type: `{"type": "i64", "value": 3}`;
//! strings that are not UTF-8 are written as `{"type": "long-string", "base64": "…"}`.
//! Writing what was read gives the same bytes back: field order is fixed, tables keep their order.

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as B64;
use serde_json::{Map, Value, json};

use super::message::{DeadLetter, Delivery, Properties};
use super::value::{HeaderValue, MAX_DEPTH, Table};

pub const FORMAT_VERSION: u64 = 1;

/// The first line of a snapshot.
#[derive(Clone, Debug, PartialEq)]
pub struct SnapshotHeader {
    pub queue: String,
    pub vhost: String,
    /// RFC 3339.
    pub exported_at: String,
    /// Where it came from, e.g. "RabbitMQ 4.0.5 at localhost" (never credentials).
    pub source: String,
}

#[derive(Debug, thiserror::Error, PartialEq)]
pub enum SnapshotError {
    #[error("line {line}: not JSON ({reason})")]
    Json { line: usize, reason: String },
    #[error(
        "line 1 is not a Warren snapshot header (expected \"warren_snapshot\": {FORMAT_VERSION})"
    )]
    NotASnapshot,
    #[error(
        "snapshot format version {0} is newer than this Warren understands ({FORMAT_VERSION}); upgrade Warren"
    )]
    Version(u64),
    #[error("line {line}: {reason}")]
    Field { line: usize, reason: String },
}

pub fn header_line(h: &SnapshotHeader) -> String {
    json!({
        "warren_snapshot": FORMAT_VERSION,
        "queue": h.queue,
        "vhost": h.vhost,
        "exported_at": h.exported_at,
        "source": h.source,
    })
    .to_string()
}

/// One message as one line (no trailing newline).
pub fn message_line(m: &DeadLetter) -> String {
    let p = &m.properties;
    let mut props = Map::new();
    let mut put = |k: &str, v: Option<Value>| {
        if let Some(v) = v {
            props.insert(k.to_string(), v);
        }
    };
    put("content_type", p.content_type.clone().map(Value::from));
    put(
        "content_encoding",
        p.content_encoding.clone().map(Value::from),
    );
    put("delivery_mode", p.delivery_mode.map(Value::from));
    put("priority", p.priority.map(Value::from));
    put("correlation_id", p.correlation_id.clone().map(Value::from));
    put("reply_to", p.reply_to.clone().map(Value::from));
    put("expiration", p.expiration.clone().map(Value::from));
    put("message_id", p.message_id.clone().map(Value::from));
    put("timestamp", p.timestamp.map(Value::from));
    put("type", p.kind.clone().map(Value::from));
    put("user_id", p.user_id.clone().map(Value::from));
    put("app_id", p.app_id.clone().map(Value::from));
    put("cluster_id", p.cluster_id.clone().map(Value::from));
    let d = &m.delivery;
    json!({
        "position": m.position,
        "properties": Value::Object(props),
        "headers": table_to_json(&m.headers),
        "body_base64": B64.encode(&m.body),
        "body_size": m.body_size,
        "delivery": {
            "exchange": d.exchange,
            "routing_key": d.routing_key,
            "redelivered": d.redelivered,
            "delivery_count": d.delivery_count,
            "stream_offset": d.stream_offset,
        },
    })
    .to_string()
}

/// The whole snapshot as text, one object per line, ending with a newline.
pub fn write(h: &SnapshotHeader, messages: &[DeadLetter]) -> String {
    let mut out = header_line(h);
    out.push('\n');
    for m in messages {
        out.push_str(&message_line(m));
        out.push('\n');
    }
    out
}

/// Reads a snapshot. Bad lines are errors with their line number: a snapshot is evidence, and a
/// partly read one would silently drop messages.
pub fn read(text: &str) -> Result<(SnapshotHeader, Vec<DeadLetter>), SnapshotError> {
    let mut lines = text
        .lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty());
    let Some((_, first)) = lines.next() else {
        return Err(SnapshotError::NotASnapshot);
    };
    let head: Value = serde_json::from_str(first).map_err(|e| SnapshotError::Json {
        line: 1,
        reason: e.to_string(),
    })?;
    let version = head
        .get("warren_snapshot")
        .and_then(Value::as_u64)
        .ok_or(SnapshotError::NotASnapshot)?;
    if version > FORMAT_VERSION {
        return Err(SnapshotError::Version(version));
    }
    let text_of = |v: &Value, k: &str| {
        v.get(k)
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string()
    };
    let header = SnapshotHeader {
        queue: text_of(&head, "queue"),
        vhost: text_of(&head, "vhost"),
        exported_at: text_of(&head, "exported_at"),
        source: text_of(&head, "source"),
    };
    let mut messages = Vec::new();
    for (i, line) in lines {
        let n = i + 1;
        let v: Value = serde_json::from_str(line).map_err(|e| SnapshotError::Json {
            line: n,
            reason: e.to_string(),
        })?;
        messages.push(
            message_from_json(&header.queue, &v)
                .map_err(|reason| SnapshotError::Field { line: n, reason })?,
        );
    }
    Ok((header, messages))
}

fn message_from_json(queue: &str, v: &Value) -> Result<DeadLetter, String> {
    let props = v
        .get("properties")
        .and_then(Value::as_object)
        .ok_or("missing \"properties\"")?;
    let s = |k: &str| props.get(k).and_then(Value::as_str).map(str::to_string);
    let small = |k: &str| -> Result<Option<u8>, String> {
        match props.get(k) {
            None | Some(Value::Null) => Ok(None),
            Some(x) => x
                .as_u64()
                .and_then(|n| u8::try_from(n).ok())
                .map(Some)
                .ok_or_else(|| format!("property {k} is not a small number")),
        }
    };
    let properties = Properties {
        content_type: s("content_type"),
        content_encoding: s("content_encoding"),
        delivery_mode: small("delivery_mode")?,
        priority: small("priority")?,
        correlation_id: s("correlation_id"),
        reply_to: s("reply_to"),
        expiration: s("expiration"),
        message_id: s("message_id"),
        timestamp: props.get("timestamp").and_then(Value::as_u64),
        kind: s("type"),
        user_id: s("user_id"),
        app_id: s("app_id"),
        cluster_id: s("cluster_id"),
    };
    let headers = match v.get("headers") {
        None | Some(Value::Null) => Table::new(),
        Some(h) => table_from_json(h)?,
    };
    let body = B64
        .decode(
            v.get("body_base64")
                .and_then(Value::as_str)
                .ok_or("missing \"body_base64\"")?,
        )
        .map_err(|e| format!("body is not base64: {e}"))?;
    let d = v.get("delivery").cloned().unwrap_or(Value::Null);
    Ok(DeadLetter {
        queue: queue.to_string(),
        position: v.get("position").and_then(Value::as_u64).unwrap_or(0),
        properties,
        headers,
        body_size: v
            .get("body_size")
            .and_then(Value::as_u64)
            .unwrap_or(body.len() as u64),
        body,
        delivery: Delivery {
            exchange: d
                .get("exchange")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_string(),
            routing_key: d
                .get("routing_key")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_string(),
            redelivered: d
                .get("redelivered")
                .and_then(Value::as_bool)
                .unwrap_or(false),
            delivery_count: d.get("delivery_count").and_then(Value::as_u64),
            stream_offset: d.get("stream_offset").and_then(Value::as_u64),
        },
    })
}

pub fn table_to_json(t: &Table) -> Value {
    table_json_at(t, 1)
}

fn table_json_at(t: &Table, level: usize) -> Value {
    Value::Object(
        t.iter()
            .map(|(k, v)| (k.to_string(), value_json_at(v, level)))
            .collect(),
    )
}

fn bytes_json(kind: &str, b: &[u8]) -> Value {
    match std::str::from_utf8(b) {
        Ok(s) if kind != "bytes" => json!({"type": kind, "value": s}),
        _ => json!({"type": kind, "base64": B64.encode(b)}),
    }
}

fn float_json(kind: &str, f: f64) -> Value {
    if f.is_finite() {
        json!({"type": kind, "value": f})
    } else {
        // JSON has no NaN or infinity.
        json!({"type": kind, "value": f.to_string()})
    }
}

/// One header value, typed. Never recurses deeper than `MAX_DEPTH`: values from outside are
/// no deeper (deeper ones are `TooDeep`, written flat with their bytes).
pub fn value_to_json(v: &HeaderValue) -> Value {
    value_json_at(v, 1)
}

fn value_json_at(v: &HeaderValue, level: usize) -> Value {
    if level > MAX_DEPTH && matches!(v, HeaderValue::Table(_) | HeaderValue::Array(_)) {
        // Only a value built in code gets here; written without bytes, like the API's.
        return json!({"type": "too-deep", "depth": v.depth(), "base64": ""});
    }
    match v {
        HeaderValue::Void => json!({"type": "void"}),
        HeaderValue::Bool(b) => json!({"type": "bool", "value": b}),
        HeaderValue::I8(n) => json!({"type": "i8", "value": n}),
        HeaderValue::U8(n) => json!({"type": "u8", "value": n}),
        HeaderValue::I16(n) => json!({"type": "i16", "value": n}),
        HeaderValue::U16(n) => json!({"type": "u16", "value": n}),
        HeaderValue::I32(n) => json!({"type": "i32", "value": n}),
        HeaderValue::U32(n) => json!({"type": "u32", "value": n}),
        HeaderValue::I64(n) => json!({"type": "i64", "value": n}),
        HeaderValue::F32(f) => float_json("f32", f64::from(*f)),
        HeaderValue::F64(f) => float_json("f64", *f),
        HeaderValue::Decimal { scale, value } => {
            json!({"type": "decimal", "scale": scale, "value": value})
        }
        HeaderValue::ShortString(b) => bytes_json("short-string", b),
        HeaderValue::LongString(b) => bytes_json("long-string", b),
        HeaderValue::Timestamp(t) => json!({"type": "timestamp", "value": t}),
        HeaderValue::Table(t) => json!({"type": "table", "value": table_json_at(t, level + 1)}),
        HeaderValue::Array(a) => json!({
            "type": "array",
            "value": a.iter().map(|v| value_json_at(v, level + 1)).collect::<Vec<_>>()
        }),
        HeaderValue::Bytes(b) => bytes_json("bytes", b),
        // Flat, whatever the depth: the exact AMQP bytes, read back as they were.
        HeaderValue::TooDeep { depth, raw } => {
            json!({"type": "too-deep", "depth": depth, "base64": B64.encode(raw)})
        }
    }
}

pub fn table_from_json(v: &Value) -> Result<Table, String> {
    table_at(v, 1)
}

fn table_at(v: &Value, level: usize) -> Result<Table, String> {
    let obj = v.as_object().ok_or("headers are not an object")?;
    obj.iter()
        .map(|(k, v)| {
            value_at(v, level)
                .map(|hv| (k.clone(), hv))
                .map_err(|e| format!("header {k}: {e}"))
        })
        .collect()
}

/// One typed header value. Tables and arrays deeper than [`MAX_DEPTH`] are refused (Warren
/// writes such values flat, as `too-deep`), so reading never recurses further than that.
pub fn value_from_json(v: &Value) -> Result<HeaderValue, String> {
    value_at(v, 1)
}

fn value_at(v: &Value, level: usize) -> Result<HeaderValue, String> {
    let kind = v
        .get("type")
        .and_then(Value::as_str)
        .ok_or("value without a type")?;
    let val = v.get("value");
    let int = || {
        val.and_then(Value::as_i64)
            .ok_or_else(|| format!("{kind} without an integer value"))
    };
    let bytes = || -> Result<Vec<u8>, String> {
        if let Some(s) = val.and_then(Value::as_str) {
            return Ok(s.as_bytes().to_vec());
        }
        let b = v
            .get("base64")
            .and_then(Value::as_str)
            .ok_or_else(|| format!("{kind} without a value"))?;
        B64.decode(b)
            .map_err(|e| format!("{kind}: bad base64: {e}"))
    };
    let float = || -> Result<f64, String> {
        match val {
            Some(Value::Number(n)) => n.as_f64().ok_or_else(|| format!("{kind}: not a number")),
            Some(Value::String(s)) => s.parse().map_err(|_| format!("{kind}: not a number")),
            _ => Err(format!("{kind} without a value")),
        }
    };
    let range = |what: &str| format!("{what} out of range");
    Ok(match kind {
        "void" => HeaderValue::Void,
        "bool" => HeaderValue::Bool(val.and_then(Value::as_bool).ok_or("bool without a value")?),
        "i8" => HeaderValue::I8(i8::try_from(int()?).map_err(|_| range("i8"))?),
        "u8" => HeaderValue::U8(u8::try_from(int()?).map_err(|_| range("u8"))?),
        "i16" => HeaderValue::I16(i16::try_from(int()?).map_err(|_| range("i16"))?),
        "u16" => HeaderValue::U16(u16::try_from(int()?).map_err(|_| range("u16"))?),
        "i32" => HeaderValue::I32(i32::try_from(int()?).map_err(|_| range("i32"))?),
        "u32" => HeaderValue::U32(u32::try_from(int()?).map_err(|_| range("u32"))?),
        "i64" => HeaderValue::I64(int()?),
        "f32" => HeaderValue::F32(float()? as f32),
        "f64" => HeaderValue::F64(float()?),
        "decimal" => HeaderValue::Decimal {
            scale: v
                .get("scale")
                .and_then(Value::as_u64)
                .and_then(|n| u8::try_from(n).ok())
                .ok_or("decimal scale")?,
            value: val
                .and_then(Value::as_u64)
                .and_then(|n| u32::try_from(n).ok())
                .ok_or("decimal value")?,
        },
        "short-string" => HeaderValue::ShortString(bytes()?),
        "long-string" => HeaderValue::LongString(bytes()?),
        "bytes" => HeaderValue::Bytes(bytes()?),
        "timestamp" => HeaderValue::Timestamp(
            val.and_then(Value::as_u64)
                .ok_or("timestamp without a value")?,
        ),
        "table" | "array" if level > MAX_DEPTH => {
            return Err(format!(
                "nested deeper than {MAX_DEPTH} levels (Warren writes such a value as \"too-deep\")"
            ));
        }
        "table" => HeaderValue::Table(table_at(val.ok_or("table without a value")?, level + 1)?),
        "array" => HeaderValue::Array(
            val.and_then(Value::as_array)
                .ok_or("array without a value")?
                .iter()
                .map(|v| value_at(v, level + 1))
                .collect::<Result<_, _>>()?,
        ),
        "too-deep" => HeaderValue::TooDeep {
            depth: v
                .get("depth")
                .and_then(Value::as_u64)
                .and_then(|d| usize::try_from(d).ok())
                .ok_or("too-deep without a depth")?,
            raw: bytes()?,
        },
        other => return Err(format!("unknown value type '{other}'")),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn every_type() -> Table {
        let mut inner = Table::new();
        inner.insert("count", HeaderValue::I64(3));
        inner.insert("reason", HeaderValue::string("rejected"));
        [
            ("void", HeaderValue::Void),
            ("bool", HeaderValue::Bool(true)),
            ("i8", HeaderValue::I8(-8)),
            ("u8", HeaderValue::U8(200)),
            ("i16", HeaderValue::I16(-300)),
            ("u16", HeaderValue::U16(60000)),
            ("i32", HeaderValue::I32(-70000)),
            ("u32", HeaderValue::U32(4_000_000_000)),
            ("i64", HeaderValue::I64(i64::MIN)),
            ("f32", HeaderValue::F32(1.5)),
            ("f64", HeaderValue::F64(-0.1)),
            ("nan", HeaderValue::F64(f64::INFINITY)),
            (
                "dec",
                HeaderValue::Decimal {
                    scale: 2,
                    value: 12345,
                },
            ),
            ("short", HeaderValue::ShortString(b"abc".to_vec())),
            (
                "long",
                HeaderValue::LongString(vec![0xff, 0x1b, b'[', b'3', b'1', b'm']),
            ),
            ("ts", HeaderValue::Timestamp(1_759_042_215)),
            ("table", HeaderValue::Table(inner.clone())),
            (
                "array",
                HeaderValue::Array(vec![HeaderValue::Table(inner), HeaderValue::Void]),
            ),
            ("bytes", HeaderValue::Bytes(b"text-looking".to_vec())),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v))
        .collect()
    }

    fn msg() -> DeadLetter {
        DeadLetter {
            queue: "orders.dlq".into(),
            position: 7,
            properties: Properties {
                content_type: Some("application/json".into()),
                delivery_mode: Some(2),
                priority: Some(0),
                message_id: Some("order-1000".into()),
                timestamp: Some(1_759_042_000),
                kind: Some("OrderCreated".into()),
                ..Default::default()
            },
            headers: every_type(),
            body: vec![0, 159, 146, 150, b'{'],
            body_size: 5,
            delivery: Delivery {
                exchange: "".into(),
                routing_key: "orders.dlq".into(),
                redelivered: true,
                delivery_count: Some(2),
                stream_offset: None,
            },
        }
    }

    #[test]
    fn a_snapshot_reads_back_exactly_and_writes_the_same_bytes() {
        let h = SnapshotHeader {
            queue: "orders.dlq".into(),
            vhost: "/".into(),
            exported_at: "2026-11-29T23:00:00Z".into(),
            source: "RabbitMQ 3.10.8".into(),
        };
        let text = write(
            &h,
            &[
                msg(),
                DeadLetter {
                    position: 8,
                    ..msg()
                },
            ],
        );
        let (h2, msgs) = read(&text).expect("reads");
        assert_eq!(h2, h);
        assert_eq!(
            msgs,
            vec![
                msg(),
                DeadLetter {
                    position: 8,
                    ..msg()
                }
            ]
        );
        assert_eq!(write(&h2, &msgs), text);
    }

    #[test]
    fn bad_input_says_which_line() {
        assert_eq!(read(""), Err(SnapshotError::NotASnapshot));
        assert_eq!(read("{\"x\":1}\n"), Err(SnapshotError::NotASnapshot));
        assert_eq!(
            read("{\"warren_snapshot\":99}\n"),
            Err(SnapshotError::Version(99))
        );
        let h = header_line(&SnapshotHeader {
            queue: "q".into(),
            vhost: "/".into(),
            exported_at: String::new(),
            source: String::new(),
        });
        assert!(matches!(
            read(&format!("{h}\nnot json\n")),
            Err(SnapshotError::Json { line: 2, .. })
        ));
        let bad = format!(
            "{h}\n{{\"properties\":{{}},\"headers\":{{\"a\":{{\"type\":\"u8\",\"value\":999}}}},\"body_base64\":\"\"}}\n"
        );
        assert!(
            matches!(read(&bad), Err(SnapshotError::Field { line: 2, .. })),
            "{:?}",
            read(&bad)
        );
    }
}
