//! The Replays view (`R`): every recorded replay, this machine's and the rota's (the broker's
//! audit stream), newest first, with what it moved, how many of those came back to a
//! dead-letter queue so far, and the most common new failure among them. The worker loads it
//! (`Command::LoadReplays`); this only draws what `State::replay_runs` holds.

use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::text::{Line, Span};

use super::format;
use super::state::State;
use crate::domain::sanitize;

/// The overlay's lines, from the `skip`th run: two lines per run (who, where, how it ended;
/// then what came back), then what could not be reached.
pub fn lines(state: &State, skip: usize) -> Vec<Line<'static>> {
    let t = &state.settings.theme;
    let Some((runs, unreached)) = &state.replay_runs else {
        return vec![Line::styled(
            "Reading the audit (this machine's and the broker's)…",
            t.muted,
        )];
    };
    let mut out: Vec<Line<'static>> = Vec::new();
    if runs.is_empty() {
        out.push(Line::styled("No replay recorded.", t.muted));
    }
    for r in runs.iter().skip(skip) {
        let seen = match (r.local, r.broker, r.unvouched) {
            (false, _, true) => "broker, UNVOUCHED: not signed by the user it names",
            (true, true, _) => "local+broker",
            (true, false, _) => "local",
            _ => "broker",
        };
        out.push(Line::from(vec![
            Span::styled(
                format!("{:>8} ", format::time(r.started_at, state.now)),
                t.muted,
            ),
            Span::styled(
                format!(
                    "{}@{} ",
                    sanitize::one_line(&r.os_user, 30),
                    sanitize::one_line(&r.broker_user, 30)
                ),
                t.accent,
            ),
            Span::raw(format!(
                "{:<7} {} {}  moved {}  {}",
                r.operation.as_str(),
                sanitize::one_line(&r.vhost, 30),
                sanitize::one_line(&r.from_queue, 60),
                r.moved.map_or("-".into(), |n| n.to_string()),
                sanitize::one_line(&r.outcome.to_string(), 60),
            )),
            Span::styled(
                format!("  [{seen}]"),
                if r.unvouched { t.warn } else { t.muted },
            ),
        ]));
        let back = match &r.came_back {
            None => Span::styled("    came back: not looked at (another vhost)", t.muted),
            Some(b) if b.came_back == 0 => Span::styled("    came back 0", t.ok),
            Some(b) => Span::styled(
                format!(
                    "    came back {}{}",
                    b.came_back,
                    b.top_failure.as_ref().map_or(String::new(), |f| format!(
                        ", most: {} ×{}",
                        sanitize::one_line(f, 120),
                        b.top_failure_count
                    ))
                ),
                t.warn,
            ),
        };
        let mut spans = vec![back];
        if let Some(id) = &r.run_id {
            spans.push(Span::styled(
                format!("  run {}", sanitize::one_line(id, 64)),
                t.muted,
            ));
        }
        out.push(Line::from(spans));
        if let Some(c) = &r.canary {
            let style = if c.decision.went_ahead() {
                t.ok
            } else {
                t.warn
            };
            out.push(Line::styled(
                format!("    {}", sanitize::one_line(&c.words(), 300)),
                style,
            ));
        }
    }
    for why in unreached {
        out.push(Line::styled(sanitize::one_line(why, 400), t.warn));
    }
    out
}

/// The overlay, scrolled `scroll` runs down from the newest.
pub fn draw(state: &State, scroll: u16, frame: &mut Frame, area: Rect) {
    let n = state.replay_runs.as_ref().map_or(0, |(r, _)| r.len());
    super::oplog::draw_list(
        state,
        frame,
        area,
        format!(" Replays: {n} run(s), newest first "),
        " came back: replayed messages dead again, counted by their warren-replay-id ",
        |_| lines(state, usize::from(scroll)),
    );
}
