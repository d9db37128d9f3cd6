//! When the operator types the count to go ahead: the one rule `ops` asks its front ends by
//! (`Front::go_ahead`'s `typed`) and the TUI's modals show, so the command line and the
//! terminal UI never disagree.

/// Above this many messages a replay or a restore needs its count typed.
pub const TYPED_ABOVE: u64 = 100;

/// What would move the messages.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Moving {
    Replay,
    Archive,
    Discard,
    Restore,
}

/// Whether `count` messages moved this way need the count typed, not only a yes.
pub fn typed_count(how: Moving, count: u64) -> bool {
    match how {
        // Deleting cannot be undone: whatever the count.
        Moving::Discard => true,
        // An archive is restored at will: the go-ahead is enough.
        Moving::Archive => false,
        // Messages reach consumers: a large number is typed.
        Moving::Replay | Moving::Restore => count > TYPED_ABOVE,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_discard_is_always_typed_an_archive_never_a_replay_above_100() {
        assert!(typed_count(Moving::Discard, 1));
        assert!(!typed_count(Moving::Archive, 1_000_000));
        for how in [Moving::Replay, Moving::Restore] {
            assert!(!typed_count(how, TYPED_ABOVE));
            assert!(typed_count(how, TYPED_ABOVE + 1));
        }
    }
}
