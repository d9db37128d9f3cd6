//! `y` and `Y`: the message id or its body onto the operator's clipboard. The loop writes it
//! to the terminal as OSC 52 (`State::handover`), which the terminal at the other end of SSH
//! and tmux puts on its own clipboard, as lazygit and helix do: no X server or `xclip` needed
//! on the bastion host.

use super::*;
use crate::domain::body;

/// The most of a body copied: terminals cap what one OSC 52 sequence may carry (xterm's
/// default is about 100 KB encoded; tmux's 1 MiB), and a larger one is dropped whole.
pub const COPY_BYTES: usize = 64 * 1024;

pub(super) fn id(state: &mut State) {
    let Some(row) = state.msgs.current_row() else {
        state.banner.notice = Some("no message under the cursor: open a queue and pick one".into());
        return;
    };
    let Some(id) = row.shown_id().map(clean) else {
        state.banner.notice = Some("this message has no id to copy (Y copies its body)".into());
        return;
    };
    state.banner.notice = Some(format!(
        "copied {} (through the terminal: OSC 52; tmux needs set-clipboard on)",
        sanitize::one_line(&id, 80)
    ));
    state.handover.clipboard = Some(id);
}

pub(super) fn body(state: &mut State) {
    let Some(row) = state.current_opened() else {
        state.banner.notice = Some("no message under the cursor: open a queue and pick one".into());
        return;
    };
    let m = &row.msg;
    let decoded = body::decode_message(m, body::DECODE_CAP);
    let text = match (decoded.format, std::str::from_utf8(&decoded.bytes)) {
        (body::Format::Binary, _) | (_, Err(_)) => {
            state.banner.notice = Some(
                "the body is binary, which a clipboard does not carry: S saves the message to a snapshot file"
                    .into(),
            );
            return;
        }
        (_, Ok(text)) => clean(text),
    };
    let whole = m.body_complete() && text.len() <= COPY_BYTES;
    let copied = cut(&text, COPY_BYTES);
    state.banner.notice = Some(if whole {
        format!(
            "copied the body ({} bytes, through the terminal: OSC 52)",
            copied.len()
        )
    } else {
        format!(
            "copied the first {} bytes of the body (of {}): a clipboard takes no more through the terminal; S saves all of it",
            copied.len(),
            m.body_size.max(text.len() as u64)
        )
    });
    state.handover.clipboard = Some(copied.to_string());
}

/// What is copied carries no terminal controls (pasted into a terminal, they would act):
/// newlines and tabs stay, the rest of the unsafe characters go.
fn clean(s: &str) -> String {
    s.chars()
        .filter(|&c| c == '\n' || c == '\t' || !sanitize::is_unsafe(c))
        .collect()
}

/// At most `max` bytes of `s`, cut at a character boundary.
fn cut(s: &str, max: usize) -> &str {
    if s.len() <= max {
        return s;
    }
    let mut end = max;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    &s[..end]
}
