//! An AMQP-encoded body (`type: amqp-1.0`) made readable: its body sections decoded and what
//! they hold given as the bytes a person reads — an amqp-value string or binary as itself,
//! anything else (a map, a list, an amqp-sequence, a number) as JSON. Display only: a replay
//! sends the bytes as they were read.

use serde_json::{Map, Value, json};

use super::codec::{self, Amqp, Reader};

/// Which body section a message carried.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Section {
    /// One AMQP value.
    Value,
    /// One or more lists of values.
    Sequence,
    /// Data sections (bytes), when the broker encoded them too.
    Data,
}

impl Section {
    pub fn label(self) -> &'static str {
        match self {
            Section::Value => "amqp-value",
            Section::Sequence => "amqp-sequence",
            Section::Data => "data",
        }
    }
}

/// A decoded body: its section and the bytes to show.
#[derive(Clone, Debug, PartialEq)]
pub struct Readable {
    pub section: Section,
    pub bytes: Vec<u8>,
}

/// Longest binary shown as hex inside a JSON rendering; the rest is counted.
const HEX_BYTES: usize = 1024;

/// Decodes the body sections of an AMQP-encoded body. Sections that are not body sections
/// (header, annotations, properties, footer) are passed over; anything else is an error.
pub fn body(raw: &[u8]) -> Result<Readable, codec::Error> {
    let mut r = Reader::new(raw);
    let mut section = None;
    let mut values = Vec::new();
    let mut data = Vec::new();
    while !r.at_end() {
        let Amqp::Described(descriptor, value) = r.value(0)? else {
            return Err(codec::Error::Malformed(
                "a body section that is not described",
            ));
        };
        let kind = match section_code(&descriptor) {
            Some(0x75) => Section::Data,
            Some(0x76) => Section::Sequence,
            Some(0x77) => Section::Value,
            Some(0x70..=0x74 | 0x78) => continue,
            _ => return Err(codec::Error::Malformed("not an AMQP 1.0 message section")),
        };
        // The last kind seen names the body; the spec allows one kind per message.
        section = Some(kind);
        match (kind, *value) {
            (Section::Data, Amqp::Binary(b)) => data.extend(b),
            (Section::Data, _) => {
                return Err(codec::Error::Malformed("a data section without bytes"));
            }
            (Section::Sequence, Amqp::List(items)) => values.extend(items),
            (Section::Sequence, _) => {
                return Err(codec::Error::Malformed(
                    "an amqp-sequence that is not a list",
                ));
            }
            (Section::Value, v) => values.push(v),
        }
    }
    let section = section.ok_or(codec::Error::Malformed("no body section"))?;
    let bytes = match (section, values.as_slice()) {
        (Section::Data, _) => data,
        (Section::Value, [Amqp::String(s)]) => s.clone().into_bytes(),
        (Section::Value, [Amqp::Binary(b)]) => b.clone(),
        (Section::Value, [v]) => json_bytes(&to_json(v)),
        (_, items) => json_bytes(&Value::Array(items.iter().map(to_json).collect())),
    };
    Ok(Readable { section, bytes })
}

/// A section's descriptor as its code: `0x77`, or its symbolic name.
fn section_code(descriptor: &Amqp) -> Option<u64> {
    match descriptor {
        Amqp::Uint(code) => Some(*code),
        Amqp::Symbol(name) => match name.as_str() {
            "amqp:header:list" => Some(0x70),
            "amqp:delivery-annotations:map" => Some(0x71),
            "amqp:message-annotations:map" => Some(0x72),
            "amqp:properties:list" => Some(0x73),
            "amqp:application-properties:map" => Some(0x74),
            "amqp:data:binary" => Some(0x75),
            "amqp:amqp-sequence:list" => Some(0x76),
            "amqp:amqp-value:*" => Some(0x77),
            "amqp:footer:map" => Some(0x78),
            _ => None,
        },
        _ => None,
    }
}

fn json_bytes(v: &Value) -> Vec<u8> {
    serde_json::to_vec(v).unwrap_or_default()
}

/// A value as JSON for reading: numbers and text as themselves, a uuid and a timestamp as text,
/// binary as its text when it is printable UTF-8 else hex, a map's keys as text, a described
/// value as `{"descriptor": …, "value": …}`. As deep as the decoded value (bounded there).
pub fn to_json(v: &Amqp) -> Value {
    match v {
        Amqp::Null => Value::Null,
        Amqp::Bool(b) => json!(b),
        Amqp::Uint(n) => json!(n),
        Amqp::Int(n) => json!(n),
        Amqp::Float(f) if f.is_finite() => json!(f),
        Amqp::Float(f) => json!(f.to_string()),
        Amqp::Decimal(b) => json!(format!("decimal:0x{}", hex(b, HEX_BYTES))),
        Amqp::Char(c) => json!(c.to_string()),
        Amqp::Timestamp(ms) => json!(
            jiff::Timestamp::from_millisecond(*ms)
                .map(|t| t.to_string())
                .unwrap_or_else(|_| format!("timestamp {ms} ms"))
        ),
        Amqp::Uuid(u) => json!(uuid_text(u)),
        Amqp::Binary(b) => match std::str::from_utf8(b) {
            Ok(s) if !s.chars().any(|c| c.is_control() && !c.is_whitespace()) => json!(s),
            _ => json!(format!("0x{}", hex(b, HEX_BYTES))),
        },
        Amqp::String(s) | Amqp::Symbol(s) => json!(s),
        Amqp::List(items) | Amqp::Array(items) => Value::Array(items.iter().map(to_json).collect()),
        Amqp::Map(pairs) => {
            let mut m = Map::new();
            for (k, v) in pairs {
                let key = match k {
                    Amqp::String(s) | Amqp::Symbol(s) => s.clone(),
                    other => to_json(other).to_string(),
                };
                m.insert(key, to_json(v));
            }
            Value::Object(m)
        }
        Amqp::Described(d, v) => json!({"descriptor": to_json(d), "value": to_json(v)}),
    }
}

fn hex(bytes: &[u8], max: usize) -> String {
    let mut s: String = bytes.iter().take(max).map(|b| format!("{b:02x}")).collect();
    if bytes.len() > max {
        s.push_str(&format!("… ({} bytes)", bytes.len()));
    }
    s
}

fn uuid_text(u: &[u8; 16]) -> String {
    let h = hex(u, 16);
    format!(
        "{}-{}-{}-{}-{}",
        &h[0..8],
        &h[8..12],
        &h[12..16],
        &h[16..20],
        &h[20..32]
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn text(r: &Readable) -> &str {
        std::str::from_utf8(&r.bytes).unwrap()
    }

    #[test]
    fn amqp_value_string_is_the_text() {
        // As RabbitMQ 4.0 passed on `Message(body="hello text", inferred=False)`.
        let raw = b"\x00\x53\x77\xa1\x0ahello text";
        let r = body(raw).unwrap();
        assert_eq!(r.section, Section::Value);
        assert_eq!(text(&r), "hello text");
    }

    #[test]
    fn amqp_value_map_is_json() {
        // {"order": 17, "sku": "A-1", "tags": [:x, 3.5, null, true]}, as the broker passed it on.
        let raw = [
            0x00, 0x53, 0x77, 0xd1, 0, 0, 0, 0x34, 0, 0, 0, 6, 0xa1, 5, b'o', b'r', b'd', b'e',
            b'r', 0x55, 0x11, 0xa1, 3, b's', b'k', b'u', 0xa1, 3, b'A', b'-', b'1', 0xa1, 4, b't',
            b'a', b'g', b's', 0xd0, 0, 0, 0, 0x12, 0, 0, 0, 4, 0xa3, 1, b'x', 0x82, 0x40, 0x0c, 0,
            0, 0, 0, 0, 0, 0x40, 0x41,
        ];
        let r = body(&raw).unwrap();
        assert_eq!(r.section, Section::Value);
        let v: Value = serde_json::from_slice(&r.bytes).unwrap();
        assert_eq!(
            v,
            json!({"order": 17, "sku": "A-1", "tags": ["x", 3.5, null, true]})
        );
    }

    #[test]
    fn amqp_sequence_is_a_json_array() {
        // [1, "two", {"k": "v"}] sent as an amqp-sequence.
        let raw = [
            0x00, 0x53, 0x76, 0xd0, 0, 0, 0, 0x1a, 0, 0, 0, 3, 0x55, 1, 0xa1, 3, b't', b'w', b'o',
            0xd1, 0, 0, 0, 0x0a, 0, 0, 0, 2, 0xa1, 1, b'k', 0xa1, 1, b'v',
        ];
        let r = body(&raw).unwrap();
        assert_eq!(r.section, Section::Sequence);
        assert_eq!(text(&r), r#"[1,"two",{"k":"v"}]"#);
    }

    #[test]
    fn typed_values_read_as_text() {
        let mut uuid = vec![0x00, 0x53, 0x77, 0x98];
        uuid.extend([0x0f, 0x1e, 0x2d, 0x3c, 0x4b, 0x5a, 0x69, 0x78]);
        uuid.extend([0x87, 0x96, 0xa5, 0xb4, 0xc3, 0xd2, 0xe1, 0xf0]);
        assert_eq!(
            text(&body(&uuid).unwrap()),
            r#""0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0""#
        );
        let ts = [0x00, 0x53, 0x77, 0x83, 0, 0, 0, 0, 0, 0, 0x03, 0xe8];
        assert_eq!(text(&body(&ts).unwrap()), r#""1970-01-01T00:00:01Z""#);
        let bin = [0x00, 0x53, 0x77, 0xa0, 2, 0xff, 0x00];
        assert_eq!(body(&bin).unwrap().bytes, vec![0xff, 0x00]);
        let symbolic = b"\x00\xa3\x11amqp:amqp-value:*\x53\x07";
        assert_eq!(text(&body(symbolic).unwrap()), "7");
    }

    #[test]
    fn bad_bodies_are_errors() {
        assert!(body(b"").is_err());
        assert!(body(b"{\"json\": 1}").is_err());
        assert!(body(b"\x00\x53\x77").is_err());
        assert!(body(b"\x00\x53\x77\xa1\x0ahello").is_err());
        assert!(body(b"\x00\x53\x76\xa1\x01x").is_err());
        assert!(body(b"\x00\x53\x99\x40").is_err());
    }
}
