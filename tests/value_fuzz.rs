//! Property tests: no AMQP value, byte string or JSON text makes the conversions panic or recurse
//! without bound, and every value round-trips exactly, within the depth limit and beyond it.
//!
//! - lapin value → domain → lapin gives the same value (compared by its AMQP encoding, so NaN
//!   and every bit count), whatever the nesting; deeper than `MAX_DEPTH` the domain holds it as
//!   `TooDeep` bytes, and no domain value is deeper than the limit.
//! - Warren's own encoder writes what lapin's parser reads, and its decoder reads what lapin
//!   reads (a differential test on mutated encodings), never panicking on any bytes.
//! - The snapshot reader takes any text (and nesting deeper than serde_json allows) without a
//!   panic; a message written and read back is the same message.
//! - The management API's JSON of any shape becomes a value no deeper than the limit.

use lapin::types::{
    AMQPValue, ByteArray, DecimalValue, FieldArray, FieldTable, LongString, ShortString,
};
use proptest::prelude::*;
use serde_json::Value;
use warren::broker::amqp::{
    decode_value, encode_value, properties_from_amqp, properties_to_amqp, table_from_amqp,
    table_to_amqp, value_from_amqp, value_to_amqp,
};
use warren::domain::message::{DeadLetter, Delivery, Properties};
use warren::domain::value::{HeaderValue, MAX_DEPTH, Table};
use warren::domain::{json, snapshot};

/// Every scalar lapin reads off the wire (no `ShortString`: RabbitMQ's tables have none).
fn scalar() -> impl Strategy<Value = AMQPValue> {
    prop_oneof![
        any::<bool>().prop_map(AMQPValue::Boolean),
        any::<i8>().prop_map(AMQPValue::ShortShortInt),
        any::<u8>().prop_map(AMQPValue::ShortShortUInt),
        any::<i16>().prop_map(AMQPValue::ShortInt),
        any::<u16>().prop_map(AMQPValue::ShortUInt),
        any::<i32>().prop_map(AMQPValue::LongInt),
        any::<u32>().prop_map(AMQPValue::LongUInt),
        any::<i64>().prop_map(AMQPValue::LongLongInt),
        any::<f32>().prop_map(AMQPValue::Float),
        any::<f64>().prop_map(AMQPValue::Double),
        (any::<u8>(), any::<u32>())
            .prop_map(|(scale, value)| AMQPValue::DecimalValue(DecimalValue { scale, value })),
        proptest::collection::vec(any::<u8>(), 0..24)
            .prop_map(|b| AMQPValue::LongString(LongString::from(b))),
        any::<u64>().prop_map(AMQPValue::Timestamp),
        proptest::collection::vec(any::<u8>(), 0..24)
            .prop_map(|b| AMQPValue::ByteArray(ByteArray::from(b))),
        Just(AMQPValue::Void),
    ]
}

fn key() -> impl Strategy<Value = ShortString> {
    // Unicode keys up to 255 bytes.
    "\\PC{0,12}".prop_map(|k| ShortString::try_new(k).expect("short"))
}

/// Bushy values a few levels deep.
fn bushy() -> impl Strategy<Value = AMQPValue> {
    scalar().prop_recursive(6, 48, 4, |inner| {
        prop_oneof![
            proptest::collection::vec(inner.clone(), 0..4)
                .prop_map(|v| AMQPValue::FieldArray(FieldArray::from(v))),
            proptest::collection::vec((key(), inner), 0..4).prop_map(|kv| {
                let mut t = FieldTable::default();
                for (k, v) in kv {
                    t.insert(k, v);
                }
                AMQPValue::FieldTable(t)
            }),
        ]
    })
}

/// A bushy value wrapped in a chain of tables and arrays around the depth limit (and, now and
/// then, far beyond it).
fn value() -> impl Strategy<Value = AMQPValue> {
    let chain = prop_oneof![
        4 => proptest::collection::vec((any::<bool>(), key()), 0..(MAX_DEPTH + 8)),
        1 => proptest::collection::vec((any::<bool>(), key()), 200..600),
    ];
    (bushy(), chain, scalar()).prop_map(|(mut v, chain, sibling)| {
        for (i, (array, k)) in chain.into_iter().enumerate() {
            v = if array {
                let mut items = vec![v];
                if i % 5 == 0 {
                    items.push(sibling.clone());
                }
                AMQPValue::FieldArray(FieldArray::from(items))
            } else {
                let mut t = FieldTable::default();
                t.insert(k, v);
                AMQPValue::FieldTable(t)
            };
        }
        v
    })
}

fn lapin_parse(raw: &[u8]) -> Option<AMQPValue> {
    match lapin::types::parsing::parse_value(raw) {
        Ok(([], v)) => Some(v),
        _ => None,
    }
}

/// The deepest structured nesting in a domain value (`TooDeep` counts as a leaf).
fn structured_depth(v: &HeaderValue) -> usize {
    match v {
        HeaderValue::Table(t) => {
            1 + t
                .iter()
                .map(|(_, v)| structured_depth(v))
                .max()
                .unwrap_or(0)
        }
        HeaderValue::Array(a) => 1 + a.iter().map(structured_depth).max().unwrap_or(0),
        _ => 0,
    }
}

/// Runs a property on a thread with room: lapin's parser recurses several KiB per level, and
/// these values go hundreds of levels deep.
fn on_big_stack(f: impl FnOnce() + Send + 'static) {
    let r = std::thread::Builder::new()
        .stack_size(warren::broker::amqp::DEEP_STACK)
        .spawn(f)
        .expect("thread")
        .join();
    if let Err(e) = r {
        std::panic::resume_unwind(e);
    }
}

fn config() -> ProptestConfig {
    ProptestConfig::with_cases(300)
}

#[test]
fn lapin_to_domain_to_lapin_is_exact() {
    on_big_stack(|| {
        proptest!(config(), |(v in value())| {
                let raw = encode_value(&v);
                // Warren's encoding is what lapin parses.
                let parsed = lapin_parse(&raw).expect("lapin parses Warren's encoding");
                prop_assert_eq!(encode_value(&parsed), raw.clone());
                let domain = value_from_amqp(&v);
                prop_assert!(structured_depth(&domain) <= MAX_DEPTH);
                let deep = warren::broker::amqp::amqp_depth(&v);
                if deep > MAX_DEPTH {
                    let is_too_deep = matches!(&domain, HeaderValue::TooDeep { depth, raw: r } if *depth == deep && *r == raw);
                    prop_assert!(is_too_deep, "{deep} deep became {}", domain.type_name());
                } else {
                    let kept_whole = !matches!(domain, HeaderValue::TooDeep { .. });
                    prop_assert!(kept_whole, "{deep} deep became too-deep");
                }
                // Display, depth and the capped rendering stay bounded and do not panic.
                let shown = domain.display_capped(200);
                prop_assert!(shown.len() <= 200 + '…'.len_utf8());
                let _ = domain.to_string();
                let back = value_to_amqp(&domain).expect("sendable");
                prop_assert_eq!(encode_value(&back), raw);
        });
    });
}

#[test]
fn headers_and_snapshots_round_trip() {
    on_big_stack(|| {
        proptest!(config(), |(vs in proptest::collection::vec((key(), value()), 0..5))| {
                let mut t = FieldTable::default();
                for (k, v) in vs {
                    t.insert(k, v);
                }
                let headers = table_from_amqp(&t);
                let sent = table_to_amqp(&headers).expect("sendable");
                prop_assert_eq!(
                    encode_value(&AMQPValue::FieldTable(sent.clone())),
                    encode_value(&AMQPValue::FieldTable(t))
                );
                let p = properties_to_amqp(&Properties::default(), &headers).expect("properties");
                let (_, again) = properties_from_amqp(&p);
                prop_assert_eq!(&again, &headers);
                // The snapshot writes and reads the same message, deep values included.
                let m = DeadLetter {
                    queue: "q".into(),
                    position: 0,
                    delivery: Delivery::default(),
                    properties: Properties::default(),
                    headers: headers.clone(),
                    body: b"body".to_vec(),
                    body_size: 4,
                };
                let h = snapshot::SnapshotHeader {
                    queue: "q".into(),
                    vhost: "/".into(),
                    exported_at: "2026-01-01T00:00:00Z".into(),
                    source: "test".into(),
                };
                let text = snapshot::write(&h, std::slice::from_ref(&m));
                let (_, read) = snapshot::read(&text).expect("reads its own snapshot");
                prop_assert_eq!(read.len(), 1);
                prop_assert_eq!(snapshot::write(&h, &read), text);
                let _ = warren::domain::identity::message_key(&read[0]);
        });
    });
}

#[test]
fn the_decoder_agrees_with_lapin_and_never_panics() {
    on_big_stack(|| {
        proptest!(config(), |(v in bushy(), flips in proptest::collection::vec((any::<usize>(), any::<u8>()), 0..4), cut in any::<usize>())| {
                let mut raw = encode_value(&v);
                for (at, byte) in flips {
                    if !raw.is_empty() {
                        let i = at % raw.len();
                        raw[i] = byte;
                    }
                }
                if cut % 4 == 0 && !raw.is_empty() {
                    raw.truncate(cut % raw.len());
                }
                let ours = decode_value(&raw);
                if let Some(theirs) = lapin_parse(&raw) {
                    let ours = ours.expect("Warren reads what lapin reads");
                    prop_assert_eq!(encode_value(&ours), encode_value(&theirs));
                }
        });
    });
}

#[test]
fn any_bytes_decode_without_panic() {
    on_big_stack(|| {
        proptest!(config(), |(raw in proptest::collection::vec(any::<u8>(), 0..64))| {
                let _ = decode_value(&raw);
        });
    });
}

#[test]
fn the_snapshot_reader_takes_any_text() {
    on_big_stack(|| {
        proptest!(config(), |(lines in proptest::collection::vec("\\PC{0,80}", 0..4), depth in 0usize..3000, typed_depth in 0usize..80)| {
                let head = r#"{"warren_snapshot":1,"queue":"q"}"#;
                let _ = snapshot::read(&lines.join("\n"));
                let _ = snapshot::read(&format!("{head}\n{}", lines.join("\n")));
                // Nesting of any depth: serde_json refuses past 128, Warren past MAX_DEPTH; no panic.
                let nested = format!("{}{}", "[".repeat(depth), "]".repeat(depth));
                let _ = snapshot::read(&format!("{head}\n{{\"headers\":{nested}}}"));
                let mut v = r#"{"type":"i32","value":1}"#.to_string();
                for _ in 0..typed_depth {
                    v = format!(r#"{{"type":"array","value":[{v}]}}"#);
                }
                let line = format!(r#"{{"properties":{{}},"headers":{{"h":{v}}},"body_base64":""}}"#);
                let r = snapshot::read(&format!("{head}\n{line}"));
                if typed_depth <= MAX_DEPTH {
                    prop_assert!(r.is_ok(), "{typed_depth}: {r:?}");
                } else {
                    prop_assert!(r.is_err());
                }
                let odd = r#"{"properties":{},"headers":{"h":{"type":"too-deep","depth":9,"base64":"!!"}},"body_base64":""}"#;
                let _ = snapshot::read(&format!("{head}\n{odd}"));
        });
    });
}

#[test]
fn management_json_of_any_shape_is_bounded() {
    on_big_stack(|| {
        proptest!(config(), |(depth in 0usize..120, wide in 0usize..50)| {
                let mut v = Value::from(1);
                for i in 0..depth {
                    v = if i % 2 == 0 {
                        Value::Array(vec![v; 1 + (i == 0) as usize * wide])
                    } else {
                        serde_json::json!({ "k": v })
                    };
                }
                let hv = json::header_value_from_json(&v);
                prop_assert!(structured_depth(&hv) <= MAX_DEPTH);
                let _ = hv.display_capped(100);
                let mut headers = Table::new();
                headers.insert("h", hv.clone());
                let sent = table_to_amqp(&headers);
                if depth > MAX_DEPTH {
                    // Without its bytes a too-deep value is refused, with the header named.
                    let e = sent.expect_err("no bytes to send");
                    prop_assert!(e.to_string().contains("'h'"));
                } else {
                    prop_assert!(sent.is_ok());
                }
        });
    });
}
