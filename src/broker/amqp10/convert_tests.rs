use super::*;
use fe2o3_amqp::types::messaging::{ApplicationProperties, Data, Properties as Props10};
use fe2o3_amqp::types::primitives::{Binary, SimpleValue, Timestamp};

/// RabbitMQ's `x-opt-deaths` on a message dead-lettered once from `w` (rejected), as the
/// broker encodes it: an array32 of map32 (one death).
const ONE_DEATH: &str = "f00000008400000001d10000007b0000000ea3057175657565a10177a306726561736f6ea30872656a6563746564a305636f756e745301a30a66697273742d74696d6583000001a2497ecb66a3096c6173742d74696d6583000001a2497ecb66a30865786368616e6765a100a30c726f7574696e672d6b657973f00000000a00000001b100000001";

fn unhex(s: &str) -> Vec<u8> {
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
        .collect()
}

/// The same array with two deaths: the map's payload twice behind one element constructor.
fn two_deaths() -> Vec<u8> {
    let mut one = unhex(ONE_DEATH);
    one.push(0x77); // the routing key "w" the constant stops before
    let payload = one[10..].to_vec(); // after f0, size, count, d1
    let mut out = vec![0xf0];
    out.extend(((4 + 1 + 2 * payload.len()) as u32).to_be_bytes());
    out.extend(2u32.to_be_bytes());
    out.push(0xd1);
    out.extend(&payload);
    out.extend(&payload);
    out
}

#[test]
fn the_brokers_death_annotation_decodes_with_the_patched_codec() {
    let v: Value = serde_amqp::from_slice(&two_deaths()).expect("an array of maps decodes");
    let Some(HeaderValue::Array(d)) = deaths(&v) else {
        panic!("x-death from {v:?}");
    };
    assert_eq!(d.len(), 2);
    let t = d[0].as_table().unwrap();
    assert_eq!(t.get_str("queue"), Some("w"));
    assert_eq!(t.get_str("reason"), Some("rejected"));
    assert_eq!(t.get_i64("count"), Some(1));
    assert_eq!(t.get("time"), Some(&HeaderValue::Timestamp(1_796_529_376)));
    assert_eq!(
        t.get("routing-keys"),
        Some(&HeaderValue::Array(vec![HeaderValue::string("w")]))
    );
}

fn sample() -> Message10 {
    let mut ap = OrderedMap::new();
    ap.insert("k".to_string(), SimpleValue::String("v".into()));
    let mut anns: OrderedMap<OwnedKey, Value> = OrderedMap::new();
    for (k, v) in [
        ("x-opt-exception", "ValueError: bad price"),
        ("x-opt-keep", "mine"),
        ("x-first-death-queue", "w"),
        ("x-routing-key", "dlq"),
        ("x-exchange", ""),
    ] {
        anns.insert(OwnedKey::Symbol(Symbol::from(k)), Value::String(v.into()));
    }
    anns.insert(
        OwnedKey::Symbol(Symbol::from("x-delivery-count")),
        Value::Long(3),
    );
    Message {
        header: Some(Header {
            durable: true,
            priority: 4.into(),
            ttl: Some(60_000),
            first_acquirer: false,
            delivery_count: 2,
        }),
        delivery_annotations: None,
        message_annotations: Some(MessageAnnotations(anns)),
        properties: Some(Props10 {
            message_id: Some(MessageId::Ulong(42)),
            user_id: None,
            to: Some("/queues/w".into()),
            subject: Some("subj".into()),
            reply_to: None,
            correlation_id: Some(MessageId::Binary(Binary::from(vec![1u8, 2]))),
            content_type: None,
            content_encoding: None,
            absolute_expiry_time: Some(Timestamp::from(1_900_000_000_500)),
            creation_time: Some(Timestamp::from(1_700_000_000_123)),
            group_id: Some("g".into()),
            group_sequence: Some(7),
            reply_to_group_id: Some("rg".into()),
        }),
        application_properties: Some(ApplicationProperties(ap)),
        body: Body::Data(vec![Data(Binary::from(b"data-body".to_vec()))].into()),
        footer: None,
    }
}

#[test]
fn a_message_reads_as_a_091_reader_gets_it() {
    let dl = dead_letter("dlq", 3, &sample());
    assert_eq!(dl.properties.message_id.as_deref(), Some("42"));
    assert_eq!(dl.properties.correlation_id, None);
    assert_eq!(
        dl.headers.get("x-correlation-id"),
        Some(&HeaderValue::Bytes(vec![1, 2]))
    );
    assert_eq!(dl.properties.app_id.as_deref(), Some("g"));
    assert_eq!(dl.properties.timestamp, Some(1_700_000_000));
    assert_eq!(dl.properties.delivery_mode, Some(2));
    assert_eq!(dl.properties.expiration.as_deref(), Some("60000"));
    assert_eq!(dl.headers.get_str("k"), Some("v"));
    assert_eq!(
        dl.headers.get_str("x-opt-exception"),
        Some("ValueError: bad price")
    );
    assert!(
        !dl.headers.contains_key("x-routing-key"),
        "internal annotations stay out"
    );
    assert_eq!(dl.delivery.routing_key, "dlq");
    assert_eq!(dl.delivery.delivery_count, Some(3));
    assert_eq!(dl.body, b"data-body");
    assert_eq!(dl.properties.kind, None);
}

#[test]
fn an_amqp_value_body_is_marked_as_encoded() {
    let mut m = sample();
    m.body = Body::Value(fe2o3_amqp::types::messaging::AmqpValue(Value::String(
        "hello".into(),
    )));
    let dl = dead_letter("dlq", 0, &m);
    assert_eq!(dl.properties.kind.as_deref(), Some("amqp-1.0"));
    // 0x00 0x53 0x77 (amqp-value), then str8 "hello".
    assert_eq!(
        dl.body,
        [0x00, 0x53, 0x77, 0xa1, 5, b'h', b'e', b'l', b'l', b'o']
    );
}

#[test]
fn a_replay_keeps_the_bare_message_and_marks_only_annotations() {
    let original = sample();
    let marks = Marks {
        removed: vec!["x-opt-exception".into()],
        added: vec![("warren-replay-id".into(), Value::String("r-1".into()))],
        clear_ttl: false,
    };
    let out = republish(original.clone(), &marks);
    assert_eq!(out.properties, original.properties, "properties untouched");
    assert_eq!(out.application_properties, original.application_properties);
    assert_eq!(out.body, original.body);
    let h = out.header.as_ref().unwrap();
    assert_eq!(
        (h.durable, h.priority.0, h.ttl, h.delivery_count),
        (true, 4, Some(60_000), 0)
    );
    let keys: Vec<String> = out
        .message_annotations
        .as_ref()
        .unwrap()
        .0
        .keys()
        .map(|k| match k {
            OwnedKey::Symbol(Symbol(s)) => s.clone(),
            OwnedKey::Ulong(n) => n.to_string(),
        })
        .collect();
    assert_eq!(keys, ["x-opt-keep", "x-opt-warren-replay-id"]);
    let cleared = republish(
        original,
        &Marks {
            clear_ttl: true,
            ..Marks::default()
        },
    );
    assert_eq!(cleared.header.unwrap().ttl, None);
}
