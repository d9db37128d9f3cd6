//! The document: each message's editable part as text.

use std::fmt::Write as _;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as B64;

use super::{Editable, is_fixed_header, plain};
use crate::domain::body::{self, Decoding, Encoding, Format};
use crate::domain::identity;
use crate::domain::message::DeadLetter;
use crate::domain::sanitize::{escape_json_text, is_unsafe, one_line};

/// How a body is shown, and read back.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Kind {
    Json,
    Text,
    Base64,
}

impl Kind {
    pub(super) fn label(self) -> &'static str {
        match self {
            Kind::Json => "JSON",
            Kind::Text => "text",
            Kind::Base64 => "base64",
        }
    }
}

/// A body as the document shows it: its kind, the compression it was decoded from (and is
/// encoded with again), and the text.
pub(super) struct View {
    pub(super) kind: Kind,
    pub(super) encoding: Option<Encoding>,
    pub(super) text: String,
}

/// The body of `msg` as the document shows it: decoded when its compression is one Warren
/// decodes whole; JSON pretty-printed; text when it is text a terminal shows safely; else the
/// exact bytes as base64.
pub(super) fn view(msg: &DeadLetter) -> View {
    let decoded = body::decode(
        &msg.body,
        msg.properties.content_encoding.as_deref(),
        true,
        body::DECODE_CAP,
    );
    let encoding = match decoded.decoding {
        Decoding::Decoded(e) => Some(e),
        Decoding::Plain => None,
        // Not decoded whole: the bytes as they are.
        _ => return base64_view(&msg.body),
    };
    let bytes = decoded.bytes.as_ref();
    if decoded.format == Format::Json
        && let Ok(v) = serde_json::from_slice::<serde_json::Value>(bytes)
        && let Ok(text) = serde_json::to_string_pretty(&v)
    {
        return View {
            kind: Kind::Json,
            encoding,
            // The same JSON, with bidi and invisible characters as `\uXXXX`: read back, it is
            // the same value.
            text: escape_json_text(&text),
        };
    }
    match std::str::from_utf8(bytes) {
        Ok(text) if is_plain_text(text) => View {
            kind: Kind::Text,
            encoding,
            text: text.to_string(),
        },
        _ => base64_view(&msg.body),
    }
}

fn base64_view(raw: &[u8]) -> View {
    View {
        kind: Kind::Base64,
        encoding: None,
        text: B64.encode(raw),
    }
}

/// Text an editor and a terminal keep as it is: no control character but newline and tab, no
/// bidi or invisible character (an editor would show the text reordered or hide part of it:
/// such a body is shown as base64, exactly), and no line that would read as one of the
/// document's own.
fn is_plain_text(text: &str) -> bool {
    !text
        .chars()
        .any(|c| (c.is_control() || is_unsafe(c)) && c != '\n' && c != '\t')
        && !text
            .lines()
            .any(|l| l.starts_with("=== message ") || l.starts_with("--- body"))
}

/// A name as the document writes it: as it is when plain, else as a JSON string.
pub(super) fn name(n: &str) -> String {
    let bare = !n.is_empty()
        && n.chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.' | '/'));
    if bare {
        n.to_string()
    } else {
        escape_json_text(&serde_json::Value::String(n.to_string()).to_string())
    }
}

/// The property lines of `p`, in a fixed order.
pub(super) fn property_lines(p: &Editable) -> Vec<(&'static str, serde_json::Value)> {
    let s = |v: &Option<String>| v.clone().map_or(serde_json::Value::Null, Into::into);
    vec![
        ("content_type", s(&p.content_type)),
        ("type", s(&p.kind)),
        ("message_id", s(&p.message_id)),
        ("correlation_id", s(&p.correlation_id)),
        ("reply_to", s(&p.reply_to)),
        ("app_id", s(&p.app_id)),
        (
            "priority",
            p.priority.map_or(serde_json::Value::Null, Into::into),
        ),
    ]
}

const PREAMBLE: &str = "\
# Edit the dead letters below, then save and quit. Each message you change is replayed
# through the replay's plan; its original is archived first, so it can always be restored.
# A message left as it is stays in the queue. Leave the file unchanged, or empty it, to cancel.
# Values are JSON (strings in quotes, null for none). Delete a header's line to remove it, add
# a line to add one. x-death and Warren's own headers are not shown and stay as they are.
# Lines starting with # are comments.
";

/// The document for `messages`, read from `queue`.
pub fn document(queue: &str, messages: &[DeadLetter]) -> String {
    let mut out = String::from(PREAMBLE);
    let _ = writeln!(out, "# From {}.", one_line(queue, 200));
    for (i, msg) in messages.iter().enumerate() {
        section(&mut out, i, messages.len(), msg);
    }
    out
}

fn section(out: &mut String, i: usize, n: usize, msg: &DeadLetter) {
    let id = identity::shown_id(msg).unwrap_or_else(|| identity::message_key(msg));
    // No blank line before a section but the first: the lines up to the next section are
    // exactly the body above it.
    if i == 0 {
        out.push('\n');
    }
    let _ = writeln!(
        out,
        "=== message {} of {n}: {} ===",
        i + 1,
        one_line(&id, 120)
    );
    for (k, v) in property_lines(&Editable::of(&msg.properties)) {
        let _ = writeln!(out, "property {k}: {}", escape_json_text(&v.to_string()));
    }
    for (k, v) in msg.headers.iter() {
        if is_fixed_header(k) {
            continue;
        }
        match plain(v) {
            Some(j) => {
                let _ = writeln!(
                    out,
                    "header {}: {}",
                    name(k),
                    escape_json_text(&j.to_string())
                );
            }
            None => {
                let _ = writeln!(
                    out,
                    "# header {} ({}) is kept as it is: it has no text form",
                    one_line(&name(k), 120),
                    v.type_name()
                );
            }
        }
    }
    let v = view(msg);
    let how = match v.encoding {
        Some(e) => format!(", {0} (decoded here, {0} again when saved)", e.label()),
        None => String::new(),
    };
    let _ = writeln!(out, "--- body: {}{how} ---", v.kind.label());
    let _ = writeln!(out, "{}", v.text);
}
