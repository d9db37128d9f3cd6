//! Edit, then replay: dead letters as a document a person edits (in `$EDITOR` or Warren's own
//! editor) and reads back. Pure: the document is text in, edits out.
//!
//! One document holds every selected message: a `=== message N of M: <id> ===` line, then its
//! editable properties and headers, one a line (`property content_type: "application/json"`,
//! `header tenant: "acme"`, values as JSON), then its body after a `--- body: <kind> ---` line:
//! JSON pretty-printed, text as it is (both decoded by `content_encoding` and encoded again on
//! save), or base64 for bytes no editor keeps. The broker's record (`x-death`, the delivery
//! count) and Warren's own headers are not shown and never change. A message whose section is
//! left as it was is not replayed; a document left unchanged or emptied cancels.

mod change;
mod doc;
mod read;
#[cfg(test)]
mod tests;

use super::message::Properties;
use super::value::{HeaderValue, Table};

pub use doc::document;
pub use read::read;

/// Most messages one edit takes: more is not a document a person reads.
pub const MAX_MESSAGES: usize = 100;

/// One edited message: what to change in the original when it is taken from the queue.
#[derive(Clone, Debug, PartialEq)]
pub struct Edited {
    /// The original's `identity::message_key`.
    pub key: String,
    /// Headers set (added or changed) and removed; every other header stays as it is.
    pub set: Vec<(String, HeaderValue)>,
    pub removed: Vec<String>,
    /// The editable properties as edited.
    pub properties: Editable,
    /// The body as it will be published (encoded again by `content_encoding`).
    pub body: Vec<u8>,
    /// What changed, in a person's words (`body.order: "x" → 5`), at most [`MAX_CHANGES`].
    pub changes: Vec<String>,
    /// SHA-256 of the original body and of the edited one, as published.
    pub before: String,
    pub after: String,
}

/// Most changes recorded for one message; the rest are counted.
pub const MAX_CHANGES: usize = 20;

/// The properties an edit may change.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Editable {
    pub content_type: Option<String>,
    pub kind: Option<String>,
    pub correlation_id: Option<String>,
    pub reply_to: Option<String>,
    pub message_id: Option<String>,
    pub app_id: Option<String>,
    pub priority: Option<u8>,
}

impl Editable {
    pub(crate) fn of(p: &Properties) -> Editable {
        Editable {
            content_type: p.content_type.clone(),
            kind: p.kind.clone(),
            correlation_id: p.correlation_id.clone(),
            reply_to: p.reply_to.clone(),
            message_id: p.message_id.clone(),
            app_id: p.app_id.clone(),
            priority: p.priority,
        }
    }

    fn apply(&self, p: &mut Properties) {
        p.content_type.clone_from(&self.content_type);
        p.kind.clone_from(&self.kind);
        p.correlation_id.clone_from(&self.correlation_id);
        p.reply_to.clone_from(&self.reply_to);
        p.message_id.clone_from(&self.message_id);
        p.app_id.clone_from(&self.app_id);
        p.priority = self.priority;
    }
}

impl Edited {
    /// The message as it will be replayed: `msg` (as taken from the queue) with this edit.
    pub fn apply(&self, msg: &mut super::message::DeadLetter) {
        for name in &self.removed {
            msg.headers.remove(name);
        }
        for (name, value) in &self.set {
            msg.headers.insert(name.clone(), value.clone());
        }
        self.properties.apply(&mut msg.properties);
        msg.body_size = self.body.len() as u64;
        msg.body.clone_from(&self.body);
    }
}

/// What the operator saved.
#[derive(Clone, Debug, PartialEq)]
pub struct Edits {
    /// The messages whose section changed, in the document's order.
    pub messages: Vec<Edited>,
    /// How many sections were left as they were (those messages stay in the queue).
    pub unchanged: usize,
}

impl Edits {
    /// The edit of the message whose `identity::message_key` is `key`.
    pub fn of(&self, key: &str) -> Option<&Edited> {
        self.messages.iter().find(|e| e.key == key)
    }

    /// The keys of the edited messages: exactly what the run selects.
    pub fn keys(&self) -> std::collections::HashSet<String> {
        self.messages.iter().map(|e| e.key.clone()).collect()
    }
}

/// An edit as the audit keeps it.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct EditRecord {
    /// The message's key (`identity::message_key` of the original).
    pub key: String,
    pub changes: Vec<String>,
    /// SHA-256 of the body before and after.
    pub before: String,
    pub after: String,
}

impl Edited {
    pub fn record(&self) -> EditRecord {
        EditRecord {
            key: self.key.clone(),
            changes: self.changes.clone(),
            before: self.before.clone(),
            after: self.after.clone(),
        }
    }
}

/// Why a saved document is refused: its line (1-based) and what is wrong there.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Problem {
    pub line: usize,
    pub reason: String,
}

impl std::fmt::Display for Problem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "line {}: {}", self.line, self.reason)
    }
}

/// Headers nobody edits: the broker's record of the message's deaths and deliveries, and
/// Warren's own (replay ids and counts, archive stamps).
pub fn is_fixed_header(name: &str) -> bool {
    let lower = name.to_ascii_lowercase();
    matches!(
        lower.as_str(),
        "x-death" | "x-delivery-count" | "x-acquired-count" | "x-opt-deaths"
    ) || lower.starts_with("x-first-death-")
        || lower.starts_with("x-last-death-")
        || lower.starts_with("warren-")
}

/// A header value as the document shows it (plain JSON), when it has a plain form that reads
/// back as the same value; `None` for bytes, timestamps, decimals, void and values nested too
/// deep, which are kept as they are and shown as a comment.
pub(crate) fn plain(v: &HeaderValue) -> Option<serde_json::Value> {
    use serde_json::Value;
    Some(match v {
        HeaderValue::Bool(b) => Value::Bool(*b),
        HeaderValue::I8(n) => (*n).into(),
        HeaderValue::U8(n) => (*n).into(),
        HeaderValue::I16(n) => (*n).into(),
        HeaderValue::U16(n) => (*n).into(),
        HeaderValue::I32(n) => (*n).into(),
        HeaderValue::U32(n) => (*n).into(),
        HeaderValue::I64(n) => (*n).into(),
        HeaderValue::F32(f) => serde_json::Number::from_f64(f64::from(*f))?.into(),
        HeaderValue::F64(f) => serde_json::Number::from_f64(*f)?.into(),
        HeaderValue::ShortString(b) | HeaderValue::LongString(b) => {
            Value::String(String::from_utf8(b.clone()).ok()?)
        }
        HeaderValue::Table(t) => Value::Object(plain_table(t)?),
        HeaderValue::Array(a) => Value::Array(a.iter().map(plain).collect::<Option<_>>()?),
        _ => return None,
    })
}

fn plain_table(t: &Table) -> Option<serde_json::Map<String, serde_json::Value>> {
    t.iter()
        .map(|(k, v)| Some((k.to_string(), plain(v)?)))
        .collect()
}
