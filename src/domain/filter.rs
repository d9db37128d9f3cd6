//! The filter language shared by `warren replay --filter` and the TUI's `/`.
//!
//! A query is whitespace-separated terms, all of which must match:
//! - `exception:TEXT` — exception type or message contains TEXT
//! - `reason:rejected|expired|maxlen|delivery_limit|other` — a broker death reason
//! - `queue:TEXT` — the origin queue, `type:TEXT` — the message type,
//!   `convention:TEXT` / `fw:TEXT` — the framework that dead-lettered it
//! - `header:NAME=TEXT` (value contains TEXT) and `header:NAME` (present)
//! - `body:TEXT` — the body contains TEXT
//! - `age:>1h`, `age:<30m`, `age:>=2d`, `age:<1h30m` (units s, m, h, d)
//! - a free word: the verdict, the exception or the body contains it
//!
//! `-` before a term negates it; double quotes hold spaces (`exception:"carrier down"`, inside
//! them `\"` and `\\`). Text matching is case-insensitive substring matching. The filter matches
//! a plain [`Subject`] the caller fills in, so it depends on nothing but the header model.

use std::borrow::Cow;
use std::fmt;
use std::str::FromStr;

use super::value::{HeaderValue, Table};

/// What a filter is matched against: one dead letter, as the caller explains it.
#[derive(Clone, Debug)]
pub struct Subject<'a> {
    pub verdict: Cow<'a, str>,
    pub exception_type: Option<&'a str>,
    pub exception_message: Option<&'a str>,
    /// Broker death reasons, e.g. "rejected".
    pub reasons: Vec<&'a str>,
    pub origin_queue: Option<&'a str>,
    pub message_type: Option<&'a str>,
    pub convention: &'a str,
    pub headers: &'a Table,
    pub body: &'a [u8],
    /// Seconds since the message was first seen dead (or since its first death).
    pub age_secs: Option<u64>,
}

/// A parsed query. The empty filter matches everything.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Filter {
    terms: Vec<Term>,
}

/// A parse error, with the 1-based column (in characters) where the problem is.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("filter error at column {column}: {message}")]
pub struct FilterError {
    pub column: usize,
    pub message: String,
}

#[derive(Clone, Debug, PartialEq, Eq)]
struct Term {
    negated: bool,
    kind: TermKind,
}

#[derive(Clone, Debug, PartialEq, Eq)]
enum TermKind {
    Exception(Needle),
    Reason(Reason),
    Queue(Needle),
    Type(Needle),
    Convention(Needle),
    Header { name: String, value: Option<Needle> },
    Body(Needle),
    Age { op: AgeOp, secs: u64 },
    Word(Needle),
}

/// Text to look for, kept as typed (for the canonical form) and lower-cased (for matching).
#[derive(Clone, Debug, PartialEq, Eq)]
struct Needle {
    text: String,
    lower: String,
}

impl Needle {
    fn new(text: String) -> Self {
        let lower = text.to_lowercase();
        Needle { text, lower }
    }

    fn found_in_str(&self, hay: Option<&str>) -> bool {
        hay.is_some_and(|h| self.found_in(h.as_bytes()))
    }

    /// Case-insensitive substring search. ASCII needles (the common case) are searched in the
    /// raw bytes without allocating; others through lossy UTF-8 and full lower-casing.
    fn found_in(&self, hay: &[u8]) -> bool {
        let needle = self.lower.as_bytes();
        if needle.is_empty() {
            return true;
        }
        if self.lower.is_ascii() {
            // Jump between candidate first bytes with memchr (SIMD): the TUI filters 100,000
            // bodies on every keystroke, and a plain window scan made that ~100 ms.
            let (first, rest) = (needle[0], &needle[1..]);
            memchr::memchr2_iter(first.to_ascii_lowercase(), first.to_ascii_uppercase(), hay).any(
                |i| {
                    hay.get(i + 1..i + needle.len())
                        .is_some_and(|w| w.eq_ignore_ascii_case(rest))
                },
            )
        } else {
            String::from_utf8_lossy(hay)
                .to_lowercase()
                .contains(&self.lower)
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Reason {
    Rejected,
    Expired,
    Maxlen,
    DeliveryLimit,
    /// Any reason other than the four above.
    Other,
}

impl Reason {
    const NAMES: &'static str = "rejected, expired, maxlen, delivery_limit, other";

    fn parse(s: &str) -> Option<Reason> {
        match s.to_ascii_lowercase().replace('-', "_").as_str() {
            "rejected" => Some(Reason::Rejected),
            "expired" => Some(Reason::Expired),
            "maxlen" => Some(Reason::Maxlen),
            "delivery_limit" => Some(Reason::DeliveryLimit),
            "other" => Some(Reason::Other),
            _ => None,
        }
    }

    fn name(self) -> &'static str {
        match self {
            Reason::Rejected => "rejected",
            Reason::Expired => "expired",
            Reason::Maxlen => "maxlen",
            Reason::DeliveryLimit => "delivery_limit",
            Reason::Other => "other",
        }
    }

    fn matches(self, reason: &str) -> bool {
        match self {
            Reason::Other => Reason::parse(reason).is_none_or(|r| r == Reason::Other),
            known => reason.eq_ignore_ascii_case(known.name()),
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum AgeOp {
    Gt,
    Ge,
    Lt,
    Le,
}

impl AgeOp {
    fn symbol(self) -> &'static str {
        match self {
            AgeOp::Gt => ">",
            AgeOp::Ge => ">=",
            AgeOp::Lt => "<",
            AgeOp::Le => "<=",
        }
    }
}

const KEYS: &str = "exception, reason, queue, type, header, body, age, convention (fw)";

/// How terms combine, for the man page (`warren man`) and anything else that documents the
/// language (`docs/manual.md` says the same).
pub const SYNTAX: &str = "Shared by warren replay --filter, warren show --filter, the other commands' \
     --filter and the terminal UI's /: whitespace-separated key:value terms, all of which must \
     match; - before a term negates it; double quotes hold spaces (exception:\"carrier down\"). \
     Text matching is case-insensitive substring matching. An empty --filter is a usage error \
     (exit 2): leave it out to take every message.";

/// Each term as written and what it matches, for the same readers as [`SYNTAX`].
pub const TERMS: &[(&str, &str)] = &[
    (
        "exception:TEXT",
        "the exception type or message contains TEXT",
    ),
    (
        "reason:NAME",
        "a broker death reason, one of rejected, expired, maxlen, delivery_limit, other",
    ),
    ("queue:TEXT", "the origin queue"),
    ("type:TEXT", "the message type"),
    (
        "convention:TEXT, fw:TEXT",
        "the framework that dead-lettered it (convention:masstransit)",
    ),
    (
        "header:NAME=TEXT, header:NAME",
        "the header's value contains TEXT; the header is present",
    ),
    ("body:TEXT", "the body contains TEXT"),
    (
        "age:>1h, age:<30m, age:>=2d, age:<1h30m",
        "how long it has been in the DLQ (units s, m, h, d): exact when it died once, else \
         since Warren first saw it (a lower bound)",
    ),
    (
        "WORD",
        "a plain word: the verdict, the exception or the body contains it",
    ),
];

impl Filter {
    /// Parses a query; see the module documentation for the language.
    pub fn parse(input: &str) -> Result<Filter, FilterError> {
        let chars: Vec<char> = input.chars().collect();
        let mut terms = Vec::new();
        let mut i = 0;
        while i < chars.len() {
            if chars.get(i).is_some_and(|c| c.is_whitespace()) {
                i += 1;
                continue;
            }
            let (term, next) = parse_term(&chars, i)?;
            terms.push(term);
            i = next;
        }
        Ok(Filter { terms })
    }

    /// True when the filter has no terms (and so matches everything).
    pub fn is_empty(&self) -> bool {
        self.terms.is_empty()
    }

    /// The header names its terms look at (matched case-insensitively): a caller that keeps
    /// headers packed (the TUI) decodes only those for [`Subject::headers`].
    pub fn header_names(&self) -> Vec<&str> {
        self.terms
            .iter()
            .filter_map(|t| match &t.kind {
                TermKind::Header { name, .. } => Some(name.as_str()),
                _ => None,
            })
            .collect()
    }

    /// Whether a term looks at the body (`body:`, or a free word): a caller that keeps bodies
    /// out of memory (the TUI's long pages) fetches them only then.
    pub fn reads_body(&self) -> bool {
        self.terms
            .iter()
            .any(|t| matches!(t.kind, TermKind::Body(_) | TermKind::Word(_)))
    }

    /// True when every term matches `s`.
    pub fn matches(&self, s: &Subject) -> bool {
        self.terms.iter().all(|t| t.kind.matches(s) != t.negated)
    }
}

impl FromStr for Filter {
    type Err = FilterError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Filter::parse(s)
    }
}

fn err(column0: usize, message: impl Into<String>) -> FilterError {
    FilterError {
        column: column0 + 1,
        message: message.into(),
    }
}

/// Parses the term starting at `start` (not whitespace); returns it and the index after it.
fn parse_term(chars: &[char], start: usize) -> Result<(Term, usize), FilterError> {
    let mut i = start;
    let negated = chars.get(i) == Some(&'-');
    if negated {
        i += 1;
        if chars.get(i).is_none_or(|c| c.is_whitespace()) {
            return Err(err(
                start,
                "`-` must be followed by a term to negate, e.g. -reason:expired",
            ));
        }
    }
    // An unquoted identifier followed by `:` is a key.
    let key_start = i;
    let mut j = i;
    while chars.get(j).is_some_and(|c| c.is_ascii_alphabetic()) {
        j += 1;
    }
    let key = if j > key_start && chars.get(j) == Some(&':') {
        let key: String = chars.get(key_start..j).unwrap_or_default().iter().collect();
        i = j + 1;
        Some(key.to_ascii_lowercase())
    } else {
        None
    };
    let value_start = i;
    let (value, next) = read_value(chars, i)?;

    let kind = match key.as_deref() {
        None => {
            if value.is_empty() {
                return Err(err(
                    start,
                    "empty quotes: put the text to look for inside them",
                ));
            }
            TermKind::Word(Needle::new(value))
        }
        Some(k) => {
            if value.is_empty() {
                return Err(err(
                    key_start,
                    format!("`{k}:` needs a value after the colon"),
                ));
            }
            match k {
                "exception" => TermKind::Exception(Needle::new(value)),
                "queue" => TermKind::Queue(Needle::new(value)),
                "type" => TermKind::Type(Needle::new(value)),
                "convention" | "fw" => TermKind::Convention(Needle::new(value)),
                "body" => TermKind::Body(Needle::new(value)),
                "reason" => match Reason::parse(&value) {
                    Some(r) => TermKind::Reason(r),
                    None => {
                        return Err(err(
                            value_start,
                            format!("unknown reason `{value}`; use one of {}", Reason::NAMES),
                        ));
                    }
                },
                "header" => parse_header(&value, value_start)?,
                "age" => parse_age(&value, value_start)?,
                other => {
                    return Err(err(
                        key_start,
                        format!(
                            "unknown key `{other}:`; known keys are {KEYS}. To search for text \
                             with a colon, quote it: \"{other}:…\""
                        ),
                    ));
                }
            }
        }
    };
    Ok((Term { negated, kind }, next))
}

/// Reads a value up to the next unquoted whitespace, removing quotes.
fn read_value(chars: &[char], mut i: usize) -> Result<(String, usize), FilterError> {
    let mut value = String::new();
    while let Some(&c) = chars.get(i) {
        if c.is_whitespace() {
            break;
        }
        if c != '"' {
            value.push(c);
            i += 1;
            continue;
        }
        let open = i;
        i += 1;
        loop {
            match chars.get(i) {
                None => {
                    return Err(err(open, "this quote is never closed; add a closing \""));
                }
                Some('"') => {
                    i += 1;
                    break;
                }
                Some('\\') if matches!(chars.get(i + 1), Some('"' | '\\')) => {
                    if let Some(&escaped) = chars.get(i + 1) {
                        value.push(escaped);
                    }
                    i += 2;
                }
                Some(&other) => {
                    value.push(other);
                    i += 1;
                }
            }
        }
    }
    Ok((value, i))
}

fn parse_header(value: &str, at: usize) -> Result<TermKind, FilterError> {
    let (name, wanted) = match value.split_once('=') {
        Some((name, wanted)) => (name, Some(wanted)),
        None => (value, None),
    };
    if name.is_empty() {
        return Err(err(
            at,
            "`header:` needs a header name, e.g. header:x-tenant=acme",
        ));
    }
    if wanted == Some("") {
        return Err(err(
            at + name.chars().count() + 1,
            format!(
                "`header:{name}=` needs a value after `=`; use header:{name} to test that it is present"
            ),
        ));
    }
    Ok(TermKind::Header {
        name: name.to_string(),
        value: wanted.map(|w| Needle::new(w.to_string())),
    })
}

fn parse_age(value: &str, at: usize) -> Result<TermKind, FilterError> {
    let (op, rest) = if let Some(r) = value.strip_prefix(">=") {
        (AgeOp::Ge, r)
    } else if let Some(r) = value.strip_prefix("<=") {
        (AgeOp::Le, r)
    } else if let Some(r) = value.strip_prefix('>') {
        (AgeOp::Gt, r)
    } else if let Some(r) = value.strip_prefix('<') {
        (AgeOp::Lt, r)
    } else {
        return Err(err(
            at,
            format!(
                "`age:{value}` needs a comparison: age:>1h (older than) or age:<30m (newer than)"
            ),
        ));
    };
    let op_len = op.symbol().len();
    let bad = |msg: String| err(at + op_len, msg);
    let mut secs: u64 = 0;
    let mut number = String::new();
    let mut any = false;
    for c in rest.chars() {
        if c.is_ascii_digit() {
            number.push(c);
            continue;
        }
        let unit: u64 = match c.to_ascii_lowercase() {
            's' => 1,
            'm' => 60,
            'h' => 3600,
            'd' => 86_400,
            _ => {
                return Err(bad(format!(
                    "`{c}` in `age:{value}` is not a unit; use s, m, h or d, e.g. age:>1h30m"
                )));
            }
        };
        if number.is_empty() {
            return Err(bad(format!("`age:{value}` needs a number before `{c}`")));
        }
        let n: u64 = number
            .parse()
            .map_err(|_| bad(format!("`{number}` in `age:{value}` is too large")))?;
        secs = n
            .checked_mul(unit)
            .and_then(|v| secs.checked_add(v))
            .ok_or_else(|| bad(format!("`age:{value}` is too large")))?;
        number.clear();
        any = true;
    }
    if !number.is_empty() {
        return Err(bad(format!(
            "`{number}` in `age:{value}` needs a unit: s, m, h or d (e.g. {number}m)"
        )));
    }
    if !any {
        return Err(bad(format!("`age:{value}` needs a duration, e.g. age:>1h")));
    }
    Ok(TermKind::Age { op, secs })
}

/// A header value as text: strings and byte arrays as lossy UTF-8, numbers in decimal, nested
/// values in `HeaderValue`'s plain form.
fn header_text(value: &HeaderValue) -> Cow<'_, str> {
    match value.as_bytes() {
        Some(b) => String::from_utf8_lossy(b),
        None => Cow::Owned(value.to_string()),
    }
}

impl TermKind {
    fn matches(&self, s: &Subject) -> bool {
        match self {
            TermKind::Exception(n) => {
                n.found_in_str(s.exception_type) || n.found_in_str(s.exception_message)
            }
            TermKind::Reason(r) => s.reasons.iter().any(|reason| r.matches(reason)),
            TermKind::Queue(n) => n.found_in_str(s.origin_queue),
            TermKind::Type(n) => n.found_in_str(s.message_type),
            TermKind::Convention(n) => n.found_in_str(Some(s.convention)),
            TermKind::Header { name, value } => s
                .headers
                .iter()
                .filter(|(k, _)| k.eq_ignore_ascii_case(name))
                .any(|(_, v)| {
                    value
                        .as_ref()
                        .is_none_or(|n| n.found_in(header_text(v).as_bytes()))
                }),
            TermKind::Body(n) => n.found_in(s.body),
            TermKind::Age { op, secs } => s.age_secs.is_some_and(|age| match op {
                AgeOp::Gt => age > *secs,
                AgeOp::Ge => age >= *secs,
                AgeOp::Lt => age < *secs,
                AgeOp::Le => age <= *secs,
            }),
            TermKind::Word(n) => {
                n.found_in_str(Some(&s.verdict))
                    || n.found_in_str(s.exception_type)
                    || n.found_in_str(s.exception_message)
                    || n.found_in(s.body)
            }
        }
    }
}

/// Writes `text` so that the parser reads it back unchanged: quoted when it holds whitespace or
/// a quote (or, for a free word, could be read as a key or a negation).
fn write_value(f: &mut fmt::Formatter<'_>, text: &str, free_word: bool) -> fmt::Result {
    let needs_quotes = text.is_empty()
        || text.chars().any(|c| c.is_whitespace() || c == '"')
        || (free_word && (text.starts_with('-') || text.contains(':')));
    if !needs_quotes {
        return f.write_str(text);
    }
    f.write_str("\"")?;
    for c in text.chars() {
        if c == '"' || c == '\\' {
            f.write_str("\\")?;
        }
        write!(f, "{c}")?;
    }
    f.write_str("\"")
}

/// A duration in the largest exact units: 5400 → `1h30m`, 0 → `0s`.
fn write_duration(f: &mut fmt::Formatter<'_>, secs: u64) -> fmt::Result {
    if secs == 0 {
        return f.write_str("0s");
    }
    let mut rest = secs;
    for (unit, size) in [("d", 86_400), ("h", 3600), ("m", 60), ("s", 1)] {
        let n = rest / size;
        if n > 0 {
            write!(f, "{n}{unit}")?;
            rest %= size;
        }
    }
    Ok(())
}

/// The canonical form (for the audit record and the status line); parses back to an equal filter.
impl fmt::Display for Filter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, term) in self.terms.iter().enumerate() {
            if i > 0 {
                f.write_str(" ")?;
            }
            if term.negated {
                f.write_str("-")?;
            }
            match &term.kind {
                TermKind::Exception(n) => {
                    f.write_str("exception:")?;
                    write_value(f, &n.text, false)?;
                }
                TermKind::Reason(r) => write!(f, "reason:{}", r.name())?,
                TermKind::Queue(n) => {
                    f.write_str("queue:")?;
                    write_value(f, &n.text, false)?;
                }
                TermKind::Type(n) => {
                    f.write_str("type:")?;
                    write_value(f, &n.text, false)?;
                }
                TermKind::Convention(n) => {
                    f.write_str("convention:")?;
                    write_value(f, &n.text, false)?;
                }
                TermKind::Header { name, value } => {
                    f.write_str("header:")?;
                    match value {
                        Some(n) => write_value(f, &format!("{name}={}", n.text), false)?,
                        None => write_value(f, name, false)?,
                    }
                }
                TermKind::Body(n) => {
                    f.write_str("body:")?;
                    write_value(f, &n.text, false)?;
                }
                TermKind::Age { op, secs } => {
                    write!(f, "age:{}", op.symbol())?;
                    write_duration(f, *secs)?;
                }
                TermKind::Word(n) => write_value(f, &n.text, true)?,
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_key_the_parser_knows_is_documented() {
        for key in KEYS.split(", ") {
            let key = key.split(' ').next().unwrap();
            assert!(
                TERMS.iter().any(|(t, _)| t.contains(&format!("{key}:"))),
                "{key}"
            );
        }
        assert!(TERMS.iter().any(|(t, _)| t.contains("fw:")));
    }

    struct Owned {
        headers: Table,
        reasons: Vec<&'static str>,
    }

    fn owned() -> Owned {
        let mut headers = Table::new();
        headers.insert("x-tenant", HeaderValue::string("Acme Corp"));
        headers.insert("retry-count", HeaderValue::I32(3));
        headers.insert("blob", HeaderValue::Bytes(b"raw bytes".to_vec()));
        Owned {
            headers,
            reasons: vec!["rejected", "expired"],
        }
    }

    fn subject(o: &Owned) -> Subject<'_> {
        Subject {
            verdict: "rejected three times by orders.process".into(),
            exception_type: Some("System.TimeoutException"),
            exception_message: Some("Carrier down: no answer in 30s"),
            reasons: o.reasons.clone(),
            origin_queue: Some("orders.process"),
            message_type: Some("urn:message:Shop:OrderPlaced"),
            convention: "MassTransit",
            headers: &o.headers,
            body: b"{\"orderId\": 42, \"sku\": \"\xc3\xa9CLAIR\"}",
            age_secs: Some(5400),
        }
    }

    fn m(q: &str) -> bool {
        let o = owned();
        let f = Filter::parse(q).unwrap_or_else(|e| panic!("{q}: {e}"));
        f.matches(&subject(&o))
    }

    #[test]
    fn empty_query_matches_everything() {
        let f = Filter::parse("   ").unwrap();
        assert!(f.is_empty());
        assert!(m(""));
        assert_eq!(f.to_string(), "");
    }

    #[test]
    fn exception_matches_type_or_message() {
        assert!(m("exception:timeout"));
        assert!(m("exception:\"carrier DOWN\""));
        assert!(!m("exception:NullReference"));
    }

    #[test]
    fn reason_terms() {
        assert!(m("reason:rejected"));
        assert!(m("reason:EXPIRED"));
        assert!(!m("reason:maxlen"));
        assert!(!m("reason:delivery-limit"));
        assert!(!m("reason:other"));
        let o = Owned {
            reasons: vec!["some-future-reason"],
            ..owned()
        };
        assert!(Filter::parse("reason:other").unwrap().matches(&subject(&o)));
    }

    #[test]
    fn queue_type_convention_body() {
        assert!(m("queue:orders.PROC"));
        assert!(m("type:orderplaced"));
        assert!(m("convention:masstransit"));
        assert!(m("fw:mass"));
        assert!(!m("fw:spring"));
        assert!(m("body:orderid"));
        assert!(m("body:éclair"));
        assert!(!m("body:refund"));
    }

    #[test]
    fn header_presence_and_value() {
        assert!(m("header:x-tenant"));
        assert!(m("header:X-Tenant=acme"));
        assert!(m("header:x-tenant=\"acme corp\""));
        assert!(m("header:\"x-tenant=Acme Corp\""));
        assert!(m("header:retry-count=3"));
        assert!(m("header:blob=raw"));
        assert!(!m("header:x-tenant=globex"));
        assert!(!m("header:x-missing"));
    }

    #[test]
    fn age_terms() {
        assert!(m("age:>1h"));
        assert!(m("age:<2h"));
        assert!(m("age:>=1h30m"));
        assert!(m("age:<=90m"));
        assert!(!m("age:>90m"));
        assert!(!m("age:<30m"));
        let o = owned();
        let mut s = subject(&o);
        s.age_secs = None;
        assert!(!Filter::parse("age:>1s").unwrap().matches(&s));
        assert!(Filter::parse("-age:>1s").unwrap().matches(&s));
    }

    #[test]
    fn free_words_match_verdict_exception_and_body() {
        assert!(m("three"));
        assert!(m("carrier"));
        assert!(m("sku"));
        assert!(m("\"no answer\""));
        assert!(!m("acme"), "free words do not search headers");
    }

    #[test]
    fn negation_and_conjunction() {
        assert!(m("-reason:maxlen"));
        assert!(!m("-reason:rejected"));
        assert!(m("reason:rejected exception:timeout -body:refund"));
        assert!(!m("reason:rejected exception:timeout body:refund"));
        assert!(m("-\"not there\""));
    }

    #[test]
    fn errors_say_where_and_what() {
        let e = Filter::parse("reason:rejected exception:\"carrier down").unwrap_err();
        assert_eq!(e.column, 27);
        assert!(e.message.contains("never closed"), "{e}");
        assert!(e.to_string().starts_with("filter error at column 27:"));

        let e = Filter::parse("foo:bar").unwrap_err();
        assert_eq!(e.column, 1);
        assert!(e.message.contains("unknown key `foo:`"), "{e}");

        let e = Filter::parse("x reason:bounced").unwrap_err();
        assert_eq!(e.column, 10);
        assert!(e.message.contains("delivery_limit"), "{e}");

        for (q, col, text) in [
            ("age:1h", 5, "comparison"),
            ("age:>1w", 6, "not a unit"),
            ("age:>90", 6, "needs a unit"),
            ("age:>", 6, "needs a duration"),
            ("age:>h", 6, "number before"),
            ("age:>99999999999999999999s", 6, "too large"),
            ("exception:", 1, "needs a value"),
            ("a - b", 3, "must be followed"),
            ("header:=x", 8, "header name"),
            ("header:x=", 10, "after `=`"),
            ("\"\"", 1, "empty quotes"),
        ] {
            let e = Filter::parse(q).expect_err(q);
            assert_eq!(e.column, col, "{q}: {e}");
            assert!(e.message.contains(text), "{q}: {e}");
        }
    }

    #[test]
    fn quoted_text_with_a_colon_is_a_free_word() {
        let f = Filter::parse("\"http://host\"").unwrap();
        assert_eq!(f.to_string(), "\"http://host\"");
    }

    #[test]
    fn canonical_form_round_trips() {
        let q = "  Exception:\"carrier \\\"x\\\" down\"  -reason:delivery-limit fw:spring \
                 header:x-a=\"b c\" header:x-b age:>=5400s body:{} \"-neg\" word";
        let f = Filter::parse(q).unwrap();
        let canon = f.to_string();
        assert_eq!(
            canon,
            "exception:\"carrier \\\"x\\\" down\" -reason:delivery_limit convention:spring \
             header:\"x-a=b c\" header:x-b age:>=1h30m body:{} \"-neg\" word"
        );
        assert_eq!(Filter::parse(&canon).unwrap(), f);
    }
}
