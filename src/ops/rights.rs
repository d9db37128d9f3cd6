//! Rights: whether this session may take messages off a queue, decided once per session and
//! asked by every operation before anything else.

use crate::broker::rights::Publishing;
use crate::broker::session::Session;

/// Why nothing may leave a queue here.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ReadOnly {
    /// Warren was started with `--read-only`.
    Flag,
    /// The context is configured `read_only = true`.
    Context(String),
    /// The broker lets this user read but not publish (the words say how Warren knows).
    Broker(String),
}

impl ReadOnly {
    /// Why, in the user's words, for the TUI's header and every refusal.
    pub fn reason(&self) -> String {
        match self {
            ReadOnly::Flag => "Warren was started with --read-only".into(),
            ReadOnly::Context(c) => format!("context '{c}' is configured read_only = true"),
            ReadOnly::Broker(why) => why.clone(),
        }
    }
}

/// What an operation would do that read-only forbids.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Act {
    Replay,
    Archive,
    Discard,
    Restore,
    Protect,
    Redirect,
}

impl Act {
    fn verb(self) -> &'static str {
        match self {
            Act::Replay => "replay",
            Act::Archive => "archive",
            Act::Discard => "discard",
            Act::Restore => "restore",
            Act::Protect => "protect",
            Act::Redirect => "redirect",
        }
    }

    /// What the operation would have done, for the refusal.
    fn undone(self) -> &'static str {
        match self {
            Act::Restore => "nothing restored",
            Act::Discard => "nothing deleted",
            Act::Protect => "no policy set",
            Act::Redirect => "no redirect changed",
            _ => "nothing moved",
        }
    }
}

/// Whether this session is read-only, and why: the flag and the context first (no broker
/// call), then the broker's own word (asked once per session; see `broker::rights`). A broker
/// that could not tell leaves the session writable: each run checks its targets and stops at
/// the first refused publish.
pub async fn read_only(s: &Session) -> Option<ReadOnly> {
    if let Some(r) = configured(s) {
        return Some(r);
    }
    match s.publishing().await {
        Publishing::Refused(why) => Some(ReadOnly::Broker(why.clone())),
        Publishing::Allowed | Publishing::Unknown(_) => None,
    }
}

/// Read-only by the flag or the context alone (no broker call).
pub fn configured(s: &Session) -> Option<ReadOnly> {
    if s.target.read_only_flag {
        Some(ReadOnly::Flag)
    } else if s.target.read_only {
        Some(ReadOnly::Context(s.target.context.clone()))
    } else {
        None
    }
}

/// The gate every operation passes first: `Err` with the refusal in words when this session is
/// read-only. Reading is never refused here.
pub async fn admit<R: super::ports::Rights>(r: &R, act: Act) -> Result<(), String> {
    match r.read_only().await {
        None => Ok(()),
        Some(r) => Err(refusal(act, &r)),
    }
}

/// The refusal of `act` in a read-only session.
pub fn refusal(act: Act, r: &ReadOnly) -> String {
    format!(
        "read-only: {}; {} is disabled ({}). Reading stays open: `warren show`, `warren archive list`",
        r.reason(),
        act.verb(),
        act.undone()
    )
}
