//! Drawing only: `view(&State, &mut Frame)` reads the state and draws it. Nothing here changes
//! state or talks to the broker. Every broker string is sanitised before it is drawn.

mod edit;
mod messages;
mod modals;
mod queues;
mod stuck;
mod wrap;

use ratatui::Frame;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::{Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::{
    Block, BorderType, Borders, Cell, Clear, HighlightSpacing, Paragraph, Row as TRow, Table, Wrap,
};

use super::event::ConnectionState;
use super::format;
use super::help;
use super::keys::{self, Scope};
use super::state::{ArchiveKind, Focus, ListMode, Overlay, State};
use crate::domain::sanitize;
use messages::{detail_pane, group_pane, message_pane};
use modals::{archive_modal, progress, question_modal, replay_modal, restore_modal};
use queues::{longest_label, queue_pane, queue_pane_width};

pub fn view(state: &State, frame: &mut Frame) {
    let area = frame.area();
    let banner = banner_paragraph(state);
    // Wrapped, so that what ends a notice ("Enter again to browse") is on screen; `w` lets a
    // long one take up to half the screen.
    let banner_needs = banner.as_ref().map_or(0, |p| {
        u16::try_from(p.line_count(area.width)).unwrap_or(u16::MAX)
    });
    let banner_cap = if state.banner.whole {
        (area.height / 2).max(BANNER_LINES)
    } else {
        BANNER_LINES
    };
    let banner_height = banner_needs.min(banner_cap);
    let input = state.inputs.filter.is_some()
        || state.inputs.queue_filter.is_some()
        || state.inputs.command.is_some()
        || state.inputs.note.is_some();
    let [status, main, banner_area, input_area, footer] = Layout::vertical([
        Constraint::Length(1),
        Constraint::Min(3),
        Constraint::Length(banner_height),
        Constraint::Length(u16::from(input)),
        Constraint::Length(1),
    ])
    .areas(area);

    status_bar(state, frame, status);
    // The longest name, measured once a frame (a list of 10,000 queues).
    let longest = longest_label(state);
    let left_width = queue_pane_width(longest, area.width);
    // On a narrow screen the queue list steps aside while the messages have the focus, as
    // lazygit's side panels do: at 80 columns it leaves the reasons 16 columns otherwise.
    let left_width = if state.focus != Focus::Queues && area.width < WIDE_SCREEN {
        left_width.min(QUEUE_PANE_ASIDE)
    } else {
        left_width
    };
    let [left, right] =
        Layout::horizontal([Constraint::Length(left_width), Constraint::Min(20)]).areas(main);
    queue_pane(state, frame, left, longest);
    let list_height = (right.height * 2 / 5).max(5);
    let [top, bottom] =
        Layout::vertical([Constraint::Length(list_height), Constraint::Min(3)]).areas(right);
    match state.msgs.list_mode {
        ListMode::Messages => message_pane(state, frame, top),
        ListMode::Groups => group_pane(state, frame, top),
    }
    detail_pane(state, frame, bottom);
    if let Some(p) = banner {
        banner_line(state, p, banner_needs > banner_height, frame, banner_area);
    }
    if input {
        input_line(state, frame, input_area);
    }
    footer_line(state, frame, footer);

    match &state.overlay {
        Overlay::None => {}
        Overlay::Help => help(state, frame, area),
        Overlay::Log(scroll) => super::oplog::draw(state, *scroll, frame, area),
        Overlay::Replays(scroll) => super::replays::draw(state, *scroll, frame, area),
        Overlay::Replay(modal) => replay_modal(state, modal, frame, area),
        Overlay::Archive(modal) => archive_modal(state, modal, frame, area),
        Overlay::Restore(modal) => restore_modal(state, modal, frame, area),
        Overlay::Progress(run) => progress(state, run, frame, area),
        Overlay::Edit(modal) => edit::editor(state, modal, frame, area),
        Overlay::Contexts(p) => super::picker::draw(state, p, frame, area),
        Overlay::Question(q) => question_modal(state, q, frame, area),
        // Everything but the footer, which says the pager's keys.
        Overlay::Pager(p) => super::pager::draw(
            state,
            p,
            frame,
            Rect {
                height: area.height.saturating_sub(1),
                ..area
            },
        ),
    }
}

fn pane_block(state: &State, title: String, focused: bool) -> Block<'static> {
    let t = &state.settings.theme;
    Block::default()
        .borders(Borders::ALL)
        .border_type(if focused {
            BorderType::Thick
        } else {
            BorderType::Plain
        })
        .border_style(if focused { t.accent } else { t.muted })
        .title(Span::styled(title, if focused { t.accent } else { t.base }))
}

fn status_bar(state: &State, frame: &mut Frame, area: Rect) {
    let t = &state.settings.theme;
    let o = &state.overview;
    let s = |x: &str, n| sanitize::one_line(x, n);
    let mut spans = vec![Span::styled(" warren ", t.accent)];
    // First, so that no width can cut them off: where this is, in its colour, and read-only.
    let mut context_shown = false;
    if let Some(color) = o.color {
        let name = o.label.as_deref().unwrap_or(&o.context);
        spans.push(Span::raw(" "));
        spans.push(Span::styled(
            format!(" {} ", s(name, 24)),
            t.context_badge(color),
        ));
        context_shown = o.label.is_none();
    } else if let Some(label) = &o.label {
        spans.push(Span::styled(format!(" {} ", s(label, 24)), t.accent));
    }
    if state.read_only {
        spans.push(Span::raw(" "));
        spans.push(Span::styled(" READ-ONLY ", t.badge));
    }
    let (dot, text, style) = match &state.connection {
        ConnectionState::Connecting => ("○", "connecting".to_string(), t.warn),
        ConnectionState::Connected => ("●", "connected".to_string(), t.ok),
        ConnectionState::Snapshot => ("◆", "snapshot, no broker".to_string(), t.muted),
        ConnectionState::Disconnected(why) => {
            ("✕", format!("disconnected: {}", s(why, 40)), t.danger)
        }
    };
    spans.push(Span::styled(format!(" {dot} {text} "), style));
    // Until the worker reached the new place, everything shown is still the old one's.
    if let Some(sw) = &state.switching {
        spans.push(Span::styled(format!(" switching to {}… ", sw.to), t.warn));
    }
    if state.every_context() {
        every_context_spans(state, &mut spans);
        frame.render_widget(Paragraph::new(Line::from(spans)), area);
        return;
    }
    if !o.context.is_empty() && !context_shown {
        spans.push(Span::raw(format!(" {}", s(&o.context, 24))));
    }
    if !o.broker_version.is_empty() {
        spans.push(Span::styled(
            format!(" (RabbitMQ {})", s(&o.broker_version, 16)),
            t.muted,
        ));
    }
    if state.every_vhost() {
        // The scope: every vhost of the context, one listing.
        spans.push(Span::raw(format!("  {} · ", s(&o.user, 20))));
        spans.push(Span::styled("every vhost", t.accent));
    } else if !o.user.is_empty() || !o.vhost.is_empty() {
        spans.push(Span::raw(format!(
            "  {}@{}",
            s(&o.user, 20),
            s(&o.vhost, 24)
        )));
    }
    if !o.tags.is_empty() {
        let tags: Vec<String> = o.tags.iter().map(|x| s(x, 20)).collect();
        spans.push(Span::styled(format!("  tags: {}", tags.join(",")), t.muted));
    }
    if state.queues.loaded
        && state
            .queues
            .depths_at
            .is_some_and(|d| state.secs_since(d) > super::state::STALE_AFTER_SECS as u64)
    {
        let since = state
            .queues
            .depths_at
            .map(|d| format::time(d, state.now))
            .unwrap_or_default();
        spans.push(Span::styled(
            format!("  depths stale since {since}"),
            t.warn,
        ));
    }
    frame.render_widget(Paragraph::new(Line::from(spans)), area);
}

/// The scope of every context at once: how many contexts are listed, and each that is not,
/// with why (cut to fit; the command log and `w` have it whole).
fn every_context_spans(state: &State, spans: &mut Vec<Span<'static>>) {
    let t = &state.settings.theme;
    let o = &state.overview;
    let listed = o.contexts.iter().filter(|r| r.unreached.is_none()).count();
    let scope = if o.vhost_scope().is_every() {
        format!(" every context ({listed}), every vhost ")
    } else {
        format!(" every context ({listed}) ")
    };
    spans.push(Span::styled(scope, t.accent));
    let read_only = o
        .contexts
        .iter()
        .filter(|r| r.unreached.is_none() && r.read_only)
        .count();
    if read_only > 0 {
        spans.push(Span::styled(format!(" {read_only} read-only "), t.muted));
    }
    for r in o.contexts.iter() {
        if let Some(why) = &r.unreached {
            spans.push(Span::styled(
                format!(
                    " ✕ {}: {} ",
                    sanitize::one_line(&r.context, 24),
                    sanitize::one_line(why, 60)
                ),
                t.danger,
            ));
        }
    }
}

/// A list pane's table: its rows under column titles, the cursor row marked and highlighted.
fn list_table<'a>(
    state: &State,
    rows: Vec<TRow<'a>>,
    widths: Vec<Constraint>,
    header: TRow<'a>,
    block: Block<'a>,
    focused: bool,
) -> Table<'a> {
    Table::new(rows, widths)
        .header(header)
        .block(block)
        .column_spacing(1)
        .highlight_symbol("▶ ")
        .highlight_spacing(HighlightSpacing::Always)
        .row_highlight_style(cursor_style(state, focused))
}

/// The cursor row: reversed when the pane has focus (visible without colour), bold otherwise.
fn cursor_style(state: &State, focused: bool) -> Style {
    if focused {
        state.settings.theme.selected
    } else {
        Style::default().add_modifier(Modifier::BOLD)
    }
}

/// What a row shows before a queue's name: with every context listed, its context (and its
/// vhost where not the context's own); with every vhost listed, its vhost; else nothing.
fn row_prefix(state: &State, context: &str, vhost: &str) -> String {
    if state.every_context() {
        sanitize::one_line(&state.place_of(context, vhost), 40)
    } else if state.every_vhost() {
        sanitize::one_line(vhost, 24)
    } else {
        String::new()
    }
}

/// A queue's name as a title or a row shows it, at most `max` columns: with every vhost
/// listed, after its vhost ("billing/orders.dlq"), each sanitised. Where both do not fit the
/// name keeps its room (it says what the queue is) and the vhost, cut in the middle, what is
/// left, at least 4 columns.
fn queue_title(state: &State, vhost: &str, name: &str, max: usize) -> String {
    queue_title_in(state, "", vhost, name, max)
}

/// [`queue_title`] of a queue of `context` (every context listed: after its context).
fn queue_title_in(state: &State, context: &str, vhost: &str, name: &str, max: usize) -> String {
    let name = crate::domain::archive::shown_name(name);
    let v = row_prefix(state, context, vhost);
    if v.is_empty() {
        return sanitize::middle_cut(name, max);
    }
    let cols = |s: &str| unicode_width::UnicodeWidthStr::width(s);
    let n = sanitize::one_line(name, 255);
    let (vw, nw) = (cols(&v), cols(&n));
    if vw + 1 + nw <= max {
        return format!("{v}/{n}");
    }
    let v_room = max.saturating_sub(nw + 1).max(4).min(vw);
    let n_room = max.saturating_sub(v_room + 1);
    format!(
        "{}/{}",
        sanitize::middle_cut(&v, v_room),
        sanitize::middle_cut(&n, n_room)
    )
}

/// A queue's name in the list, not yet cut: after its context or vhost where the scope holds
/// several (bounded), so that two queues of one name in two places read as two.
fn queue_label(state: &State, context: &str, vhost: &str, name: &str) -> String {
    let name = crate::domain::archive::shown_name(name);
    let v = row_prefix(state, context, vhost);
    if v.is_empty() {
        sanitize::one_line(name, 255)
    } else {
        format!("{v}/{}", sanitize::one_line(name, 255))
    }
}

/// A table's header row: column titles in words, right-aligned over numbers.
fn column_titles(state: &State, titles: &[(&str, bool)]) -> TRow<'static> {
    TRow::new(titles.iter().map(|&(title, right)| {
        let line = Line::styled(title.to_string(), state.settings.theme.muted);
        Cell::from(if right { line.right_aligned() } else { line })
    }))
}

/// The slice of a list of `len` rows to build so that `cursor` is visible in a table pane of
/// `height` lines (two borders and a header line).
fn window(cursor: usize, len: usize, height: u16) -> (usize, usize) {
    let rows = usize::from(height.saturating_sub(3)).max(1);
    let start = cursor.saturating_sub(rows - 1).min(len.saturating_sub(1));
    (start, (start + rows).min(len))
}

/// Below this many columns the queue list narrows while it is not focused.
const WIDE_SCREEN: u16 = 120;
/// The queue list's width then: depth and growth, and the start of each name.
const QUEUE_PANE_ASIDE: u16 = 24;

/// Rows the banner takes at most until `w` asks for its whole text.
const BANNER_LINES: u16 = 3;

/// The most of an error or notice shown (characters).
const BANNER_CHARS: usize = 2000;

/// The error (else, while a filter is typed, why it does not parse yet; else the notice) as a
/// wrapped paragraph, or none.
fn banner_paragraph(state: &State) -> Option<Paragraph<'static>> {
    let t = &state.settings.theme;
    let typing = state
        .filtering
        .error
        .as_ref()
        .filter(|_| state.inputs.filter.is_some());
    let (text, style) = match (&state.banner.error, typing, &state.banner.notice) {
        (Some(e), _, _) => (
            format!(
                " ✕ {}  (Esc to dismiss)",
                sanitize::one_line(e, BANNER_CHARS)
            ),
            t.danger,
        ),
        (None, Some(e), _) => (
            format!(" ! {}", sanitize::one_line(e, BANNER_CHARS)),
            t.warn,
        ),
        (None, None, Some(n)) => (
            format!(" ! {}", sanitize::one_line(n, BANNER_CHARS)),
            t.warn,
        ),
        (None, None, None) => return None,
    };
    Some(Paragraph::new(Span::styled(text, style)).wrap(Wrap { trim: true }))
}

fn banner_line(state: &State, p: Paragraph<'_>, cut: bool, frame: &mut Frame, area: Rect) {
    frame.render_widget(p, area);
    if cut && area.height > 0 {
        // Over the end of the last row: the rest is one key away.
        // Even half the screen can be too little for the longest (2,000 characters).
        let hint = if state.banner.whole {
            " … (cut) w: fold "
        } else {
            " … w: whole text "
        };
        let w = u16::try_from(hint.chars().count())
            .unwrap_or(u16::MAX)
            .min(area.width);
        let at = Rect {
            x: area.x + area.width - w,
            y: area.y + area.height - 1,
            width: w,
            height: 1,
        };
        frame.render_widget(Clear, at);
        frame.render_widget(
            Paragraph::new(Span::styled(hint, state.settings.theme.accent)),
            at,
        );
    }
}

fn input_line(state: &State, frame: &mut Frame, area: Rect) {
    let t = &state.settings.theme;
    // Why a filter does not parse yet is in the banner, wrapped, not squeezed in here.
    let [prompt, field] =
        Layout::horizontal([Constraint::Length(2), Constraint::Min(10)]).areas(area);
    if let Some(fi) = &state.inputs.filter {
        frame.render_widget(Paragraph::new(Span::styled(" /", t.accent)), prompt);
        frame.render_widget(&fi.input, field);
    } else if let Some((input, _)) = &state.inputs.queue_filter {
        frame.render_widget(Paragraph::new(Span::styled(" /", t.accent)), prompt);
        frame.render_widget(input, field);
    } else if let Some(input) = &state.inputs.command {
        frame.render_widget(Paragraph::new(Span::styled(" :", t.accent)), prompt);
        frame.render_widget(input, field);
    } else if let Some(ni) = &state.inputs.note {
        let [prompt, field] =
            Layout::horizontal([Constraint::Length(7), Constraint::Min(10)]).areas(area);
        frame.render_widget(Paragraph::new(Span::styled(" note: ", t.accent)), prompt);
        frame.render_widget(&ni.input, field);
    }
}

fn footer_scope(state: &State) -> Scope {
    match &state.overlay {
        Overlay::Replay(_) => Scope::Modal,
        Overlay::Restore(_) => Scope::Restore,
        Overlay::Progress(_) => Scope::Progress,
        Overlay::Pager(_) => Scope::Pager,
        Overlay::Log(_) => Scope::Log,
        Overlay::Replays(_) => Scope::Replays,
        _ => match state.focus {
            Focus::Queues => Scope::Queues,
            Focus::Messages if state.msgs.list_mode == ListMode::Groups => Scope::Groups,
            Focus::Messages => Scope::Messages,
            Focus::Detail => Scope::Detail,
        },
    }
}

fn footer_line(state: &State, frame: &mut Frame, area: Rect) {
    let t = &state.settings.theme;
    let mut spans: Vec<Span> = Vec::new();
    let mut used = 0usize;
    let width = usize::from(area.width);
    let hints: Vec<(String, String, bool)> = if state.inputs.queue_filter.is_some() {
        vec![
            ("type".into(), "queue name".into(), false),
            ("Enter".into(), "keep".into(), false),
            ("Esc".into(), "undo".into(), false),
        ]
    } else if state.inputs.filter.is_some() {
        vec![
            ("Enter".into(), "keep filter".into(), false),
            ("Esc".into(), "undo".into(), false),
        ]
    } else if state.inputs.command.is_some() {
        vec![
            ("Enter".into(), "run".into(), false),
            ("Esc".into(), "cancel".into(), false),
        ]
    } else if state.inputs.note.is_some() {
        vec![
            ("Enter".into(), "keep note (empty: remove)".into(), false),
            ("Esc".into(), "cancel".into(), false),
        ]
    } else if let Overlay::Archive(m) = &state.overlay {
        let mut hints = vec![
            ("Enter".into(), m.verb().into(), false),
            ("Esc".into(), "cancel".into(), false),
        ];
        if m.kind == ArchiveKind::Archive {
            hints.push(("type".into(), "reason".into(), false));
        }
        hints
    } else if matches!(state.overlay, Overlay::Contexts(_)) {
        vec![
            ("type".into(), "narrow".into(), false),
            ("↑/↓".into(), "choose".into(), false),
            ("Enter".into(), "open".into(), false),
            ("Esc".into(), "close".into(), false),
        ]
    } else if matches!(state.overlay, Overlay::Help) {
        vec![
            ("Esc/?".into(), "close help".into(), false),
            ("j/k".into(), "scroll".into(), false),
        ]
    } else {
        keys::footer(footer_scope(state))
            .into_iter()
            // Every context at once lists dead-letter queues only.
            .filter(|b| !(state.every_context() && b.action == keys::Action::ToggleOrdinary))
            .map(|b| {
                let word = match (&state.overlay, b.action) {
                    (Overlay::Replay(m), keys::Action::Accept) => m.enter_does(),
                    // Nothing to read there: Enter says why and what to do.
                    (Overlay::None, keys::Action::Open)
                        if state.focus == Focus::Queues && state.stuck_at_cursor().is_some() =>
                    {
                        "why stuck"
                    }
                    (Overlay::None, keys::Action::Open)
                        if state.every_context() && state.focus == Focus::Queues =>
                    {
                        "open in its context"
                    }
                    // In the archive, `r` restores.
                    (Overlay::None, keys::Action::Replay) if state.archive_open() => "restore",
                    _ => b.footer.unwrap_or(""),
                };
                let disabled = state.read_only && b.action == keys::Action::Replay;
                let word = if disabled {
                    format!("{word} (disabled: read-only)")
                } else {
                    word.to_string()
                };
                (b.label.to_string(), word, disabled)
            })
            .collect()
    };
    // Opened from every context at once: the way back comes first.
    let hints = if state.from_every_context
        && state.focus == Focus::Queues
        && matches!(state.overlay, Overlay::None)
        && state.inputs.command.is_none()
        && state.inputs.filter.is_none()
        && state.inputs.queue_filter.is_none()
    {
        let mut back = vec![("*".to_string(), "every context".to_string(), false)];
        back.extend(hints);
        back
    } else {
        hints
    };
    for (key, word, disabled) in hints {
        let len = key.chars().count() + word.chars().count() + 3;
        if used + len > width {
            break;
        }
        spans.push(Span::styled(
            format!(" {key}"),
            if disabled { t.muted } else { t.accent },
        ));
        spans.push(Span::styled(format!(" {word} "), t.muted));
        used += len;
    }
    frame.render_widget(Paragraph::new(Line::from(spans)), area);
}

fn centered(area: Rect, width: u16, height: u16) -> Rect {
    let w = width.min(area.width);
    let h = height.min(area.height);
    Rect {
        x: area.x + (area.width - w) / 2,
        y: area.y + (area.height - h) / 2,
        width: w,
        height: h,
    }
}

fn help(state: &State, frame: &mut Frame, area: Rect) {
    let t = &state.settings.theme;
    let rect = help::rect(area);
    frame.render_widget(Clear, rect);
    let searched = !state.help.query.is_empty() || state.help.typing;
    let title = if searched {
        format!(
            " Keys matching “{}”{} · {} ",
            sanitize::one_line(&state.help.query, 40),
            if state.help.typing { "▏" } else { "" },
            if state.help.typing {
                "Enter keeps, Esc drops"
            } else {
                "Esc shows all"
            }
        )
    } else {
        " Keys (/ to search, Esc to close) ".to_string()
    };
    let mut block = Block::default()
        .borders(Borders::ALL)
        .border_style(t.accent)
        .title(Span::styled(title, t.accent));
    let inner = block.inner(rect);
    let column = |sections: Vec<help::Section>| -> Vec<Line> {
        let mut lines = Vec::new();
        for (title, bindings) in sections {
            lines.push(Line::styled(title, t.accent));
            for b in bindings {
                let disabled = state.read_only && b.action == keys::Action::Replay;
                let help = if disabled {
                    format!("{} — disabled: read-only", b.help)
                } else {
                    b.help.to_string()
                };
                lines.push(Line::from(vec![
                    Span::styled(format!(" {:<8}", b.label), t.accent),
                    Span::raw(help),
                ]));
            }
        }
        lines
    };
    let (left, right) = help::columns_for(inner.width, &state.help.query);
    let two = !right.is_empty();
    let (mut left, mut right) = (column(left), column(right));
    if searched && left.is_empty() {
        left.push(Line::styled(" no key matches: Backspace or Esc", t.muted));
    }
    // The configured commands go last, as `help::tallest` counts them.
    if let Some(custom) = custom_help(state).filter(|_| state.help.query.is_empty()) {
        if two {
            right.extend(custom)
        } else {
            left.extend(custom)
        }
    }
    let tallest = left.len().max(right.len());
    let height = usize::from(inner.height);
    // `update` keeps the scroll within the last page; a resize since can leave it past.
    let scroll = usize::from(state.help.scroll).min(tallest.saturating_sub(height));
    if tallest > height {
        let last = (scroll + height).min(tallest);
        block = block.title_bottom(
            Line::styled(
                format!(
                    " lines {}–{last} of {tallest} · j/k PgUp/PgDn g/G scroll ",
                    scroll + 1
                ),
                t.muted,
            )
            .right_aligned(),
        );
    }
    frame.render_widget(block, rect);
    let offset = (u16::try_from(scroll).unwrap_or(u16::MAX), 0);
    if two {
        let [l, r] = Layout::horizontal([Constraint::Percentage(50), Constraint::Percentage(50)])
            .areas(inner);
        frame.render_widget(Paragraph::new(left).scroll(offset), l);
        frame.render_widget(Paragraph::new(right).scroll(offset), r);
    } else {
        frame.render_widget(Paragraph::new(left).scroll(offset), inner);
    }
}

/// The configured commands as a help section, when there are any (names sanitised: the config
/// is the operator's, but a section is drawn as any other text).
fn custom_help(state: &State) -> Option<Vec<Line<'static>>> {
    let t = &state.settings.theme;
    let rows = super::custom::help_rows(state);
    if rows.is_empty() {
        return None;
    }
    let mut lines = vec![Line::styled(super::custom::HELP_TITLE, t.accent)];
    for (key, help) in rows {
        lines.push(Line::from(vec![
            Span::styled(format!(" {:<8}", sanitize::one_line(&key, 8)), t.accent),
            Span::raw(sanitize::one_line(&help, 80)),
        ]));
    }
    Some(lines)
}
