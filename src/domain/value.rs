//! AMQP 0.9.1 field values as Warren sees them: one type for every header value a broker can hand
//! us, whichever way it arrived (AMQP, or the management API's lossy JSON). Strings are kept as
//! bytes because nothing guarantees a header is UTF-8; display goes through `sanitize`.

use std::fmt;

/// How many levels of tables and arrays a header value may have inside Warren. AMQP puts no
/// limit on nesting (a 35 KB header can be 5,000 levels deep); every recursive walk over a
/// value (conversion, display, fingerprints, snapshots) is bounded by this instead. A value
/// nested deeper is kept as [`HeaderValue::TooDeep`]: its exact AMQP encoding, shown as such.
/// 32 because a snapshot writes each level as two nested JSON objects and serde_json reads at
/// most 128; real headers (x-death, framework fault headers) are 3 or 4 levels deep.
pub const MAX_DEPTH: usize = 32;

/// One AMQP 0.9.1 field value (RabbitMQ's dialect, which is what lapin and the broker speak).
#[derive(Clone, Debug, PartialEq)]
pub enum HeaderValue {
    Void,
    Bool(bool),
    I8(i8),
    U8(u8),
    I16(i16),
    U16(u16),
    I32(i32),
    U32(u32),
    I64(i64),
    F32(f32),
    F64(f64),
    Decimal {
        scale: u8,
        value: u32,
    },
    /// `s`: at most 255 bytes on the wire.
    ShortString(Vec<u8>),
    /// `S`: arbitrary bytes, usually but not necessarily UTF-8.
    LongString(Vec<u8>),
    /// `T`: seconds since the Unix epoch.
    Timestamp(u64),
    Table(Table),
    Array(Vec<HeaderValue>),
    /// `x`: RabbitMQ's byte array.
    Bytes(Vec<u8>),
    /// A table or array nested deeper than [`MAX_DEPTH`] levels, not taken apart: `raw` is its
    /// AMQP field-value encoding (type letter and payload) exactly as received, so a replay
    /// sends the same bytes; `depth` is how many levels of tables and arrays it has. `raw` is
    /// empty when the value came without its bytes (the management API's JSON): such a value
    /// can be shown but not republished.
    TooDeep {
        depth: usize,
        raw: Vec<u8>,
    },
}

impl HeaderValue {
    pub fn string(s: impl Into<String>) -> Self {
        HeaderValue::LongString(s.into().into_bytes())
    }

    /// The value as text when it is a string of valid UTF-8 (short or long).
    pub fn as_str(&self) -> Option<&str> {
        match self {
            HeaderValue::ShortString(b) | HeaderValue::LongString(b) => std::str::from_utf8(b).ok(),
            _ => None,
        }
    }

    /// The raw bytes of a string or byte array.
    pub fn as_bytes(&self) -> Option<&[u8]> {
        match self {
            HeaderValue::ShortString(b) | HeaderValue::LongString(b) | HeaderValue::Bytes(b) => {
                Some(b)
            }
            _ => None,
        }
    }

    /// Any integer width (and a timestamp) as i64; strings holding a plain integer too, because
    /// frameworks and the management API disagree about whether counters are numbers or text.
    pub fn as_i64(&self) -> Option<i64> {
        match self {
            HeaderValue::I8(v) => Some(i64::from(*v)),
            HeaderValue::U8(v) => Some(i64::from(*v)),
            HeaderValue::I16(v) => Some(i64::from(*v)),
            HeaderValue::U16(v) => Some(i64::from(*v)),
            HeaderValue::I32(v) => Some(i64::from(*v)),
            HeaderValue::U32(v) => Some(i64::from(*v)),
            HeaderValue::I64(v) => Some(*v),
            HeaderValue::Timestamp(v) => i64::try_from(*v).ok(),
            HeaderValue::F64(v) if v.fract() == 0.0 && v.is_finite() && v.abs() < 9.0e15 => {
                Some(*v as i64)
            }
            HeaderValue::ShortString(_) | HeaderValue::LongString(_) => {
                self.as_str().and_then(|s| s.trim().parse().ok())
            }
            _ => None,
        }
    }

    pub fn as_table(&self) -> Option<&Table> {
        match self {
            HeaderValue::Table(t) => Some(t),
            _ => None,
        }
    }

    pub fn as_array(&self) -> Option<&[HeaderValue]> {
        match self {
            HeaderValue::Array(a) => Some(a),
            _ => None,
        }
    }

    /// The AMQP type letter, for display and for the lossless export.
    pub fn type_name(&self) -> &'static str {
        match self {
            HeaderValue::Void => "void",
            HeaderValue::Bool(_) => "bool",
            HeaderValue::I8(_) => "i8",
            HeaderValue::U8(_) => "u8",
            HeaderValue::I16(_) => "i16",
            HeaderValue::U16(_) => "u16",
            HeaderValue::I32(_) => "i32",
            HeaderValue::U32(_) => "u32",
            HeaderValue::I64(_) => "i64",
            HeaderValue::F32(_) => "f32",
            HeaderValue::F64(_) => "f64",
            HeaderValue::Decimal { .. } => "decimal",
            HeaderValue::ShortString(_) => "short-string",
            HeaderValue::LongString(_) => "long-string",
            HeaderValue::Timestamp(_) => "timestamp",
            HeaderValue::Table(_) => "table",
            HeaderValue::Array(_) => "array",
            HeaderValue::Bytes(_) => "bytes",
            HeaderValue::TooDeep { .. } => "too-deep",
        }
    }

    /// How many levels of tables and arrays the value has (0 for a scalar). Counts at most
    /// `MAX_DEPTH + 1` levels for structured values; a `TooDeep` value reports its own depth.
    pub fn depth(&self) -> usize {
        fn go(v: &HeaderValue, level: usize) -> usize {
            if level > MAX_DEPTH {
                return level;
            }
            match v {
                HeaderValue::Table(t) => t
                    .iter()
                    .map(|(_, v)| go(v, level + 1))
                    .max()
                    .unwrap_or(level + 1)
                    .max(level + 1),
                HeaderValue::Array(a) => a
                    .iter()
                    .map(|v| go(v, level + 1))
                    .max()
                    .unwrap_or(level + 1)
                    .max(level + 1),
                // `depth` may come from a snapshot: any number.
                HeaderValue::TooDeep { depth, .. } => level.saturating_add(*depth),
                _ => level,
            }
        }
        go(self, 0)
    }

    /// The plain rendering (as `Display`) cut at about `max_bytes`: the work stops there, so a
    /// table of 100,000 entries costs no more than a short one. A cut rendering ends in `…`.
    /// Terminal output must still go through `sanitize`.
    pub fn display_capped(&self, max_bytes: usize) -> String {
        let mut w = Capped {
            out: String::new(),
            max: max_bytes,
            full: false,
        };
        let _ = fmt::write(&mut w, format_args!("{self}"));
        if w.full {
            w.out.push('…');
        }
        w.out
    }
}

/// A writer that takes at most `max` bytes and then fails, which stops `Display` early.
struct Capped {
    out: String,
    max: usize,
    full: bool,
}

impl fmt::Write for Capped {
    fn write_str(&mut self, s: &str) -> fmt::Result {
        let room = self.max.saturating_sub(self.out.len());
        if s.len() <= room {
            self.out.push_str(s);
            return Ok(());
        }
        let mut cut = room;
        while !s.is_char_boundary(cut) {
            cut -= 1;
        }
        self.out.push_str(&s[..cut]);
        self.full = true;
        Err(fmt::Error)
    }
}

/// Writes `v` as `Display` does, refusing to go deeper than `MAX_DEPTH` levels even for a value
/// built in code (values from outside never are: conversions make them `TooDeep`).
fn write_value(f: &mut fmt::Formatter<'_>, v: &HeaderValue, level: usize) -> fmt::Result {
    if level > MAX_DEPTH {
        return f.write_str("<nested too deep>");
    }
    match v {
        HeaderValue::Table(t) => {
            f.write_str("{")?;
            for (i, (k, v)) in t.iter().enumerate() {
                if i > 0 {
                    f.write_str(", ")?;
                }
                write!(f, "{k}: ")?;
                write_value(f, v, level + 1)?;
            }
            f.write_str("}")
        }
        HeaderValue::Array(a) => {
            f.write_str("[")?;
            for (i, v) in a.iter().enumerate() {
                if i > 0 {
                    f.write_str(", ")?;
                }
                write_value(f, v, level + 1)?;
            }
            f.write_str("]")
        }
        other => write!(f, "{other}"),
    }
}

/// Plain (unsanitised) rendering for logs and tests. Terminal output must go through
/// `sanitize::display` instead.
impl fmt::Display for HeaderValue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            HeaderValue::Void => f.write_str("void"),
            HeaderValue::Bool(v) => write!(f, "{v}"),
            HeaderValue::I8(v) => write!(f, "{v}"),
            HeaderValue::U8(v) => write!(f, "{v}"),
            HeaderValue::I16(v) => write!(f, "{v}"),
            HeaderValue::U16(v) => write!(f, "{v}"),
            HeaderValue::I32(v) => write!(f, "{v}"),
            HeaderValue::U32(v) => write!(f, "{v}"),
            HeaderValue::I64(v) => write!(f, "{v}"),
            HeaderValue::F32(v) => write!(f, "{v}"),
            HeaderValue::F64(v) => write!(f, "{v}"),
            HeaderValue::Decimal { scale, value } => write!(f, "{value}e-{scale}"),
            HeaderValue::ShortString(b) | HeaderValue::LongString(b) => {
                f.write_str(&String::from_utf8_lossy(b))
            }
            HeaderValue::Timestamp(v) => write!(f, "@{v}"),
            HeaderValue::Table(_) | HeaderValue::Array(_) => write_value(f, self, 0),
            HeaderValue::Bytes(b) => write!(f, "<{} bytes>", b.len()),
            HeaderValue::TooDeep { depth, raw } => write!(
                f,
                "<nested {depth} levels deep (Warren reads {MAX_DEPTH}); kept as received, {} bytes>",
                raw.len()
            ),
        }
    }
}

/// A field table: ordered (as received) name → value pairs. Lookups are exact and case-sensitive,
/// as frameworks spell their headers (`x-original-routingKey` has a capital K).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Table(Vec<(String, HeaderValue)>);

impl Table {
    pub fn new() -> Self {
        Table(Vec::new())
    }

    pub fn get(&self, key: &str) -> Option<&HeaderValue> {
        self.0.iter().find(|(k, _)| k == key).map(|(_, v)| v)
    }

    pub fn get_str(&self, key: &str) -> Option<&str> {
        self.get(key).and_then(HeaderValue::as_str)
    }

    pub fn get_i64(&self, key: &str) -> Option<i64> {
        self.get(key).and_then(HeaderValue::as_i64)
    }

    pub fn contains_key(&self, key: &str) -> bool {
        self.get(key).is_some()
    }

    /// Sets `key`, replacing an existing value in place (keeps the position) or appending.
    pub fn insert(&mut self, key: impl Into<String>, value: HeaderValue) {
        let key = key.into();
        match self.0.iter_mut().find(|(k, _)| *k == key) {
            Some(slot) => slot.1 = value,
            None => self.0.push((key, value)),
        }
    }

    pub fn remove(&mut self, key: &str) -> Option<HeaderValue> {
        let pos = self.0.iter().position(|(k, _)| k == key)?;
        Some(self.0.remove(pos).1)
    }

    pub fn retain(&mut self, mut keep: impl FnMut(&str, &HeaderValue) -> bool) {
        self.0.retain(|(k, v)| keep(k, v));
    }

    /// A copy of the entries `keep` keeps, in order: `clone` then `retain` without copying
    /// what goes.
    pub fn filtered(&self, mut keep: impl FnMut(&str, &HeaderValue) -> bool) -> Table {
        Table(self.0.iter().filter(|(k, v)| keep(k, v)).cloned().collect())
    }

    pub fn iter(&self) -> impl Iterator<Item = (&str, &HeaderValue)> {
        self.0.iter().map(|(k, v)| (k.as_str(), v))
    }

    pub fn keys(&self) -> impl Iterator<Item = &str> {
        self.0.iter().map(|(k, _)| k.as_str())
    }

    pub fn len(&self) -> usize {
        self.0.len()
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

impl FromIterator<(String, HeaderValue)> for Table {
    fn from_iter<I: IntoIterator<Item = (String, HeaderValue)>>(iter: I) -> Self {
        let mut t = Table::new();
        for (k, v) in iter {
            t.insert(k, v);
        }
        t
    }
}

impl IntoIterator for Table {
    type Item = (String, HeaderValue);
    type IntoIter = std::vec::IntoIter<(String, HeaderValue)>;
    fn into_iter(self) -> Self::IntoIter {
        self.0.into_iter()
    }
}
