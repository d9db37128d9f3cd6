//! A dead letter kept small in memory, for lists of many messages (the TUI holds 100,000): the
//! body as browsed, and everything else (headers, properties, delivery) in one compact byte
//! string, unpacked again when the message is opened, saved or planned. A decoded header table
//! costs about three times its packed size (a `String` and a `HeaderValue` per entry, an
//! allocation per string), which is most of what a browsed message weighed besides its body.
//!
//! The encoding is Warren's own and lives only in memory: tagged values, lengths as LEB128, and
//! the header names most dead letters carry as one or two bytes each (`WORDS`).
//! Packing then unpacking gives the same `DeadLetter` back. Like every walk over a header value
//! it goes at most [`MAX_DEPTH`] levels deep: a deeper table or array (only one built in code can
//! be: values from outside are `TooDeep` already) is kept as `TooDeep` without bytes, as the
//! snapshot writes it. Unpacking is total: bytes that are not a packing (impossible unless
//! memory is corrupt) give what could be read, never a panic.

use super::message::{DeadLetter, Delivery, Properties};
use super::value::{HeaderValue, MAX_DEPTH, Table};

/// One dead letter, packed (see the module documentation).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Packed {
    /// Headers first (so that they can be read alone), then the rest of the message.
    meta: Box<[u8]>,
    body: Box<[u8]>,
}

impl Packed {
    /// Packs `dl`; its body moves, it is not copied (the buffer is only shrunk to its length).
    pub fn pack(dl: DeadLetter) -> Packed {
        let mut w = Writer(Vec::with_capacity(256));
        w.table(&dl.headers, 1);
        w.str(&dl.queue);
        w.uint(dl.position);
        w.uint(dl.body_size);
        properties(&mut w, &dl.properties);
        let d = &dl.delivery;
        w.str(&d.exchange);
        w.str(&d.routing_key);
        w.0.push(u8::from(d.redelivered));
        w.opt_uint(d.delivery_count);
        w.opt_uint(d.stream_offset);
        Packed {
            // Copied to an allocation of its exact size: shrinking the scratch buffer in place
            // would leave a small hole beside every message.
            meta: Box::from(w.0.as_slice()),
            body: dl.body.into_boxed_slice(),
        }
    }

    /// The message again, as it was packed.
    pub fn unpack(&self) -> DeadLetter {
        unpack(&self.meta, self.body.to_vec())
    }

    /// The message again, its body moved rather than copied.
    pub fn into_message(self) -> DeadLetter {
        unpack(&self.meta, self.body.into_vec())
    }

    /// The headers alone, without the rest of the message.
    pub fn headers(&self) -> Table {
        Reader::new(&self.meta).table(1)
    }

    /// The headers whose name `wanted` accepts (what a `header:` filter looks at), the others
    /// skipped without being decoded.
    pub fn headers_named(&self, wanted: impl Fn(&str) -> bool) -> Table {
        let mut r = Reader::new(&self.meta);
        let n = r.len().unwrap_or(0);
        let mut found = Vec::new();
        for _ in 0..n {
            let Some(k) = r.word() else { break };
            let name = String::from_utf8_lossy(&k);
            if wanted(&name) {
                let Some(v) = r.value(1) else { break };
                found.push((name.into_owned(), v));
            } else if r.skip_value(1).is_none() {
                break;
            }
        }
        found.into_iter().collect()
    }

    /// The body as browsed (possibly cut at the browse cap: see `DeadLetter::body_size`).
    pub fn body(&self) -> &[u8] {
        &self.body
    }

    /// The packing as one byte string (the length of the rest, 4 bytes little-endian, the rest,
    /// then the body), appended to `out`: how a message is kept out of memory
    /// (`local::spill`). [`Packed::from_bytes`] reads it back.
    pub fn write_bytes(&self, out: &mut Vec<u8>) {
        let meta = u32::try_from(self.meta.len()).unwrap_or(u32::MAX);
        out.extend_from_slice(&meta.to_le_bytes());
        out.extend_from_slice(&self.meta[..meta as usize]);
        out.extend_from_slice(&self.body);
    }

    /// What [`Packed::write_bytes`] wrote; `None` for bytes it cannot have written.
    pub fn from_bytes(b: &[u8]) -> Option<Packed> {
        let (len, rest) = b.split_first_chunk::<4>()?;
        let meta = usize::try_from(u32::from_le_bytes(*len)).ok()?;
        if meta > rest.len() {
            return None;
        }
        let (meta, body) = rest.split_at(meta);
        Some(Packed {
            meta: Box::from(meta),
            body: Box::from(body),
        })
    }

    /// Bytes held on the heap, for benchmarks and for deciding what is worth keeping.
    pub fn heap_bytes(&self) -> usize {
        self.meta.len() + self.body.len()
    }
}

impl From<DeadLetter> for Packed {
    fn from(dl: DeadLetter) -> Packed {
        Packed::pack(dl)
    }
}

fn unpack(meta: &[u8], body: Vec<u8>) -> DeadLetter {
    let mut r = Reader::new(meta);
    let headers = r.table(1);
    let mut dl = DeadLetter {
        headers,
        body,
        ..DeadLetter::default()
    };
    // A field that cannot be read leaves the defaults from there on.
    let _ = rest(&mut r, &mut dl);
    dl
}

fn properties(w: &mut Writer, p: &Properties) {
    for s in [
        &p.content_type,
        &p.content_encoding,
        &p.correlation_id,
        &p.reply_to,
        &p.expiration,
        &p.message_id,
        &p.kind,
        &p.user_id,
        &p.app_id,
        &p.cluster_id,
    ] {
        w.opt_str(s.as_deref());
    }
    w.opt_uint(p.delivery_mode.map(u64::from));
    w.opt_uint(p.priority.map(u64::from));
    w.opt_uint(p.timestamp);
}

/// Everything after the headers, in the order `pack` wrote it.
fn rest(r: &mut Reader, dl: &mut DeadLetter) -> Option<()> {
    dl.queue = r.str()?;
    dl.position = r.uint()?;
    dl.body_size = r.uint()?;
    let p = &mut dl.properties;
    for slot in [
        &mut p.content_type,
        &mut p.content_encoding,
        &mut p.correlation_id,
        &mut p.reply_to,
        &mut p.expiration,
        &mut p.message_id,
        &mut p.kind,
        &mut p.user_id,
        &mut p.app_id,
        &mut p.cluster_id,
    ] {
        *slot = r.opt_str()?;
    }
    p.delivery_mode = r.opt_uint()?.and_then(|v| u8::try_from(v).ok());
    p.priority = r.opt_uint()?.and_then(|v| u8::try_from(v).ok());
    p.timestamp = r.opt_uint()?;
    dl.delivery = Delivery {
        exchange: r.str()?,
        routing_key: r.str()?,
        redelivered: r.byte()? != 0,
        delivery_count: r.opt_uint()?,
        stream_offset: r.opt_uint()?,
    };
    Some(())
}

/// Names and values that most dead letters carry (the broker's and the frameworks' header
/// names, death reasons, content types), written as their index: `x-death` then costs one byte
/// instead of eight. Only the packing uses it; any string packs, listed or not. Appending is
/// safe (packings live in memory only). An index is written as twice the index plus one: the
/// first 64 words take one byte, the rest two, so the most common come first.
const WORDS: &[&str] = &[
    "x-death",
    "count",
    "reason",
    "queue",
    "time",
    "exchange",
    "routing-keys",
    "original-expiration",
    "x-first-death-queue",
    "x-first-death-reason",
    "x-first-death-exchange",
    "x-last-death-queue",
    "x-last-death-reason",
    "x-last-death-exchange",
    "x-delivery-count",
    "x-acquired-count",
    "rejected",
    "expired",
    "maxlen",
    "delivery_limit",
    "MT-Reason",
    "fault",
    "MT-Fault-ExceptionType",
    "MT-Fault-Message",
    "MT-Fault-StackTrace",
    "MT-Fault-ConsumerType",
    "MT-Fault-MessageType",
    "MT-Fault-Timestamp",
    "MT-Fault-RetryCount",
    "MT-Fault-InputAddress",
    "MT-Redelivery-Count",
    "MT-MessageId",
    "MT-OriginalMessageId",
    "MT-Host-MachineName",
    "MT-Host-ProcessName",
    "MT-Host-ProcessId",
    "MT-Host-Assembly",
    "MT-Host-AssemblyVersion",
    "MT-Host-FrameworkVersion",
    "MT-Host-MassTransitVersion",
    "MT-Host-OperatingSystemVersion",
    "x-exception-message",
    "x-exception-stacktrace",
    "x-original-exchange",
    "x-original-routingKey",
    "NServiceBus.MessageId",
    "NServiceBus.FailedQ",
    "NServiceBus.Retries",
    "NServiceBus.TimeOfFailure",
    "NServiceBus.ExceptionInfo.ExceptionType",
    "NServiceBus.ExceptionInfo.Message",
    "NServiceBus.ExceptionInfo.StackTrace",
    "NServiceBus.ExceptionInfo.Source",
    "NServiceBus.ProcessingMachine",
    "NServiceBus.ProcessingEndpoint",
    "NServiceBus.EnclosedMessageTypes",
    "NServiceBus.CorrelationId",
    "NServiceBus.ConversationId",
    "NServiceBus.ContentType",
    "NServiceBus.TimeSent",
    "NServiceBus.MessageIntent",
    "NServiceBus.OriginatingEndpoint",
    "NServiceBus.OriginatingMachine",
    "NServiceBus.Version",
    "rbs2-msg-id",
    "rbs2-msg-type",
    "rbs2-corr-id",
    "rbs2-error-details",
    "rbs2-source-queue",
    "rbs2-delivery-count",
    "rbs2-defer-count",
    "exception-type",
    "exception-message",
    "exception-stack",
    "message-type",
    "message-id",
    "failed-at",
    "retry-count",
    "x-retry-count",
    "x-retries",
    "x-last-error",
    "x-error",
    "x-exception",
    "warren-replay-count",
    "warren-replayed-from",
    "warren-replayed-at",
    "application/json",
    "text/plain",
    "application/xml",
    "application/octet-stream",
    "application/vnd.masstransit+json",
    "utf-8",
    "UTF-8",
    "gzip",
    "lang",
    "task",
    "id",
    "retries",
    "rascal",
];

// Value tags.
const VOID: u8 = 0;
const BOOL: u8 = 1;
const I8: u8 = 2;
const U8: u8 = 3;
const I16: u8 = 4;
const U16: u8 = 5;
const I32: u8 = 6;
const U32: u8 = 7;
const I64: u8 = 8;
const F32: u8 = 9;
const F64: u8 = 10;
const DECIMAL: u8 = 11;
const SHORT: u8 = 12;
const LONG: u8 = 13;
const TIMESTAMP: u8 = 14;
const TABLE: u8 = 15;
const ARRAY: u8 = 16;
const BYTES: u8 = 17;
const TOO_DEEP: u8 = 18;

struct Writer(Vec<u8>);

impl Writer {
    fn uint(&mut self, mut v: u64) {
        loop {
            let low = (v & 0x7f) as u8;
            v >>= 7;
            if v == 0 {
                self.0.push(low);
                return;
            }
            self.0.push(low | 0x80);
        }
    }

    fn bytes(&mut self, b: &[u8]) {
        self.uint(b.len() as u64);
        self.0.extend_from_slice(b);
    }

    fn str(&mut self, s: &str) {
        self.word(s.as_bytes());
    }

    /// A string: `2 × index + 1` for one of [`WORDS`], else `2 × length` and the bytes.
    fn word(&mut self, b: &[u8]) {
        match WORDS.iter().position(|w| w.as_bytes() == b) {
            Some(i) => self.uint(2 * i as u64 + 1),
            None => {
                self.uint(2 * b.len() as u64);
                self.0.extend_from_slice(b);
            }
        }
    }

    fn opt_str(&mut self, s: Option<&str>) {
        match s {
            None => self.0.push(0),
            Some(s) => {
                self.0.push(1);
                self.str(s);
            }
        }
    }

    fn opt_uint(&mut self, v: Option<u64>) {
        match v {
            None => self.0.push(0),
            Some(v) => {
                self.0.push(1);
                self.uint(v);
            }
        }
    }

    fn table(&mut self, t: &Table, level: usize) {
        self.uint(t.len() as u64);
        for (k, v) in t.iter() {
            self.str(k);
            self.value(v, level);
        }
    }

    /// `level` as in the snapshot: 1 for a header's own value.
    fn value(&mut self, v: &HeaderValue, level: usize) {
        if level > MAX_DEPTH && matches!(v, HeaderValue::Table(_) | HeaderValue::Array(_)) {
            self.0.push(TOO_DEEP);
            self.uint(v.depth() as u64);
            self.bytes(&[]);
            return;
        }
        match v {
            HeaderValue::Void => self.0.push(VOID),
            HeaderValue::Bool(b) => self.0.extend([BOOL, u8::from(*b)]),
            HeaderValue::I8(n) => self.0.extend([I8, n.to_le_bytes()[0]]),
            HeaderValue::U8(n) => self.0.extend([U8, *n]),
            HeaderValue::I16(n) => self.fixed(I16, &n.to_le_bytes()),
            HeaderValue::U16(n) => self.fixed(U16, &n.to_le_bytes()),
            HeaderValue::I32(n) => self.fixed(I32, &n.to_le_bytes()),
            HeaderValue::U32(n) => self.fixed(U32, &n.to_le_bytes()),
            HeaderValue::I64(n) => self.fixed(I64, &n.to_le_bytes()),
            HeaderValue::F32(f) => self.fixed(F32, &f.to_bits().to_le_bytes()),
            HeaderValue::F64(f) => self.fixed(F64, &f.to_bits().to_le_bytes()),
            HeaderValue::Decimal { scale, value } => {
                self.0.extend([DECIMAL, *scale]);
                self.0.extend_from_slice(&value.to_le_bytes());
            }
            HeaderValue::ShortString(b) => {
                self.0.push(SHORT);
                self.word(b);
            }
            HeaderValue::LongString(b) => {
                self.0.push(LONG);
                self.word(b);
            }
            HeaderValue::Timestamp(t) => {
                self.0.push(TIMESTAMP);
                self.uint(*t);
            }
            HeaderValue::Table(t) => {
                self.0.push(TABLE);
                self.table(t, level + 1);
            }
            HeaderValue::Array(a) => {
                self.0.push(ARRAY);
                self.uint(a.len() as u64);
                for v in a {
                    self.value(v, level + 1);
                }
            }
            HeaderValue::Bytes(b) => {
                self.0.push(BYTES);
                self.bytes(b);
            }
            HeaderValue::TooDeep { depth, raw } => {
                self.0.push(TOO_DEEP);
                self.uint(*depth as u64);
                self.bytes(raw);
            }
        }
    }

    fn fixed(&mut self, tag: u8, bytes: &[u8]) {
        self.0.push(tag);
        self.0.extend_from_slice(bytes);
    }
}

struct Reader<'a> {
    buf: &'a [u8],
}

impl<'a> Reader<'a> {
    fn new(buf: &'a [u8]) -> Self {
        Reader { buf }
    }

    fn take(&mut self, n: usize) -> Option<&'a [u8]> {
        if n > self.buf.len() {
            return None;
        }
        let (head, tail) = self.buf.split_at(n);
        self.buf = tail;
        Some(head)
    }

    fn byte(&mut self) -> Option<u8> {
        self.take(1).map(|b| b[0])
    }

    fn array<const N: usize>(&mut self) -> Option<[u8; N]> {
        self.take(N).and_then(|b| b.try_into().ok())
    }

    fn uint(&mut self) -> Option<u64> {
        let mut v: u64 = 0;
        for shift in (0..64).step_by(7) {
            let b = self.byte()?;
            v |= u64::from(b & 0x7f) << shift;
            if b & 0x80 == 0 {
                return Some(v);
            }
        }
        None
    }

    fn len(&mut self) -> Option<usize> {
        // A length never exceeds what is left, so a corrupt one cannot reserve memory.
        usize::try_from(self.uint()?)
            .ok()
            .filter(|&n| n <= self.buf.len())
    }

    fn bytes(&mut self) -> Option<Vec<u8>> {
        let n = self.len()?;
        self.take(n).map(<[u8]>::to_vec)
    }

    fn str(&mut self) -> Option<String> {
        self.word()
            .map(|b| String::from_utf8(b).unwrap_or_else(|e| lossy(e.as_bytes())))
    }

    /// See `Writer::word`.
    fn word(&mut self) -> Option<Vec<u8>> {
        let n = self.uint()?;
        if n % 2 == 1 {
            let i = usize::try_from(n / 2).ok()?;
            return WORDS.get(i).map(|w| w.as_bytes().to_vec());
        }
        let n = usize::try_from(n / 2)
            .ok()
            .filter(|&n| n <= self.buf.len())?;
        self.take(n).map(<[u8]>::to_vec)
    }

    fn opt_str(&mut self) -> Option<Option<String>> {
        match self.byte()? {
            0 => Some(None),
            _ => self.str().map(Some),
        }
    }

    fn opt_uint(&mut self) -> Option<Option<u64>> {
        match self.byte()? {
            0 => Some(None),
            _ => self.uint().map(Some),
        }
    }

    /// A table; entries that cannot be read end it (see the module documentation).
    fn table(&mut self, level: usize) -> Table {
        let n = self.len().unwrap_or(0);
        let mut entries = Vec::with_capacity(n.min(64));
        for _ in 0..n {
            let Some(k) = self.str() else { break };
            let Some(v) = self.value(level) else { break };
            entries.push((k, v));
        }
        entries.into_iter().collect()
    }

    /// Steps over one value as `value` would read it, allocating nothing.
    fn skip_value(&mut self, level: usize) -> Option<()> {
        let tag = self.byte()?;
        if level > MAX_DEPTH && matches!(tag, TABLE | ARRAY) {
            return None;
        }
        match tag {
            VOID => {}
            BOOL | I8 | U8 => {
                self.take(1)?;
            }
            I16 | U16 => {
                self.take(2)?;
            }
            I32 | U32 | F32 => {
                self.take(4)?;
            }
            I64 | F64 => {
                self.take(8)?;
            }
            DECIMAL => {
                self.take(5)?;
            }
            SHORT | LONG => self.skip_word()?,
            TIMESTAMP => {
                self.uint()?;
            }
            TABLE => {
                for _ in 0..self.len()? {
                    self.skip_word()?;
                    self.skip_value(level + 1)?;
                }
            }
            ARRAY => {
                for _ in 0..self.len()? {
                    self.skip_value(level + 1)?;
                }
            }
            BYTES => {
                let n = self.len()?;
                self.take(n)?;
            }
            TOO_DEEP => {
                self.uint()?;
                let n = self.len()?;
                self.take(n)?;
            }
            _ => return None,
        }
        Some(())
    }

    fn skip_word(&mut self) -> Option<()> {
        let n = self.uint()?;
        if n % 2 == 0 {
            let n = usize::try_from(n / 2).ok()?;
            self.take(n)?;
        }
        Some(())
    }

    fn value(&mut self, level: usize) -> Option<HeaderValue> {
        let tag = self.byte()?;
        if level > MAX_DEPTH && matches!(tag, TABLE | ARRAY) {
            // `pack` never writes these; refusing them bounds the recursion.
            return None;
        }
        Some(match tag {
            VOID => HeaderValue::Void,
            BOOL => HeaderValue::Bool(self.byte()? != 0),
            I8 => HeaderValue::I8(i8::from_le_bytes(self.array()?)),
            U8 => HeaderValue::U8(self.byte()?),
            I16 => HeaderValue::I16(i16::from_le_bytes(self.array()?)),
            U16 => HeaderValue::U16(u16::from_le_bytes(self.array()?)),
            I32 => HeaderValue::I32(i32::from_le_bytes(self.array()?)),
            U32 => HeaderValue::U32(u32::from_le_bytes(self.array()?)),
            I64 => HeaderValue::I64(i64::from_le_bytes(self.array()?)),
            F32 => HeaderValue::F32(f32::from_bits(u32::from_le_bytes(self.array()?))),
            F64 => HeaderValue::F64(f64::from_bits(u64::from_le_bytes(self.array()?))),
            DECIMAL => HeaderValue::Decimal {
                scale: self.byte()?,
                value: u32::from_le_bytes(self.array()?),
            },
            SHORT => HeaderValue::ShortString(self.word()?),
            LONG => HeaderValue::LongString(self.word()?),
            TIMESTAMP => HeaderValue::Timestamp(self.uint()?),
            TABLE => HeaderValue::Table(self.table(level + 1)),
            ARRAY => {
                let n = self.len()?;
                let mut items = Vec::with_capacity(n.min(64));
                for _ in 0..n {
                    items.push(self.value(level + 1)?);
                }
                HeaderValue::Array(items)
            }
            BYTES => HeaderValue::Bytes(self.bytes()?),
            TOO_DEEP => HeaderValue::TooDeep {
                depth: usize::try_from(self.uint()?).unwrap_or(usize::MAX),
                raw: self.bytes()?,
            },
            _ => return None,
        })
    }
}

fn lossy(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rich() -> DeadLetter {
        let mut death = Table::new();
        death.insert("count", HeaderValue::I64(3));
        death.insert("reason", HeaderValue::string("rejected"));
        death.insert("time", HeaderValue::Timestamp(1_759_042_215));
        death.insert(
            "routing-keys",
            HeaderValue::Array(vec![HeaderValue::ShortString(b"order.created".to_vec())]),
        );
        let mut headers = Table::new();
        headers.insert(
            "x-death",
            HeaderValue::Array(vec![HeaderValue::Table(death)]),
        );
        headers.insert("bin", HeaderValue::LongString(vec![0xff, 0xfe, 0, 1]));
        headers.insert("bytes", HeaderValue::Bytes(vec![1, 2, 3]));
        headers.insert("void", HeaderValue::Void);
        headers.insert("yes", HeaderValue::Bool(true));
        headers.insert("i8", HeaderValue::I8(-8));
        headers.insert("u8", HeaderValue::U8(200));
        headers.insert("i16", HeaderValue::I16(-1600));
        headers.insert("u16", HeaderValue::U16(65_000));
        headers.insert("i32", HeaderValue::I32(i32::MIN));
        headers.insert("u32", HeaderValue::U32(u32::MAX));
        headers.insert("i64", HeaderValue::I64(i64::MIN));
        headers.insert("f32", HeaderValue::F32(-1.5));
        headers.insert("f64", HeaderValue::F64(f64::MAX));
        headers.insert(
            "dec",
            HeaderValue::Decimal {
                scale: 2,
                value: 12_345,
            },
        );
        headers.insert(
            "deep",
            HeaderValue::TooDeep {
                depth: 40,
                raw: vec![b'F', 0, 0, 0, 0],
            },
        );
        DeadLetter {
            queue: "orders.dlq".into(),
            position: 12_345_678,
            properties: Properties {
                content_type: Some("application/json".into()),
                content_encoding: Some(String::new()),
                delivery_mode: Some(2),
                priority: Some(9),
                correlation_id: Some("c-1".into()),
                reply_to: None,
                expiration: Some("60000".into()),
                message_id: Some("order-1 ✓".into()),
                timestamp: Some(u64::MAX),
                kind: Some("OrderPlaced".into()),
                user_id: None,
                app_id: Some("api".into()),
                cluster_id: None,
            },
            headers,
            body: b"{\"id\":1}".to_vec(),
            body_size: 70_000,
            delivery: Delivery {
                exchange: String::new(),
                routing_key: "orders.dlq".into(),
                redelivered: true,
                delivery_count: Some(0),
                stream_offset: None,
            },
        }
    }

    #[test]
    fn packing_then_unpacking_gives_the_message_back() {
        for dl in [rich(), DeadLetter::default()] {
            let packed = Packed::pack(dl.clone());
            assert_eq!(packed.unpack(), dl);
            assert_eq!(packed.headers(), dl.headers);
            assert_eq!(packed.headers_named(|_| true), dl.headers);
            let only: Table = dl
                .headers
                .iter()
                .filter(|(k, _)| k.starts_with('i') || *k == "deep")
                .map(|(k, v)| (k.to_string(), v.clone()))
                .collect();
            assert_eq!(
                packed.headers_named(|k| k.starts_with('i') || k == "deep"),
                only
            );
            assert_eq!(packed.body(), &dl.body[..]);
            assert_eq!(packed.into_message(), dl);
        }
    }

    #[test]
    fn every_word_packs_in_one_or_two_bytes() {
        let mut seen = std::collections::HashSet::new();
        for (i, w) in WORDS.iter().enumerate() {
            assert!(seen.insert(w), "{w} twice");
            let mut out = Writer(Vec::new());
            out.str(w);
            assert_eq!(out.0.len(), if i < 64 { 1 } else { 2 }, "{w}");
            assert_eq!(Reader::new(&out.0).str().as_deref(), Some(*w));
        }
    }

    #[test]
    fn a_packed_message_is_small() {
        let dl = rich();
        let packed = Packed::pack(dl);
        assert!(packed.heap_bytes() < 400, "{}", packed.heap_bytes());
    }

    #[test]
    fn a_value_built_deeper_than_the_limit_is_kept_as_too_deep() {
        let mut v = HeaderValue::I32(1);
        for _ in 0..100 {
            v = HeaderValue::Array(vec![v]);
        }
        let mut headers = Table::new();
        headers.insert("deep", v);
        let back = Packed::pack(DeadLetter {
            headers,
            ..DeadLetter::default()
        })
        .headers();
        let mut at = back.get("deep").expect("kept");
        let mut levels = 0;
        while let HeaderValue::Array(a) = at {
            at = &a[0];
            levels += 1;
        }
        assert_eq!(levels, MAX_DEPTH);
        assert!(
            matches!(at, HeaderValue::TooDeep { depth, raw } if *depth > MAX_DEPTH - 32 && raw.is_empty()),
            "{at:?}"
        );
    }

    #[test]
    fn bytes_that_are_not_a_packing_never_panic() {
        let good = Packed::pack(rich());
        for cut in 0..good.meta.len() {
            let p = Packed {
                meta: good.meta[..cut].into(),
                body: Box::default(),
            };
            let _ = p.unpack();
        }
        for junk in [
            &[0xffu8; 40][..],
            &[TABLE; 200],
            &[1, 1, ARRAY, 0xff, 0xff, 0x7f],
        ] {
            let p = Packed {
                meta: junk.into(),
                body: Box::default(),
            };
            let _ = p.unpack();
            let _ = p.headers_named(|k| k.len() % 2 == 0);
        }
    }

    #[test]
    fn a_packing_written_as_bytes_reads_back_the_same() {
        let mut dl = DeadLetter {
            queue: "orders.dlq".into(),
            position: 7,
            body: b"{\"id\": 1}".to_vec(),
            ..DeadLetter::default()
        };
        dl.headers
            .insert("x-first-death-reason", HeaderValue::string("rejected"));
        let p = Packed::pack(dl.clone());
        let mut out = b"before".to_vec();
        p.write_bytes(&mut out);
        let back = Packed::from_bytes(&out[6..]).expect("read back");
        assert_eq!(back, p);
        assert_eq!(back.unpack(), dl);
        assert_eq!(Packed::from_bytes(&out[6..8]), None);
    }
}
