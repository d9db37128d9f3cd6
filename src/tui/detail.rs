//! The detail of one message as lines of text: the verdict, the timeline of deaths, the
//! framework's fault, properties, headers and the body. Pure (state in, lines out) so that the
//! update can clamp scrolling with the same line count the view draws. Every broker string goes
//! through `sanitize`.

use ratatui::style::Style;
use ratatui::text::{Line, Span};

use super::format;
use super::state::{Opened, Row, State};
use super::theme::Theme;
use crate::domain::body;
use crate::domain::comeback;
use crate::domain::convention::{Fault, short_type};
use crate::domain::explain::Explanation;
use crate::domain::message::DeadLetter;
use crate::domain::replay::{self, ReplayOptions, ReplayTarget};
use crate::domain::sanitize;
use crate::domain::value::HeaderValue;
use crate::domain::xdeath::Death;

/// Longest header value shown (chars); the rest is cut with a marker saying how much.
const HEADER_CHARS: usize = 400;
/// Most of a body rendered (chars).
const BODY_CHARS: usize = 64 * 1024;
/// Most stack-trace lines shown when unfolded.
const TRACE_CHARS: usize = 16 * 1024;

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
    /// `MessageView::content_serial`: bumped whenever the rows or the discovery are replaced.
    pub content: u64,
    /// The message's index in `Browse::rows`.
    pub row: usize,
    pub trace_open: bool,
    pub day: i64,
    pub theme: Theme,
}

pub fn lines(state: &State, row: &Opened) -> Vec<Line<'static>> {
    let t = &state.settings.theme;
    let mut out: Vec<Line<'static>> = Vec::new();
    let exp = &row.exp;

    verdict(state, row, &mut out);
    timeline(state, row, &mut out);
    for p in &exp.deaths.problems {
        out.push(Line::styled(
            format!("  ! {}", sanitize::one_line(p, 200)),
            t.warn,
        ));
    }

    if let Some(f) = &exp.fault {
        fault(state, exp, f, &mut out);
    } else if exp.skipped {
        out.push(Line::styled(
            "  skipped: no consumer on the endpoint handles this message type",
            t.warn,
        ));
    }

    replay_preview(state, row, &mut out);

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

/// The verdict first, and for a replayed message that died again, the run it came back from.
fn verdict(state: &State, row: &Opened, out: &mut Vec<Line<'static>>) {
    let t = &state.settings.theme;
    let exp = &row.exp;
    out.push(Line::styled(
        sanitize::multi_line(&exp.verdict, 2000).replace('\n', " "),
        t.accent,
    ));
    // A replayed message that died again names its run ("failed again 14 minutes after replay
    // R by alice (3rd replay)").
    if let Some(f) = comeback::failed_again(&row.msg, exp) {
        let by = state
            .msgs
            .browse
            .as_ref()
            .and_then(|b| b.authors.get(&f.run_id))
            .map(|a| sanitize::one_line(a, 60));
        out.push(Line::styled(
            sanitize::one_line(&f.describe(by.as_deref()), 300),
            t.warn,
        ));
    }
}

/// The message's deaths as a timeline, oldest first (the header is newest first, and not
/// always sorted), from its first publish to the queue it is in now.
fn timeline(state: &State, row: &Opened, out: &mut Vec<Line<'static>>) {
    let t = &state.settings.theme;
    let exp = &row.exp;
    if exp.deaths.entries.is_empty() {
        return;
    }
    out.push(heading("timeline (UTC)", t.muted));
    if exp.deaths.copied {
        out.push(Line::styled(
            "  x-death copied by Symfony from the delivery that failed (its delay queue): not why it failed",
            t.warn,
        ));
    }
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
        death(state, d, out);
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

/// One death of the timeline: when, why, where and how often, then the exchange it came
/// through and, in a retry loop, roughly when it last died.
fn death(state: &State, d: &Death, out: &mut Vec<Line<'static>>) {
    let t = &state.settings.theme;
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
        && let Some(b) = &state.msgs.browse
        && let Some(lp) = state.queues.discovery.retry_loop_in(&b.vhost, q)
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

/// The framework's fault: the exception, its message, the facts around it and the stack
/// trace, folded unless opened.
fn fault(state: &State, exp: &Explanation, f: &Fault, out: &mut Vec<Line<'static>>) {
    let t = &state.settings.theme;
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
        if state.msgs.trace_open {
            out.push(Line::styled(
                format!("  stack trace ({n} lines) — e fold · T pager"),
                t.muted,
            ));
            for l in text.lines() {
                out.push(Line::raw(format!("    {l}")));
            }
        } else {
            out.push(Line::styled(
                format!("  stack trace ({n} lines) — e unfold · T pager"),
                t.muted,
            ));
        }
    }
}

/// Where a replay of this message would go and what it would strip and add: the domain's own
/// plan (the one `replay --dry-run` prints), with attempts reset as the replay modal starts.
/// Which queues an exchange's bindings reach is the worker's to find out (the modal shows it).
fn replay_preview(state: &State, row: &Opened, out: &mut Vec<Line<'static>>) {
    let t = &state.settings.theme;
    let opts = ReplayOptions {
        keep_attempts: false,
        clear_expiry: false,
        strip_failure_stamp: false,
        target_queue: None,
        now: state.now,
        run_id: None,
    };
    // The redirects in force in the open queue's vhost, as the worker last read them.
    let redirects = state
        .msgs
        .browse
        .as_ref()
        .and_then(|b| state.redirects.get(&b.vhost))
        .cloned()
        .unwrap_or_default();
    let plan = replay::plan_with(&row.msg, &row.exp, &opts, &redirects);
    out.push(heading("a replay would", t.muted));
    let field = |name: &str| Span::styled(format!("  {name:<8} "), t.muted);
    match &plan.target {
        Some(target) => {
            let mut publish = vec![field("publish"), Span::raw(target_text(target))];
            if let Some(r) = &plan.redirected {
                publish.push(Span::styled(format!(" ({})", r.describe()), t.muted));
            }
            out.push(Line::from(publish));
            let reaches = match &target.expected_queue {
                Some(q) => Span::raw(sanitize::one_line(q, 200)),
                None => Span::styled(
                    "what the exchange's bindings route to (r shows the queues)",
                    t.muted,
                ),
            };
            out.push(Line::from(vec![field("reach"), reaches]));
        }
        None => out.push(Line::from(vec![
            field("publish"),
            Span::styled("nowhere: nothing records where it came from", t.danger),
        ])),
    }
    let names = |names: Vec<&str>| {
        let shown: Vec<String> = names.iter().map(|n| sanitize::one_line(n, 80)).collect();
        if shown.is_empty() {
            "nothing".to_string()
        } else {
            shown.join(", ")
        }
    };
    out.push(Line::from(vec![
        field("strip"),
        Span::raw(names(plan.removed.iter().map(String::as_str).collect())),
    ]));
    out.push(Line::from(vec![
        field("add"),
        Span::raw(names(plan.added.iter().map(|(k, _)| k.as_str()).collect())),
    ]));
    for w in &plan.warnings {
        out.push(Line::styled(
            format!("  ! {}", sanitize::summary(&w.to_string(), 400)),
            t.warn,
        ));
    }
}

/// A replay target in the words of the replay modal, every name sanitised.
fn target_text(target: &ReplayTarget) -> String {
    let key = sanitize::one_line(&target.routing_key, 200);
    if target.is_direct() {
        format!("{key} (default exchange)")
    } else {
        format!(
            "exchange {}, routing key \"{key}\"",
            sanitize::one_line(&target.exchange, 200)
        )
    }
}

fn heading(title: &str, style: Style) -> Line<'static> {
    Line::styled(format!("─ {title} ─"), style)
}

fn reason_style(state: &State, reason: &str) -> Style {
    match reason {
        "rejected" | "delivery_limit" => state.settings.theme.danger,
        "expired" | "maxlen" => state.settings.theme.warn,
        _ => state.settings.theme.base,
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

/// A body as both the detail pane and the pager show it: decoded, in its detected format,
/// sanitised (see `domain::body`).
#[derive(Clone, Debug, PartialEq)]
pub struct BodyView {
    /// "3.1 KiB, gzip → JSON, 12.4 KiB decoded", or "41 B, JSON" when nothing was decoded.
    pub label: String,
    /// What the operator must know about the decoding (capped, corrupt, not decoded).
    pub note: Option<String>,
    pub text: String,
    /// Bytes of the body not read (cut at the browse cap).
    pub unread: u64,
}

impl BodyView {
    pub fn unread_note(&self) -> Option<String> {
        (self.unread > 0).then(|| format!("… {} more bytes not read (body cap)", self.unread))
    }
}

/// Decodes and renders `m`'s body as text of at most about `max_chars` characters.
pub fn body_view(m: &DeadLetter, max_chars: usize) -> BodyView {
    let decoded = body::decode_message(m, body::DECODE_CAP);
    let size = format::bytes(m.body_size);
    let label = match decoded.decoded_label() {
        Some(from) => format!(
            "{size}, {from} → {}, {} decoded",
            decoded.format.label(),
            format::bytes(decoded.bytes.len() as u64)
        ),
        None => format!("{size}, {}", decoded.format.label()),
    };
    BodyView {
        label,
        note: decoded.note(),
        text: body::text(&decoded, max_chars),
        unread: m.body_size.saturating_sub(m.body.len() as u64),
    }
}

fn body(state: &State, m: &DeadLetter, out: &mut Vec<Line<'static>>) {
    let t = &state.settings.theme;
    let view = body_view(m, BODY_CHARS);
    out.push(heading(&format!("body ({})", view.label), t.muted));
    if m.body.is_empty() && m.body_size == 0 {
        out.push(Line::styled("  (empty)", t.muted));
        return;
    }
    if let Some(n) = &view.note {
        out.push(Line::styled(format!("  {n}"), t.warn));
    }
    for l in view.text.lines() {
        out.push(Line::raw(format!("  {l}")));
    }
    if let Some(n) = view.unread_note() {
        out.push(Line::styled(format!("  {n}"), t.warn));
    }
}

/// The list cell for a message: the exception when a framework recorded one, else the verdict.
pub fn headline(row: &Row) -> String {
    let b = &row.brief;
    match (b.exception_type(), b.exception_message.as_deref()) {
        (Some(ty), Some(msg)) => format!("{}: {}", short_type(ty), msg),
        (Some(ty), None) => short_type(ty).to_string(),
        (None, _) => b.verdict().into_owned(),
    }
}
