//! How a run ended, as a type: the audit keeps its words (`Display`), and every decision —
//! the exit code, "completed or not", the Replays view — is made on the type, never by comparing
//! text.

use std::fmt;

/// How a replay, archive, discard or restore ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RunOutcome {
    /// Every selected message moved; nothing failed or was returned.
    Completed,
    /// Stopped by the operator, settled; with what was and was not done, when said.
    Cancelled(Option<String>),
    /// Stopped early by its own rules, or some failed: why.
    Partial(String),
    /// A broker or connection fault, or nothing moved: why.
    Failed(String),
    /// Ended without settling (a second signal, a crash): why, when known.
    Interrupted(Option<String>),
}

impl RunOutcome {
    pub fn is_completed(&self) -> bool {
        matches!(self, RunOutcome::Completed)
    }

    /// The words the audit keeps, read back (older records, the broker's stream). Anything
    /// Warren did not write reads as a failure with those words.
    pub fn parse(text: &str) -> RunOutcome {
        let (head, rest) = match text.split_once(": ") {
            Some((h, r)) => (h, Some(r.to_string())),
            None => (text, None),
        };
        match (head, rest) {
            ("completed", None) => RunOutcome::Completed,
            ("cancelled", why) => RunOutcome::Cancelled(why),
            ("interrupted", why) => RunOutcome::Interrupted(why),
            ("partial", Some(why)) => RunOutcome::Partial(why),
            ("failed", Some(why)) => RunOutcome::Failed(why),
            _ => RunOutcome::Failed(text.to_string()),
        }
    }
}

impl fmt::Display for RunOutcome {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let with = |f: &mut fmt::Formatter<'_>, head: &str, why: &Option<String>| match why {
            Some(w) => write!(f, "{head}: {w}"),
            None => f.write_str(head),
        };
        match self {
            RunOutcome::Completed => f.write_str("completed"),
            RunOutcome::Cancelled(why) => with(f, "cancelled", why),
            RunOutcome::Partial(why) => write!(f, "partial: {why}"),
            RunOutcome::Failed(why) => write!(f, "failed: {why}"),
            RunOutcome::Interrupted(why) => with(f, "interrupted", why),
        }
    }
}

/// Kept as its words: the audit's records (local and on the broker's stream) stay as they were,
/// and a record Warren did not write reads as a failure with its text (see [`RunOutcome::parse`]).
impl serde::Serialize for RunOutcome {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> serde::Deserialize<'de> for RunOutcome {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<RunOutcome, D::Error> {
        let text = <std::borrow::Cow<'de, str>>::deserialize(d)?;
        Ok(RunOutcome::parse(&text))
    }
}

impl Default for RunOutcome {
    /// A record with no outcome yet ended without settling, as far as anyone can tell.
    fn default() -> RunOutcome {
        RunOutcome::Interrupted(None)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_words_read_back_as_the_same_outcome() {
        for o in [
            RunOutcome::Completed,
            RunOutcome::Cancelled(None),
            RunOutcome::Cancelled(Some("3 restored, 2 not sent".into())),
            RunOutcome::Partial("1 failed, 0 returned; the limit was reached".into()),
            RunOutcome::Failed("the broker refused the publish: ACCESS_REFUSED".into()),
            RunOutcome::Interrupted(None),
            RunOutcome::Interrupted(Some("stopped at once".into())),
        ] {
            assert_eq!(RunOutcome::parse(&o.to_string()), o);
        }
        assert!(!RunOutcome::parse("completed: but not quite").is_completed());
        assert!(!RunOutcome::parse("something else").is_completed());
    }

    #[test]
    fn a_record_keeps_the_words_and_reads_back_the_type() {
        let o = RunOutcome::Cancelled(Some("3 restored, 2 not sent".into()));
        let json = serde_json::to_string(&o).unwrap();
        assert_eq!(json, "\"cancelled: 3 restored, 2 not sent\"");
        assert_eq!(serde_json::from_str::<RunOutcome>(&json).unwrap(), o);
        // A record Warren did not write is a failure in its own words, never refused.
        assert_eq!(
            serde_json::from_str::<RunOutcome>("\"done-ish\"").unwrap(),
            RunOutcome::Failed("done-ish".into())
        );
        assert_eq!(RunOutcome::default(), RunOutcome::Interrupted(None));
    }
}
