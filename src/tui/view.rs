//! Drawing only: `view(&State, &mut Frame)` reads the state and draws it. Nothing here changes
//! state or talks to the broker. Every broker string is sanitised before it is drawn.

use ratatui::Frame;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::{Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::{
    Block, BorderType, Borders, Cell, Clear, Gauge, HighlightSpacing, Paragraph, Row as TRow,
    Table, TableState, Wrap,
};

use super::detail;
use super::event::{ConnectionState, JobKind};
use super::format;
use super::help;
use super::keys::{self, Scope};
use super::state::{
    ArchiveKind, ArchiveModal, Focus, ListMode, ModalField, Overlay, QueueRow, ReplayModal,
    ReplayRun, RestoreModal, State,
};
use crate::domain::discovery::DlqKind;
use crate::domain::grouping::GroupBy;
use crate::domain::sanitize;
use crate::domain::urgency::Figures;

pub fn view(state: &State, frame: &mut Frame) {
    let area = frame.area();
    let banner = banner_paragraph(state);
    // Wrapped, so that what ends a notice ("Enter again to browse") is on screen; `w` lets a
    // long one take up to half the screen.
    let banner_needs = banner.as_ref().map_or(0, |p| {
        u16::try_from(p.line_count(area.width)).unwrap_or(u16::MAX)
    });
    let banner_cap = if state.banner_whole {
        (area.height / 2).max(BANNER_LINES)
    } else {
        BANNER_LINES
    };
    let banner_height = banner_needs.min(banner_cap);
    let input =
        state.filter_input.is_some() || state.command_input.is_some() || state.note_input.is_some();
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
    let [left, right] =
        Layout::horizontal([Constraint::Length(left_width), Constraint::Min(20)]).areas(main);
    queue_pane(state, frame, left, longest);
    let list_height = (right.height * 2 / 5).max(5);
    let [top, bottom] =
        Layout::vertical([Constraint::Length(list_height), Constraint::Min(3)]).areas(right);
    match state.list_mode {
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
    let t = &state.theme;
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
    let t = &state.theme;
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
    if state.queues_loaded
        && state
            .depths_at
            .is_some_and(|d| state.secs_since(d) > super::state::STALE_AFTER_SECS as u64)
    {
        let since = state
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
    let t = &state.theme;
    let o = &state.overview;
    let listed = o.contexts.iter().filter(|r| r.unreached.is_none()).count();
    let scope = if o.vhost == crate::broker::config::EVERY_VHOST {
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

/// How much the queue pane shows besides the name, by its width.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum QueueTier {
    /// Marker, depth, growth.
    Narrow,
    /// And kind, age of the oldest dead letter, last arrival.
    Wide,
    /// And the framework.
    Widest,
}

impl QueueTier {
    /// Columns besides the name: borders, cursor, the cells and the spaces between.
    fn extra(self) -> u16 {
        match self {
            // The ⚠ marker shares the depth cell.
            QueueTier::Narrow => 2 + 2 + 6 + 4 + 2,
            QueueTier::Wide => 2 + 2 + 4 + 1 + 6 + 7 + 5 + 5 + 7,
            QueueTier::Widest => 2 + 2 + 7 + 11 + 1 + 6 + 7 + 5 + 5 + 8,
        }
    }

    /// The richest tier whose columns leave `name` columns for the name in `width`.
    fn fitting(width: u16, name: u16) -> QueueTier {
        [QueueTier::Widest, QueueTier::Wide]
            .into_iter()
            .find(|t| t.extra().saturating_add(name) <= width)
            .unwrap_or(QueueTier::Narrow)
    }
}

/// The fewest columns a name gets before the pane drops a tier.
const QUEUE_NAME_MIN: u16 = 14;
/// Height of the urgency panel under the queue list (borders, two lines, the sparkline).
const TREND_HEIGHT: u16 = 6;

/// As wide as the longest queue name needs with the richest columns that fit, between 30
/// columns and two fifths of the screen (the message pane needs the rest), never more than
/// half.
fn queue_pane_width(longest: u16, width: u16) -> u16 {
    let max = (width * 2 / 5).max(30);
    let tier = QueueTier::fitting(max, longest.clamp(QUEUE_NAME_MIN, 40));
    let needed = longest.saturating_add(tier.extra());
    needed.clamp(30, max).min(width / 2)
}

/// The columns the longest name of the queue list takes (with its vhost, every vhost listed).
fn longest_label(state: &State) -> u16 {
    let longest = state
        .queue_rows()
        .iter()
        .map(|r| {
            unicode_width::UnicodeWidthStr::width(
                queue_label(state, r.context(), r.vhost(), r.name()).as_str(),
            )
        })
        .max()
        .unwrap_or(0);
    u16::try_from(longest).unwrap_or(u16::MAX)
}

fn short_kind(kind: DlqKind) -> &'static str {
    match kind {
        DlqKind::DeadLetter => "dlq",
        DlqKind::Error => "err",
        DlqKind::Skipped => "skip",
        DlqKind::ParkingLot => "park",
        DlqKind::Archive => "arch",
    }
}

fn depth_text(d: Option<u64>) -> String {
    d.map_or("?".into(), |d| d.to_string())
}

/// Growth in a queue cell: `+12/m`, `+1.5/m`, `0`, blank when unknown.
fn growth_cell(g: Option<f64>, narrow: bool) -> String {
    let per = if narrow { "" } else { "/m" };
    match g {
        None => String::new(),
        Some(g) if g <= 0.0 => "0".into(),
        Some(g) if g < 10.0 => format!("+{g:.1}{per}"),
        Some(g) if g < 1_000.0 || (!narrow && g < 10_000.0) => format!("+{g:.0}{per}"),
        Some(_) => "+++".into(),
    }
}

/// An age in a queue cell, to the minute (an idle screen redraws once a minute).
fn age_cell(secs: u64, lower_bound: bool) -> String {
    match (secs < 60, lower_bound) {
        // "At least less than a minute" says nothing yet.
        (true, true) => "—".into(),
        (true, false) => "<1m".into(),
        (false, true) => format!("≥{}", crate::domain::urgency::duration_text(secs)),
        (false, false) => crate::domain::urgency::duration_text(secs),
    }
}

fn queue_pane(state: &State, frame: &mut Frame, area: Rect, longest: u16) {
    let t = &state.theme;
    let focused = state.focus == Focus::Queues && matches!(state.overlay, Overlay::None);
    let block = pane_block(state, queue_pane_title(state, area.width), focused);
    // The tier the pane's width was chosen for (see `queue_pane_width`).
    let tier = QueueTier::fitting(area.width, longest.clamp(QUEUE_NAME_MIN, 40));
    let name_w = usize::from(area.width.saturating_sub(tier.extra()));
    if !state.queues_loaded {
        let text = match &state.connection {
            ConnectionState::Disconnected(_) => "not connected",
            _ => "discovering queues…",
        };
        frame.render_widget(
            Paragraph::new(Span::styled(text, t.muted)).block(block),
            area,
        );
        return;
    }
    let rows = state.queue_rows();
    if rows.is_empty() {
        frame.render_widget(
            Paragraph::new(Span::styled(
                if state.every_context() {
                    "no dead-letter queues in any context reached"
                } else if state.every_vhost() {
                    "no dead-letter queues in any vhost (o: all queues)"
                } else {
                    "no dead-letter queues in this vhost (o: all queues)"
                },
                t.muted,
            ))
            .wrap(Wrap { trim: true })
            .block(block),
            area,
        );
        return;
    }
    let (list_area, trend_area) = if area.height >= TREND_HEIGHT + 6 {
        let [a, b] =
            Layout::vertical([Constraint::Min(3), Constraint::Length(TREND_HEIGHT)]).areas(area);
        (a, Some(b))
    } else {
        (area, None)
    };
    // Whether a read spends deliveries depends on the broker's version (free on 4.3+).
    let figures = state.row_figures();
    // Only the rows in view are built: a vhost of 10,000 queues draws a screenful.
    let (first, end) = window(state.queue_cursor, rows.len(), list_area.height);
    let table_rows: Vec<TRow> = rows[first..end]
        .iter()
        .zip(figures.get(first..end).unwrap_or(&[]))
        .map(|(r, f)| queue_row(state, r, f.copied().unwrap_or_default(), tier, name_w))
        .collect();
    let table = Table::new(table_rows, queue_widths(tier))
        .header(queue_header(state, tier))
        .block(block)
        .column_spacing(1)
        .highlight_symbol("▶ ")
        .highlight_spacing(HighlightSpacing::Always)
        .row_highlight_style(cursor_style(state, focused));
    let mut ts = TableState::default().with_selected(Some(state.queue_cursor - first));
    frame.render_stateful_widget(table, list_area, &mut ts);
    if let Some(area) = trend_area {
        trend_panel(state, frame, area);
    }
}

/// The queue pane's title: what it lists, and the order in words where it fits (the column
/// titles carry its arrow anyway).
fn queue_pane_title(state: &State, width: u16) -> String {
    let n_dlq = state.discovery.dead_letter_queues.len();
    let order = format!(
        "by {}{}",
        state.sort.label(),
        if state.sort_reverse { " ▲" } else { "" }
    );
    let base = if state.show_ordinary {
        format!(
            " Queues ({n_dlq} DLQ + {} other) ",
            state.discovery.other_queues.len()
        )
    } else {
        format!(" Dead-letter queues ({n_dlq}) ")
    };
    let with_order = format!("{base}{order} ");
    if unicode_width::UnicodeWidthStr::width(with_order.as_str()) + 2 <= usize::from(width) {
        with_order
    } else {
        base
    }
}

/// One queue's row, with the columns `tier` has room for.
fn queue_row(
    state: &State,
    r: &QueueRow,
    f: Figures,
    tier: QueueTier,
    name_w: usize,
) -> TRow<'static> {
    let t = &state.theme;
    let right = |text: String| Cell::from(Line::from(text).right_aligned());
    let name = queue_title_in(state, r.context(), r.vhost(), r.name(), name_w);
    let (style, kind, framework, marker, depth) = match r {
        QueueRow::Dlq(d) => (
            t.base,
            if tier == QueueTier::Widest {
                d.kind.label()
            } else {
                short_kind(d.kind)
            },
            d.convention.as_str().to_string(),
            d.limit_applies(state.version_of(&d.context)),
            d.depth,
        ),
        QueueRow::Other(q) => (
            t.muted,
            if tier == QueueTier::Widest {
                "queue"
            } else {
                "q"
            },
            q.queue_type.as_str().to_string(),
            false,
            q.depth,
        ),
    };
    let growth = Cell::from(
        Line::styled(
            growth_cell(f.growth_per_min, tier == QueueTier::Narrow),
            if f.growing() { t.warn } else { t.muted },
        )
        .right_aligned(),
    );
    let mut cells = vec![Cell::from(Span::styled(name, style))];
    if tier >= QueueTier::Wide {
        cells.push(Cell::from(Span::styled(kind, t.muted)));
    }
    if tier == QueueTier::Widest {
        cells.push(Cell::from(Span::styled(framework, t.muted)));
    }
    let warn = Span::styled("⚠", t.warn);
    if tier == QueueTier::Narrow {
        let mut depth_line = vec![Span::raw(depth_text(depth))];
        if marker {
            depth_line.insert(0, warn);
        }
        cells.push(Cell::from(Line::from(depth_line).right_aligned()));
    } else {
        cells.push(if marker {
            Cell::from(warn)
        } else {
            Cell::from(" ")
        });
        cells.push(right(depth_text(depth)));
    }
    cells.push(growth);
    if tier >= QueueTier::Wide {
        cells.push(right(f.oldest.map_or(String::new(), |o| {
            age_cell(o.age_secs(state.now), o.is_lower_bound())
        })));
        cells
            .push(right(f.last_arrival.map_or(String::new(), |l| {
                age_cell(state.secs_since(l), false)
            })));
    }
    TRow::new(cells)
}

/// The queue table's column widths for `tier`, in the order [`queue_row`] fills them.
fn queue_widths(tier: QueueTier) -> Vec<Constraint> {
    let mut widths = vec![Constraint::Fill(1)];
    if tier >= QueueTier::Wide {
        widths.push(Constraint::Length(if tier == QueueTier::Widest {
            7
        } else {
            4
        }));
    }
    if tier == QueueTier::Widest {
        widths.push(Constraint::Length(11));
    }
    if tier == QueueTier::Narrow {
        widths.push(Constraint::Length(6));
        widths.push(Constraint::Length(4));
    } else {
        widths.extend([
            Constraint::Length(1),
            Constraint::Length(6),
            Constraint::Length(7),
        ]);
    }
    if tier >= QueueTier::Wide {
        widths.push(Constraint::Length(5));
        widths.push(Constraint::Length(5));
    }
    widths
}

/// The queue table's column titles for `tier`; the sorted column's carries the arrow (urgency
/// sorts by growth, then depth).
fn queue_header(state: &State, tier: QueueTier) -> TRow<'static> {
    let arrow = if state.sort_reverse { "▲" } else { "▼" };
    let titled = |name: &str, by: &[crate::domain::urgency::SortBy]| {
        if by.contains(&state.sort) {
            format!("{name}{arrow}")
        } else {
            name.to_string()
        }
    };
    use crate::domain::urgency::SortBy as B;
    let queue_t = titled("Queue", &[B::Name]);
    let depth_t = titled("Depth", &[B::Depth]);
    let growth_t = titled(
        if tier == QueueTier::Narrow {
            "+/m"
        } else {
            "Growth"
        },
        &[B::Urgency, B::Growth],
    );
    let age_t = titled("Age", &[B::Age]);
    let last_t = titled("Last", &[B::LastArrival]);
    let mut titles: Vec<(&str, bool)> = vec![(queue_t.as_str(), false)];
    if tier >= QueueTier::Wide {
        titles.push(("Kind", false));
    }
    if tier == QueueTier::Widest {
        titles.push(("Framework", false));
    }
    if tier != QueueTier::Narrow {
        titles.push(("", false));
    }
    titles.push((depth_t.as_str(), true));
    titles.push((growth_t.as_str(), true));
    if tier >= QueueTier::Wide {
        titles.push((age_t.as_str(), true));
        titles.push((last_t.as_str(), true));
    }
    column_titles(state, &titles)
}

/// The queue under the cursor over time: its figures in words and a depth sparkline (the
/// session's samples, continued from the store's last hour).
fn trend_panel(state: &State, frame: &mut Frame, area: Rect) {
    let t = &state.theme;
    let name = state.queue_at_cursor();
    let block = Block::default()
        .borders(Borders::ALL)
        .border_style(t.muted)
        .title(Span::styled(" Depth, last hour ", t.muted));
    let inner = block.inner(area);
    frame.render_widget(block, area);
    let Some(name) = name else { return };
    let Some(f) = state.figures_of(&name) else {
        frame.render_widget(
            Paragraph::new(Span::styled("not a dead-letter queue", t.muted)),
            inner,
        );
        return;
    };
    let [text_area, spark_area] =
        Layout::vertical([Constraint::Length(2), Constraint::Min(1)]).areas(inner);
    let growth = crate::domain::urgency::growth_text(f.growth_per_min);
    let oldest = f.oldest.map_or("—".to_string(), |o| {
        age_cell(o.age_secs(state.now), o.is_lower_bound())
    });
    let last = f
        .last_arrival
        .map_or("—".to_string(), |l| age_cell(state.secs_since(l), false));
    // Whether anything still consumes where these failed.
    let consumers = match f.origin_consumers {
        None => Span::styled("feeder ?", t.muted),
        Some(0) => Span::styled("no consumer", t.danger),
        Some(1) => Span::styled("1 consumer", t.ok),
        Some(n) => Span::styled(format!("{n} consumers"), t.ok),
    };
    let lines = vec![
        Line::from(vec![
            Span::styled(
                format!("growth {growth}"),
                if f.growing() { t.warn } else { t.base },
            ),
            Span::styled(format!("  last {last}"), t.muted),
        ]),
        Line::from(vec![
            Span::styled(format!("oldest {oldest}  "), t.base),
            consumers,
        ]),
    ];
    frame.render_widget(Paragraph::new(lines), text_area);
    let depths = state
        .histories
        .get(&name)
        .map(|h| h.depths())
        .unwrap_or_default();
    // The newest points that fit, one column each.
    let w = usize::from(spark_area.width);
    let shown = &depths[depths.len().saturating_sub(w)..];
    frame.render_widget(
        ratatui::widgets::Sparkline::default()
            .data(shown.iter().copied())
            .style(t.accent),
        spark_area,
    );
}

/// The cursor row: reversed when the pane has focus (visible without colour), bold otherwise.
fn cursor_style(state: &State, focused: bool) -> Style {
    if focused {
        state.theme.selected
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

/// The message pane's title; the queues that feed the DLQ only when they fit in `width`
/// (they are in the detail's timeline too), so that "reading…" is never the part cut off.
fn message_title(state: &State, width: u16) -> String {
    let Some(b) = &state.browse else {
        return match &state.loading {
            Some(q) => format!(" {} — reading… ", queue_title(state, &q.vhost, &q.name, 40)),
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
        let reading = if state.loading.is_some() { 12 } else { 0 };
        let room = usize::from(width.saturating_sub(4));
        let cols = |s: &str| unicode_width::UnicodeWidthStr::width(s);
        if cols(&title) + cols(&from) + reading <= room {
            title.push_str(&from);
        }
    }
    if state.loading.is_some() {
        title.push_str(" — reading…");
    }
    title.push(' ');
    title
}

/// The bottom line of the message pane: selection count (always), filter, how much is shown.
fn message_status(state: &State) -> Line<'static> {
    let t = &state.theme;
    let mut spans = vec![Span::styled(
        format!(" [{} selected]", state.selected_messages()),
        t.marked,
    )];
    if let Some(b) = &state.browse {
        if !state.filter_text.trim().is_empty() {
            spans.push(Span::styled(
                format!(" filter: {}", sanitize::one_line(&state.filter_text, 40)),
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

fn message_pane(state: &State, frame: &mut Frame, area: Rect) {
    let t = &state.theme;
    let focused = state.focus == Focus::Messages && matches!(state.overlay, Overlay::None);
    let block = pane_block(state, message_title(state, area.width), focused)
        .title_bottom(message_status(state));
    let Some(b) = &state.browse else {
        let hint = if state.loading.is_some() {
            "reading messages (they stay in the queue)…"
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
            "no message matches the filter"
        };
        frame.render_widget(
            Paragraph::new(Span::styled(hint, t.muted)).block(block),
            area,
        );
        return;
    }
    let wide = area.width >= 70;
    // Build only the rows that fit: with 100,000 messages browsed, building every row on every
    // key press cost ~0.5 s a frame. The window keeps the cursor on screen the way ratatui's
    // table does from a fresh state (cursor at the bottom when scrolling down).
    let (start, end) = window(state.msg_cursor, b.visible.len(), area.height);
    let shown: Vec<&super::state::Row> = b
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
    let table = Table::new(rows, widths)
        .header(header)
        .block(block)
        .column_spacing(1)
        .highlight_symbol("▶ ")
        .highlight_spacing(HighlightSpacing::Always)
        .row_highlight_style(cursor_style(state, focused));
    let mut ts = TableState::default().with_selected(Some(state.msg_cursor - start));
    frame.render_stateful_widget(table, area, &mut ts);
}

/// One message's row: its mark, place, id (cut to fit), reason, attempts and ages.
fn message_row(
    state: &State,
    r: &super::state::Row,
    id: Option<String>,
    wide: bool,
) -> TRow<'static> {
    let t = &state.theme;
    let picked = state.selected.contains(&r.key);
    let mark = if picked {
        Span::styled("●", t.marked)
    } else {
        Span::raw(" ")
    };
    // How long it has been in the DLQ, by the one rule: exact, or said as a bound.
    let age = r.arrival().age(state.now).map_or("—".into(), |a| {
        format!("{}{}", a.prefix(), format::age(a.secs))
    });
    let position = (r.brief.position + 1).to_string();
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

/// The message list's id column title (its narrowest width).
const MESSAGE_ID_TITLE: &str = "Message id";

/// A table's header row: column titles in words, right-aligned over numbers.
fn column_titles(state: &State, titles: &[(&str, bool)]) -> TRow<'static> {
    TRow::new(titles.iter().map(|&(title, right)| {
        let line = Line::styled(title.to_string(), state.theme.muted);
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

fn group_pane(state: &State, frame: &mut Frame, area: Rect) {
    let t = &state.theme;
    let focused = state.focus == Focus::Messages && matches!(state.overlay, Overlay::None);
    // The grouping is in the title: "Groups by exception type — orders.dlq (3 groups)".
    let what = match state.group_by {
        GroupBy::Fingerprint => "Failure groups".to_string(),
        by => format!("Groups by {}", by.label()),
    };
    let title = match &state.browse {
        Some(b) => format!(
            " {what} — {} ({} groups) ",
            queue_title(state, &b.vhost, &b.queue, 40),
            b.groups.len()
        ),
        None => format!(" {what} "),
    };
    let block = pane_block(state, title, focused).title_bottom(message_status(state));
    let Some(b) = state.browse.as_ref().filter(|b| !b.groups.is_empty()) else {
        frame.render_widget(
            Paragraph::new(Span::styled("no messages to group", t.muted)).block(block),
            area,
        );
        return;
    };
    let wide = area.width >= 70;
    let column = match state.group_by {
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
            if let Some(n) = state.note_for(g) {
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
    let table = Table::new(rows, widths)
        .header(header)
        .block(block)
        .column_spacing(1)
        .highlight_symbol("▶ ")
        .highlight_spacing(HighlightSpacing::Always)
        .row_highlight_style(cursor_style(state, focused));
    let mut ts = TableState::default().with_selected(Some(state.group_cursor));
    frame.render_stateful_widget(table, area, &mut ts);
}

fn detail_pane(state: &State, frame: &mut Frame, area: Rect) {
    let t = &state.theme;
    let focused = state.focus == Focus::Detail && matches!(state.overlay, Overlay::None);
    let Some(row) = state.current_row() else {
        frame.render_widget(pane_block(state, " Timeline ".into(), focused), area);
        return;
    };
    // The whole id when it fits the border (a GUID does at 80 columns), else cut in the middle.
    let room = usize::from(area.width.saturating_sub(16));
    let name = row.shown_id().map_or_else(
        || format!("#{}", row.brief.position + 1),
        |id| sanitize::middle_cut(id, room),
    );
    let title = match state.list_mode {
        ListMode::Groups => format!(" Example — {name} "),
        ListMode::Messages => format!(" Timeline — {name} "),
    };
    let mut block = pane_block(state, title, focused);
    // In the group list, the group's note in full above its example (the row may cut it).
    let note: Vec<Line<'_>> = state
        .current_group()
        .filter(|_| state.list_mode == ListMode::Groups)
        .and_then(|g| state.note_for(g))
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
    let scroll = usize::from(state.detail_scroll).min(total.saturating_sub(1));
    if total > usize::from(area.height.saturating_sub(2)) {
        block = block.title_bottom(
            Line::styled(format!(" line {}/{} ", scroll + 1, total), t.muted).right_aligned(),
        );
    }
    // Each line takes at least one row, so none past `scroll + height` can be in view.
    let shown = (scroll + usize::from(area.height)).min(total);
    let text: Vec<Line<'_>> = note
        .into_iter()
        .chain(lines.iter().map(borrowed))
        .take(shown)
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

/// Rows the banner takes at most until `w` asks for its whole text.
const BANNER_LINES: u16 = 3;
/// The most of an error or notice shown (characters).
const BANNER_CHARS: usize = 2000;

/// The error (else, while a filter is typed, why it does not parse yet; else the notice) as a
/// wrapped paragraph, or none.
fn banner_paragraph(state: &State) -> Option<Paragraph<'static>> {
    let t = &state.theme;
    let typing = state
        .filter_error
        .as_ref()
        .filter(|_| state.filter_input.is_some());
    let (text, style) = match (&state.error, typing, &state.notice) {
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
        let hint = if state.banner_whole {
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
        frame.render_widget(Paragraph::new(Span::styled(hint, state.theme.accent)), at);
    }
}

fn input_line(state: &State, frame: &mut Frame, area: Rect) {
    let t = &state.theme;
    // Why a filter does not parse yet is in the banner, wrapped, not squeezed in here.
    let [prompt, field] =
        Layout::horizontal([Constraint::Length(2), Constraint::Min(10)]).areas(area);
    if let Some(fi) = &state.filter_input {
        frame.render_widget(Paragraph::new(Span::styled(" /", t.accent)), prompt);
        frame.render_widget(&fi.input, field);
    } else if let Some(input) = &state.command_input {
        frame.render_widget(Paragraph::new(Span::styled(" :", t.accent)), prompt);
        frame.render_widget(input, field);
    } else if let Some(ni) = &state.note_input {
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
            Focus::Messages if state.list_mode == ListMode::Groups => Scope::Groups,
            Focus::Messages => Scope::Messages,
            Focus::Detail => Scope::Detail,
        },
    }
}

fn footer_line(state: &State, frame: &mut Frame, area: Rect) {
    let t = &state.theme;
    let mut spans: Vec<Span> = Vec::new();
    let mut used = 0usize;
    let width = usize::from(area.width);
    let hints: Vec<(String, String, bool)> = if state.filter_input.is_some() {
        vec![
            ("Enter".into(), "keep filter".into(), false),
            ("Esc".into(), "undo".into(), false),
        ]
    } else if state.command_input.is_some() {
        vec![
            ("Enter".into(), "run".into(), false),
            ("Esc".into(), "cancel".into(), false),
        ]
    } else if state.note_input.is_some() {
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
        && state.command_input.is_none()
        && state.filter_input.is_none()
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

/// A dry run moves nothing, so it has no progress to show: its answer is what the replay would
/// do, in the words `warren replay --dry-run` uses, wrapped rather than cut.
fn dry_run(state: &State, run: &ReplayRun, frame: &mut Frame, area: Rect) {
    let t = &state.theme;
    let width = area.width.saturating_sub(4).min(100);
    let inner_w = usize::from(width.saturating_sub(2)).max(1);
    let queue = queue_title(state, &run.vhost, &run.queue, 40);
    let (title, lines): (String, Vec<Line>) = match &run.outcome {
        None => (
            format!(" Dry run from {queue} "),
            vec![Line::styled(" working out what would move…", t.muted)],
        ),
        Some(o) => match &o.error {
            Some(e) => (
                format!(" Dry run from {queue} — failed "),
                vec![Line::styled(
                    format!(" {}", sanitize::one_line(e, 600)),
                    t.danger,
                )],
            ),
            None if o.cancelled => (
                format!(" Dry run from {queue} — stopped "),
                vec![Line::styled(" stopped: nothing was published", t.warn)],
            ),
            None => (
                format!(" Dry run from {queue} — nothing was published "),
                o.summary
                    .iter()
                    .map(|l| {
                        let style = if l.trim_start().starts_with(['!', '✗']) {
                            t.warn
                        } else {
                            t.base
                        };
                        // The CLI's indentation is ours; the rest is sanitised again.
                        let text = l.trim_start_matches(' ');
                        let indent = " ".repeat((l.len() - text.len()).min(8));
                        Line::styled(format!("{indent}{}", sanitize::one_line(text, 600)), style)
                    })
                    .collect(),
            ),
        },
    };
    let keys_text = if run.outcome.is_some() {
        " Enter/Esc  close"
    } else {
        " Esc  stop"
    };
    // Rows the wrapped lines take, plus a blank, the keys and the border.
    let rows: usize = lines
        .iter()
        .map(|l| l.width().div_ceil(inner_w).max(1))
        .sum();
    let height = u16::try_from(rows + 4).unwrap_or(u16::MAX);
    let rect = centered(area, width, height);
    frame.render_widget(Clear, rect);
    let block = Block::default()
        .borders(Borders::ALL)
        .border_type(BorderType::Double)
        .border_style(t.accent)
        .title(Span::styled(title, t.accent));
    let mut lines = lines;
    lines.push(Line::raw(""));
    lines.push(Line::styled(keys_text, t.accent));
    frame.render_widget(
        Paragraph::new(lines)
            .wrap(Wrap { trim: false })
            .block(block),
        rect,
    );
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
    let t = &state.theme;
    let rect = help::rect(area);
    frame.render_widget(Clear, rect);
    let mut block = Block::default()
        .borders(Borders::ALL)
        .border_style(t.accent)
        .title(Span::styled(" Keys (Esc to close) ", t.accent));
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
    let (left, right) = help::columns(inner.width);
    let two = !right.is_empty();
    let (mut left, mut right) = (column(left), column(right));
    // The configured commands go last, as `help::tallest` counts them.
    if let Some(custom) = custom_help(state) {
        if two {
            right.extend(custom)
        } else {
            left.extend(custom)
        }
    }
    let tallest = left.len().max(right.len());
    let height = usize::from(inner.height);
    // `update` keeps the scroll within the last page; a resize since can leave it past.
    let scroll = usize::from(state.help_scroll).min(tallest.saturating_sub(height));
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
    let t = &state.theme;
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

fn replay_modal(state: &State, modal: &ReplayModal, frame: &mut Frame, area: Rect) {
    let t = &state.theme;
    let width = area.width.saturating_sub(4).min(90);
    let field = |s: &str| Span::styled(format!(" {s:<9} "), t.muted);
    // Lists wrap (the modal grows to fit them), within a bound that keeps Enter and Esc on an
    // 80×24 screen; `replay --dry-run` prints them whole.
    let list = |items: &[String]| -> String {
        let v: Vec<String> = items.iter().map(|s| sanitize::one_line(s, 120)).collect();
        sanitize::one_line(&v.join(", "), MODAL_LIST_CHARS)
    };
    let mut lines: Vec<Line> = Vec::new();
    let title = match &modal.preview {
        Some(p) => format!(
            " Replay {} message{} from {} ",
            p.count,
            if p.count == 1 { "" } else { "s" },
            queue_title(state, &modal.vhost, &modal.queue, 40)
        ),
        None => format!(
            " Replay {} from {} ",
            sanitize::one_line(&modal.what, 40),
            queue_title(state, &modal.vhost, &modal.queue, 40)
        ),
    };
    lines.push(Line::from(vec![
        field("What"),
        Span::raw(sanitize::one_line(&modal.what, MODAL_LIST_CHARS)),
    ]));
    match &modal.preview {
        None => lines.push(Line::styled(
            " working out where each message goes…",
            t.muted,
        )),
        Some(p) => {
            lines.push(Line::from(vec![field("To"), Span::raw(list(&p.targets))]));
            let fan_out = p.reaches.len() > 1;
            let reaches = if p.reaches.is_empty() {
                Span::styled("no queue (unroutable: messages stay in the DLQ)", t.danger)
            } else if fan_out {
                Span::styled(
                    format!("{} queues: {}", p.reaches.len(), list(&p.reaches)),
                    t.danger,
                )
            } else {
                Span::raw(format!("{} only", list(&p.reaches)))
            };
            lines.push(Line::from(vec![field("Reaches"), reaches]));
            lines.push(Line::from(vec![
                field("Removes"),
                Span::raw(list(&p.removes)),
            ]));
            lines.push(Line::from(vec![field("Adds"), Span::raw(list(&p.adds))]));
        }
    }
    lines.push(Line::from(vec![
        field("Body"),
        Span::raw(format!("{:<14}", "untouched")),
        Span::styled("Attempts ", t.muted),
        Span::raw(if modal.keep_attempts {
            "kept "
        } else {
            "reset"
        }),
        Span::styled(
            format!(
                "  [{}]",
                keys::label(Scope::Modal, keys::Action::ToggleKeep).unwrap_or("?")
            ),
            t.accent,
        ),
    ]));
    let rate_style = if modal.field == ModalField::Rate {
        t.selected
    } else {
        t.base
    };
    lines.push(Line::from(vec![
        field("Rate"),
        Span::styled(
            format!(
                "[{:>5}]",
                if modal.field == ModalField::Rate {
                    modal.rate_text.clone()
                } else {
                    modal.rate.to_string()
                }
            ),
            rate_style,
        ),
        Span::raw(" msg/s   "),
        Span::styled("Dry run  ", t.muted),
        Span::styled(
            if modal.dry_run { "ON " } else { "off" },
            if modal.dry_run { t.accent } else { t.base },
        ),
        Span::styled(
            format!(
                "  [{}]",
                keys::label(Scope::Modal, keys::Action::ToggleDryRun).unwrap_or("?")
            ),
            t.accent,
        ),
        Span::styled("  +/- Tab", t.muted),
    ]));
    if let Some(p) = &modal.preview {
        if p.replayed_before > 0 {
            lines.push(Line::styled(
                format!(
                    " ! {} of them were replayed before and failed again",
                    p.replayed_before
                ),
                t.warn,
            ));
        }
        for w in &p.warnings {
            lines.push(Line::from(vec![
                Span::styled(" ! ", t.warn),
                Span::styled(sanitize::one_line(w, MODAL_LIST_CHARS), t.warn),
            ]));
        }
        if modal.needs_typed_count() {
            let style = if modal.field == ModalField::Count {
                t.selected
            } else {
                t.base
            };
            lines.push(Line::from(vec![
                Span::styled(format!(" Type {} to confirm: ", p.count), t.danger),
                Span::styled(format!("[{:<8}]", modal.typed), style),
            ]));
        }
    }
    // The same words as the footer's (`ReplayModal::enter_does`).
    let enter = format!("Enter  {}", modal.enter_does());
    let accept = match modal.blocked() {
        _ if modal.field == ModalField::Rate => Span::styled(enter, t.accent),
        None if modal.dry_run => Span::styled(enter, t.accent),
        None => Span::styled(enter, t.danger),
        Some(why) => Span::styled(format!("{enter} ({why})"), t.muted),
    };
    draw_modal(state, title, lines, accept, width, frame, area);
}

/// The archive or discard modal: what goes, how many, where to (or that a snapshot is written
/// first, and where), the reason, and the typed count a large discard needs.
fn archive_modal(state: &State, modal: &ArchiveModal, frame: &mut Frame, area: Rect) {
    let t = &state.theme;
    let width = area.width.saturating_sub(4).min(90);
    let field = |s: &str| Span::styled(format!(" {s:<9} "), t.muted);
    let plural = if modal.count == 1 { "" } else { "s" };
    let title = match modal.kind {
        ArchiveKind::Archive => format!(
            " Archive {} message{plural} from {} ",
            modal.count,
            queue_title(state, &modal.vhost, &modal.queue, 40)
        ),
        ArchiveKind::Discard => format!(
            " Discard {} message{plural} from {} for good ",
            modal.count,
            queue_title(state, &modal.vhost, &modal.queue, 40)
        ),
    };
    let mut lines: Vec<Line> = vec![Line::from(vec![
        field("What"),
        Span::raw(sanitize::one_line(&modal.what, MODAL_LIST_CHARS)),
    ])];
    match modal.kind {
        ArchiveKind::Archive => {
            lines.push(Line::from(vec![
                field("To"),
                Span::raw(
                    "the vhost's archive stream (warren.archive unless the context names another), or the local archive file where there is no stream",
                ),
            ]));
            lines.push(Line::from(vec![
                field("Adds"),
                Span::raw(crate::domain::archive::HEADERS.join(", ")),
            ]));
            lines.push(Line::from(vec![
                field("Keeps"),
                Span::raw("body, properties and every other header (x-death included)"),
            ]));
            lines.push(Line::from(vec![
                field("Reason"),
                Span::styled(
                    format!("[{}▏]", sanitize::one_line(&modal.reason_text(), 70)),
                    t.selected,
                ),
            ]));
            lines.push(Line::from(vec![
                field("Safe"),
                Span::styled(
                    "each leaves the queue only once the archive holds it; restore puts it back",
                    t.muted,
                ),
            ]));
        }
        ArchiveKind::Discard => {
            lines.push(Line::from(vec![
                field("To"),
                Span::styled("nowhere: deleted for good", t.danger),
            ]));
            lines.push(Line::from(vec![
                field("Snapshot"),
                Span::raw(
                    "written first to discarded/<queue>-<time>.jsonl beside Warren's store (`warren open` reads it); only what it holds is deleted",
                ),
            ]));
            if modal.needs_typed_count() {
                lines.push(Line::from(vec![
                    Span::styled(format!(" Type {} to confirm: ", modal.count), t.danger),
                    Span::styled(format!("[{:<8}]", modal.typed), t.selected),
                ]));
            }
        }
    }
    let enter = format!("Enter  {}", modal.verb());
    let accept = match modal.blocked() {
        None => Span::styled(enter, t.danger),
        Some(why) => Span::styled(format!("{enter} ({why})"), t.muted),
    };
    draw_modal(state, title, lines, accept, width, frame, area);
}

/// A confirmation modal: `lines` (wrapped with hanging indents, see [`hanging`]) and below
/// them `accept` (what Enter does) beside "Esc cancel", in a double border titled `title`,
/// centred, as tall as they need.
fn draw_modal<'a>(
    state: &'a State,
    title: String,
    mut lines: Vec<Line<'a>>,
    accept: Span<'a>,
    width: u16,
    frame: &mut Frame,
    area: Rect,
) {
    let t = &state.theme;
    lines.push(Line::raw(""));
    lines.push(Line::from(vec![
        Span::raw("   "),
        accept,
        Span::raw("      "),
        Span::styled("Esc  cancel", t.accent),
    ]));
    let rows = hanging(lines, width.saturating_sub(2));
    let height = rows
        .iter()
        .fold(0u16, |h, r| h.saturating_add(r.height))
        .saturating_add(2);
    let rect = centered(area, width, height);
    frame.render_widget(Clear, rect);
    let block = Block::default()
        .borders(Borders::ALL)
        .border_type(BorderType::Double)
        .border_style(t.danger)
        .title(Span::styled(title, t.danger));
    let inner = block.inner(rect);
    frame.render_widget(block, rect);
    draw_hanging(frame, inner, rows);
}

/// The restore modal (`r` in the archive): how many, where they go, what was restored before
/// and is left out, the two toggles, and the typed count a large restore needs.
fn restore_modal(state: &State, modal: &RestoreModal, frame: &mut Frame, area: Rect) {
    let t = &state.theme;
    let width = area.width.saturating_sub(4).min(90);
    let field = |s: &str| Span::styled(format!(" {s:<9} "), t.muted);
    let key = |a: keys::Action| {
        Span::styled(
            format!("  [{}]", keys::label(Scope::Restore, a).unwrap_or("?")),
            t.accent,
        )
    };
    let list = |items: &[String]| -> String {
        let v: Vec<String> = items.iter().map(|s| sanitize::one_line(s, 120)).collect();
        sanitize::one_line(&v.join(", "), MODAL_LIST_CHARS)
    };
    let title = match modal.count() {
        Some(n) => format!(
            " Restore {n} message{} from {} ",
            if n == 1 { "" } else { "s" },
            sanitize::middle_cut(&modal.queue, 40)
        ),
        None => format!(
            " Restore {} from {} ",
            sanitize::one_line(&modal.what, 40),
            sanitize::middle_cut(&modal.queue, 40)
        ),
    };
    let mut lines: Vec<Line> = vec![Line::from(vec![
        field("What"),
        Span::raw(sanitize::one_line(&modal.what, MODAL_LIST_CHARS)),
    ])];
    lines.push(Line::from(vec![
        field("Way"),
        Span::raw(if modal.how.replay {
            "replayed to where each failed (the replay's plan, retry budget reset)"
        } else {
            "back into the dead-letter queue each came from, as it was"
        }),
        key(keys::Action::ToggleOrigin),
    ]));
    match &modal.preview {
        None => lines.push(Line::styled(
            " reading the archive and working out where each message goes…",
            t.muted,
        )),
        Some(p) => {
            let to = if p.targets.is_empty() {
                Span::styled("nowhere", t.danger)
            } else {
                Span::raw(list(&p.targets))
            };
            lines.push(Line::from(vec![field("To"), to]));
            lines.push(Line::from(vec![
                field("Removes"),
                Span::raw(list(&p.removes)),
            ]));
            if !p.adds.is_empty() {
                lines.push(Line::from(vec![field("Adds"), Span::raw(list(&p.adds))]));
            }
        }
    }
    let before = match &modal.preview {
        Some(p) if modal.how.again => {
            format!("{} restored before, restored again", p.restored_before)
        }
        Some(p) => format!("{} restored before, left out", p.restored_before),
        None if modal.how.again => "restored again".to_string(),
        None => "left out".to_string(),
    };
    lines.push(Line::from(vec![
        field("Before"),
        Span::raw(before),
        key(keys::Action::ToggleAgain),
    ]));
    lines.push(Line::from(vec![
        field("Safe"),
        Span::styled(
            "each is published with a confirm; the archive keeps its copy and Warren remembers it was restored",
            t.muted,
        ),
    ]));
    if let Some(p) = &modal.preview {
        for w in p.refusals.iter().chain(&p.warnings) {
            lines.push(Line::from(vec![
                Span::styled(" ! ", t.warn),
                Span::styled(sanitize::one_line(w, MODAL_LIST_CHARS), t.warn),
            ]));
        }
        if modal.needs_typed_count() {
            lines.push(Line::from(vec![
                Span::styled(format!(" Type {} to confirm: ", p.count), t.danger),
                Span::styled(format!("[{:<8}]", modal.typed), t.selected),
            ]));
        }
    }
    let accept = match modal.blocked() {
        None => Span::styled("Enter  restore", t.danger),
        Some(why) => Span::styled(
            format!("Enter  restore ({})", sanitize::one_line(&why, 200)),
            t.muted,
        ),
    };
    draw_modal(state, title, lines, accept, width, frame, area);
}

/// A line wrapped with a hanging indent: what follows its first span (a field's label, a
/// warning's `!`) wraps under itself, not under the label.
struct Hanging<'a> {
    label: Option<Line<'a>>,
    indent: u16,
    text: Paragraph<'a>,
    height: u16,
}

fn hanging(lines: Vec<Line<'_>>, width: u16) -> Vec<Hanging<'_>> {
    lines
        .into_iter()
        .map(|mut line| {
            let indent = match line.spans.first() {
                Some(first) if line.spans.len() > 1 => {
                    u16::try_from(first.width()).unwrap_or(u16::MAX)
                }
                _ => 0,
            };
            let (label, indent) = if indent > 0 && indent < width {
                let first = line.spans.remove(0);
                (Some(Line::from(first)), indent)
            } else {
                (None, 0)
            };
            let text = Paragraph::new(line).wrap(Wrap { trim: false });
            let height = u16::try_from(text.line_count(width - indent).max(1)).unwrap_or(u16::MAX);
            Hanging {
                label,
                indent,
                text,
                height,
            }
        })
        .collect()
}

fn draw_hanging(frame: &mut Frame, area: Rect, rows: Vec<Hanging<'_>>) {
    let mut y = area.y;
    let bottom = area.y.saturating_add(area.height);
    for row in rows {
        if y >= bottom {
            break;
        }
        let height = row.height.min(bottom - y);
        if let Some(label) = row.label {
            frame.render_widget(
                label,
                Rect {
                    x: area.x,
                    y,
                    width: row.indent,
                    height: 1,
                },
            );
        }
        frame.render_widget(
            row.text,
            Rect {
                x: area.x + row.indent,
                y,
                width: area.width.saturating_sub(row.indent),
                height,
            },
        );
        y += height;
    }
}

/// The most of a list or a warning the replay modal shows (characters; about four lines at 80
/// columns).
const MODAL_LIST_CHARS: usize = 300;

fn progress(state: &State, run: &ReplayRun, frame: &mut Frame, area: Rect) {
    if run.dry_run {
        return dry_run(state, run, frame, area);
    }
    let t = &state.theme;
    let p = &run.progress;
    let width = area.width.saturating_sub(4).min(90);
    let note = match &run.outcome {
        Some(o) => match &o.error {
            Some(e) => Span::styled(
                format!(" {}", sanitize::one_line(e, BANNER_CHARS)),
                t.danger,
            ),
            None if o.cancelled => Span::styled(
                " stopped: what moved stays moved, the rest is still in the queue",
                t.warn,
            ),
            None => Span::styled(" finished", t.ok),
        },
        None if run.cancelling => Span::styled(
            " stopping: settling what is in flight (Esc again stops at once)",
            t.warn,
        ),
        None if p.blocked.is_some() => Span::styled(
            format!(
                " broker blocked publishing ({}): waiting; Esc to stop",
                sanitize::one_line(p.blocked.as_deref().unwrap_or(""), 60)
            ),
            t.danger,
        ),
        None if matches!(run.job, JobKind::Restore(_)) => Span::styled(
            " each is published with a confirm and remembered as restored; Esc stops after the batch in flight",
            t.muted,
        ),
        None if run.job == JobKind::Discard => Span::styled(
            " only what the snapshot holds is deleted; Esc stops after what is in flight",
            t.muted,
        ),
        None => Span::styled(
            " messages leave the queue only after the broker confirms the publish",
            t.muted,
        ),
    };
    // A failure's cause wraps (up to six lines) rather than being cut at the border.
    let note = Paragraph::new(note).wrap(Wrap { trim: false });
    let note_height = u16::try_from(note.line_count(width.saturating_sub(2)))
        .unwrap_or(u16::MAX)
        .clamp(1, 6);
    let rect = centered(area, width, 8 + note_height);
    frame.render_widget(Clear, rect);
    let verb = match (&run.job, run.dry_run) {
        (_, true) => "Dry run",
        (JobKind::Replay, false) => "Replaying",
        (JobKind::Archive { .. }, false) => "Archiving",
        (JobKind::Discard, false) => "Discarding",
        (JobKind::Restore(_), false) => "Restoring",
    };
    let title = match (&run.outcome, run.cancelling) {
        (Some(o), _) if o.cancelled => format!(
            " {verb} from {} — stopped ",
            queue_title(state, &run.vhost, &run.queue, 40)
        ),
        (Some(o), _) if o.error.is_some() => format!(
            " {verb} from {} — failed ",
            queue_title(state, &run.vhost, &run.queue, 40)
        ),
        (Some(_), _) => format!(
            " {verb} from {} — done ",
            queue_title(state, &run.vhost, &run.queue, 40)
        ),
        (None, true) => format!(
            " {verb} from {} — stopping… ",
            queue_title(state, &run.vhost, &run.queue, 40)
        ),
        (None, false) => format!(
            " {verb} from {} ",
            queue_title(state, &run.vhost, &run.queue, 40)
        ),
    };
    let block = Block::default()
        .borders(Borders::ALL)
        .border_type(BorderType::Double)
        .border_style(t.danger)
        .title(Span::styled(title, t.danger));
    let inner = block.inner(rect);
    frame.render_widget(block, rect);
    let [gauge_area, counts, rate, msg, _, keys_area] = Layout::vertical([
        Constraint::Length(1),
        Constraint::Length(1),
        Constraint::Length(1),
        Constraint::Length(note_height),
        Constraint::Length(1),
        Constraint::Length(1),
    ])
    .areas(inner);
    let ratio = if p.total == 0 {
        0.0
    } else {
        (p.done() as f64 / p.total as f64).clamp(0.0, 1.0)
    };
    frame.render_widget(
        Gauge::default()
            .gauge_style(t.accent)
            .ratio(ratio)
            .label(format!("{}/{}", p.done(), p.total)),
        gauge_area,
    );
    let moved_word = if run.dry_run { "would move" } else { "moved" };
    frame.render_widget(
        Paragraph::new(Line::from(vec![
            Span::styled(format!(" {moved_word} {}", p.moved), t.ok),
            Span::raw(format!("   returned {}", p.returned)),
            Span::styled(
                format!("   failed {}", p.failed),
                if p.failed > 0 { t.danger } else { t.base },
            ),
            Span::raw(format!("   remaining {}", p.remaining())),
        ])),
        counts,
    );
    let eta = p.eta_secs().map_or("—".into(), format::duration);
    frame.render_widget(
        Paragraph::new(Span::styled(
            format!(" {:.0} msg/s (limit {})   ETA {eta}", p.rate, run.rate),
            t.muted,
        )),
        rate,
    );
    frame.render_widget(note, msg);
    let keys_text = if run.outcome.is_some() {
        " Enter/Esc  close"
    } else {
        " Esc  stop safely"
    };
    frame.render_widget(Paragraph::new(Span::styled(keys_text, t.accent)), keys_area);
}
