//! Reading a saved document back: each section checked line by line against its original.

use std::collections::BTreeMap;

use serde_json::Value;

use super::doc::Kind;
use super::{Edits, Problem, change};
use crate::domain::message::DeadLetter;

/// One section as the operator saved it.
pub(super) struct Section {
    /// Which message (0-based).
    pub(super) index: usize,
    pub(super) properties: BTreeMap<String, (usize, Value)>,
    pub(super) headers: BTreeMap<String, (usize, Value)>,
    /// The body line's number, the kind it names, and the body's lines.
    pub(super) body: Option<(usize, Kind, String)>,
}

fn problem(line: usize, reason: impl Into<String>) -> Problem {
    Problem {
        line,
        reason: reason.into(),
    }
}

/// What the operator saved: the edited messages, `None` when the document was emptied or
/// nothing in it changed (which cancels), or the first problem found.
pub fn read(text: &str, originals: &[DeadLetter]) -> Result<Option<Edits>, Problem> {
    if text.trim().is_empty() {
        return Ok(None);
    }
    let sections = sections(text, originals.len())?;
    let mut messages = Vec::new();
    let mut unchanged = originals.len() - sections.len();
    for section in &sections {
        match change::edited(&originals[section.index], section)? {
            Some(e) => messages.push(e),
            None => unchanged += 1,
        }
    }
    if messages.is_empty() {
        return Ok(None);
    }
    Ok(Some(Edits {
        messages,
        unchanged,
    }))
}

fn sections(text: &str, count: usize) -> Result<Vec<Section>, Problem> {
    let mut out: Vec<Section> = Vec::new();
    let mut body: Option<(usize, Kind, Vec<&str>)> = None;
    for (i, raw) in text.lines().enumerate() {
        let n = i + 1;
        if let Some(rest) = raw.strip_prefix("=== message ") {
            if let (Some(b), Some(last)) = (body.take(), out.last_mut()) {
                last.body = Some((b.0, b.1, b.2.join("\n")));
            }
            let index = section_index(rest, count).map_err(|r| problem(n, r))?;
            if out.iter().any(|s| s.index == index) {
                return Err(problem(n, format!("message {} appears twice", index + 1)));
            }
            out.push(Section {
                index,
                properties: BTreeMap::new(),
                headers: BTreeMap::new(),
                body: None,
            });
            continue;
        }
        if let Some(b) = body.as_mut() {
            b.2.push(raw);
            continue;
        }
        let line = raw.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let Some(section) = out.last_mut() else {
            return Err(problem(n, "expected a `=== message N of M` line first"));
        };
        if let Some(rest) = line.strip_prefix("--- body:") {
            body = Some((n, body_kind(rest).map_err(|r| problem(n, r))?, Vec::new()));
        } else if let Some(rest) = line.strip_prefix("property ") {
            let (k, v) = entry(rest).map_err(|r| problem(n, r))?;
            insert(&mut section.properties, k, n, v, "property")?;
        } else if let Some(rest) = line.strip_prefix("header ") {
            let (k, v) = entry(rest).map_err(|r| problem(n, r))?;
            insert(&mut section.headers, k, n, v, "header")?;
        } else {
            return Err(problem(
                n,
                "expected `property NAME: VALUE`, `header NAME: VALUE` or the `--- body` line",
            ));
        }
    }
    if let (Some(b), Some(last)) = (body, out.last_mut()) {
        last.body = Some((b.0, b.1, b.2.join("\n")));
    }
    Ok(out)
}

fn insert(
    map: &mut BTreeMap<String, (usize, Value)>,
    key: String,
    line: usize,
    value: Value,
    what: &str,
) -> Result<(), Problem> {
    if map.contains_key(&key) {
        return Err(problem(line, format!("{what} {key} appears twice")));
    }
    map.insert(key, (line, value));
    Ok(())
}

/// `N of M: …` → N - 1.
fn section_index(rest: &str, count: usize) -> Result<usize, String> {
    let n: usize = rest
        .split_whitespace()
        .next()
        .and_then(|w| w.parse().ok())
        .ok_or("a message line must say which message (`=== message 2 of 5: …`)")?;
    if n == 0 || n > count {
        return Err(format!("there is no message {n}: the document has {count}"));
    }
    Ok(n - 1)
}

fn body_kind(rest: &str) -> Result<Kind, String> {
    let word = rest
        .trim()
        .split([',', ' '])
        .next()
        .unwrap_or_default()
        .to_ascii_lowercase();
    match word.as_str() {
        "json" => Ok(Kind::Json),
        "text" => Ok(Kind::Text),
        "base64" => Ok(Kind::Base64),
        other => Err(format!(
            "the body is `JSON`, `text` or `base64`, not `{other}`"
        )),
    }
}

/// `NAME: VALUE`, the name plain or a JSON string, the value JSON.
fn entry(rest: &str) -> Result<(String, Value), String> {
    let (name, after) = if rest.starts_with('"') {
        let mut it = serde_json::Deserializer::from_str(rest).into_iter::<String>();
        let name = it
            .next()
            .and_then(Result::ok)
            .ok_or("a quoted name must be a JSON string")?;
        (name, &rest[it.byte_offset()..])
    } else {
        let at = rest.find(':').ok_or("expected `NAME: VALUE`")?;
        (rest[..at].trim().to_string(), &rest[at..])
    };
    let value = after
        .trim_start()
        .strip_prefix(':')
        .ok_or("expected `:` after the name")?
        .trim();
    if name.is_empty() {
        return Err("a name is missing".into());
    }
    let value = serde_json::from_str(value).map_err(|e| {
        format!("{name}: the value is not JSON ({e}); text goes in quotes, none is null")
    })?;
    Ok((name, value))
}
