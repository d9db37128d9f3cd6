//! The message side: the list of messages or of failure groups, and the detail pane.

use ratatui::Frame;
use ratatui::layout::{Constraint, Rect};
use ratatui::style::{Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Cell, Paragraph, Row as TRow, TableState, Wrap};

use super::{column_titles, list_table, pane_block, queue_title, window};
use crate::domain::grouping::GroupBy;
use crate::domain::sanitize;
use crate::tui::detail;
use crate::tui::format;
use crate::tui::state::{Focus, ListMode, MsgOrder, Overlay, State};

/// The message pane's title; the queues that feed the DLQ only when they fit in `width`
/// (they are in the detail's timeline too), so that "reading…" is never the part cut off.
fn message_title(state: &State, width: u16) -> String {
    let Some(b) = &state.msgs.browse else {
        return match &state.msgs.loading {
            Some(q) => format!(
                " {} — reading…{} ",
                queue_title(state, &q.vhost, &q.name, 40),
                arrived(state)
            ),
            None => " Messages ".into(),
        };
    };
    let name = queue_title(state, &b.vhost, &b.queue, 40);
    let dlq = state.dlq_of(&b.id());
    let depth = dlq.and_then(|d| d.depth);
    let mut title = match depth {
        Some(d) => format!(" {name} — {d} message{}", if d == 1 { "" } else { "s" }),
        None => format!(" {name}"),
    };
    if let Some(d) = dlq
        && !d.feeders.is_empty()
    {
        let feeders: Vec<String> = d
            .feeders
            .iter()
            .take(3)
            .map(|f| sanitize::middle_cut(f, 30))
            .collect();
        let more = if d.feeders.len() > 3 {
            format!(" +{}", d.feeders.len() - 3)
        } else {
            String::new()
        };
        let from = format!(", from {}{more}", feeders.join(", "));
        let reading = if state.msgs.loading.is_some() { 12 } else { 0 };
        let room = usize::from(width.saturating_sub(4));
        let cols = |s: &str| unicode_width::UnicodeWidthStr::width(s);
        if cols(&title) + cols(&from) + reading <= room {
            title.push_str(&from);
        }
    }
    if state.msgs.order != MsgOrder::Queue || state.msgs.order_reverse {
        title.push_str(" — ");
        title.push_str(state.msgs.order.words());
        if state.msgs.order_reverse {
            title.push_str(", reversed");
        }
    }
    if state.msgs.loading.is_some() {
        title.push_str(" — reading…");
        title.push_str(&arrived(state));
    }
    title.push(' ');
    title
}

/// How many messages of a page still arriving have come, in words ("" before any).
fn arrived(state: &State) -> String {
    state
        .msgs
        .arriving
        .as_ref()
        .filter(|a| {
            state
                .msgs
                .loading
                .as_ref()
                .is_some_and(|q| a.vhost == q.vhost && a.queue == q.name)
        })
        .map_or(String::new(), |a| format!(" {} so far", a.rows.len()))
}

/// The bottom line of the message pane: selection count (always), filter, how much is shown.
fn message_status(state: &State) -> Line<'static> {
    let t = &state.settings.theme;
    let mut spans = vec![Span::styled(
        format!(" [{} selected]", state.msgs.selected_messages()),
        t.marked,
    )];
    if let Some(b) = &state.msgs.browse {
        if !state.filtering.text.trim().is_empty() {
            spans.push(Span::styled(
                format!(" filter: {}", sanitize::one_line(&state.filtering.text, 40)),
                t.accent,
            ));
        }
        // A big page's new view is made in slices: until it is whole, this one is the last.
        if let Some(percent) = b.updating() {
            spans.push(Span::styled(
                format!(" updating the list… {percent}%"),
                t.accent,
            ));
        }
        spans.push(Span::styled(
            format!(
                " {} of {} · {} ",
                b.visible.len(),
                b.rows.len(),
                sanitize::one_line(&b.stop, 120)
            ),
            t.muted,
        ));
    }
    Line::from(spans)
}

pub(super) fn message_pane(state: &State, frame: &mut Frame, area: Rect) {
    let t = &state.settings.theme;
    let focused = state.focus == Focus::Messages && matches!(state.overlay, Overlay::None);
    let block = pane_block(state, message_title(state, area.width), focused)
        .title_bottom(message_status(state));
    let Some(b) = &state.msgs.browse else {
        let hint = if state.msgs.loading.is_some() {
            "reading messages (they stay in the queue)…"
        } else if state.focus == Focus::Queues && state.stuck_at_cursor().is_some() {
            "nothing to browse: these dead letters wait inside the queue they died in, in no DLQ (Enter says what to do)"
        } else if state.every_context() {
            "Enter on a queue opens it in its own context, with that context's rights (* there comes back here)"
        } else {
            "Enter on a queue to browse it"
        };
        frame.render_widget(
            Paragraph::new(Span::styled(hint, t.muted))
                .wrap(Wrap { trim: true })
                .block(block),
            area,
        );
        return;
    };
    if b.visible.is_empty() {
        let hint = if b.rows.is_empty() {
            "the queue is empty"
        } else {
            "no message matches this queue's filter (/ edits it; Ctrl-U there clears it)"
        };
        frame.render_widget(
            Paragraph::new(Span::styled(hint, t.muted))
                .wrap(Wrap { trim: true })
                .block(block),
            area,
        );
        return;
    }
    // The wide columns (position, a whole GUID, since its first failure) only where the
    // reason keeps about 30 columns beside them.
    let wide = area.width >= WIDE_LIST;
    // Build only the rows that fit: with 100,000 messages browsed, building every row on every
    // key press cost ~0.5 s a frame. The window keeps the cursor on screen the way ratatui's
    // table does from a fresh state (cursor at the bottom when scrolling down).
    let (start, end) = window(state.msgs.cursor, b.visible.len(), area.height);
    let shown: Vec<&crate::tui::state::Row> = b
        .visible
        .get(start..end)
        .unwrap_or_default()
        .iter()
        .filter_map(|&i| b.rows.get(i))
        .collect();
    // The id column is as wide as the longest id on screen, within bounds: at 80 columns the
    // reason needs the rest, and ids are cut in the middle (both ends tell ids apart).
    let id_max = if wide { 36 } else { 12 };
    let ids: Vec<Option<String>> = shown
        .iter()
        .map(|r| r.shown_id().map(|id| sanitize::middle_cut(id, id_max)))
        .collect();
    let id_w = ids
        .iter()
        .flatten()
        .map(|id| unicode_width::UnicodeWidthStr::width(id.as_str()))
        .max()
        .unwrap_or(0)
        .clamp(MESSAGE_ID_TITLE.len(), id_max);
    let rows: Vec<TRow> = shown
        .iter()
        .zip(ids)
        .map(|(r, id)| message_row(state, r, id, wide))
        .collect();
    let (widths, header) = message_columns(wide, u16::try_from(id_w).unwrap_or(u16::MAX));
    let header = column_titles(state, header);
    let table = list_table(state, rows, widths, header, block, focused);
    let mut ts = TableState::default().with_selected(Some(state.msgs.cursor - start));
    frame.render_stateful_widget(table, area, &mut ts);
}

/// One message's row: its mark, place, id (cut to fit), reason, attempts and ages.
fn message_row(
    state: &State,
    r: &crate::tui::state::Row,
    id: Option<String>,
    wide: bool,
) -> TRow<'static> {
    let t = &state.settings.theme;
    let picked = state.msgs.selected.contains(r.key.as_str());
    let mark = if picked {
        Span::styled("●", t.marked)
    } else {
        Span::raw(" ")
    };
    // How long it has been in the DLQ, by the one rule: exact, or said as a bound.
    // The one notation (`Age::text`), the same as the queue row's.
    let age = r
        .arrival()
        .age(state.now)
        .map_or("—".into(), crate::domain::arrival::Age::text);
    let position = (r.brief.position() + 1).to_string();
    // Without an id, the narrow list names the message by its place in the queue.
    let id = match (id, wide) {
        (Some(id), _) => Span::raw(id),
        (None, true) => Span::styled("—", t.muted),
        (None, false) => Span::styled(format!("#{position}"), t.muted),
    };
    let mut cells = vec![Cell::from(mark)];
    if wide {
        cells.push(Cell::from(Span::styled(position, t.muted)));
    }
    cells.push(Cell::from(id));
    cells.push(Cell::from(sanitize::one_line(&detail::headline(r), 300)));
    cells.push(Cell::from(
        Line::from(format!("×{}", r.attempts())).right_aligned(),
    ));
    cells.push(Cell::from(Line::from(age).right_aligned()));
    if wide {
        // Since its first failure: how long it has been failing, not how long in the DLQ.
        let died = r
            .failed_at()
            .map_or("—".into(), |x| format::age(state.secs_since(x)));
        cells.push(Cell::from(Line::from(died).right_aligned()));
    }
    let row = TRow::new(cells);
    if picked {
        row.style(Style::default().add_modifier(Modifier::BOLD))
    } else {
        row
    }
}

/// The message table's column widths and titles, wide or narrow, the id column `id_w` wide.
fn message_columns(wide: bool, id_w: u16) -> (Vec<Constraint>, &'static [(&'static str, bool)]) {
    if wide {
        (
            vec![
                Constraint::Length(1),
                Constraint::Length(4),
                Constraint::Length(id_w),
                Constraint::Fill(1),
                Constraint::Length(8),
                Constraint::Length(7),
                Constraint::Length(7),
            ],
            &[
                ("", false),
                ("#", false),
                (MESSAGE_ID_TITLE, false),
                ("Reason", false),
                ("Attempts", true),
                ("In DLQ", true),
                ("Died", true),
            ],
        )
    } else {
        (
            vec![
                Constraint::Length(1),
                Constraint::Length(id_w),
                Constraint::Fill(1),
                Constraint::Length(5),
                Constraint::Length(6),
            ],
            &[
                ("", false),
                (MESSAGE_ID_TITLE, false),
                ("Reason", false),
                ("Tries", true),
                ("In DLQ", true),
            ],
        )
    }
}

/// The message pane's width from which it shows the wide columns.
const WIDE_LIST: u16 = 100;

/// The message list's id column title (its narrowest width).
const MESSAGE_ID_TITLE: &str = "Message id";

pub(super) fn group_pane(state: &State, frame: &mut Frame, area: Rect) {
    let t = &state.settings.theme;
    let focused = state.focus == Focus::Messages && matches!(state.overlay, Overlay::None);
    // The grouping is in the title: "Groups by exception type — orders.dlq (3 groups)".
    let what = match state.msgs.shown_grouping() {
        GroupBy::Fingerprint => "Failure groups".to_string(),
        by => format!("Groups by {}", by.label()),
    };
    let title = match &state.msgs.browse {
        Some(b) => format!(
            " {what} — {} ({} groups) ",
            queue_title(state, &b.vhost, &b.queue, 40),
            b.groups.len()
        ),
        None => format!(" {what} "),
    };
    let block = pane_block(state, title, focused).title_bottom(message_status(state));
    let Some(b) = state.msgs.browse.as_ref().filter(|b| !b.groups.is_empty()) else {
        frame.render_widget(
            Paragraph::new(Span::styled("no messages to group", t.muted)).block(block),
            area,
        );
        return;
    };
    // The last-seen column where there is room for it.
    let wide = area.width >= 70;
    let column = match state.msgs.shown_grouping() {
        GroupBy::Fingerprint => "Failure",
        GroupBy::Exception => "Exception",
        GroupBy::Type => "Message type",
        GroupBy::Origin => "Origin queue",
        GroupBy::Reason => "Reason",
        GroupBy::Endpoint => "Replay endpoint",
    };
    let rows: Vec<TRow> = b
        .groups
        .iter()
        .map(|g| {
            // A note is shown next to its group, after the summary, as long as the group lasts.
            let mut summary = vec![Span::raw(sanitize::one_line(&g.summary, 300))];
            if let Some(n) = state.msgs.note_for(g) {
                summary.push(Span::styled(
                    format!("  ✎ {}", sanitize::one_line(&n.text, 300)),
                    t.warn,
                ));
            }
            let mut cells = vec![
                Cell::from(Line::from(g.rows.len().to_string()).right_aligned()),
                Cell::from(Line::from(summary)),
                Cell::from(
                    Line::from(
                        g.first
                            .map_or("—".into(), |x| format::age(state.secs_since(x))),
                    )
                    .right_aligned(),
                ),
            ];
            if wide {
                cells.push(Cell::from(
                    Line::from(
                        g.last
                            .map_or("—".into(), |x| format::age(state.secs_since(x))),
                    )
                    .right_aligned(),
                ));
            }
            TRow::new(cells)
        })
        .collect();
    let (widths, header): (Vec<Constraint>, Vec<(&str, bool)>) = if wide {
        (
            vec![
                Constraint::Length(5),
                Constraint::Fill(1),
                Constraint::Length(7),
                Constraint::Length(7),
            ],
            vec![
                ("Count", true),
                (column, false),
                ("First", true),
                ("Last", true),
            ],
        )
    } else {
        (
            vec![
                Constraint::Length(5),
                Constraint::Fill(1),
                Constraint::Length(7),
            ],
            vec![("Count", true), (column, false), ("First", true)],
        )
    };
    let header = column_titles(state, &header);
    let table = list_table(state, rows, widths, header, block, focused);
    let mut ts = TableState::default().with_selected(Some(state.msgs.group_cursor));
    frame.render_stateful_widget(table, area, &mut ts);
}

pub(super) fn detail_pane(state: &State, frame: &mut Frame, area: Rect) {
    let t = &state.settings.theme;
    let focused = state.focus == Focus::Detail && matches!(state.overlay, Overlay::None);
    let Some(row) = state.msgs.current_row() else {
        frame.render_widget(pane_block(state, " Timeline ".into(), focused), area);
        return;
    };
    // The whole id when it fits the border (a GUID does at 80 columns), else cut in the middle.
    let room = usize::from(area.width.saturating_sub(16));
    let name = row.shown_id().map_or_else(
        || format!("#{}", row.brief.position() + 1),
        |id| sanitize::middle_cut(id, room),
    );
    let title = match state.msgs.list_mode {
        ListMode::Groups => format!(" Example — {name} "),
        ListMode::Messages => format!(" Timeline — {name} "),
    };
    let mut block = pane_block(state, title, focused);
    // In the group list, the group's note in full above its example (the row may cut it).
    let note: Vec<Line<'_>> = state
        .msgs
        .current_group()
        .filter(|_| state.msgs.list_mode == ListMode::Groups)
        .and_then(|g| state.msgs.note_for(g))
        .map(|n| {
            vec![
                Line::styled(
                    format!(
                        "✎ note by {}, {}: {}",
                        sanitize::one_line(&n.author, 40),
                        n.at.strftime("%Y-%m-%d %H:%M UTC"),
                        sanitize::one_line(&n.text, 600)
                    ),
                    t.warn,
                ),
                Line::raw(""),
            ]
        })
        .unwrap_or_default();
    // Rendered by `update` when the message changed; the frame borrows it.
    let lines = state.detail_lines().unwrap_or_default();
    let total = lines.len() + note.len();
    let scroll = usize::from(state.msgs.detail_scroll).min(total.saturating_sub(1));
    if total > usize::from(area.height.saturating_sub(2)) {
        block = block.title_bottom(
            Line::styled(format!(" line {}/{} ", scroll + 1, total), t.muted).right_aligned(),
        );
    }
    // Each line takes at least one row, so none past `scroll + height` can be in view.
    let shown = (scroll + usize::from(area.height)).min(total);
    // Wrapped here with a hanging indent (a timeline entry's second row under its text), so
    // the paragraph's own wrapping never has to.
    let inner = usize::from(area.width.saturating_sub(2));
    let text: Vec<Line<'_>> = note
        .into_iter()
        .chain(lines.iter().map(borrowed))
        .take(shown)
        .flat_map(|l| super::wrap::hanging(l, inner))
        .collect();
    frame.render_widget(
        Paragraph::new(text)
            .block(block)
            .wrap(Wrap { trim: false })
            .scroll((u16::try_from(scroll).unwrap_or(u16::MAX), 0)),
        area,
    );
}

/// A line that borrows its text from `l` (no copy of the strings).
fn borrowed<'a>(l: &'a Line<'static>) -> Line<'a> {
    Line {
        spans: l
            .spans
            .iter()
            .map(|s| Span::styled(s.content.as_ref(), s.style))
            .collect(),
        style: l.style,
        alignment: l.alignment,
    }
}
