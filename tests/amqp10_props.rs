//! Property tests for the AMQP 1.0 body decoder (`domain::amqp10`): no byte string — random,
//! a valid encoding mutated or cut anywhere, or nested far past the depth bound — makes it
//! panic, recurse without bound or run away, and what a small encoder writes reads back the same.

use proptest::prelude::*;
use warren::domain::amqp10::codec::{self, Amqp, MAX_DEPTH};
use warren::domain::amqp10::sections;
use warren::domain::body;
use warren::domain::message::{DeadLetter, Properties};

fn config() -> ProptestConfig {
    ProptestConfig::with_cases(300)
}

/// Values the test encoder writes.
fn value() -> impl Strategy<Value = Amqp> {
    let scalar = prop_oneof![
        Just(Amqp::Null),
        any::<bool>().prop_map(Amqp::Bool),
        any::<u64>().prop_map(Amqp::Uint),
        any::<i64>().prop_map(Amqp::Int),
        "\\PC{0,12}".prop_map(Amqp::String),
        proptest::collection::vec(any::<u8>(), 0..16).prop_map(Amqp::Binary),
        proptest::array::uniform16(any::<u8>()).prop_map(Amqp::Uuid),
    ];
    scalar.prop_recursive(5, 40, 4, |inner| {
        prop_oneof![
            proptest::collection::vec(inner.clone(), 0..4).prop_map(Amqp::List),
            proptest::collection::vec(("\\PC{0,6}".prop_map(Amqp::String), inner.clone()), 0..4)
                .prop_map(Amqp::Map),
            (inner.clone(), inner).prop_map(|(d, v)| Amqp::Described(Box::new(d), Box::new(v))),
        ]
    })
}

/// The widest encoding of each value (the decoder reads every width; this one is simplest).
fn encode(v: &Amqp, out: &mut Vec<u8>) {
    let sized = |code: u8, body: &[u8], out: &mut Vec<u8>| {
        out.push(code);
        out.extend((body.len() as u32).to_be_bytes());
        out.extend(body);
    };
    match v {
        Amqp::Null => out.push(0x40),
        Amqp::Bool(b) => out.push(if *b { 0x41 } else { 0x42 }),
        Amqp::Uint(n) => {
            out.push(0x80);
            out.extend(n.to_be_bytes());
        }
        Amqp::Int(n) => {
            out.push(0x81);
            out.extend(n.to_be_bytes());
        }
        Amqp::String(s) => sized(0xb1, s.as_bytes(), out),
        Amqp::Binary(b) => sized(0xb0, b, out),
        Amqp::Uuid(u) => {
            out.push(0x98);
            out.extend(u);
        }
        Amqp::List(items) => compound(0xd0, items.len(), items.iter(), out),
        Amqp::Map(pairs) => compound(
            0xd1,
            pairs.len() * 2,
            pairs.iter().flat_map(|(k, v)| [k, v]),
            out,
        ),
        Amqp::Described(d, v) => {
            out.push(0x00);
            encode(d, out);
            encode(v, out);
        }
        other => unreachable!("not generated: {other:?}"),
    }
}

fn compound<'a>(code: u8, count: usize, items: impl Iterator<Item = &'a Amqp>, out: &mut Vec<u8>) {
    let mut body = (count as u32).to_be_bytes().to_vec();
    for i in items {
        encode(i, &mut body);
    }
    out.push(code);
    out.extend((body.len() as u32).to_be_bytes());
    out.extend(body);
}

fn amqp_value_body(v: &Amqp) -> Vec<u8> {
    let mut raw = vec![0x00, 0x53, 0x77];
    encode(v, &mut raw);
    raw
}

/// A dead letter whose body the broker passed on encoded.
fn encoded(body: &[u8], body_size: u64) -> DeadLetter {
    DeadLetter {
        properties: Properties {
            kind: Some("amqp-1.0".into()),
            ..Properties::default()
        },
        body: body.to_vec(),
        body_size,
        ..DeadLetter::default()
    }
}

/// Shown whatever it holds: bounded text, never a panic.
fn shown(m: &DeadLetter) -> String {
    let b = body::decode_message(m, body::DECODE_CAP);
    let _ = b.note();
    body::text(&b, 2000)
}

#[test]
fn what_is_encoded_decodes_the_same() {
    proptest!(config(), |(v in value())| {
        let mut raw = Vec::new();
        encode(&v, &mut raw);
        prop_assert_eq!(codec::decode(&raw), Ok(v.clone()));
        let r = sections::body(&amqp_value_body(&v));
        prop_assert!(r.is_ok(), "{:?}", r);
    });
}

#[test]
fn any_bytes_decode_or_fail_without_a_panic() {
    proptest!(config(), |(raw in proptest::collection::vec(any::<u8>(), 0..512))| {
        let _ = codec::decode(&raw);
        let _ = sections::body(&raw);
        let mut with_section = vec![0x00, 0x53, 0x77];
        with_section.extend(&raw);
        let _ = sections::body(&with_section);
        prop_assert!(shown(&encoded(&with_section, with_section.len() as u64)).chars().count() <= 4000);
    });
}

#[test]
fn a_valid_body_cut_or_mutated_anywhere_never_panics() {
    proptest!(config(), |(v in value(), cut in any::<prop::sample::Index>(), flips in proptest::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 0..4))| {
        let raw = amqp_value_body(&v);
        let n = cut.index(raw.len() + 1);
        let m = encoded(&raw[..n], raw.len() as u64);
        let _ = shown(&m);
        if n < raw.len() {
            prop_assert!(sections::body(&raw[..n]).is_err());
        }
        let mut mutated = raw.clone();
        for (i, b) in flips {
            let i = i.index(mutated.len());
            mutated[i] = b;
        }
        let _ = shown(&encoded(&mutated, mutated.len() as u64));
    });
}

#[test]
fn nesting_far_past_the_bound_is_refused_on_an_ordinary_stack() {
    // On this thread's own stack: the bound, not a big stack, keeps it safe.
    proptest!(config(), |(depth in MAX_DEPTH..20_000usize, kind in 0u8..2)| {
        let mut raw = vec![0x00, 0x53, 0x77];
        for level in 0..depth {
            // Described values, or list32s each sized exactly for the one it holds.
            let inner = 9 * (depth - 1 - level) + 1;
            let size = (4 + inner) as u32;
            if kind == 0 {
                raw.push(0x00);
            } else {
                raw.push(0xd0);
                raw.extend(size.to_be_bytes());
                raw.extend(1u32.to_be_bytes());
            }
        }
        raw.push(0x40);
        prop_assert!(sections::body(&raw).is_err());
        let _ = shown(&encoded(&raw, raw.len() as u64));
    });
}
