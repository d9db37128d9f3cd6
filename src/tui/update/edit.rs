//! `E` on a message, and the keys of Warren's editor: Ctrl-S plans the replay of the edited
//! copy, Ctrl-E hands the document to `$EDITOR`, Esc closes it (nothing moves); every other
//! key edits, and the document is read again after each.

use super::*;
use crate::tui::edit::{Check, EditModal};

/// `E`: Warren's editor on the message under the cursor.
pub(super) fn open_editor(state: &mut State) -> Vec<Command> {
    let Some(queue) = open_queue(state, "edit", false) else {
        return Vec::new();
    };
    let Some(row) = state.current_opened() else {
        state.banner.notice = Some("nothing to edit: move to a message".into());
        return Vec::new();
    };
    if !row.msg.body_complete() {
        state.banner.error = Some(format!(
            "this body was read only in part ({} of {} bytes): `warren replay {} --edit` reads it whole",
            row.msg.body.len(),
            row.msg.body_size,
            sanitize::one_line(&queue.name, 80)
        ));
        return Vec::new();
    }
    let modal = EditModal::new(queue.vhost, queue.name, row.key, row.msg);
    state.overlay = Overlay::Edit(Box::new(modal));
    Vec::new()
}

pub(super) fn on_edit_key(state: &mut State, key: KeyEvent) -> Vec<Command> {
    let Overlay::Edit(modal) = &mut state.overlay else {
        return Vec::new();
    };
    let ctrl = key.modifiers.contains(KeyModifiers::CONTROL);
    match key.code {
        KeyCode::Esc => {
            state.overlay = Overlay::None;
            state.banner.notice = Some("edit closed: nothing moved".into());
        }
        KeyCode::Char('s') if ctrl => return save(state),
        KeyCode::Char('e') if ctrl => state.handover.editor = Some(modal.text()),
        _ => {
            modal.area.input(key);
            modal.recheck();
        }
    }
    Vec::new()
}

/// Ctrl-S: the replay modal on the edited copy, once the document reads and changed something.
fn save(state: &mut State) -> Vec<Command> {
    let Overlay::Edit(modal) = &state.overlay else {
        return Vec::new();
    };
    match (&modal.check, modal.copy()) {
        (Check::Problem(p), _) => {
            state.banner.error = Some(format!("not yet: {p}"));
            Vec::new()
        }
        (_, None) => {
            state.banner.notice =
                Some("nothing changed yet: edit the document, or Esc to close".into());
            Vec::new()
        }
        (_, Some(copy)) => {
            let (vhost, queue) = (modal.vhost.clone(), modal.queue.clone());
            let selection = Selection::Keys(HashSet::from([modal.key.clone()]));
            let text = copy.text.clone();
            let mut replay = ReplayModal::new(
                (vhost.clone(), queue.clone()),
                selection.clone(),
                "the message under the cursor, edited".into(),
                state.settings.replay_rate,
            );
            replay.edited = Some(copy);
            state.overlay = Overlay::Replay(Box::new(replay));
            vec![Command::PreviewReplay {
                vhost,
                queue,
                selection,
                keep_attempts: false,
                strip_failure_stamp: false,
                edited: Some(text),
            }]
        }
    }
}

/// Back from `$EDITOR`.
pub(super) fn edited(state: &mut State, result: Result<Option<String>, String>) {
    match (result, &mut state.overlay) {
        (Ok(Some(text)), Overlay::Edit(modal)) => modal.set_text(&text),
        (Ok(_), _) => {}
        (Err(why), _) => state.banner.error = Some(why),
    }
    state.dirty = true;
}
