use super::*;

fn every_variant() -> Vec<HeaderValue> {
    let mut nested = Table::new();
    nested.insert("count", HeaderValue::I64(3));
    nested.insert("queue", HeaderValue::string("orders"));
    vec![
        HeaderValue::Void,
        HeaderValue::Bool(true),
        HeaderValue::I8(-8),
        HeaderValue::U8(200),
        HeaderValue::I16(-16_000),
        HeaderValue::U16(65_000),
        HeaderValue::I32(-2_000_000_000),
        HeaderValue::U32(4_000_000_000),
        HeaderValue::I64(i64::MIN),
        HeaderValue::F32(1.5),
        HeaderValue::F64(-2.25e300),
        HeaderValue::Decimal {
            scale: 2,
            value: 12_345,
        },
        HeaderValue::LongString(vec![0xff, 0x00, b'a']),
        HeaderValue::Timestamp(1_700_000_000),
        HeaderValue::Table(nested.clone()),
        HeaderValue::Array(vec![HeaderValue::Table(nested), HeaderValue::I32(1)]),
        HeaderValue::Bytes(vec![1, 2, 3, 0]),
    ]
}

#[test]
fn every_value_round_trips() {
    for v in every_variant() {
        let back = value_from_amqp(&value_to_amqp(&v).expect("convertible"));
        assert_eq!(back, v, "{}", v.type_name());
    }
}

#[test]
fn short_string_is_sent_as_long_string_with_the_same_bytes() {
    let v = HeaderValue::ShortString(b"short".to_vec());
    let sent = value_to_amqp(&v).expect("convertible");
    assert_eq!(
        sent,
        AMQPValue::LongString(LongString::from(b"short".to_vec()))
    );
    assert_eq!(value_from_amqp(&sent).as_bytes(), v.as_bytes());
    // Read from lapin, a short string keeps its own variant.
    let read = value_from_amqp(&AMQPValue::ShortString("s".into()));
    assert_eq!(read, HeaderValue::ShortString(b"s".to_vec()));
}

#[test]
fn tables_round_trip_as_sorted_keys() {
    let mut t = Table::new();
    for (i, v) in every_variant().into_iter().enumerate() {
        t.insert(format!("k{i:02}"), v);
    }
    let back = table_from_amqp(&table_to_amqp(&t).expect("convertible"));
    assert_eq!(back, t);
    // Order is not kept: lapin sorts.
    let mut u = Table::new();
    u.insert("b", HeaderValue::I32(1));
    u.insert("a", HeaderValue::I32(2));
    let back = table_from_amqp(&table_to_amqp(&u).expect("convertible"));
    assert_eq!(back.keys().collect::<Vec<_>>(), vec!["a", "b"]);
}

#[test]
fn long_header_names_and_properties_are_errors_not_panics() {
    let mut t = Table::new();
    t.insert("k".repeat(300), HeaderValue::Bool(true));
    assert!(matches!(
        table_to_amqp(&t),
        Err(ConvertError::LongHeaderName(_))
    ));
    let p = Properties {
        message_id: Some("m".repeat(256)),
        ..Properties::default()
    };
    assert_eq!(
        properties_to_amqp(&p, &Table::new()),
        Err(ConvertError::LongProperty { name: "message_id" })
    );
}

#[test]
fn properties_round_trip() {
    let p = Properties {
        content_type: Some("application/json".into()),
        content_encoding: Some("gzip".into()),
        delivery_mode: Some(2),
        priority: Some(7),
        correlation_id: Some("corr".into()),
        reply_to: Some("replies".into()),
        expiration: Some("60000".into()),
        message_id: Some("id-1".into()),
        timestamp: Some(1_700_000_000),
        kind: Some("OrderPlaced".into()),
        user_id: Some("guest".into()),
        app_id: Some("orders".into()),
        cluster_id: Some("c1".into()),
    };
    let mut h = Table::new();
    h.insert("x-death", HeaderValue::Array(vec![]));
    let (p2, h2) = properties_from_amqp(&properties_to_amqp(&p, &h).expect("convertible"));
    assert_eq!(p2, p);
    assert_eq!(h2, h);
    let (empty, no_headers) = properties_from_amqp(
        &properties_to_amqp(&Properties::default(), &Table::new()).expect("ok"),
    );
    assert_eq!(empty, Properties::default());
    assert!(no_headers.is_empty());
}

/// A header `n` tables deep (or arrays), built without recursion.
fn deep(n: usize, arrays: bool) -> AMQPValue {
    let mut v = AMQPValue::LongString(b"bottom".to_vec().into());
    for i in 0..n {
        v = if arrays {
            AMQPValue::FieldArray(vec![v, AMQPValue::LongInt(i as i32)].into())
        } else {
            let mut t = FieldTable::default();
            t.insert(ShortString::try_new("k").expect("short"), v);
            AMQPValue::FieldTable(t)
        };
    }
    v
}

fn on_big_stack(f: impl FnOnce() + Send + 'static) {
    std::thread::Builder::new()
        .stack_size(DEEP_STACK)
        .spawn(f)
        .expect("thread")
        .join()
        .expect("no panic");
}

#[test]
fn encoding_is_what_lapin_parses() {
    let mut all = FieldTable::default();
    for (i, v) in every_variant().iter().enumerate() {
        let sent = value_to_amqp(v).expect("convertible");
        let raw = encode_value(&sent);
        let (rest, parsed) = lapin::types::parsing::parse_value(raw.as_slice()).expect("parses");
        assert!(rest.is_empty());
        assert_eq!(parsed, sent, "{}", v.type_name());
        assert_eq!(decode_value(&raw), Ok(sent.clone()), "{}", v.type_name());
        all.insert(ShortString::try_new(format!("k{i}")).expect("short"), sent);
    }
    let table = AMQPValue::FieldTable(all);
    let raw = encode_value(&table);
    assert_eq!(decode_value(&raw), Ok(table));
}

#[test]
fn bad_bytes_are_errors_not_panics() {
    for raw in [
        &b""[..],
        b"F",
        b"F\x00\x00\x00\x05\x01kV",
        b"F\x00\x00\x00\x02\x01kV",
        b"A\xff\xff\xff\xffV",
        b"Q",
        b"S\x00\x00\x00\x09abc",
        b"VV",
        b"F\x00\x00\x00\x03\x01\xffV",
    ] {
        assert!(decode_value(raw).is_err(), "{raw:?}");
    }
}

#[test]
fn a_5000_deep_header_is_kept_as_bytes_and_sent_back_exactly() {
    on_big_stack(|| {
        for arrays in [false, true] {
            let v = deep(5000, arrays);
            let raw = encode_value(&v);
            let domain = value_from_amqp(&v);
            let HeaderValue::TooDeep { depth, raw: kept } = &domain else {
                panic!("not kept whole: {}", domain.type_name());
            };
            assert_eq!(*depth, 5000);
            assert_eq!(kept, &raw);
            // The domain value is flat: its own walks cost nothing.
            assert_eq!(domain.depth(), 5000);
            assert!(domain.to_string().contains("5000 levels deep"));
            let mut h = Table::new();
            h.insert("deep", domain.clone());
            let back = table_to_amqp(&h).expect("convertible");
            let sent = back.inner().values().next().expect("one");
            assert_eq!(encode_value(sent), raw);
            // The whole frame as lapin would write it parses back to the same.
            let p = properties_to_amqp(&Properties::default(), &h).expect("convertible");
            let (_, h2) = properties_from_amqp(&p);
            assert_eq!(h2, h);
            drop_deep(p);
        }
    });
}

#[test]
fn lapin_parses_the_deepest_header_a_frame_holds_on_the_stack_main_gives_it() {
    // The deepest header a `MAX_FRAME` frame can carry: arrays, 5 bytes a level. lapin's
    // parser recurses per level on its IO thread, which `main` gives `DEEP_STACK`.
    on_big_stack(|| {
        let levels = MAX_FRAME as usize / 5;
        let mut v = AMQPValue::Void;
        for _ in 0..levels {
            v = AMQPValue::FieldArray(vec![v].into());
        }
        let raw = encode_value(&v);
        assert!(raw.len() <= MAX_FRAME as usize + 1);
        let (_, parsed) = lapin::types::parsing::parse_value(raw.as_slice()).expect("parses");
        assert_eq!(amqp_depth(&parsed), levels);
        let kept = value_from_amqp(&parsed);
        assert_eq!(kept.depth(), levels);
    });
}

#[test]
fn depth_limit_is_exact() {
    let at = value_from_amqp(&deep(MAX_DEPTH, false));
    assert_eq!(at.type_name(), "table");
    assert_eq!(at.depth(), MAX_DEPTH);
    assert_eq!(value_to_amqp(&at).map(|v| amqp_depth(&v)), Ok(MAX_DEPTH));
    let over = value_from_amqp(&deep(MAX_DEPTH + 1, false));
    assert_eq!(over.type_name(), "too-deep");
    // A value built in code deeper than the limit is refused, not recursed into.
    let mut v = HeaderValue::I32(1);
    for _ in 0..MAX_DEPTH + 1 {
        v = HeaderValue::Array(vec![v]);
    }
    let mut h = Table::new();
    h.insert("built", v);
    assert_eq!(
        table_to_amqp(&h),
        Err(ConvertError::TooDeep {
            header: "built".into()
        })
    );
    // Without bytes (management API) it cannot be sent, and says why.
    let mut h = Table::new();
    h.insert(
        "api",
        HeaderValue::TooDeep {
            depth: 40,
            raw: Vec::new(),
        },
    );
    let e = table_to_amqp(&h).expect_err("no bytes");
    assert!(e.to_string().contains("'api'"), "{e}");
    assert!(e.to_string().contains("left in the DLQ"), "{e}");
}

#[test]
fn implausible_saved_values_are_refused_not_sent() {
    let huge = HeaderValue::TooDeep {
        depth: usize::MAX,
        raw: vec![b'V'; MAX_FRAME as usize + 1],
    };
    assert_eq!(huge.depth(), usize::MAX);
    assert!(huge.to_string().contains("levels deep"));
    let mut h = Table::new();
    h.insert("x", huge);
    let e = table_to_amqp(&h).expect_err("too big");
    assert!(
        e.to_string().contains("more than a 262144-byte frame"),
        "{e}"
    );
    let mut h = Table::new();
    h.insert(
        "x",
        HeaderValue::TooDeep {
            depth: 40,
            raw: b"F\x00\x00".to_vec(),
        },
    );
    let e = table_to_amqp(&h).expect_err("bad bytes");
    assert!(e.to_string().starts_with("header 'x' holds"), "{e}");
}

#[test]
fn short_strings_say_how_long() {
    assert!(short("the routing key", &"r".repeat(255)).is_ok());
    let e = short("the routing key", &"r".repeat(312)).expect_err("too long");
    assert_eq!(
        e.to_string(),
        "the routing key is 312 bytes; AMQP allows 255"
    );
    assert!(build_uri("amqp://h", &"v".repeat(256), "", "").is_err());
}

#[test]
fn urls_are_shown_without_credentials() {
    assert_eq!(
        display_url("amqp://ops:s3cret@rabbit.example:5672/prod"),
        "amqp://rabbit.example:5672"
    );
    assert_eq!(display_url("amqps://u:p@[::1]/x"), "amqps://[::1]:5671");
    assert_eq!(display_url("not a url with pass:word"), "<invalid URL>");
}

#[test]
fn uri_takes_explicit_credentials_and_vhost() {
    let uri = build_uri(
        "amqp://a:b@h:1234/ignored?heartbeat=7",
        "my vhost",
        "ops",
        "pw",
    )
    .expect("valid");
    assert_eq!(uri.authority.userinfo.username, "ops");
    assert_eq!(uri.authority.userinfo.password, "pw");
    assert_eq!(uri.authority.host, "h");
    assert_eq!(uri.authority.port, 1234);
    assert_eq!(uri.vhost, "my vhost");
    assert_eq!(uri.query.heartbeat, Some(7));
    assert_eq!(uri.query.frame_max, Some(MAX_FRAME));
    let asked = build_uri("amqp://h/?frame_max=4096", "/", "", "").expect("valid");
    assert_eq!(asked.query.frame_max, Some(4096));
    let uri = build_uri("amqps://u%40x:p%2F@127.0.0.1", "/", "", "").expect("valid");
    assert_eq!(uri.authority.userinfo.username, "u@x");
    assert_eq!(uri.authority.userinfo.password, "p/");
    assert_eq!(uri.authority.host, "127.0.0.1");
    assert_eq!(uri.authority.port, 5671);
    assert!(build_uri("http://h", "/", "", "").is_err());
}
