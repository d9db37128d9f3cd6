//! The queue pane: the list of dead-letter queues (columns by the width it has) and the
//! urgency panel of the queue under the cursor.

use ratatui::Frame;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders, Cell, Paragraph, Row as TRow, TableState, Wrap};

use super::{column_titles, list_table, pane_block, queue_label, queue_title_in, window};
use crate::domain::discovery::DlqKind;
use crate::domain::discovery::stuck::Stuck;
use crate::domain::urgency::Figures;
use crate::tui::event::ConnectionState;
use crate::tui::state::{Focus, Overlay, QueueRow, State};

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
pub(super) fn queue_pane_width(longest: u16, width: u16) -> u16 {
    let max = (width * 2 / 5).max(30);
    let tier = QueueTier::fitting(max, longest.clamp(QUEUE_NAME_MIN, 40));
    let needed = longest.saturating_add(tier.extra());
    needed.clamp(30, max).min(width / 2)
}

/// The columns the longest name of the queue list takes (with its vhost, every vhost listed).
pub(super) fn longest_label(state: &State) -> u16 {
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

/// Growth in a queue cell: `+12/m`, `+1.5/m`, `0`, `—` when unknown (no depths over time yet,
/// or a snapshot: one moment), as the age says it.
fn growth_cell(g: Option<f64>, narrow: bool) -> String {
    let per = if narrow { "" } else { "/m" };
    match g {
        None => "—".into(),
        Some(g) if g <= 0.0 => "0".into(),
        Some(g) if g < 10.0 => format!("+{g:.1}{per}"),
        Some(g) if g < 1_000.0 || (!narrow && g < 10_000.0) => format!("+{g:.0}{per}"),
        Some(_) => "+++".into(),
    }
}

/// An exact age in a queue cell ("Last"), in the notation of "dead since" (`Age::text`).
fn age_cell(secs: u64) -> String {
    crate::domain::arrival::Age::exact(secs).text()
}

pub(super) fn queue_pane(state: &State, frame: &mut Frame, area: Rect, longest: u16) {
    let t = &state.settings.theme;
    let focused = state.focus == Focus::Queues && matches!(state.overlay, Overlay::None);
    let block = pane_block(state, queue_pane_title(state, area.width), focused);
    // The tier the pane's width was chosen for (see `queue_pane_width`).
    let tier = QueueTier::fitting(area.width, longest.clamp(QUEUE_NAME_MIN, 40));
    let name_w = usize::from(area.width.saturating_sub(tier.extra()));
    if !state.queues.loaded {
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
    let (first, end) = window(state.queues.cursor, rows.len(), list_area.height);
    let table_rows: Vec<TRow> = rows[first..end]
        .iter()
        .zip(figures.get(first..end).unwrap_or(&[]))
        .map(|(r, f)| queue_row(state, r, f.copied().unwrap_or_default(), tier, name_w))
        .collect();
    let table = list_table(
        state,
        table_rows,
        queue_widths(tier),
        queue_header(state, tier),
        block,
        focused,
    );
    let mut ts = TableState::default().with_selected(Some(state.queues.cursor - first));
    frame.render_stateful_widget(table, list_area, &mut ts);
    if let Some(area) = trend_area {
        trend_panel(state, frame, area);
    }
}

/// The queue pane's title: what it lists, and the order in words where it fits (the column
/// titles carry its arrow anyway).
fn queue_pane_title(state: &State, width: u16) -> String {
    let n_dlq = state.queues.discovery.dead_letter_queues.len();
    // Queues holding stuck dead letters, listed after the DLQs.
    let stuck = match state.queues.discovery.stuck.len() {
        0 => String::new(),
        n => format!(" + {n} stuck"),
    };
    let order = format!(
        "by {}{} ",
        state.queues.sort.label(),
        if state.queues.sort_reverse {
            " ▲"
        } else {
            ""
        }
    );
    // A filtered list says how many it shows, and by what.
    let shown = if state.queues.filter.is_empty() {
        String::new()
    } else {
        format!(
            ": {} shown, /{}",
            state.queue_rows().len(),
            crate::domain::sanitize::one_line(&state.queues.filter, 24)
        )
    };
    let base = if state.queues.show_ordinary {
        format!(
            " Queues ({n_dlq} DLQ{stuck} + {} other){shown} ",
            state.queues.ordinary_count()
        )
    } else {
        format!(" Dead-letter queues ({n_dlq}){stuck}{shown} ")
    };
    // The richest that fits the border: with the order, without it, then short.
    let short = if state.queues.filter.is_empty() {
        format!(" DLQs ({n_dlq}){stuck} ")
    } else {
        format!(
            " {}/{n_dlq} /{} ",
            state.queue_rows().len(),
            crate::domain::sanitize::one_line(&state.queues.filter, 24)
        )
    };
    let fits = |t: &str| unicode_width::UnicodeWidthStr::width(t) + 2 <= usize::from(width);
    [format!("{base}{order}"), base]
        .into_iter()
        .find(|t| fits(t))
        .unwrap_or(short)
}

/// One queue's row, with the columns `tier` has room for.
fn queue_row(
    state: &State,
    r: &QueueRow,
    f: Figures,
    tier: QueueTier,
    name_w: usize,
) -> TRow<'static> {
    let t = &state.settings.theme;
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
        QueueRow::Stuck(st) => return stuck_row(state, st, r, tier, name_w),
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
        cells.push(right(
            f.oldest.map_or(String::new(), |o| o.age(state.now).text()),
        ));
        cells.push(right(
            f.last_arrival
                .map_or(String::new(), |l| age_cell(state.secs_since(l))),
        ));
    }
    TRow::new(cells)
}

/// A queue holding stuck dead letters: kind `stuck` (after its name where the pane has no kind
/// column wide enough), how many it holds in the depth column, `held` where growth goes, and no
/// figures (they are not in a DLQ). The cells of [`queue_widths`].
fn stuck_row(
    state: &State,
    s: &Stuck,
    r: &QueueRow,
    tier: QueueTier,
    name_w: usize,
) -> TRow<'static> {
    let t = &state.settings.theme;
    let right = |text: String, style| Cell::from(Line::styled(text, style).right_aligned());
    let name = if tier == QueueTier::Widest {
        Line::styled(
            queue_title_in(state, r.context(), r.vhost(), r.name(), name_w),
            t.warn,
        )
    } else {
        let name = queue_title_in(
            state,
            r.context(),
            r.vhost(),
            r.name(),
            name_w.saturating_sub(STUCK_WORD.len() + 1),
        );
        Line::from(vec![
            Span::styled(name, t.warn),
            Span::styled(format!(" {STUCK_WORD}"), t.danger),
        ])
    };
    let mut cells = vec![Cell::from(name)];
    if tier == QueueTier::Wide {
        cells.push(Cell::from(" "));
    }
    if tier == QueueTier::Widest {
        cells.push(Cell::from(Span::styled(STUCK_WORD, t.danger)));
        cells.push(Cell::from(Span::styled("quorum", t.muted)));
    }
    if tier != QueueTier::Narrow {
        cells.push(Cell::from(" "));
    }
    cells.push(right(s.count.to_string(), t.danger));
    cells.push(right("held".into(), t.muted));
    if tier >= QueueTier::Wide {
        cells.push(Cell::from(" "));
        cells.push(Cell::from(" "));
    }
    TRow::new(cells)
}

/// The kind of a queue holding stuck dead letters, as `warren queues` says it.
const STUCK_WORD: &str = "stuck";

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
    let arrow = if state.queues.sort_reverse {
        "▲"
    } else {
        "▼"
    };
    let titled = |name: &str, by: &[crate::domain::urgency::SortBy]| {
        if by.contains(&state.queues.sort) {
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
    let t = &state.settings.theme;
    let name = state.queue_at_cursor();
    let block = Block::default()
        .borders(Borders::ALL)
        .border_style(t.muted)
        .title(Span::styled(" Depth, last hour ", t.muted));
    if let Some(s) = state.stuck_at_cursor() {
        return super::stuck::panel(state, s, frame, area);
    }
    let inner = block.inner(area);
    frame.render_widget(block, area);
    let Some(name) = name else { return };
    let Some(f) = state.queues.figures_of(&name) else {
        frame.render_widget(
            Paragraph::new(Span::styled("not a dead-letter queue", t.muted)),
            inner,
        );
        return;
    };
    let [text_area, spark_area] =
        Layout::vertical([Constraint::Length(2), Constraint::Min(1)]).areas(inner);
    let growth = crate::domain::urgency::growth_text(f.growth_per_min);
    let oldest = f
        .oldest
        .map_or("—".to_string(), |o| o.age(state.now).text());
    let last = f
        .last_arrival
        .map_or("—".to_string(), |l| age_cell(state.secs_since(l)));
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
        .queues
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
