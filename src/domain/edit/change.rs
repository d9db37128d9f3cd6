//! One section against its original: what changed, checked, and in a person's words.

use std::io::Write as _;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as B64;
use serde_json::Value;
use sha2::Digest as _;

use super::doc::{Kind, property_lines, view};
use super::read::Section;
use super::{Editable, Edited, MAX_CHANGES, Problem, is_fixed_header, plain};
use crate::domain::body::Encoding;
use crate::domain::json::header_value_from_json;
use crate::domain::message::DeadLetter;

fn problem(line: usize, reason: impl Into<String>) -> Problem {
    Problem {
        line,
        reason: reason.into(),
    }
}

/// The edit `section` makes to `original`, `None` when it makes none.
pub(super) fn edited(original: &DeadLetter, section: &Section) -> Result<Option<Edited>, Problem> {
    let mut changes = Vec::new();
    let before = Editable::of(&original.properties);
    let properties = properties(&before, section, &mut changes)?;
    let (set, removed) = headers(original, section, &mut changes)?;
    let body = body(original, section, &properties, &mut changes)?;
    if changes.is_empty() {
        return Ok(None);
    }
    if changes.len() > MAX_CHANGES {
        let more = changes.len() - MAX_CHANGES;
        changes.truncate(MAX_CHANGES);
        changes.push(format!("… and {more} more"));
    }
    let body = body.unwrap_or_else(|| original.body.clone());
    Ok(Some(Edited {
        key: crate::domain::identity::message_key(original),
        set,
        removed,
        properties,
        before: digest(&original.body),
        after: digest(&body),
        body,
        changes,
    }))
}

/// SHA-256 of a body, as the audit records it.
pub fn digest(bytes: &[u8]) -> String {
    let hash = sha2::Sha256::digest(bytes);
    let hex: String = hash.iter().map(|b| format!("{b:02x}")).collect();
    format!("sha256:{hex}")
}

fn properties(
    before: &Editable,
    section: &Section,
    changes: &mut Vec<String>,
) -> Result<Editable, Problem> {
    let mut after = before.clone();
    let known: Vec<&str> = property_lines(before).iter().map(|(k, _)| *k).collect();
    for (name, (line, value)) in &section.properties {
        let text = |v: &Value| match v {
            Value::Null => Ok(None),
            Value::String(s) => Ok(Some(s.clone())),
            _ => Err(problem(
                *line,
                format!("property {name} is text (in quotes) or null"),
            )),
        };
        match name.as_str() {
            "content_type" => after.content_type = text(value)?,
            "type" => after.kind = text(value)?,
            "message_id" => after.message_id = text(value)?,
            "correlation_id" => after.correlation_id = text(value)?,
            "reply_to" => after.reply_to = text(value)?,
            "app_id" => after.app_id = text(value)?,
            "priority" => {
                after.priority =
                    match value {
                        Value::Null => None,
                        v => Some(v.as_u64().and_then(|n| u8::try_from(n).ok()).ok_or_else(
                            || {
                                problem(
                                    *line,
                                    "property priority is a number from 0 to 255, or null",
                                )
                            },
                        )?),
                    }
            }
            other => {
                return Err(problem(
                    *line,
                    format!(
                        "property {other} cannot be edited; these can: {}",
                        known.join(", ")
                    ),
                ));
            }
        }
    }
    for ((k, old), (_, new)) in property_lines(before).iter().zip(property_lines(&after)) {
        if *old != new {
            changes.push(format!("property {k}: {old} → {new}"));
        }
    }
    Ok(after)
}

type HeaderChange = (
    Vec<(String, crate::domain::value::HeaderValue)>,
    Vec<String>,
);

fn headers(
    original: &DeadLetter,
    section: &Section,
    changes: &mut Vec<String>,
) -> Result<HeaderChange, Problem> {
    let (mut set, mut removed) = (Vec::new(), Vec::new());
    for (name, (line, value)) in &section.headers {
        if is_fixed_header(name) {
            return Err(problem(
                *line,
                format!("header {name} is the broker's or Warren's record and cannot be edited"),
            ));
        }
        let old = original.headers.get(name);
        if old.and_then(plain).as_ref() == Some(value) {
            continue;
        }
        let shown = old
            .and_then(plain)
            .map_or("(none)".to_string(), |v| v.to_string());
        changes.push(format!("header {name}: {shown} → {value}"));
        set.push((name.clone(), header_value_from_json(value)));
    }
    for (name, old) in original.headers.iter() {
        // Only a header the document showed can be removed by deleting its line.
        if !is_fixed_header(name)
            && !section.headers.contains_key(name)
            && let Some(shown) = plain(old)
        {
            changes.push(format!("header {name}: {shown} → removed"));
            removed.push(name.to_string());
        }
    }
    Ok((set, removed))
}

/// The new body as published, `None` when it did not change.
fn body(
    original: &DeadLetter,
    section: &Section,
    properties: &Editable,
    changes: &mut Vec<String>,
) -> Result<Option<Vec<u8>>, Problem> {
    let Some((line, kind, text)) = &section.body else {
        return Ok(None);
    };
    let was = view(original);
    let zlib = crate::domain::body::zlib_header(&original.body);
    let encode = |plain: Vec<u8>| match was.encoding {
        Some(e) => compress(e, zlib, &plain),
        None => plain,
    };
    let new = match kind {
        Kind::Json => {
            let v: Value = serde_json::from_str(text)
                .map_err(|e| problem(line + e.line(), format!("the body is not JSON: {e}")))?;
            let old = (was.kind == Kind::Json)
                .then(|| serde_json::from_str::<Value>(&was.text).ok())
                .flatten();
            if old.as_ref() == Some(&v) {
                None
            } else {
                json_changes(old.as_ref(), &v, "body", changes);
                Some(encode(serde_json::to_vec(&v).unwrap_or_default()))
            }
        }
        Kind::Text if was.kind == Kind::Text && *text == was.text => None,
        Kind::Text => {
            changes.push("body (text) changed".into());
            Some(encode(text.clone().into_bytes()))
        }
        Kind::Base64 => {
            let compact: String = text.split_whitespace().collect();
            let raw = B64
                .decode(compact)
                .map_err(|e| problem(line + 1, format!("the body is not base64: {e}")))?;
            (raw != original.body).then(|| {
                changes.push("body (bytes) changed".into());
                raw
            })
        }
    };
    json_required(original, properties, new.as_deref(), *line)?;
    Ok(new)
}

/// A body whose content type says JSON must still be JSON after the edit.
fn json_required(
    original: &DeadLetter,
    properties: &Editable,
    new: Option<&[u8]>,
    line: usize,
) -> Result<(), Problem> {
    let says_json = properties
        .content_type
        .as_deref()
        .is_some_and(|t| t.to_ascii_lowercase().contains("json"));
    if !says_json {
        return Ok(());
    }
    let mut probe = original.clone();
    if let Some(b) = new {
        probe.body = b.to_vec();
    }
    probe
        .properties
        .content_type
        .clone_from(&properties.content_type);
    if view(&probe).kind == Kind::Json {
        return Ok(());
    }
    Err(problem(
        line,
        "the content type says JSON, but the body is not JSON: fix the body or the content_type",
    ))
}

/// `plain` compressed as the original was (`deflate`: zlib-wrapped or raw, as it came).
fn compress(e: Encoding, zlib: bool, plain: &[u8]) -> Vec<u8> {
    let out = Vec::with_capacity(plain.len() / 2);
    let level = flate2::Compression::default();
    match e {
        Encoding::Gzip => {
            let mut w = flate2::write::GzEncoder::new(out, level);
            let _ = w.write_all(plain);
            w.finish().unwrap_or_default()
        }
        Encoding::Deflate if zlib => {
            let mut w = flate2::write::ZlibEncoder::new(out, level);
            let _ = w.write_all(plain);
            w.finish().unwrap_or_default()
        }
        Encoding::Deflate => {
            let mut w = flate2::write::DeflateEncoder::new(out, level);
            let _ = w.write_all(plain);
            w.finish().unwrap_or_default()
        }
    }
}

/// The paths where two JSON values differ, as `path: old → new`.
fn json_changes(old: Option<&Value>, new: &Value, path: &str, out: &mut Vec<String>) {
    if out.len() > MAX_CHANGES {
        return;
    }
    match (old, new) {
        (Some(Value::Object(a)), Value::Object(b)) => {
            for (k, v) in b {
                json_changes(a.get(k), v, &format!("{path}.{k}"), out);
            }
            for k in a.keys().filter(|k| !b.contains_key(*k)) {
                out.push(format!("{path}.{k}: removed"));
            }
        }
        (Some(a), b) if a == b => {}
        (Some(a), b) => out.push(format!("{path}: {} → {}", short(a), short(b))),
        (None, b) => out.push(format!("{path}: added {}", short(b))),
    }
}

fn short(v: &Value) -> String {
    let text = v.to_string();
    if text.chars().count() <= 60 {
        return text;
    }
    let cut: String = text.chars().take(57).collect();
    format!("{cut}…")
}
