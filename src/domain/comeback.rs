//! What came back after a replay: a replayed message carries its run's id (`warren-replay-id`),
//! when it was replayed (`warren-replayed-at`) and the how-manieth replay it was
//! (`warren-replay-count`); when it dies again those headers are still on it (the broker and the
//! frameworks add their own, they do not remove Warren's), so the dead letter links itself to
//! its run. Pure: the run's author comes from the audit, passed in by the caller.

use std::collections::HashMap;

use jiff::Timestamp;

use super::amqp10::carrier::warren_mark;
use super::explain::{Explanation, REPLAY_COUNT_HEADER};
use super::message::DeadLetter;
use super::replay::{REPLAY_ID_HEADER, REPLAYED_AT_HEADER};

/// Longest run id Warren accepts from a header (its own are about 30 characters): a broker
/// string is untrusted, and a run id is a map key.
pub const MAX_RUN_ID: usize = 64;

/// A dead letter that a Warren replay sent back once and that died again.
#[derive(Clone, Debug, PartialEq)]
pub struct FailedAgain {
    /// The run that replayed it last.
    pub run_id: String,
    /// When that replay published it (from `warren-replayed-at`).
    pub replayed_at: Option<Timestamp>,
    /// When it died again: the newest death the broker recorded after the replay.
    pub died_at: Option<Timestamp>,
    /// Which replay of this message that was (1 = the first).
    pub nth: i64,
}

/// The run a dead letter came back from, when Warren replayed it (`None` otherwise, or when the
/// header is not a run id Warren could have written).
pub fn failed_again(dl: &DeadLetter, ex: &Explanation) -> Option<FailedAgain> {
    let run_id = run_id_of(dl)?;
    let replayed_at = warren_mark(&dl.headers, REPLAYED_AT_HEADER)
        .and_then(|v| v.as_str())
        .and_then(|t| t.parse::<Timestamp>().ok());
    // x-death times are whole seconds: a death in the second of the replay still counts.
    let floor = replayed_at.map(|t| Timestamp::from_second(t.as_second()).unwrap_or(t));
    let died_at = ex
        .deaths
        .entries
        .iter()
        .filter_map(|d| d.time)
        .chain(ex.failed_at)
        .filter(|t| floor.is_none_or(|f| *t >= f))
        .max();
    Some(FailedAgain {
        run_id,
        replayed_at,
        died_at,
        nth: warren_mark(&dl.headers, REPLAY_COUNT_HEADER)
            .and_then(|v| v.as_i64())
            .unwrap_or(1)
            .max(1),
    })
}

/// The `warren-replay-id` a message carries, when it is one Warren could have written.
pub fn run_id_of(dl: &DeadLetter) -> Option<String> {
    let id = warren_mark(&dl.headers, REPLAY_ID_HEADER)?.as_str()?.trim();
    let ok = !id.is_empty()
        && id.len() <= MAX_RUN_ID
        && id
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_');
    ok.then(|| id.to_string())
}

/// "1st", "2nd", "3rd", "4th", "11th", "21st".
pub fn ordinal(n: i64) -> String {
    let suffix = match (n % 10, n % 100) {
        (_, 11..=13) => "th",
        (1, _) => "st",
        (2, _) => "nd",
        (3, _) => "rd",
        _ => "th",
    };
    format!("{n}{suffix}")
}

/// How long, in words a person reads at a glance: "40 seconds", "14 minutes", "3 hours",
/// "2 days".
pub fn span(secs: i64) -> String {
    let secs = secs.max(0);
    let (n, unit) = match secs {
        0..=119 => (secs, "second"),
        120..=7199 => (secs / 60, "minute"),
        7200..=172_799 => (secs / 3600, "hour"),
        _ => (secs / 86_400, "day"),
    };
    format!("{n} {unit}{}", if n == 1 { "" } else { "s" })
}

impl FailedAgain {
    /// "failed again 14 minutes after replay R by alice (3rd replay)"; `by` is the run's author
    /// as the audit knows it (local or broker), `None` when the run is not in either.
    pub fn describe(&self, by: Option<&str>) -> String {
        let mut s = String::from("failed again");
        if let (Some(r), Some(d)) = (self.replayed_at, self.died_at) {
            s.push(' ');
            s.push_str(&span(d.as_second() - r.as_second()));
        }
        s.push_str(" after replay ");
        s.push_str(&self.run_id);
        if let Some(by) = by {
            s.push_str(" by ");
            s.push_str(by);
        }
        s.push_str(&format!(" ({} replay)", ordinal(self.nth)));
        s
    }
}

/// Per run: how many of its messages came back, and the most common new failure among them.
#[derive(Clone, Debug, Default, PartialEq, serde::Serialize)]
pub struct CameBack {
    /// Messages seen in a dead-letter queue again, carrying this run's id.
    pub came_back: u64,
    /// The most common failure summary among them (ties: the one seen first).
    pub top_failure: Option<String>,
    /// How many of them failed that way.
    pub top_failure_count: u64,
}

/// Tallies what came back, by run id, from `(run id, failure summary)` pairs of dead letters
/// (one per message: a message seen twice is the caller's to drop).
pub fn tally<'a>(seen: impl IntoIterator<Item = (&'a str, &'a str)>) -> HashMap<String, CameBack> {
    // Per run: the summaries in first-seen order, with counts.
    let mut by_run: HashMap<String, (u64, Vec<(String, u64)>)> = HashMap::new();
    for (run, summary) in seen {
        let (n, summaries) = by_run.entry(run.to_string()).or_default();
        *n += 1;
        match summaries.iter_mut().find(|(s, _)| s == summary) {
            Some((_, c)) => *c += 1,
            None => summaries.push((summary.to_string(), 1)),
        }
    }
    by_run
        .into_iter()
        .map(|(run, (n, summaries))| {
            // max_by_key keeps the last of equals: walk from the back so the first-seen wins.
            let top = summaries.into_iter().rev().max_by_key(|(_, c)| *c);
            let (top_failure, top_failure_count) = match top {
                Some((s, c)) => (Some(s), c),
                None => (None, 0),
            };
            (
                run,
                CameBack {
                    came_back: n,
                    top_failure,
                    top_failure_count,
                },
            )
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::explain::explain;
    use crate::domain::value::{HeaderValue, Table};

    fn replayed(run: &str, at: &str, nth: i64, died: i64) -> DeadLetter {
        let mut death = Table::new();
        death.insert("queue", HeaderValue::string("work"));
        death.insert("reason", HeaderValue::string("rejected"));
        death.insert("count", HeaderValue::I64(1));
        death.insert("time", HeaderValue::Timestamp(died as u64));
        death.insert("exchange", HeaderValue::string(""));
        let mut h = Table::new();
        h.insert(
            "x-death",
            HeaderValue::Array(vec![HeaderValue::Table(death)]),
        );
        h.insert(REPLAY_ID_HEADER, HeaderValue::string(run));
        h.insert(REPLAYED_AT_HEADER, HeaderValue::string(at));
        h.insert(REPLAY_COUNT_HEADER, HeaderValue::I64(nth));
        DeadLetter {
            queue: "work.dlq".into(),
            headers: h,
            ..DeadLetter::default()
        }
    }

    #[test]
    fn a_replayed_message_that_died_again_names_its_run() {
        let at: Timestamp = "2026-12-01T10:00:00.500Z".parse().unwrap();
        let died = at.as_second() + 14 * 60;
        let dl = replayed("r-abc", &at.to_string(), 3, died);
        let f = failed_again(&dl, &explain(&dl)).unwrap();
        assert_eq!(f.run_id, "r-abc");
        assert_eq!(f.nth, 3);
        assert_eq!(
            f.describe(Some("alice")),
            "failed again 14 minutes after replay r-abc by alice (3rd replay)"
        );
        assert_eq!(
            f.describe(None),
            "failed again 14 minutes after replay r-abc (3rd replay)"
        );
    }

    #[test]
    fn a_death_in_the_second_of_the_replay_counts_and_an_older_one_does_not() {
        let at: Timestamp = "2026-12-01T10:00:00.700Z".parse().unwrap();
        let dl = replayed("r-1", &at.to_string(), 1, at.as_second());
        let f = failed_again(&dl, &explain(&dl)).unwrap();
        assert!(f.describe(None).starts_with("failed again 0 seconds after"));
        let old = replayed("r-1", &at.to_string(), 1, at.as_second() - 60);
        let f = failed_again(&old, &explain(&old)).unwrap();
        assert_eq!(f.died_at, None);
        assert_eq!(
            f.describe(None),
            "failed again after replay r-1 (1st replay)"
        );
    }

    #[test]
    fn hostile_run_ids_are_not_links() {
        for bad in ["", "  ", "a\u{1b}[31m", &"x".repeat(65), "a b"] {
            let dl = replayed(bad, "2026-12-01T10:00:00Z", 1, 0);
            assert_eq!(run_id_of(&dl), None, "{bad:?}");
        }
        assert_eq!(
            failed_again(&DeadLetter::default(), &explain(&DeadLetter::default())),
            None
        );
    }

    #[test]
    fn ordinals_and_spans() {
        let o: Vec<String> = [1, 2, 3, 4, 11, 12, 13, 21, 22, 103, 111]
            .map(ordinal)
            .into();
        assert_eq!(
            o,
            [
                "1st", "2nd", "3rd", "4th", "11th", "12th", "13th", "21st", "22nd", "103rd",
                "111th"
            ]
        );
        assert_eq!(span(1), "1 second");
        assert_eq!(span(14 * 60 + 5), "14 minutes");
        assert_eq!(span(3 * 3600), "3 hours");
        assert_eq!(span(5 * 86_400), "5 days");
        assert_eq!(span(-5), "0 seconds");
    }

    #[test]
    fn tally_counts_per_run_and_names_the_most_common_failure() {
        let seen = [
            ("r1", "timeout"),
            ("r1", "bad card"),
            ("r1", "bad card"),
            ("r2", "x"),
            ("r2", "y"),
        ];
        let t = tally(seen);
        assert_eq!(t["r1"].came_back, 3);
        assert_eq!(t["r1"].top_failure.as_deref(), Some("bad card"));
        assert_eq!(t["r1"].top_failure_count, 2);
        // A tie: the first seen.
        assert_eq!(t["r2"].top_failure.as_deref(), Some("x"));
        assert!(!t.contains_key("r3"));
    }
}
