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
    let shown = state.banner.error.as_ref().or(state.banner.notice.as_ref());
    match (shown, &state.banner.since) {
        (None, _) => state.banner.since = None,
        (Some(text), Some((was, _))) if was == text => {}
        (Some(text), _) => state.banner.since = Some((text.clone(), state.now)),
    }
}

/// On the clock: drops the banner once its time is up.
pub(super) fn expire(state: &mut State) {
    let Some((_, since)) = &state.banner.since else {
        return;
    };
    if state.pending.asking() || state.banner.whole {
        return;
    }
    let limit = if state.banner.error.is_some() {
        ERROR_SECS
    } else {
        NOTICE_SECS
    };
    if state.now.as_second() - since.as_second() >= limit {
        state.banner.error = None;
        state.banner.notice = None;
        state.banner.since = None;
        state.dirty = true;
    }
}
