//! A stable key per dead letter, so that Warren can remember when it first saw each message
//! ("dead since": x-death's `time` is the first death, not the arrival in this queue).
//!
//! The key is the producer's id when there is one (the `message_id` property, or the
//! `x-message-id` header where RabbitMQ keeps an AMQP 1.0 id the property cannot carry), else a framework's own message id (a header
//! such as `NServiceBus.MessageId`, Celery's task id or dramatiq's body `message_id`, read by
//! `convention`), else a hash of the
//! content. The hash leaves out what changes while a message sits or cycles (x-death
//! counts, delivery and acquisition counters, the last-death headers) and normalises header
//! value types, so the same message gets the same key whether it was read over AMQP or through
//! the management API's lossy JSON. Two byte-identical messages without ids share a key; nothing
//! could tell them apart anyway.

use std::hash::Hasher;

use fnv::FnvHasher;

use super::convention::{self, IdPlace};
use super::message::DeadLetter;
use super::value::{HeaderValue, MAX_DEPTH, Table};

// Defined with the body readers that also stop there, so that convention does not import this
// module, which imports convention.
pub use super::convention::HASHED_BODY;

/// Framework id headers that stay with a message through retries and error queues, in order of
/// preference. (`MT-OriginalMessageId` is left out: it names another message.)
const ID_HEADERS: &[&str] = &[
    "NServiceBus.MessageId",
    "rbs2-msg-id",
    "MT-MessageId",
    "MessageId",
];

/// Headers that change while a message sits in a queue or cycles through retry queues.
fn is_volatile_header(name: &str) -> bool {
    matches!(name, "x-death" | "x-delivery-count" | "x-acquired-count")
        || name.starts_with("x-last-death-")
}

/// The key for `msg`: `id:<message_id>`, `header:<name>:<value>`, `body:<field>:<value>`, or
/// `hash:<16 hex digits>`.
pub fn message_key(msg: &DeadLetter) -> String {
    if let Some(id) = msg.properties.message_id.as_deref()
        && !id.trim().is_empty()
    {
        return format!("id:{id}");
    }
    // An AMQP 1.0 producer's id that the 0.9.1 property cannot carry (binary): the broker
    // keeps it in a header.
    if let Some(id) = super::amqp10::message_id(&msg.headers) {
        return format!("id:{id}");
    }
    match framework_id(msg) {
        Some((IdPlace::Header(name), value)) => format!("header:{name}:{value}"),
        Some((IdPlace::Body(name), value)) => format!("body:{name}:{value}"),
        None => format!("hash:{:016x}", content_hash(msg)),
    }
}

/// True when `key` is an id (the producer's or a framework's), not a content hash: only such a
/// key tells one message from another that merely looks the same, so only it links a message to
/// its earlier replays in the audit.
pub fn is_id_key(key: &str) -> bool {
    !key.starts_with("hash:")
}

/// The id a person knows `msg` by, as the key takes it: the producer's `message_id`, else a
/// framework's id header; `None` when the message has neither (its key is a content hash).
/// Not sanitised.
pub fn shown_id(msg: &DeadLetter) -> Option<String> {
    match msg.properties.message_id.as_deref() {
        Some(id) if !id.trim().is_empty() => Some(id.to_string()),
        _ => super::amqp10::message_id(&msg.headers)
            .or_else(|| framework_id(msg).map(|(_, value)| value)),
    }
}

/// What [`shown_id`] gives for the message whose [`message_key`] is `key`, read from the key
/// alone (a list of many messages keeps the key, not the headers).
pub fn shown_id_in_key(key: &str) -> Option<&str> {
    if let Some(id) = key.strip_prefix("id:") {
        return Some(id);
    }
    // Header and body field names are Warren's own constants, without a colon.
    key.strip_prefix("header:")
        .or_else(|| key.strip_prefix("body:"))
        .and_then(|rest| rest.split_once(':'))
        .map(|(_, value)| value)
}

/// A framework's own id: Celery's task id or dramatiq's body `message_id` (read by
/// `convention`), else the first framework id header with a value, by preference.
fn framework_id(msg: &DeadLetter) -> Option<(IdPlace, String)> {
    convention::framework_id(msg).or_else(|| id_header(msg))
}

fn id_header(msg: &DeadLetter) -> Option<(IdPlace, String)> {
    ID_HEADERS.iter().find_map(|&name| {
        let value = msg.headers.get(name).and_then(HeaderValue::as_bytes)?;
        let value = String::from_utf8_lossy(value);
        (!value.trim().is_empty()).then(|| (IdPlace::Header(name), value.into_owned()))
    })
}

/// The content hash: FNV-1a 64 (the `fnv` crate, as in `fingerprint`), stable across Rust
/// versions and platforms, over tagged fields; enough to tell apart the messages of one queue.
#[derive(Default)]
struct Fnv(FnvHasher);

impl Fnv {
    fn new() -> Self {
        Fnv::default()
    }

    fn bytes(&mut self, bytes: &[u8]) {
        self.0.write(bytes);
    }

    fn finish(&self) -> u64 {
        self.0.finish()
    }

    /// A tagged, length-prefixed field, so that no two different inputs share a byte stream.
    fn field(&mut self, tag: u8, bytes: &[u8]) {
        self.bytes(&[tag]);
        self.bytes(&(bytes.len() as u64).to_le_bytes());
        self.bytes(bytes);
    }

    fn opt(&mut self, tag: u8, value: Option<&str>) {
        match value {
            Some(v) => self.field(tag, v.as_bytes()),
            None => self.bytes(&[tag, 0xff]),
        }
    }
}

fn content_hash(msg: &DeadLetter) -> u64 {
    let mut h = Fnv::new();
    let p = &msg.properties;
    h.opt(b'c', p.content_type.as_deref());
    h.opt(b'e', p.content_encoding.as_deref());
    h.opt(b'd', p.delivery_mode.map(|v| v.to_string()).as_deref());
    h.opt(b'p', p.priority.map(|v| v.to_string()).as_deref());
    h.opt(b'r', p.correlation_id.as_deref());
    h.opt(b'y', p.reply_to.as_deref());
    h.opt(b'x', p.expiration.as_deref());
    h.opt(b't', p.timestamp.map(|v| v.to_string()).as_deref());
    h.opt(b'k', p.kind.as_deref());
    h.opt(b'u', p.user_id.as_deref());
    h.opt(b'a', p.app_id.as_deref());
    h.opt(b'l', p.cluster_id.as_deref());
    hash_table(&mut h, &msg.headers, true, 0);
    // The first `HASHED_BODY` bytes plus the real size: the same key whether the body was read
    // whole (replay) or cut at any cap of at least that size (browse, preview).
    h.field(b'B', msg.body.get(..HASHED_BODY).unwrap_or(&msg.body));
    h.field(b'S', &msg.body_size.to_le_bytes());
    h.finish()
}

/// Hashes a table in name order (the management API and AMQP need not agree on order).
fn hash_table(h: &mut Fnv, table: &Table, top_level: bool, level: usize) {
    let mut entries: Vec<(&str, &HeaderValue)> = table
        .iter()
        .filter(|(name, _)| !(top_level && is_volatile_header(name)))
        .collect();
    entries.sort_by(|a, b| a.0.cmp(b.0));
    h.field(b'T', &(entries.len() as u64).to_le_bytes());
    for (name, value) in entries {
        h.field(b'n', name.as_bytes());
        hash_value(h, value, level + 1);
    }
}

/// Hashes a value by its meaning rather than its wire type: every integer width (and a
/// timestamp) as one integer, short and long strings and byte arrays as bytes. Never deeper
/// than `MAX_DEPTH` (values from outside are no deeper; deeper ones are `TooDeep`).
fn hash_value(h: &mut Fnv, value: &HeaderValue, level: usize) {
    if level > MAX_DEPTH && matches!(value, HeaderValue::Table(_) | HeaderValue::Array(_)) {
        return h.field(b'X', &[]);
    }
    match value {
        HeaderValue::Void => h.field(b'v', &[]),
        HeaderValue::Bool(b) => h.field(b'b', &[u8::from(*b)]),
        HeaderValue::F32(f) => h.field(b'f', &f64::from(*f).to_bits().to_le_bytes()),
        HeaderValue::F64(f) => match value.as_i64() {
            Some(i) => h.field(b'i', &i.to_le_bytes()),
            None => h.field(b'f', &f.to_bits().to_le_bytes()),
        },
        HeaderValue::Decimal { scale, value } => {
            h.field(b'm', &[*scale]);
            h.bytes(&value.to_le_bytes());
        }
        HeaderValue::ShortString(b) | HeaderValue::LongString(b) | HeaderValue::Bytes(b) => {
            h.field(b's', b)
        }
        HeaderValue::Table(t) => hash_table(h, t, false, level),
        // Not taken apart: the exact bytes, or only the depth when there are none.
        HeaderValue::TooDeep { depth, raw } => {
            h.field(b'X', raw);
            h.bytes(&(*depth as u64).to_le_bytes());
        }
        HeaderValue::Array(items) => {
            h.field(b'A', &(items.len() as u64).to_le_bytes());
            for item in items {
                hash_value(h, item, level + 1);
            }
        }
        HeaderValue::I8(_)
        | HeaderValue::U8(_)
        | HeaderValue::I16(_)
        | HeaderValue::U16(_)
        | HeaderValue::I32(_)
        | HeaderValue::U32(_)
        | HeaderValue::I64(_)
        | HeaderValue::Timestamp(_) => {
            // `as_i64` covers every integer width; a timestamp beyond i64 is hashed by its bits.
            let i = value.as_i64().unwrap_or(i64::MIN);
            h.field(b'i', &i.to_le_bytes());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn msg(body: &[u8]) -> DeadLetter {
        DeadLetter {
            queue: "orders.dlq".into(),
            body: body.to_vec(),
            body_size: body.len() as u64,
            ..DeadLetter::default()
        }
    }

    #[test]
    fn message_id_property_wins() {
        let mut m = msg(b"{}");
        m.properties.message_id = Some("abc-1".into());
        m.headers
            .insert("NServiceBus.MessageId", HeaderValue::string("nsb-1"));
        assert_eq!(message_key(&m), "id:abc-1");
    }

    #[test]
    fn empty_message_id_falls_back_to_framework_header() {
        let mut m = msg(b"{}");
        m.properties.message_id = Some("  ".into());
        m.headers.insert("rbs2-msg-id", HeaderValue::string("r-7"));
        m.headers
            .insert("NServiceBus.MessageId", HeaderValue::string("nsb-1"));
        assert_eq!(message_key(&m), "header:NServiceBus.MessageId:nsb-1");
        assert_eq!(
            shown_id(&m).as_deref(),
            Some("nsb-1"),
            "the id the key uses"
        );
    }

    #[test]
    fn shown_id_is_the_producers_then_the_frameworks_then_none() {
        let mut m = msg(b"{}");
        assert_eq!(shown_id(&m), None, "a content hash is no id to show");
        m.headers
            .insert("MT-MessageId", HeaderValue::string("mt-9"));
        assert_eq!(shown_id(&m).as_deref(), Some("mt-9"));
        m.properties.message_id = Some("abc-1".into());
        assert_eq!(shown_id(&m).as_deref(), Some("abc-1"));
    }

    #[test]
    fn the_shown_id_can_be_read_from_the_key() {
        let mut ids = msg(b"{}");
        ids.properties.message_id = Some(" a:b ".into());
        let mut blank = msg(b"{}");
        blank.properties.message_id = Some("  ".into());
        blank
            .headers
            .insert("rbs2-msg-id", HeaderValue::string("r:7"));
        let dramatiq = msg(
            br#"{"queue_name":"q","actor_name":"a","args":[],"kwargs":{},"options":{},"message_id":"d-1"}"#,
        );
        for m in [msg(b"{}"), ids, blank, celery_task("c:1"), dramatiq] {
            assert_eq!(
                shown_id_in_key(&message_key(&m)),
                shown_id(&m).as_deref(),
                "{m:?}"
            );
        }
    }

    fn celery_task(id: &str) -> DeadLetter {
        let mut m = msg(br#"[[1], {}, {"callbacks": null}]"#);
        m.properties.correlation_id = Some(id.into());
        m.headers.insert("lang", HeaderValue::string("py"));
        m.headers.insert("task", HeaderValue::string("app.charge"));
        m.headers.insert("id", HeaderValue::string(id));
        m.headers.insert("retries", HeaderValue::I64(0));
        m
    }

    #[test]
    fn celery_task_id_is_the_identity_and_survives_a_replay() {
        let m = celery_task("ab9e6f14-cda2-4e2b-a0f5-f302ebd4825d");
        let key = message_key(&m);
        assert_eq!(key, "header:id:ab9e6f14-cda2-4e2b-a0f5-f302ebd4825d");
        // What a replay changes, and what the next death adds, leave the key alone.
        let mut again = m.clone();
        again
            .headers
            .insert("warren-replay-count", HeaderValue::I64(1));
        again.headers.insert("retries", HeaderValue::I64(0));
        again.headers.insert(
            "x-death",
            HeaderValue::Array(vec![HeaderValue::Table(Table::new())]),
        );
        assert_eq!(message_key(&again), key);
        // Two tasks with the same arguments are two messages.
        assert_ne!(
            message_key(&celery_task("25fc0bae-14a6-4f74-bc59-1af7acbfdd9f")),
            key
        );
    }

    /// A dead letter as dramatiq's worker leaves it in `<q>.XQ`: no AMQP `message_id`, only the
    /// broker's headers; the record is the JSON body.
    fn dramatiq_message(id: &str, retries: u32, args: &str) -> DeadLetter {
        let body = format!(
            r#"{{"queue_name":"work","actor_name":"charge","args":{args},"kwargs":{{}},"options":{{"retries":{retries},"traceback":"Traceback ...\nValueError: card declined\n","requeue_timestamp":1796147035796}},"message_id":"{id}","message_timestamp":1796147035786}}"#
        );
        let mut m = msg(body.as_bytes());
        m.queue = "work.XQ".into();
        m.headers.insert(
            "x-death",
            HeaderValue::Array(vec![HeaderValue::Table(Table::new())]),
        );
        m
    }

    #[test]
    fn dramatiq_body_message_id_is_the_identity_and_survives_a_replay() {
        let id = "878bb499-7995-48dd-88c4-3c8139f97820";
        let m = dramatiq_message(id, 1, "[0]");
        let key = message_key(&m);
        assert_eq!(key, format!("body:message_id:{id}"));
        assert_eq!(shown_id(&m).as_deref(), Some(id));
        // A replay adds Warren's headers, the next death a new x-death; dramatiq's own retry
        // rewrites the body's options. None of it changes the key (each did change the hash).
        let mut again = dramatiq_message(id, 2, "[0]");
        again
            .headers
            .insert("warren-replay-count", HeaderValue::I64(1));
        again
            .headers
            .insert("warren-replayed-from", HeaderValue::string("work.XQ"));
        assert_eq!(message_key(&again), key);
        // Read in another queue it is the same message.
        again.queue = "parked".into();
        assert_eq!(message_key(&again), key);
        // Two sends of the same arguments are two messages.
        assert_ne!(
            message_key(&dramatiq_message(
                "8584d852-f7e0-43ae-9dfb-27b4be9708f4",
                1,
                "[0]"
            )),
            key
        );
    }

    #[test]
    fn dramatiq_key_is_the_same_whole_or_cut_and_needs_the_id_within_the_hashed_prefix() {
        let id = "5b0c6a51-0000-4000-8000-000000000001";
        // Large arguments come before the id in dramatiq's encoding.
        let small = dramatiq_message(id, 1, &format!("[\"{}\"]", "x".repeat(1000)));
        let mut cut = small.clone();
        cut.body.truncate(cut.body.len() - 20);
        assert_eq!(message_key(&small), format!("body:message_id:{id}"));
        assert_eq!(message_key(&cut), message_key(&small), "cut after the id");
        let big = dramatiq_message(id, 1, &format!("[\"{}\"]", "x".repeat(HASHED_BODY)));
        let mut big_cut = big.clone();
        big_cut.body.truncate(HASHED_BODY + 10);
        assert!(
            message_key(&big).starts_with("hash:"),
            "id beyond the prefix"
        );
        assert_eq!(message_key(&big), message_key(&big_cut));
    }

    #[test]
    fn only_id_keys_name_one_message() {
        assert!(is_id_key(&message_key(&dramatiq_message("d-1", 0, "[]"))));
        assert!(is_id_key(&message_key(&celery_task("t-1"))));
        let mut m = msg(b"{}");
        m.properties.message_id = Some("abc".into());
        assert!(is_id_key(&message_key(&m)));
        assert!(!is_id_key(&message_key(&msg(b"same content"))));
    }

    #[test]
    fn the_producers_message_id_wins_over_the_body() {
        let mut m = dramatiq_message("d-1", 0, "[]");
        m.properties.message_id = Some("amqp-1".into());
        assert_eq!(message_key(&m), "id:amqp-1");
    }

    #[test]
    fn an_amqp_1_0_binary_id_kept_in_x_message_id_is_the_id() {
        let mut m = msg(b"\x00\x53\x77\x40");
        m.headers
            .insert("x-message-id", HeaderValue::Bytes(b"\x01\x02bin".to_vec()));
        assert_eq!(message_key(&m), "id:0x010262696e");
        assert_eq!(shown_id(&m).as_deref(), Some("0x010262696e"));
        assert_eq!(shown_id_in_key(&message_key(&m)), Some("0x010262696e"));
        // The property, when the broker could set it, wins.
        m.properties.message_id = Some("42".into());
        assert_eq!(message_key(&m), "id:42");
    }

    #[test]
    fn an_id_header_alone_is_not_a_celery_task_id() {
        let mut m = msg(b"{}");
        m.headers.insert("id", HeaderValue::string("42"));
        assert!(message_key(&m).starts_with("hash:"));
    }

    #[test]
    fn hash_ignores_what_changes_while_the_message_sits() {
        let mut a = msg(b"payload");
        a.headers.insert("tenant", HeaderValue::string("acme"));
        let mut b = a.clone();
        b.headers.insert(
            "x-death",
            HeaderValue::Array(vec![HeaderValue::Table(Table::new())]),
        );
        b.headers.insert("x-delivery-count", HeaderValue::I64(4));
        b.headers
            .insert("x-last-death-queue", HeaderValue::string("orders"));
        b.delivery.redelivered = true;
        b.delivery.delivery_count = Some(3);
        b.position = 17;
        let ka = message_key(&a);
        assert!(ka.starts_with("hash:"), "{ka}");
        assert_eq!(ka, message_key(&b));
    }

    #[test]
    fn hash_is_the_same_for_amqp_and_management_api_types() {
        let mut a = msg(b"x");
        a.headers.insert("retry-count", HeaderValue::I32(3));
        a.headers
            .insert("source", HeaderValue::ShortString(b"svc".to_vec()));
        let mut b = msg(b"x");
        b.headers.insert("source", HeaderValue::string("svc"));
        b.headers.insert("retry-count", HeaderValue::I64(3));
        assert_eq!(message_key(&a), message_key(&b));
    }

    #[test]
    fn hash_tells_different_content_apart() {
        let a = msg(b"payload-1");
        let b = msg(b"payload-2");
        assert_ne!(message_key(&a), message_key(&b));
        let mut c = msg(b"payload-1");
        c.properties.kind = Some("OrderPlaced".into());
        assert_ne!(message_key(&a), message_key(&c));
    }

    #[test]
    fn hash_is_stable_across_builds() {
        // FNV-1a of a fixed input: guards against an accidental change of the key scheme, which
        // would make every stored first-seen time unreachable.
        let mut h = Fnv::new();
        h.bytes(b"a");
        assert_eq!(h.finish(), 0xaf63_dc4c_8601_ec8c);
    }

    #[test]
    fn a_body_cut_at_any_cap_of_at_least_the_hashed_size_keeps_its_key() {
        let body: Vec<u8> = (0..200_000u32).map(|i| (i % 251) as u8).collect();
        let whole = msg(&body);
        let mut cut = msg(&body[..HASHED_BODY]);
        cut.body_size = whole.body_size;
        let mut cut_more = msg(&body[..HASHED_BODY * 2]);
        cut_more.body_size = whole.body_size;
        assert_eq!(message_key(&whole), message_key(&cut));
        assert_eq!(message_key(&whole), message_key(&cut_more));
        let mut other = msg(&body);
        other.body[150_000] ^= 1;
        other.body_size = whole.body_size;
        assert_eq!(
            message_key(&whole),
            message_key(&other),
            "only the first 64 KiB are hashed"
        );
        assert_ne!(
            message_key(&whole),
            message_key(&msg(&body[..199_999])),
            "the size counts"
        );
    }
}
