//! The filter lines (the messages', the queue list's) and the group note input.

use super::*;

pub(super) fn open_filter(state: &mut State) {
    let mut input = TextArea::new(vec![state.filtering.text.clone()]);
    input.move_cursor(ratatui_textarea::CursorMove::End);
    let before = state
        .filtering
        .filter
        .clone()
        .map(|f| (state.filtering.text.clone(), f));
    state.inputs.filter = Some(FilterInput { input, before });
}

/// Keys in the filter line: the list narrows as the query parses; Enter keeps (once it parses),
/// Esc restores.
pub(super) fn on_filter_key(state: &mut State, key: KeyEvent) {
    let Some(fi) = &mut state.inputs.filter else {
        return;
    };
    match key.code {
        // A query that does not parse (a mistyped key) is not kept as if it did: the line
        // stays open with why on the banner, until it is fixed or Esc restores the last one.
        KeyCode::Enter if state.filtering.error.is_some() => state.dirty = true,
        KeyCode::Enter => {
            state.inputs.filter = None;
            state.filtering.error = None;
            if state.filtering.pending {
                state.refresh_view();
            }
        }
        KeyCode::Esc => {
            let before = fi.before.take();
            state.inputs.filter = None;
            state.filtering.error = None;
            match before {
                Some((text, f)) => {
                    state.filtering.text = text;
                    state.filtering.filter = Some(f);
                }
                None => {
                    state.filtering.text.clear();
                    state.filtering.filter = None;
                }
            }
            state.refresh_view();
        }
        // Ctrl-U clears the line, as in a shell (tui-textarea's default would undo).
        KeyCode::Char('u') if key.modifiers.contains(KeyModifiers::CONTROL) => {
            fi.input = TextArea::default();
            apply_filter_text(state, String::new());
        }
        _ => {
            // One line only: Enter is handled above, so the text area never gets a newline.
            fi.input.input(key);
            let text = fi.input.lines().join(" ");
            apply_filter_text(state, text);
        }
    }
}

/// `n` on a group: the note input, holding the group's note when it has one (the worker
/// refuses a note on a snapshot, which has no broker to keep it for).
pub(super) fn open_note(state: &mut State) {
    let Some(g) = state.msgs.current_group() else {
        state.banner.notice = Some("no group here to write a note on".into());
        return;
    };
    let Some((vhost, queue)) = state
        .msgs
        .browse
        .as_ref()
        .map(|b| (b.vhost.clone(), b.queue.clone()))
    else {
        return;
    };
    let text = state
        .msgs
        .note_for(g)
        .map(|n| n.text.clone())
        .unwrap_or_default();
    let (key, summary) = (g.key.clone(), g.summary.clone());
    let mut input = TextArea::new(vec![text]);
    input.move_cursor(ratatui_textarea::CursorMove::End);
    state.inputs.note = Some(NoteInput {
        input,
        vhost,
        queue,
        by: state.msgs.shown_grouping(),
        key,
        summary,
    });
}

/// Keys in the note input: Enter keeps the note (an empty one removes it), Esc drops the edit.
pub(super) fn on_note_key(state: &mut State, key: KeyEvent) -> Vec<Command> {
    let Some(ni) = &mut state.inputs.note else {
        return Vec::new();
    };
    match key.code {
        KeyCode::Esc => {
            state.inputs.note = None;
            Vec::new()
        }
        KeyCode::Enter => {
            let text = grouping::note_text(&ni.input.lines().join(" "));
            let Some(ni) = state.inputs.note.take() else {
                return Vec::new();
            };
            vec![Command::SetGroupNote {
                vhost: ni.vhost,
                note: GroupNote {
                    queue: ni.queue,
                    by: ni.by,
                    key: ni.key,
                    text,
                    author: String::new(),
                    at: state.now,
                },
            }]
        }
        KeyCode::Char('u') if key.modifiers.contains(KeyModifiers::CONTROL) => {
            ni.input = TextArea::default();
            Vec::new()
        }
        _ => {
            // One line, at most a note's length.
            if ni.input.lines().join(" ").chars().count() < grouping::MAX_NOTE_CHARS
                || !matches!(key.code, KeyCode::Char(_))
            {
                ni.input.input(key);
            }
            Vec::new()
        }
    }
}

/// Parses `text`; a query that does not parse yet (mid-typing) keeps the last good filter and
/// says why.
pub fn apply_filter_text(state: &mut State, text: String) {
    if text.trim().is_empty() {
        state.filtering.filter = None;
        state.filtering.error = None;
    } else {
        match Filter::parse(&text) {
            Ok(f) => {
                state.filtering.filter = Some(f);
                state.filtering.error = None;
            }
            Err(e) => state.filtering.error = Some(e.to_string()),
        }
    }
    state.filtering.text = text;
    let rows = state.msgs.browse.as_ref().map_or(0, |b| b.rows.len());
    if rows > FILTER_DEBOUNCE_ROWS {
        // Filtering a big page is work the loop does in slices: echo the keystroke now and
        // begin it when typing pauses (`Event::FilterSettle`), not again on every keystroke.
        state.filtering.pending = true;
        state.dirty = true;
    } else {
        state.refresh_view();
    }
}

/// Above this many browsed messages, the filter narrows the list when typing pauses rather than
/// on every keystroke.
pub const FILTER_DEBOUNCE_ROWS: usize = crate::tui::refresh::SLICED_ABOVE;
/// How long typing must pause before a large list is narrowed.
pub const FILTER_SETTLE: std::time::Duration = std::time::Duration::from_millis(150);

/// `/` on the queue list: the queue filter's line, holding the filter in force.
pub(super) fn open_queue_filter(state: &mut State) {
    let mut input = TextArea::new(vec![state.queues.filter.clone()]);
    input.move_cursor(ratatui_textarea::CursorMove::End);
    state.inputs.queue_filter = Some((input, state.queues.filter.clone()));
}

/// Keys in the queue filter's line: the list narrows as it is typed, the cursor staying on its
/// queue while that is still listed; Enter keeps, Esc restores the filter from before. Moving
/// the cursor rests it on a new queue, which the first screen then reads (see `glance`).
pub(super) fn on_queue_filter_key(state: &mut State, key: KeyEvent) -> Vec<Command> {
    let Some((input, before)) = &mut state.inputs.queue_filter else {
        return Vec::new();
    };
    // Only Enter and Esc end it; a key the line does not take does nothing.
    let text = match key.code {
        KeyCode::Enter => {
            state.inputs.queue_filter = None;
            state.dirty = true;
            return Vec::new();
        }
        KeyCode::Esc => {
            let before = std::mem::take(before);
            state.inputs.queue_filter = None;
            before
        }
        KeyCode::Char('u') if key.modifiers.contains(KeyModifiers::CONTROL) => {
            *input = TextArea::default();
            String::new()
        }
        _ => {
            input.input(key);
            input.lines().join(" ")
        }
    };
    state.set_queue_filter(text);
    super::glance::cursor_moved(state);
    Vec::new()
}

/// A filter belongs to the queue it was typed on: when `to` opens, the filter in force is kept
/// for the queue shown until now (a filter typed before any queue opened goes to `to`), and
/// `to`'s own filter, if it had one, comes back; otherwise `to` shows every message.
pub(super) fn filter_follows_queue(state: &mut State, to: QueueRef) {
    let Some(from) = state.msgs.browse.as_ref().map(Browse::id) else {
        return;
    };
    if from == to {
        return;
    }
    match state.filtering.filter.take() {
        Some(f) => {
            let text = std::mem::take(&mut state.filtering.text);
            state.filtering.saved.insert(from, (text, f));
        }
        None => {
            state.filtering.saved.remove(&from);
        }
    }
    state.filtering.error = None;
    state.filtering.pending = false;
    state.filtering.text.clear();
    // A filter line left open keeps editing the filter of the queue now shown.
    if let Some((text, f)) = state.filtering.saved.remove(&to) {
        state.filtering.text = text;
        state.filtering.filter = Some(f);
    }
    if let Some(fi) = &mut state.inputs.filter {
        fi.input = TextArea::new(vec![state.filtering.text.clone()]);
        fi.input.move_cursor(ratatui_textarea::CursorMove::End);
        fi.before = state
            .filtering
            .filter
            .clone()
            .map(|f| (state.filtering.text.clone(), f));
    }
}
