//! Warren's editor (`E`): the document, and below it what it reads as now.

use ratatui::Frame;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, BorderType, Borders, Clear, Paragraph, Wrap};

use super::queue_title;
use crate::domain::sanitize;
use crate::tui::edit::{Check, EditModal};
use crate::tui::state::State;

pub(super) fn editor(state: &State, modal: &EditModal, frame: &mut Frame, area: Rect) {
    let t = &state.settings.theme;
    let rect = Rect {
        height: area.height.saturating_sub(1),
        ..area
    };
    frame.render_widget(Clear, rect);
    let [text, status] = Layout::vertical([Constraint::Min(3), Constraint::Length(3)]).areas(rect);
    let title = format!(
        " Edit {} from {} — Ctrl-S replay it · Ctrl-E $EDITOR · Esc close ",
        sanitize::one_line(&modal.key, 40),
        queue_title(state, &modal.vhost, &modal.queue, 40)
    );
    let block = Block::default()
        .borders(Borders::ALL)
        .border_type(BorderType::Thick)
        .border_style(t.accent)
        .title(Span::styled(title, t.accent));
    let inner = block.inner(text);
    frame.render_widget(block, text);
    frame.render_widget(&modal.area, inner);
    let line = match &modal.check {
        Check::Unchanged => Line::styled(" unchanged: Ctrl-S replays nothing yet", t.muted),
        Check::Problem(p) => Line::styled(format!(" ✗ {}", sanitize::one_line(p, 300)), t.danger),
        Check::Changes(c) => Line::styled(
            format!(" ✓ reads — {}", sanitize::one_line(&c.join("; "), 300)),
            t.accent,
        ),
    };
    frame.render_widget(
        Paragraph::new(line)
            .wrap(Wrap { trim: false })
            .block(Block::default().borders(Borders::TOP).border_style(t.muted)),
        status,
    );
}
