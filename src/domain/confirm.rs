//! When the operator types the count to go ahead: the one rule, which `ops::Questions` carries
//! with each plan (`Front::go_ahead`'s `typed`, the TUI previews' `typed_count`), so the command
//! line and the terminal UI never disagree and neither decides it.

/// Above this many messages a replay or a restore needs its count typed.
pub const TYPED_ABOVE: u64 = 100;

use super::run::RunKind;

/// Whether `count` messages moved by a run of kind `how` need the count typed, not only a yes.
pub fn typed_count(how: RunKind, count: u64) -> bool {
    match how {
        // Deleting cannot be undone: whatever the count.
        RunKind::Discard => true,
        // An archive is restored at will: the go-ahead is enough.
        RunKind::Archive => false,
        // Messages reach consumers: a large number is typed.
        RunKind::Replay | RunKind::Restore => count > TYPED_ABOVE,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_discard_is_always_typed_an_archive_never_a_replay_above_100() {
        assert!(typed_count(RunKind::Discard, 1));
        assert!(!typed_count(RunKind::Archive, 1_000_000));
        for how in [RunKind::Replay, RunKind::Restore] {
            assert!(!typed_count(how, TYPED_ABOVE));
            assert!(typed_count(how, TYPED_ABOVE + 1));
        }
    }
}
