//! Read-only, in words: why nothing may leave a queue, and the one refusal of each act. Pure:
//! `ops::rights` decides it once per session (the flag, the context, the broker's word) and
//! asks it first; the broker layer's last checks behind it refuse in these same words.

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
    /// Read-only by the flag or the context alone: `flag` is `--read-only`, `configured` the
    /// context's `read_only` (or the flag), `context` its name.
    pub fn configured(flag: bool, configured: bool, context: &str) -> Option<ReadOnly> {
        if flag {
            Some(ReadOnly::Flag)
        } else if configured {
            Some(ReadOnly::Context(context.to_string()))
        } else {
            None
        }
    }

    /// Why, in the user's words, for the TUI's header and every refusal.
    pub fn reason(&self) -> String {
        match self {
            ReadOnly::Flag => "Warren was started with --read-only".into(),
            ReadOnly::Context(c) => format!(
                "context '{}' is configured read_only = true",
                crate::domain::sanitize::one_line(c, 100)
            ),
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
    /// Creating a stream (the archive's).
    CreateStream,
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
            Act::CreateStream => "creating a stream",
        }
    }

    /// What the operation would have done, for the refusal.
    fn undone(self) -> &'static str {
        match self {
            Act::Restore => "nothing restored",
            Act::Discard => "nothing deleted",
            Act::Protect => "no policy set",
            Act::Redirect => "no redirect changed",
            Act::CreateStream => "nothing created",
            _ => "nothing moved",
        }
    }
}

/// The refusal of `act` in a read-only session: one wording wherever it is refused.
pub fn refusal(act: Act, r: &ReadOnly) -> String {
    format!(
        "read-only: {}; {} is disabled ({}). Reading stays open: `warren show`, `warren archive list`",
        r.reason(),
        act.verb(),
        act.undone()
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_flag_wins_and_each_refusal_says_why_and_what_did_not_happen() {
        assert_eq!(
            ReadOnly::configured(true, true, "prod"),
            Some(ReadOnly::Flag)
        );
        assert_eq!(
            ReadOnly::configured(false, true, "prod"),
            Some(ReadOnly::Context("prod".into()))
        );
        assert_eq!(ReadOnly::configured(false, false, "prod"), None);
        let r = refusal(Act::Discard, &ReadOnly::Context("prod".into()));
        assert!(r.starts_with("read-only: context 'prod' is configured read_only = true"));
        assert!(r.contains("discard is disabled (nothing deleted)"), "{r}");
    }
}
