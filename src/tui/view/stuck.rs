//! The panel under the queue list for a queue holding stuck dead letters: how many, why they do
//! not move, in words (Enter says what to do). Drawing only.

use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders, Paragraph, Wrap};

use crate::domain::discovery::stuck::Stuck;
use crate::domain::sanitize;
use crate::tui::state::State;

/// In the place of the depth panel: the count, then why, wrapped; what a short pane cuts,
/// Enter's banner says whole.
pub(super) fn panel(state: &State, s: &Stuck, frame: &mut Frame, area: Rect) {
    let t = &state.settings.theme;
    let block = Block::default()
        .borders(Borders::ALL)
        .border_style(t.muted)
        .title(Span::styled(" Stuck dead letters ", t.warn));
    let lines = vec![
        Line::styled(format!("{} stuck here, in no DLQ", s.count), t.danger),
        Line::styled(sanitize::one_line(&s.explain(), 400), t.base),
        Line::from(vec![
            Span::styled("Enter", t.accent),
            Span::styled(" what to do", t.muted),
        ]),
    ];
    frame.render_widget(
        Paragraph::new(lines).wrap(Wrap { trim: true }).block(block),
        area,
    );
}
