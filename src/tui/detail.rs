//! The detail of one message as lines of text: the verdict, the timeline of deaths, the
//! framework's fault, properties, headers and the body. Pure (state in, lines out) so that the
//! update can clamp scrolling with the same line count the view draws. Every broker string goes
//! through `sanitize`.

use ratatui::style::Style;
use ratatui::text::{Line, Span};

use super::format;
use super::state::{Row, State};
use super::theme::Theme;
use crate::domain::convention::short_type;
use crate::domain::message::DeadLetter;
use crate::domain::sanitize;
use crate::domain::value::HeaderValue;

/// Longest header value shown (chars); the rest is cut with a marker saying how much.
const HEADER_CHARS: usize = 400;
/// Most of a body rendered (chars).
const BODY_CHARS: usize = 64 * 1024;
/// Most stack-trace lines shown when unfolded.
const TRACE_CHARS: usize = 16 * 1024;
/// Bytes per hex dump line.
const HEX_WIDTH: usize = 16;

/// The detail of one message as rendered, with what it was rendered from (see
/// `State::refresh_detail`).
#[derive(Clone, Debug)]
pub struct Rendered {
    pub key: DetailKey,
    pub lines: Vec<Line<'static>>,
}

/// Everything the lines depend on: the message, the folded trace, the day (times from other
/// days carry their date), the theme, and the discovery (retry loops), which is in `content`.
#[derive(Clone, Debug, PartialEq)]
pub struct DetailKey {
    /// `State::content_serial`: bumped whenever the rows or the discovery are replaced.
    pub content: u64,
    /// The message's index in `Browse::rows`.
    pub row: usize,
    pub trace_open: bool,
    pub day: i64,
    pub theme: Theme,
}

pub fn lines(state: &State, row: &Row) -> Vec<Line<'static>> {
    let t = &state.theme;
    let mut out: Vec<Line<'static>> = Vec::new();
    let exp = &row.exp;

    out.push(Line::styled(
        sanitize::multi_line(&exp.verdict, 2000).replace('\n', " "),
        t.accent,
    ));

    // Timeline: oldest first (the header is newest first, and not always sorted).
    if !exp.deaths.entries.is_empty() {
        out.push(heading("timeline (UTC)", t.muted));
        let mut deaths: Vec<_> = exp.deaths.entries.iter().collect();
        deaths.sort_by_key(|d| d.time.map_or(i64::MAX, |t| t.as_second()));
        if let Some(first) = deaths.first() {
            let exchange = first
                .exchange
                .as_deref()
                .map_or("?".to_string(), exchange_name);
            let keys = keys_text(&first.routing_keys);
            out.push(Line::from(vec![
                Span::styled(
                    format!(
                        "  {:<9} ",
                        first
                            .time
                            .map_or("?".into(), |x| format::time(x, state.now))
                    ),
                    t.muted,
                ),
                Span::raw(format!("published → {exchange}{keys}")),
            ]));
        }
        for d in &deaths {
            let when = d.time.map_or("?".into(), |x| format::time(x, state.now));
            let reason = d.reason.as_ref().map_or("?", |r| r.as_str()).to_string();
            let queue = d
                .queue
                .as_deref()
                .map_or("?".into(), |q| sanitize::one_line(q, 80));
            let mut spans = vec![
                Span::styled(format!("  {when:<9} "), t.muted),
                Span::styled(
                    format!("{:<9} ", sanitize::one_line(&reason, 20)),
                    reason_style(state, &reason),
                ),
                Span::raw(format!("{queue}  ×{}", d.times())),
            ];
            if let Some(exp) = &d.original_expiration {
                spans.push(Span::styled(
                    format!("  (message TTL {} ms)", sanitize::one_line(exp, 20)),
                    t.muted,
                ));
            }
            out.push(Line::from(spans));
            let mut via = Vec::new();
            let exchange = d.exchange.as_deref().map(exchange_name);
            if exchange.is_some() || !d.routing_keys.is_empty() {
                via.push(format!(
                    "via {}{}",
                    exchange.unwrap_or_else(|| "?".into()),
                    keys_text(&d.routing_keys)
                ));
            }
            // x-death keeps the first time of each pair; in a retry loop the last one can be
            // estimated from the wait queue's TTL.
            if d.times() > 1
                && let (Some(q), Some(time)) = (&d.queue, d.time)
                && let Some(lp) = state.discovery.retry_loop_of(q)
            {
                let cycle = i64::try_from(lp.ttl_ms / 1000).unwrap_or(0);
                let last = time
                    .as_second()
                    .saturating_add(cycle.saturating_mul(d.times() - 1));
                if let Ok(last) = jiff::Timestamp::from_second(last) {
                    via.push(format!("last ≈{}", format::time(last, state.now)));
                }
            }
            if !via.is_empty() {
                out.push(Line::styled(format!("    {}", via.join(" · ")), t.muted));
            }
        }
        let seen = row
            .first_seen
            .map(|s| format!(", seen by Warren since {}", format::time(s, state.now)))
            .unwrap_or_default();
        out.push(Line::styled(
            format!(
                "    now in {}{seen}",
                sanitize::one_line(&row.msg.queue, 80)
            ),
            t.muted,
        ));
    }
    for p in &exp.deaths.problems {
        out.push(Line::styled(
            format!("  ! {}", sanitize::one_line(p, 200)),
            t.warn,
        ));
    }

    if let Some(f) = &exp.fault {
        out.push(heading(
            &format!("fault ({})", exp.convention.label()),
            t.muted,
        ));
        if let Some(ty) = &f.exception_type {
            out.push(Line::styled(
                format!("  {}", sanitize::one_line(ty, 200)),
                t.danger,
            ));
        }
        if let Some(m) = &f.message {
            for l in sanitize::multi_line(m, 2000).lines() {
                out.push(Line::raw(format!("  {l}")));
            }
        }
        let mut facts = Vec::new();
        for (label, v) in [
            ("consumer", &f.consumer),
            ("message type", &f.message_type),
            ("inner", &f.inner_exception_type),
            ("host", &f.host),
        ] {
            if let Some(v) = v {
                facts.push(format!("{label}: {}", sanitize::one_line(v, 120)));
            }
        }
        if let Some(at) = exp.failed_at {
            facts.push(format!("failed at {}", format::time(at, state.now)));
        }
        if let Some(r) = exp.retries {
            facts.push(format!("retries: {r}"));
        }
        for fact in facts {
            out.push(Line::styled(format!("  {fact}"), t.muted));
        }
        if let Some(trace) = &f.stack_trace {
            let text = sanitize::multi_line(trace, TRACE_CHARS);
            let n = text.lines().count();
            if state.trace_open {
                out.push(Line::styled(
                    format!("  stack trace ({n} lines) — e to fold"),
                    t.muted,
                ));
                for l in text.lines() {
                    out.push(Line::raw(format!("    {l}")));
                }
            } else {
                out.push(Line::styled(
                    format!("  stack trace ({n} lines) — e to unfold"),
                    t.muted,
                ));
            }
        }
    } else if exp.skipped {
        out.push(Line::styled(
            "  skipped: no consumer on the endpoint handles this message type",
            t.warn,
        ));
    }

    let props = properties(&row.msg);
    if !props.is_empty() {
        out.push(heading("properties", t.muted));
        for (k, v) in props {
            out.push(Line::from(vec![
                Span::styled(format!("  {k:<16} "), t.muted),
                Span::raw(v),
            ]));
        }
    }

    if !row.msg.headers.is_empty() {
        out.push(heading(
            &format!("headers ({})", row.msg.headers.len()),
            t.muted,
        ));
        for (k, v) in row.msg.headers.iter() {
            out.push(Line::from(vec![
                Span::styled(format!("  {} ", sanitize::one_line(k, 60)), t.muted),
                Span::raw(header_value(k, v)),
            ]));
        }
    }

    body(state, &row.msg, &mut out);
    out
}

fn heading(title: &str, style: Style) -> Line<'static> {
    Line::styled(format!("─ {title} ─"), style)
}

fn reason_style(state: &State, reason: &str) -> Style {
    match reason {
        "rejected" | "delivery_limit" => state.theme.danger,
        "expired" | "maxlen" => state.theme.warn,
        _ => state.theme.base,
    }
}

fn exchange_name(e: &str) -> String {
    if e.is_empty() {
        "(default exchange)".into()
    } else {
        sanitize::one_line(e, 80)
    }
}

fn keys_text(keys: &[String]) -> String {
    if keys.is_empty() {
        String::new()
    } else {
        let k: Vec<String> = keys.iter().map(|k| sanitize::one_line(k, 80)).collect();
        format!(" key {}", k.join(", "))
    }
}

fn properties(m: &DeadLetter) -> Vec<(&'static str, String)> {
    let p = &m.properties;
    let mut out = Vec::new();
    let text = |v: &Option<String>| v.as_deref().map(|s| sanitize::display(s, 200));
    for (k, v) in [
        ("content_type", text(&p.content_type)),
        ("content_encoding", text(&p.content_encoding)),
        ("message_id", text(&p.message_id)),
        ("correlation_id", text(&p.correlation_id)),
        ("type", text(&p.kind)),
        ("app_id", text(&p.app_id)),
        ("user_id", text(&p.user_id)),
        ("reply_to", text(&p.reply_to)),
        ("expiration", text(&p.expiration)),
        ("cluster_id", text(&p.cluster_id)),
        (
            "delivery_mode",
            p.delivery_mode.map(|d| match d {
                2 => "2 (persistent)".to_string(),
                1 => "1 (transient)".to_string(),
                n => n.to_string(),
            }),
        ),
        ("priority", p.priority.map(|v| v.to_string())),
        (
            "timestamp",
            p.timestamp.map(|v| {
                i64::try_from(v)
                    .ok()
                    .and_then(|s| jiff::Timestamp::from_second(s).ok())
                    .map_or(v.to_string(), |t| {
                        t.strftime("%Y-%m-%d %H:%M:%S UTC").to_string()
                    })
            }),
        ),
    ] {
        if let Some(v) = v {
            out.push((k, v));
        }
    }
    if m.delivery.redelivered {
        out.push(("redelivered", "yes".into()));
    }
    if let Some(c) = m.delivery.delivery_count {
        out.push(("delivery_count", c.to_string()));
    }
    out
}

/// One header value on one line. `x-death` is the timeline above, so only summarised here.
fn header_value(key: &str, v: &HeaderValue) -> String {
    match v {
        HeaderValue::Array(items) if key == "x-death" => {
            format!("[{} entries, see the timeline]", items.len())
        }
        HeaderValue::ShortString(b) | HeaderValue::LongString(b) => {
            sanitize::display_bytes(b, HEADER_CHARS)
        }
        HeaderValue::Bytes(b) => format!("<{} bytes> {}", b.len(), sanitize::display_bytes(b, 64)),
        HeaderValue::Timestamp(s) => i64::try_from(*s)
            .ok()
            .and_then(|s| jiff::Timestamp::from_second(s).ok())
            .map_or(s.to_string(), |t| {
                t.strftime("%Y-%m-%d %H:%M:%S UTC").to_string()
            }),
        // Display of a table or array can hold broker strings: sanitise the whole rendering.
        // Rendered only as far as is shown: a table of 100,000 entries costs a short one.
        other => sanitize::display(&other.display_capped(HEADER_CHARS * 4 + 16), HEADER_CHARS),
    }
}

/// How the body is shown.
#[derive(Debug, PartialEq, Eq)]
enum BodyKind {
    Json,
    Text,
    Binary,
}

fn body_kind(body: &[u8]) -> BodyKind {
    if body.is_empty() {
        return BodyKind::Text;
    }
    if serde_json::from_slice::<serde_json::Value>(body).is_ok() {
        return BodyKind::Json;
    }
    // Text unless a good share of it is bytes no text would hold.
    let invalid: usize = body.utf8_chunks().map(|c| c.invalid().len()).sum();
    let controls = body
        .iter()
        .filter(|&&b| b < 0x20 && !matches!(b, b'\n' | b'\r' | b'\t' | 0x1b))
        .count();
    if (invalid + controls) * 10 > body.len() {
        BodyKind::Binary
    } else {
        BodyKind::Text
    }
}

fn body(state: &State, m: &DeadLetter, out: &mut Vec<Line<'static>>) {
    let t = &state.theme;
    let kind = body_kind(&m.body);
    let label = match kind {
        BodyKind::Json => "JSON",
        BodyKind::Text => "text",
        BodyKind::Binary => "binary",
    };
    out.push(heading(
        &format!("body ({}, {label})", format::bytes(m.body_size)),
        t.muted,
    ));
    if m.body.is_empty() && m.body_size == 0 {
        out.push(Line::styled("  (empty)", t.muted));
        return;
    }
    let text = match kind {
        BodyKind::Json => serde_json::from_slice::<serde_json::Value>(&m.body)
            .ok()
            .and_then(|v| serde_json::to_string_pretty(&v).ok())
            .map(|s| sanitize::multi_line(&s, BODY_CHARS))
            .unwrap_or_else(|| sanitize::multi_line_bytes(&m.body, BODY_CHARS)),
        BodyKind::Text => sanitize::multi_line_bytes(&m.body, BODY_CHARS),
        BodyKind::Binary => hex_dump(&m.body, BODY_CHARS / 80),
    };
    for l in text.lines() {
        out.push(Line::raw(format!("  {l}")));
    }
    if !m.body_complete() {
        out.push(Line::styled(
            format!(
                "  … {} more bytes not read (body cap)",
                m.body_size.saturating_sub(m.body.len() as u64)
            ),
            t.warn,
        ));
    }
}

/// `00000000  7b 22 6f 72 …  |{"or…|`: printable ASCII only in the right column.
fn hex_dump(bytes: &[u8], max_lines: usize) -> String {
    let mut out = String::new();
    for (i, chunk) in bytes.chunks(HEX_WIDTH).enumerate() {
        if i >= max_lines {
            out.push_str(&format!(
                "… {} more bytes\n",
                bytes.len().saturating_sub(i * HEX_WIDTH)
            ));
            break;
        }
        let hex: Vec<String> = chunk.iter().map(|b| format!("{b:02x}")).collect();
        let ascii: String = chunk
            .iter()
            .map(|&b| {
                if (0x20..0x7f).contains(&b) {
                    b as char
                } else {
                    '.'
                }
            })
            .collect();
        out.push_str(&format!(
            "{:08x}  {:<width$}  |{ascii}|\n",
            i * HEX_WIDTH,
            hex.join(" "),
            width = HEX_WIDTH * 3 - 1
        ));
    }
    out
}

/// The list cell for a message: the exception when a framework recorded one, else the verdict.
pub fn headline(row: &Row) -> String {
    match row.exp.fault.as_ref().and_then(|f| {
        f.exception_type
            .as_deref()
            .map(|t| (t, f.message.as_deref()))
    }) {
        Some((ty, Some(msg))) => format!("{}: {}", short_type(ty), msg),
        Some((ty, None)) => short_type(ty).to_string(),
        None => row.exp.verdict.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn body_kinds() {
        assert_eq!(body_kind(br#"{"a":1}"#), BodyKind::Json);
        assert_eq!(body_kind(b"hello \x1b[31m world"), BodyKind::Text);
        assert_eq!(
            body_kind(&[0u8, 1, 2, 3, 0xff, 0xfe, 7, 8]),
            BodyKind::Binary
        );
    }

    #[test]
    fn hex_dump_shows_only_printable_ascii() {
        let d = hex_dump(b"ab\x1b\x9b", 10);
        assert_eq!(d, format!("00000000  {:<47}  |ab..|\n", "61 62 1b 9b"));
    }
}
