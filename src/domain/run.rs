//! Which kind of run moves messages out of a dead-letter queue (or back into one): the one
//! run-kind of the audit, the go-ahead, the TUI's jobs and modals. Its words are here once.

use serde::{Deserialize, Serialize};

/// What a run is: every way a message leaves a dead-letter queue (or comes back).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum RunKind {
    /// Moved back to where it failed (also `warren restore --replay`, from the archive).
    #[default]
    Replay,
    /// Moved to the archive.
    Archive,
    /// Deleted for good (after a snapshot, unless `--no-snapshot`).
    Discard,
    /// Put back into the DLQ it was archived from.
    Restore,
}

impl RunKind {
    pub const ALL: [RunKind; 4] = [
        RunKind::Replay,
        RunKind::Archive,
        RunKind::Discard,
        RunKind::Restore,
    ];

    /// Its name, as the audit keeps it.
    pub fn as_str(self) -> &'static str {
        match self {
            RunKind::Replay => "replay",
            RunKind::Archive => "archive",
            RunKind::Discard => "discard",
            RunKind::Restore => "restore",
        }
    }

    pub fn parse(s: &str) -> Option<RunKind> {
        RunKind::ALL.into_iter().find(|o| o.as_str() == s)
    }

    /// The verb the go-ahead asks with ("Type 3 to delete them").
    pub fn verb(self) -> &'static str {
        match self {
            RunKind::Discard => "delete",
            other => other.as_str(),
        }
    }

    /// What did not happen when it stopped before anything moved.
    pub fn undone(self) -> &'static str {
        match self {
            RunKind::Discard => "nothing deleted",
            RunKind::Restore => "nothing restored",
            RunKind::Replay | RunKind::Archive => "nothing moved",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_kind_reads_back_and_says_its_verb() {
        for k in RunKind::ALL {
            assert_eq!(RunKind::parse(k.as_str()), Some(k));
        }
        assert_eq!(RunKind::Discard.verb(), "delete");
        assert_eq!(RunKind::Discard.undone(), "nothing deleted");
        assert_eq!(RunKind::Archive.undone(), "nothing moved");
        assert_eq!(
            serde_json::to_string(&RunKind::Restore).ok().as_deref(),
            Some("\"restore\"")
        );
    }
}
