//! The session's command log (`@`, as lazygit's): every broker operation the worker performed
//! this session, with what it cost (a read and the deliveries it spent, a replay's publishes and
//! acks, a policy set, a listing, a connect), newest first. The worker reports each one as it
//! happens (`Report::Operation`); the UI keeps the last [`CAP`].

use std::collections::VecDeque;

use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders, Clear, Paragraph};

use super::event::Operation;
use super::format;
use super::state::State;
use crate::domain::sanitize;

/// Entries kept; older ones are dropped (and counted).
pub const CAP: usize = 500;

/// Longest entry shown, in characters.
const TEXT_CAP: usize = 600;

#[derive(Clone, Debug, Default)]
pub struct OpLog {
    entries: VecDeque<Operation>,
    /// How many older entries were dropped to stay within [`CAP`].
    dropped: u64,
}

impl OpLog {
    pub fn push(&mut self, op: Operation) {
        if self.entries.len() >= CAP {
            self.entries.pop_front();
            self.dropped += 1;
        }
        self.entries.push_back(op);
    }

    pub fn newest_first(&self) -> impl Iterator<Item = &Operation> {
        self.entries.iter().rev()
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    pub fn dropped(&self) -> u64 {
        self.dropped
    }
}

/// Columns before an entry's text: the time and the kind.
const GUTTER: usize = 17;

/// The overlay's lines for a text area `width` columns wide, newest first from the `skip`th
/// entry: time, kind, and what was done and what it cost, wrapped under itself so the times stay
/// a column of their own.
pub fn lines(state: &State, width: usize, skip: usize) -> Vec<Line<'static>> {
    let t = &state.settings.theme;
    let log = &state.oplog;
    if log.is_empty() {
        return vec![Line::styled(
            "No broker operation yet this session.",
            t.muted,
        )];
    }
    let text_width = width.saturating_sub(GUTTER).max(20);
    let mut out: Vec<Line<'static>> = Vec::new();
    for op in log.newest_first().skip(skip) {
        let text = sanitize::one_line(&op.text, TEXT_CAP);
        for (i, part) in wrap(&text, text_width).into_iter().enumerate() {
            let gutter = if i == 0 {
                vec![
                    Span::styled(format!("{:>8} ", format::time(op.at, state.now)), t.muted),
                    Span::styled(format!("{:<8}", op.kind.label()), t.accent),
                ]
            } else {
                vec![Span::raw(" ".repeat(GUTTER))]
            };
            let mut spans = gutter;
            spans.push(Span::raw(part));
            out.push(Line::from(spans));
        }
    }
    if log.dropped() > 0 {
        out.push(Line::styled(
            format!(
                "… and {} older operation(s), not kept (the last {CAP} are)",
                log.dropped()
            ),
            t.muted,
        ));
    }
    out
}

/// Cuts sanitised `text` into lines of at most `width` columns, at spaces where it can.
fn wrap(text: &str, width: usize) -> Vec<String> {
    let mut lines = vec![String::new()];
    let mut used = 0;
    for word in text.split(' ') {
        let w: usize = word.chars().map(format::char_width).sum();
        if used > 0 && used + 1 + w > width {
            lines.push(String::new());
            used = 0;
        }
        let line = lines.last_mut().expect("never empty");
        if used > 0 {
            line.push(' ');
            used += 1;
        }
        // A word longer than a line is cut where the line ends.
        for c in word.chars() {
            let cw = format::char_width(c);
            if used + cw > width && used > 0 {
                lines.push(String::new());
                used = 0;
            }
            lines.last_mut().expect("never empty").push(c);
            used += cw;
        }
    }
    lines
}

/// The overlay, scrolled `scroll` entries down from the newest.
pub fn draw(state: &State, scroll: u16, frame: &mut Frame, area: Rect) {
    let title = format!(
        " Command log: {} broker operation(s), newest first ",
        state.oplog.len() as u64 + state.oplog.dropped()
    );
    draw_list(
        state,
        frame,
        area,
        title,
        " this session; depth refreshes are not listed ",
        |width| lines(state, width, usize::from(scroll)),
    );
}

/// A full-width list overlay between the status bar and the footer (which stay in view), with
/// a title and a bottom line; `lines` gets the width inside the border. The command log and
/// the Replays view are drawn with it.
pub fn draw_list(
    state: &State,
    frame: &mut Frame,
    area: Rect,
    title: String,
    bottom: &str,
    lines: impl FnOnce(usize) -> Vec<Line<'static>>,
) {
    let t = &state.settings.theme;
    let area = Rect {
        y: area.y + 1,
        height: area.height.saturating_sub(2),
        ..area
    };
    frame.render_widget(Clear, area);
    let block = Block::default()
        .borders(Borders::ALL)
        .border_style(t.accent)
        .title(Span::styled(title, t.accent))
        .title_bottom(Span::styled(bottom.to_string(), t.muted));
    frame.render_widget(
        Paragraph::new(lines(usize::from(area.width.saturating_sub(2)))).block(block),
        area,
    );
}
