//! The full-screen pager for long things (a body, a stack trace), as `less` reads them: by line
//! and page, `g`/`G`, `/` to search (smart case: a query with a capital letter matches case),
//! `n`/`N` from match to match, `q`/Esc back. The pager is an overlay in the one UI state; its
//! keys are handled here for `update`, and `draw` only draws.
//!
//! Its text is sanitised once, when it opens, and bounded ([`PAGER_CHARS`]). Long lines wrap at
//! the screen's width: the wrapped rows are computed for that width by `update` (on open and on
//! resize) so that scrolling and "jump to match" count the rows the screen shows.

use std::borrow::Cow;

use ratatui::Frame;
use ratatui::crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::Style;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Clear, Paragraph};
use unicode_width::UnicodeWidthChar;

use super::detail;
use super::keys::{self, Action, Scope};
use super::state::{Opened, Overlay, State};
use crate::domain::sanitize;
use crate::worker::protocol::Command;

/// Most characters of text the pager holds (a decoded body is capped at 4 MiB already).
pub const PAGER_CHARS: usize = 4 * 1024 * 1024;
/// Most matches counted; past it the count says "100000+".
pub const MAX_MATCHES: usize = 100_000;
/// Longest query typed.
const MAX_QUERY: usize = 200;
/// Rows of the screen that are not text: the title, the status line and the footer.
const CHROME_ROWS: u16 = 3;

/// One screen row of wrapped text: `lines[line][start..end]`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RowSpan {
    pub line: usize,
    pub start: usize,
    pub end: usize,
}

/// One match of the query: `lines[line][start..end]`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Match {
    pub line: usize,
    pub start: usize,
    pub end: usize,
}

#[derive(Clone, Debug)]
pub struct Pager {
    /// What is shown, in words (sanitised): "Body (1.2 KiB, JSON) of m-7 in orders.dlq".
    pub title: String,
    /// The text, sanitised, one entry per line.
    pub lines: Vec<String>,
    /// The first row shown.
    pub top: usize,
    /// The width and the number of text rows `rows` was laid out for.
    pub width: u16,
    pub height: u16,
    rows: Vec<RowSpan>,
    /// The query being typed after `/`, until Enter or Esc.
    pub input: Option<String>,
    /// The query searched for last (`n`/`N` go on with it).
    pub query: String,
    pub matches: Vec<Match>,
    /// Which of `matches` is the current one.
    pub current: Option<usize>,
    /// Said in the status line until the next key ("no match for …").
    pub message: Option<String>,
}

impl Pager {
    /// A pager on `text` (sanitised here), laid out for a screen of `screen` (width, height).
    pub fn new(title: String, text: &str, screen: (u16, u16)) -> Pager {
        let safe = sanitize::multi_line(text, PAGER_CHARS);
        let mut p = Pager {
            title,
            lines: safe.lines().map(str::to_string).collect(),
            top: 0,
            width: 0,
            height: 0,
            rows: Vec::new(),
            input: None,
            query: String::new(),
            matches: Vec::new(),
            current: None,
            message: None,
        };
        p.layout(screen);
        p
    }

    /// Wraps the lines for a screen of `screen` (width, height), keeping the first line shown.
    pub fn layout(&mut self, screen: (u16, u16)) {
        let (width, height) = (screen.0.max(1), screen.1.saturating_sub(CHROME_ROWS).max(1));
        if (width, height) == (self.width, self.height) {
            return;
        }
        let top_line = self.rows.get(self.top).map(|r| (r.line, r.start));
        self.width = width;
        self.height = height;
        self.rows = wrap(&self.lines, width);
        self.top = top_line.map_or(0, |at| self.row_of(at.0, at.1));
        self.top = self.top.min(self.max_top());
    }

    /// The rows for `width`: the ones laid out when it is the same, else computed now (a frame
    /// drawn at another size than the state knows, as in tests).
    pub fn rows_for(&self, width: u16) -> Cow<'_, [RowSpan]> {
        if width == self.width {
            Cow::Borrowed(&self.rows)
        } else {
            Cow::Owned(wrap(&self.lines, width.max(1)))
        }
    }

    pub fn row_count(&self) -> usize {
        self.rows.len()
    }

    fn max_top(&self) -> usize {
        self.rows.len().saturating_sub(usize::from(self.height))
    }

    fn scroll(&mut self, delta: isize) {
        self.top = self.top.saturating_add_signed(delta).min(self.max_top());
    }

    /// The row showing byte `at` of line `line`.
    fn row_of(&self, line: usize, at: usize) -> usize {
        // Rows are in (line, start) order: the last one starting at or before the position.
        self.rows
            .partition_point(|r| (r.line, r.start) <= (line, at))
            .saturating_sub(1)
    }

    /// Finds every match of `query` (smart case), makes the first one at or below the top of
    /// the screen current, and scrolls to it.
    pub fn search(&mut self, query: &str) {
        self.query = query.to_string();
        self.matches = find_all(&self.lines, query);
        self.current = None;
        if query.is_empty() {
            return;
        }
        if self.matches.is_empty() {
            self.message = Some(format!("no match for “{}”", sanitize::one_line(query, 60)));
            return;
        }
        let top = self.top;
        let first = self
            .matches
            .iter()
            .position(|m| self.row_of(m.line, m.start) >= top)
            .unwrap_or(0);
        self.go_to(first);
    }

    /// The next (`forward`) or previous match, wrapping around the ends.
    pub fn step(&mut self, forward: bool) {
        let n = self.matches.len();
        if n == 0 {
            self.message = Some(if self.query.is_empty() {
                "type / and a word to search".into()
            } else {
                format!("no match for “{}”", sanitize::one_line(&self.query, 60))
            });
            return;
        }
        let next = match (self.current, forward) {
            (None, _) => 0,
            (Some(i), true) => (i + 1) % n,
            (Some(i), false) => (i + n - 1) % n,
        };
        if forward && self.current.is_some() && next == 0 {
            self.message = Some("search went past the end: back at the first match".into());
        } else if !forward && self.current.is_some() && next == n - 1 {
            self.message = Some("search went past the start: at the last match".into());
        }
        self.go_to(next);
    }

    /// Makes match `i` current and scrolls so that it shows, a few rows below the top.
    fn go_to(&mut self, i: usize) {
        let Some(m) = self.matches.get(i).copied() else {
            return;
        };
        self.current = Some(i);
        let row = self.row_of(m.line, m.start);
        let visible = self.top..self.top + usize::from(self.height);
        if !visible.contains(&row) {
            self.top = row
                .saturating_sub(usize::from(self.height) / 4)
                .min(self.max_top());
        }
    }

    /// "match 3 of 7", when there is a search.
    pub fn match_text(&self) -> Option<String> {
        if self.query.is_empty() {
            return None;
        }
        let total = if self.matches.len() >= MAX_MATCHES {
            format!("{MAX_MATCHES}+")
        } else {
            self.matches.len().to_string()
        };
        Some(match self.current {
            Some(i) => format!("match {} of {total}", i + 1),
            None => format!("{total} matches"),
        })
    }
}

/// Every match of `query` in `lines`, at most [`MAX_MATCHES`]: case-insensitive (ASCII) unless
/// the query holds a capital letter, like `less -i` and vim's smartcase.
fn find_all(lines: &[String], query: &str) -> Vec<Match> {
    if query.is_empty() {
        return Vec::new();
    }
    let exact = query.chars().any(char::is_uppercase);
    // ASCII lowering keeps every byte offset where it was.
    let needle = if exact {
        query.to_string()
    } else {
        query.to_ascii_lowercase()
    };
    let finder = memchr::memmem::Finder::new(needle.as_bytes());
    let mut out = Vec::new();
    for (i, line) in lines.iter().enumerate() {
        let hay: Cow<'_, str> = if exact {
            Cow::Borrowed(line)
        } else {
            Cow::Owned(line.to_ascii_lowercase())
        };
        for start in finder.find_iter(hay.as_bytes()) {
            out.push(Match {
                line: i,
                start,
                end: start + needle.len(),
            });
            if out.len() >= MAX_MATCHES {
                return out;
            }
        }
    }
    out
}

/// Wraps each line at `width` columns (wide characters count two; an empty line is one row).
pub fn wrap(lines: &[String], width: u16) -> Vec<RowSpan> {
    let width = usize::from(width.max(1));
    let mut rows = Vec::with_capacity(lines.len());
    for (i, line) in lines.iter().enumerate() {
        let mut start = 0;
        let mut used = 0;
        for (at, c) in line.char_indices() {
            let w = c.width().unwrap_or(0);
            if used + w > width && at > start {
                rows.push(RowSpan {
                    line: i,
                    start,
                    end: at,
                });
                start = at;
                used = 0;
            }
            used += w;
        }
        rows.push(RowSpan {
            line: i,
            start,
            end: line.len(),
        });
    }
    rows
}

/// `v`: the pager on the body of the message under the cursor.
pub fn open_body(state: &mut State) {
    let Some(row) = state.current_opened() else {
        state.banner.notice = Some("no message under the cursor: open a queue and pick one".into());
        return;
    };
    let view = detail::body_view(&row.msg, PAGER_CHARS);
    let title = format!("Body ({}) of {}", view.label, name(&row));
    let mut text = String::new();
    for note in view.note.iter().chain(view.unread_note().iter()) {
        text.push_str(note);
        text.push('\n');
    }
    if row.msg.body.is_empty() && row.msg.body_size == 0 {
        text.push_str("(empty)");
    }
    text.push_str(&view.text);
    state.overlay = Overlay::Pager(Box::new(Pager::new(title, &text, state.screen)));
}

/// `T`: the pager on the stack trace of the message under the cursor.
pub fn open_trace(state: &mut State) {
    let Some(row) = state.current_opened() else {
        state.banner.notice = Some("no message under the cursor: open a queue and pick one".into());
        return;
    };
    let Some(fault) = row.exp.fault.as_ref().filter(|f| f.stack_trace.is_some()) else {
        state.banner.notice = Some(
            "this message carries no stack trace (only a framework's error record has one)".into(),
        );
        return;
    };
    let title = match &fault.exception_type {
        Some(ty) => format!(
            "Stack trace ({}) of {}",
            sanitize::one_line(ty, 120),
            name(&row)
        ),
        None => format!("Stack trace of {}", name(&row)),
    };
    let text = fault.stack_trace.clone().unwrap_or_default();
    state.overlay = Overlay::Pager(Box::new(Pager::new(title, &text, state.screen)));
}

/// How a message is named in a title: its message id, else its position.
fn name(row: &Opened) -> String {
    let id = row.msg.properties.message_id.as_deref().map_or_else(
        || format!("#{}", row.msg.position + 1),
        |id| sanitize::one_line(id, 60),
    );
    format!("{id} in {}", sanitize::one_line(&row.msg.queue, 60))
}

/// A notice or an error arrived (a save's report): it supersedes the pager's own passing
/// message, which would otherwise hide it in the status line.
pub fn news(state: &mut State) {
    if let Overlay::Pager(p) = &mut state.overlay {
        p.message = None;
    }
}

/// A key while the pager is open.
pub fn on_key(state: &mut State, key: KeyEvent) -> Vec<Command> {
    let Overlay::Pager(p) = &mut state.overlay else {
        return Vec::new();
    };
    p.message = None;
    if let Some(input) = &mut p.input {
        match key.code {
            KeyCode::Enter => {
                let query = std::mem::take(input);
                p.input = None;
                p.search(&query);
            }
            KeyCode::Esc => p.input = None,
            KeyCode::Backspace => {
                input.pop();
            }
            KeyCode::Char(c)
                if !key.modifiers.contains(KeyModifiers::CONTROL)
                    && input.chars().count() < MAX_QUERY =>
            {
                input.push(c);
            }
            _ => {}
        }
        return Vec::new();
    }
    let page = isize::try_from(p.height).unwrap_or(isize::MAX).max(1);
    match keys::lookup(Scope::Pager, &key) {
        Some(Action::Up) => p.scroll(-1),
        Some(Action::Down) => p.scroll(1),
        Some(Action::PageUp) => p.scroll(-page),
        Some(Action::PageDown) => p.scroll(page),
        Some(Action::Top) => p.top = 0,
        Some(Action::Bottom) => p.top = p.max_top(),
        Some(Action::Search) => p.input = Some(String::new()),
        Some(Action::NextMatch) => p.step(true),
        Some(Action::PrevMatch) => p.step(false),
        Some(Action::Back) => state.overlay = Overlay::None,
        _ => {}
    }
    Vec::new()
}

/// Draws the pager over the whole screen but the footer line.
pub fn draw(state: &State, p: &Pager, frame: &mut Frame, area: Rect) {
    let t = &state.settings.theme;
    let [title_area, text_area, status_area] = Layout::vertical([
        Constraint::Length(1),
        Constraint::Min(1),
        Constraint::Length(1),
    ])
    .areas(area);
    frame.render_widget(Clear, area);
    frame.render_widget(
        Paragraph::new(Span::styled(
            super::format::fit(&format!(" {} ", p.title), usize::from(area.width)),
            t.badge,
        )),
        title_area,
    );

    let rows = p.rows_for(text_area.width);
    let height = usize::from(text_area.height);
    let top = p.top.min(rows.len().saturating_sub(height));
    let current = p.current.and_then(|i| p.matches.get(i));
    let lines: Vec<Line<'_>> = rows
        .iter()
        .skip(top)
        .take(height)
        .map(|r| {
            let text = p.lines.get(r.line).map_or("", String::as_str);
            // Matches are in (line, start) order and do not overlap: those ending past the
            // row's start, while they start before its end.
            let from = p
                .matches
                .partition_point(|m| (m.line, m.end) <= (r.line, r.start));
            let on_row: Vec<&Match> = p.matches[from..]
                .iter()
                .take_while(|m| m.line == r.line && m.start < r.end)
                .collect();
            highlight(text, r, &on_row, current, t.selected, t.marked)
        })
        .collect();
    frame.render_widget(Paragraph::new(lines), text_area);

    let status = match &p.input {
        Some(q) => Line::from(vec![
            Span::styled("/", t.accent),
            Span::raw(q.clone()),
            Span::styled("▏", t.accent),
            Span::styled("   Enter search · Esc cancel", t.muted),
        ]),
        None => {
            // Lines of the text (not screen rows): what a colleague finds in the same body.
            let line_at = |row: usize| rows.get(row).map_or(0, |r| r.line + 1);
            let last = line_at((top + height).min(rows.len()).saturating_sub(1));
            let mut parts = vec![if rows.len() <= height {
                format!(" all {} lines", p.lines.len())
            } else {
                format!(" lines {}–{last} of {}", line_at(top), p.lines.len())
            }];
            parts.extend(p.match_text());
            let mut spans = vec![Span::styled(parts.join(" · "), t.muted)];
            // The pager covers the banner: what the operator must read shows here.
            let said = match (&p.message, &state.banner.error, &state.banner.notice) {
                (Some(m), _, _) => Some((m.as_str(), t.warn)),
                (None, Some(e), _) => Some((e.as_str(), t.danger)),
                (None, None, Some(n)) => Some((n.as_str(), t.warn)),
                (None, None, None) => None,
            };
            if let Some((m, style)) = said {
                spans.push(Span::styled(
                    format!("  {}", sanitize::one_line(m, 300)),
                    style,
                ));
            }
            Line::from(spans)
        }
    };
    frame.render_widget(Paragraph::new(status), status_area);
}

/// One row of text with the matches on it styled (the current one apart).
fn highlight<'a>(
    text: &'a str,
    r: &RowSpan,
    on_row: &[&Match],
    current: Option<&Match>,
    current_style: Style,
    other_style: Style,
) -> Line<'a> {
    let mut spans = Vec::new();
    let mut at = r.start;
    for m in on_row {
        let (s, e) = (m.start.max(r.start), m.end.min(r.end));
        if s > at {
            spans.push(Span::raw(text.get(at..s).unwrap_or("")));
        }
        let style = if Some(*m) == current {
            current_style
        } else {
            other_style
        };
        spans.push(Span::styled(text.get(s..e).unwrap_or(""), style));
        at = e;
    }
    if at < r.end {
        spans.push(Span::raw(text.get(at..r.end).unwrap_or("")));
    }
    Line::from(spans)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pager(text: &str, w: u16, h: u16) -> Pager {
        Pager::new("t".into(), text, (w, h))
    }

    #[test]
    fn long_lines_wrap_at_the_width_and_wide_characters_count_two() {
        let lines = vec![
            "abcdefghij".to_string(),
            String::new(),
            "日本語".to_string(),
        ];
        let rows = wrap(&lines, 4);
        let text: Vec<&str> = rows
            .iter()
            .map(|r| &lines[r.line][r.start..r.end])
            .collect();
        assert_eq!(text, vec!["abcd", "efgh", "ij", "", "日本", "語"]);
    }

    #[test]
    fn search_is_smart_case_and_counts_every_match() {
        let mut p = pager("Order failed\norder again\nno ORDER here", 80, 24);
        p.search("order");
        assert_eq!(p.matches.len(), 3);
        assert_eq!(p.match_text().as_deref(), Some("match 1 of 3"));
        p.search("Order");
        assert_eq!(
            p.matches,
            vec![Match {
                line: 0,
                start: 0,
                end: 5
            }]
        );
        p.search("nothing");
        assert!(p.matches.is_empty());
        assert!(p.message.as_deref().unwrap().contains("no match"));
    }

    #[test]
    fn a_match_on_a_wrapped_row_is_scrolled_into_view() {
        let long = format!("{}needle", "x".repeat(400));
        let text = format!("{}{long}", "line\n".repeat(100));
        let mut p = pager(&text, 80, 24);
        p.search("needle");
        let m = p.matches[0];
        let row = p.row_of(m.line, m.start);
        assert_eq!(
            row, 105,
            "100 short lines, then the sixth row of the long one"
        );
        assert!((p.top..p.top + usize::from(p.height)).contains(&row));
    }

    #[test]
    fn resize_keeps_the_first_line_shown() {
        let text = (0..200)
            .map(|i| format!("line {i} {}", "y".repeat(100)))
            .collect::<Vec<_>>()
            .join("\n");
        let mut p = pager(&text, 80, 24);
        p.scroll(50);
        let line = p.rows[p.top].line;
        p.layout((200, 50));
        assert_eq!(p.rows[p.top].line, line);
        assert_eq!(p.rows[p.top].start, 0);
    }

    #[test]
    fn a_match_across_a_row_break_is_highlighted_on_both_rows() {
        let mut p = pager("abcdefgh", 4, 24);
        p.search("cdef");
        let (cur, other) = (Style::new().bold(), Style::new().italic());
        let rows = p.rows_for(4);
        let current = p.matches.first();
        let styled: Vec<Vec<(String, Style)>> = rows
            .iter()
            .map(|r| {
                let on_row: Vec<&Match> = p.matches.iter().collect();
                highlight(&p.lines[0], r, &on_row, current, cur, other)
                    .spans
                    .into_iter()
                    .map(|s| (s.content.to_string(), s.style))
                    .collect()
            })
            .collect();
        assert_eq!(
            styled,
            vec![
                vec![("ab".into(), Style::default()), ("cd".into(), cur)],
                vec![("ef".into(), cur), ("gh".into(), Style::default())],
            ]
        );
    }

    #[test]
    fn matches_are_bounded() {
        let text = "a".repeat(MAX_MATCHES + 10);
        let mut p = pager(&text, 80, 24);
        p.search("a");
        assert_eq!(p.matches.len(), MAX_MATCHES);
        assert_eq!(
            p.match_text().as_deref(),
            Some(format!("match 1 of {MAX_MATCHES}+").as_str())
        );
    }
}
