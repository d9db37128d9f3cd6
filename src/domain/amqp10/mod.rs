//! RabbitMQ 4's own protocol, AMQP 1.0, as an AMQP 0.9.1 reader meets it: one home for what the
//! broker's conversion leaves in a dead letter (see the reference's "AMQP 1.0 dead letters on
//! RabbitMQ 4").
//!
//! - A body that is not one data section (amqp-value, amqp-sequence) arrives with `type:
//!   amqp-1.0` and the sections' AMQP encoding as the body: the marker is not the message's
//!   type ([`message_type`]), and the body is decoded for reading ([`body`]).
//! - An id that is not a string (binary) is kept in the `x-message-id` header ([`message_id`]).
//! - A consumer that settles with `modified` (`delivery-failed`, `undeliverable-here`) may
//!   annotate why under keys that start `x-opt-`; a 0.9.1 reader sees them as headers
//!   (`convention::annotations`, which reads them into the fault).

pub mod carrier;
pub mod codec;
pub mod sections;

use super::message::Properties;
use super::value::{HeaderValue, Table};

pub use sections::body;

/// The `type` the broker gives a message whose body it passes on AMQP-encoded.
pub const ENCODED_BODY_TYPE: &str = "amqp-1.0";

/// The header holding an AMQP 1.0 message-id that the 0.9.1 `message_id` cannot carry.
pub const MESSAGE_ID_HEADER: &str = "x-message-id";

/// Longest id taken from [`MESSAGE_ID_HEADER`], in bytes of the header (an id of 64 KiB is
/// not one a person reads).
const MAX_ID_BYTES: usize = 256;

/// Whether the body is AMQP 1.0 sections as encoded (`type: amqp-1.0`), not the payload itself.
pub fn encoded_body(p: &Properties) -> bool {
    p.kind.as_deref() == Some(ENCODED_BODY_TYPE)
}

/// The message's type as the producer gave it: the `type` property, unless that is the broker's
/// marker for an encoded body (AMQP 1.0 has no `type`; its `subject` does not reach 0.9.1).
pub fn message_type(p: &Properties) -> Option<&str> {
    p.kind
        .as_deref()
        .filter(|k| *k != ENCODED_BODY_TYPE && !k.trim().is_empty())
}

/// The producer's id kept in `x-message-id`: text when it is printable UTF-8, else `0x` and
/// its bytes in hex; `None` when absent, empty or longer than an id is.
pub fn message_id(h: &Table) -> Option<String> {
    let v = h.get(MESSAGE_ID_HEADER)?;
    let bytes: Vec<u8> = match v {
        HeaderValue::ShortString(b) | HeaderValue::LongString(b) | HeaderValue::Bytes(b) => {
            b.clone()
        }
        other => other.as_i64()?.to_string().into_bytes(),
    };
    if bytes.is_empty() || bytes.len() > MAX_ID_BYTES {
        return None;
    }
    match std::str::from_utf8(&bytes) {
        Ok(s) if !s.trim().is_empty() && !s.chars().any(char::is_control) => Some(s.to_string()),
        _ => Some(format!("0x{}", hex(&bytes))),
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::body;
    use crate::domain::explain::explain;
    use crate::domain::grouping::{GroupBy, WaitQueues, group_key};
    use crate::domain::message::DeadLetter;

    /// A dead letter as RabbitMQ 4 hands it to a 0.9.1 reader after an AMQP 1.0 consumer
    /// settled it `modified` with `annotations`.
    fn failed(annotations: &[(&str, &str)], body: &[u8]) -> DeadLetter {
        let mut h = Table::new();
        let death: Table = [
            ("count", HeaderValue::I64(1)),
            ("reason", HeaderValue::string("rejected")),
            ("queue", HeaderValue::string("work")),
            ("exchange", HeaderValue::string("")),
            (
                "routing-keys",
                HeaderValue::Array(vec![HeaderValue::string("work")]),
            ),
        ]
        .into_iter()
        .fold(Table::new(), |mut t, (k, v)| {
            t.insert(k, v);
            t
        });
        h.insert(
            "x-death",
            HeaderValue::Array(vec![HeaderValue::Table(death)]),
        );
        for (k, v) in annotations {
            h.insert(*k, HeaderValue::string(*v));
        }
        DeadLetter {
            queue: "dlq".into(),
            properties: Properties {
                kind: Some(ENCODED_BODY_TYPE.into()),
                ..Properties::default()
            },
            headers: h,
            body: body.to_vec(),
            body_size: body.len() as u64,
            ..DeadLetter::default()
        }
    }

    #[test]
    fn annotated_failures_are_the_exception_and_three_groups() {
        let body = b"\x00\x53\x77\xa1\x05hello";
        let ms = [
            failed(
                &[
                    ("x-opt-exception", "ValueError: bad price"),
                    ("x-opt-dead-letter-reason", "price below zero"),
                ],
                body,
            ),
            failed(&[("x-opt-exception", "KeyError: unknown sku")], body),
            failed(&[("x-opt-dead-letter-reason", "carrier timeout")], body),
        ];
        let waits = WaitQueues::default();
        let mut exceptions = Vec::new();
        let mut fingerprints = Vec::new();
        for m in &ms {
            let x = explain(m);
            assert!(x.fault.is_some(), "{x:?}");
            assert!(x.error_headers.iter().all(|h| h.starts_with("x-opt-")));
            exceptions.push(group_key(GroupBy::Exception, m, &x, &waits).value);
            fingerprints.push(x.fingerprint.key.clone());
            // The marker is no type: one "no message type" group, not an `amqp-1.0` one.
            assert_eq!(x.message_type, None);
            assert_eq!(group_key(GroupBy::Type, m, &x, &waits).value, "");
        }
        assert_eq!(exceptions, ["ValueError", "KeyError", "carrier timeout"]);
        fingerprints.dedup();
        assert_eq!(fingerprints.len(), 3);
        let x = explain(&ms[0]);
        assert!(
            x.verdict.starts_with("ValueError in work: bad price"),
            "{}",
            x.verdict
        );
        assert_eq!(explain(&ms[2]).verdict, "carrier timeout in work");
        let b = body::decode_message(&ms[0], body::DECODE_CAP);
        assert_eq!(&*b.bytes, b"hello");
        assert_eq!(b.decoded_label().as_deref(), Some("AMQP 1.0 amqp-value"));
    }

    #[test]
    fn an_encoded_body_that_does_not_decode_is_shown_raw_with_a_note() {
        let mut m = failed(&[], b"\x00\x53\x77\xa1\x05hel");
        let b = body::decode_message(&m, body::DECODE_CAP);
        assert_eq!(&*b.bytes, b"\x00\x53\x77\xa1\x05hel");
        assert!(
            b.note().unwrap().contains("does not decode"),
            "{:?}",
            b.note()
        );
        m.body_size = 100;
        let b = body::decode_message(&m, body::DECODE_CAP);
        assert!(b.note().unwrap().contains("browse cap"));
        // Without the marker a body is not taken apart.
        m.properties.kind = None;
        let b = body::decode_message(&m, body::DECODE_CAP);
        assert_eq!(b.decoded_label(), None);
    }

    #[test]
    fn the_marker_is_not_a_type() {
        let mut p = Properties {
            kind: Some("amqp-1.0".into()),
            ..Properties::default()
        };
        assert!(encoded_body(&p));
        assert_eq!(message_type(&p), None);
        p.kind = Some("OrderPlaced".into());
        assert!(!encoded_body(&p));
        assert_eq!(message_type(&p), Some("OrderPlaced"));
        p.kind = Some("  ".into());
        assert_eq!(message_type(&p), None);
    }

    #[test]
    fn id_header() {
        let mut h = Table::new();
        assert_eq!(message_id(&h), None);
        h.insert(
            MESSAGE_ID_HEADER,
            HeaderValue::Bytes(b"\x01\x02bin".to_vec()),
        );
        assert_eq!(message_id(&h).as_deref(), Some("0x010262696e"));
        h.insert(
            MESSAGE_ID_HEADER,
            HeaderValue::LongString(b"order-7".to_vec()),
        );
        assert_eq!(message_id(&h).as_deref(), Some("order-7"));
        h.insert(MESSAGE_ID_HEADER, HeaderValue::I64(42));
        assert_eq!(message_id(&h).as_deref(), Some("42"));
        h.insert(MESSAGE_ID_HEADER, HeaderValue::Bytes(vec![]));
        assert_eq!(message_id(&h), None);
        h.insert(MESSAGE_ID_HEADER, HeaderValue::Bytes(vec![b'a'; 300]));
        assert_eq!(message_id(&h), None);
    }
}
