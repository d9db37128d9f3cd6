//! Banners go by themselves: a notice after [`NOTICE_SECS`], an error after [`ERROR_SECS`],
//! counted on the clock `Event::Tick` brings (`State::now`), never by a sleep. A banner that asks
//! for an answer (a second Enter, `P` again, Ctrl-R again) stays while its question stands, and
//! one being read whole (`w`) stays until it is closed. Esc also clears it as it goes back.

use super::*;

/// How long a notice stays, in seconds of the session's clock.
pub const NOTICE_SECS: i64 = 10;
/// How long an error stays: longer, since it is worth reading (the command log `@` keeps what
/// the worker did).
pub const ERROR_SECS: i64 = 30;

/// Notes when the banner shown changed (called after every event): its time starts then.
pub(super) fn observe(state: &mut State) {
    let shown = state.error.as_ref().or(state.notice.as_ref());
    match (shown, &state.banner_since) {
        (None, _) => state.banner_since = None,
        (Some(text), Some((was, _))) if was == text => {}
        (Some(text), _) => state.banner_since = Some((text.clone(), state.now)),
    }
}

/// On the clock: drops the banner once its time is up.
pub(super) fn expire(state: &mut State) {
    let Some((_, since)) = &state.banner_since else {
        return;
    };
    let asking = state.pending_browse.is_some()
        || state.pending_reread.is_some()
        || state.pending_protect.is_some();
    if asking || state.banner_whole {
        return;
    }
    let limit = if state.error.is_some() {
        ERROR_SECS
    } else {
        NOTICE_SECS
    };
    if state.now.as_second() - since.as_second() >= limit {
        state.error = None;
        state.notice = None;
        state.banner_since = None;
        state.dirty = true;
    }
}
