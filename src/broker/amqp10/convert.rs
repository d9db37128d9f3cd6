//! An AMQP 1.0 message as Warren's model sees it, and as a replay sends it on.
//!
//! [`dead_letter`] reads a message the way RabbitMQ 4 hands it to an AMQP 0.9.1 reader
//! (`mc_amqpl:convert_from`), so a message read over AMQP 1.0 is explained, selected, keyed and
//! planned exactly as the same message browsed over 0.9.1. [`republish`] keeps the bare message
//! (properties, application properties, body) as it came and changes only what AMQP 1.0 lets a
//! mover change: the header (the broker's delivery count goes) and the message annotations (the
//! broker's death record and counters and the failure's annotations go, Warren's replay marks
//! come as `x-opt-warren-…`).

use fe2o3_amqp::types::messaging::annotations::OwnedKey;
use fe2o3_amqp::types::messaging::{Body, Header, Message, MessageAnnotations, MessageId};
use fe2o3_amqp::types::primitives::{OrderedMap, Symbol, Value};

use crate::domain::message::{DeadLetter, Delivery, Properties};
use crate::domain::value::{HeaderValue, MAX_DEPTH, Table};

/// A message as fe2o3 decodes it, whatever its body sections.
pub(crate) type Message10 = Message<Body<Value>>;

/// Annotations the broker sets on delivery: never sent on by a replay.
const BROKER_ANNOTATIONS: &[&str] = &[
    "x-opt-deaths",
    "x-delivery-count",
    "x-acquired-count",
    "x-routing-key",
    "x-exchange",
    "x-opt-rabbitmq-received-time",
];

/// Longest string a 0.9.1 short string holds.
const SHORT: usize = 255;

/// `msg`, read from `queue` at `position`, as an AMQP 0.9.1 reader would have it.
pub(crate) fn dead_letter(queue: &str, position: u64, msg: &Message10) -> DeadLetter {
    let mut headers = Table::new();
    if let Some(ap) = &msg.application_properties {
        for (k, v) in ap.0.iter() {
            if k.len() <= SHORT {
                headers.insert(k.clone(), header(&Value::from(v.clone()), 0));
            }
        }
    }
    let anns = msg.message_annotations.as_ref();
    let ann = |key: &str| anns.and_then(|a| a.0.get(&OwnedKey::Symbol(Symbol::from(key))));
    if let Some(a) = anns {
        for (k, v) in a.0.iter() {
            let OwnedKey::Symbol(Symbol(k)) = k else {
                continue;
            };
            match k.as_str() {
                "x-opt-deaths" => {
                    if let Some(d) = deaths(v) {
                        headers.insert("x-death", d);
                    }
                }
                "x-cc" => headers.insert("CC", header(v, 0)),
                k if k.starts_with("x-") && k.len() <= SHORT && !internal(k) => {
                    headers.insert(k.to_string(), header(v, 0));
                }
                _ => {}
            }
        }
    }
    let mut properties = Properties::default();
    let p = msg.properties.as_ref();
    properties.message_id = id(
        p.and_then(|p| p.message_id.as_ref()),
        "x-message-id",
        &mut headers,
    );
    properties.correlation_id = id(
        p.and_then(|p| p.correlation_id.as_ref()),
        crate::domain::amqp10::carrier::CORRELATION_ID_HEADER,
        &mut headers,
    );
    if let Some(p) = p {
        properties.user_id = p
            .user_id
            .as_ref()
            .and_then(|u| std::str::from_utf8(u).ok())
            .filter(|u| u.len() <= SHORT)
            .map(String::from);
        properties.reply_to = p.reply_to.clone().filter(|r| r.len() <= SHORT);
        properties.app_id = p.group_id.clone().filter(|g| g.len() <= SHORT);
        properties.content_type = p.content_type.as_ref().map(|s| s.0.clone());
        properties.content_encoding = p.content_encoding.as_ref().map(|s| s.0.clone());
        properties.timestamp = p
            .creation_time
            .as_ref()
            .and_then(|t| u64::try_from(t.clone().into_inner() / 1000).ok());
    }
    let h = msg.header.as_ref();
    properties.delivery_mode = Some(if h.is_some_and(|h| h.durable) { 2 } else { 1 });
    properties.priority = h.map(|h| h.priority.0);
    properties.expiration = h.and_then(|h| h.ttl).map(|t| t.to_string());
    let (body, encoded) = body_bytes(&msg.body);
    properties.kind = if encoded {
        Some(crate::domain::amqp10::ENCODED_BODY_TYPE.to_string())
    } else {
        match ann("x-basic-type") {
            Some(Value::String(s)) => Some(s.clone()),
            _ => None,
        }
    };
    let text = |v: Option<&Value>| match v {
        Some(Value::String(s)) => s.clone(),
        _ => String::new(),
    };
    let delivery_count = headers
        .get_i64("x-delivery-count")
        .and_then(|n| u64::try_from(n).ok());
    DeadLetter {
        queue: queue.to_string(),
        position,
        delivery: Delivery {
            exchange: text(ann("x-exchange")),
            routing_key: text(ann("x-routing-key")),
            redelivered: h.is_some_and(|h| h.delivery_count > 0),
            delivery_count,
            stream_offset: None,
        },
        properties,
        headers,
        body_size: body.len() as u64,
        body,
    }
}

/// Annotations the broker adds in a conversion or keeps for itself.
fn internal(k: &str) -> bool {
    k.starts_with("x-basic-") || matches!(k, "x-routing-key" | "x-exchange" | "x-death")
}

/// An id as the 0.9.1 property carries it, or kept in `header` when it cannot.
fn id(v: Option<&MessageId>, header_name: &str, headers: &mut Table) -> Option<String> {
    match v? {
        MessageId::String(s) if s.len() <= SHORT => Some(s.clone()),
        MessageId::String(s) => {
            headers.insert(header_name, HeaderValue::LongString(s.clone().into_bytes()));
            None
        }
        MessageId::Ulong(n) => Some(n.to_string()),
        MessageId::Uuid(u) => Some(format!("urn:uuid:{}", uuid_text(u.as_inner()))),
        MessageId::Binary(b) => {
            headers.insert(header_name, HeaderValue::Bytes(b.to_vec()));
            None
        }
    }
}

fn uuid_text(b: &[u8; 16]) -> String {
    let hex: String = b.iter().map(|x| format!("{x:02x}")).collect();
    format!(
        "{}-{}-{}-{}-{}",
        &hex[0..8],
        &hex[8..12],
        &hex[12..16],
        &hex[16..20],
        &hex[20..32]
    )
}

/// The body as a 0.9.1 reader gets it: the data sections' bytes, or the sections' AMQP encoding
/// (`true`) for an amqp-value or amqp-sequence body.
fn body_bytes(body: &Body<Value>) -> (Vec<u8>, bool) {
    match body {
        Body::Data(batch) => (
            batch.iter().flat_map(|d| d.0.iter().copied()).collect(),
            false,
        ),
        Body::Empty => (Vec::new(), false),
        Body::Value(v) => (serde_amqp::to_vec(v).unwrap_or_default(), true),
        Body::Sequence(batch) => {
            let mut out = Vec::new();
            for s in batch.iter() {
                out.extend(serde_amqp::to_vec(s).unwrap_or_default());
            }
            (out, true)
        }
    }
}

/// `x-opt-deaths` as the `x-death` header a 0.9.1 reader gets (`time` in seconds, the first).
fn deaths(v: &Value) -> Option<HeaderValue> {
    let Value::Array(list) = v else {
        return None;
    };
    let mut out = Vec::new();
    for d in list.0.iter() {
        let Value::Map(m) = d else {
            continue;
        };
        let get = |k: &str| m.get(&Value::Symbol(Symbol::from(k)));
        let text = |k: &str| match get(k) {
            Some(Value::String(s)) | Some(Value::Symbol(Symbol(s))) => s.clone(),
            _ => String::new(),
        };
        let mut t = Table::new();
        let count = match get("count") {
            Some(Value::Ulong(n)) => i64::try_from(*n).unwrap_or(i64::MAX),
            _ => 0,
        };
        if let Some(Value::Uint(ttl)) = get("ttl") {
            t.insert("original-expiration", HeaderValue::string(ttl.to_string()));
        }
        t.insert("count", HeaderValue::I64(count));
        t.insert("reason", HeaderValue::string(text("reason")));
        t.insert("queue", HeaderValue::string(text("queue")));
        if let Some(Value::Timestamp(ts)) = get("first-time") {
            let secs = u64::try_from(ts.clone().into_inner() / 1000).unwrap_or(0);
            t.insert("time", HeaderValue::Timestamp(secs));
        }
        t.insert("exchange", HeaderValue::string(text("exchange")));
        let keys = match get("routing-keys") {
            Some(Value::Array(a)) => a.0.iter().map(|k| header(k, 1)).collect(),
            Some(Value::List(a)) => a.iter().map(|k| header(k, 1)).collect(),
            _ => Vec::new(),
        };
        t.insert("routing-keys", HeaderValue::Array(keys));
        out.push(HeaderValue::Table(t));
    }
    Some(HeaderValue::Array(out))
}

/// An AMQP 1.0 value as a 0.9.1 header value (`mc_amqpl:to_091`), bounded in depth.
fn header(v: &Value, depth: usize) -> HeaderValue {
    if depth > MAX_DEPTH {
        return HeaderValue::TooDeep {
            depth,
            raw: Vec::new(),
        };
    }
    match v {
        Value::Null | Value::Described(_) => HeaderValue::Void,
        Value::Bool(b) => HeaderValue::Bool(*b),
        Value::Ubyte(n) => HeaderValue::U8(*n),
        Value::Ushort(n) => HeaderValue::U16(*n),
        Value::Uint(n) => HeaderValue::U32(*n),
        Value::Ulong(n) => HeaderValue::I64(i64::try_from(*n).unwrap_or(i64::MAX)),
        Value::Byte(n) => HeaderValue::I8(*n),
        Value::Short(n) => HeaderValue::I16(*n),
        Value::Int(n) => HeaderValue::I32(*n),
        Value::Long(n) => HeaderValue::I64(*n),
        Value::Float(f) => HeaderValue::F32(f.into_inner()),
        Value::Double(f) => HeaderValue::F64(f.into_inner()),
        Value::Timestamp(t) => {
            HeaderValue::Timestamp(u64::try_from(t.clone().into_inner() / 1000).unwrap_or(0))
        }
        Value::String(s) => HeaderValue::LongString(s.clone().into_bytes()),
        Value::Symbol(s) => HeaderValue::LongString(s.0.clone().into_bytes()),
        Value::Binary(b) => HeaderValue::Bytes(b.to_vec()),
        Value::Uuid(u) => HeaderValue::Bytes(u.as_inner().to_vec()),
        Value::Char(c) => HeaderValue::string(c.to_string()),
        Value::List(l) => HeaderValue::Array(l.iter().map(|x| header(x, depth + 1)).collect()),
        Value::Array(a) => HeaderValue::Array(a.0.iter().map(|x| header(x, depth + 1)).collect()),
        Value::Map(m) => {
            let mut t = Table::new();
            for (k, x) in m.iter() {
                let key = match k {
                    Value::String(s) | Value::Symbol(Symbol(s)) => s.clone(),
                    other => format!("{other:?}"),
                };
                t.insert(key, header(x, depth + 1));
            }
            HeaderValue::Table(t)
        }
        Value::Decimal32(_) | Value::Decimal64(_) | Value::Decimal128(_) => HeaderValue::Void,
    }
}

/// What a replay changes of a message it sends on over AMQP 1.0.
#[derive(Clone, Debug, Default)]
pub(crate) struct Marks {
    /// Annotation keys the plan removes (the failure's record, as `x-opt-…` headers it read).
    pub(crate) removed: Vec<String>,
    /// Warren's replay marks, as 0.9.1 headers would carry them (`warren-replay-id`, …): sent as
    /// `x-opt-warren-replay-id`, ….
    pub(crate) added: Vec<(String, Value)>,
    /// The plan removes the expiry (`--clear-expiry`): no `ttl` in the header.
    pub(crate) clear_ttl: bool,
}

/// `msg` as a replay sends it: its bare message untouched; a fresh header (durable, priority and
/// time to live as delivered, no delivery count); its message annotations without the broker's
/// and the removed ones, with Warren's marks.
pub(crate) fn republish(mut msg: Message10, marks: &Marks) -> Message10 {
    let h = msg.header.take().unwrap_or_default();
    msg.header = Some(Header {
        durable: h.durable,
        priority: h.priority,
        ttl: if marks.clear_ttl { None } else { h.ttl },
        first_acquirer: false,
        delivery_count: 0,
    });
    msg.delivery_annotations = None;
    let mut anns: OrderedMap<OwnedKey, Value> = OrderedMap::new();
    if let Some(MessageAnnotations(a)) = msg.message_annotations.take() {
        for (k, v) in a {
            let drop = match &k {
                OwnedKey::Symbol(Symbol(s)) => {
                    BROKER_ANNOTATIONS.contains(&s.as_str())
                        || s.starts_with("x-first-death-")
                        || s.starts_with("x-last-death-")
                        || s.starts_with(crate::domain::amqp10::carrier::WARREN_PREFIX)
                        || marks.removed.iter().any(|r| r == s)
                }
                OwnedKey::Ulong(_) => false,
            };
            if !drop {
                anns.insert(k, v);
            }
        }
    }
    for (k, v) in &marks.added {
        let name = format!("x-opt-{k}");
        anns.insert(OwnedKey::Symbol(Symbol::from(name)), v.clone());
    }
    msg.message_annotations = (!anns.is_empty()).then_some(MessageAnnotations(anns));
    msg
}

#[cfg(test)]
#[path = "convert_tests.rs"]
mod tests;
