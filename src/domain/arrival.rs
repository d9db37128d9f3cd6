//! When a dead letter reached its DLQ: the one rule the list, the sort, the filter, `show`,
//! `queues`, `watch` and the TUI use.
//!
//! `x-death[].time` is the first time that (queue, reason) happened and is never updated. When
//! the newest entry (`x-death[0]`, the broker's order) has count 1, that death happened once, at
//! its time, and was the last one: the message arrived then, exactly. Otherwise (a higher count,
//! no `x-death`, a framework that republished it) the arrival lies between the newest death's
//! time (or the framework's failure time) and the first time Warren saw the message: a range,
//! shown as a bound, never as if it were exact.

use jiff::Timestamp;

use crate::domain::xdeath::DeathHistory;

/// When a dead letter arrived, as far as anyone can tell.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Arrival {
    /// Exactly then.
    At(Timestamp),
    /// Some time between `from` (its newest death, or its framework's failure time) and `to`
    /// (when Warren first saw it); either end may be unknown.
    Between {
        from: Option<Timestamp>,
        to: Option<Timestamp>,
    },
}

/// Which way an age is bounded.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Bound {
    Exact,
    /// At least this old (it arrived before Warren first saw it).
    AtLeast,
    /// At most this old (it arrived after its newest death).
    AtMost,
}

/// An age in whole seconds, with how sure it is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Age {
    pub secs: u64,
    pub bound: Bound,
}

impl Age {
    /// An age to the minute, exactly at `secs`.
    pub fn exact(secs: u64) -> Age {
        Age {
            secs,
            bound: Bound::Exact,
        }
    }

    /// The one notation of "dead since", for a queue and for its messages, kept at every
    /// width: the bound's mark, then the age in its largest unit ("47m", "≥3h", "≤4d"). Under
    /// a minute an exact age is "<1m" and a bound says its seconds ("≥45s": Warren first saw
    /// it 45 s ago, and it may have been there longer), never "≥<1m".
    pub fn text(self) -> String {
        if self.bound == Bound::Exact && self.secs < 60 {
            return "<1m".into();
        }
        format!("{}{}", self.prefix(), duration_words(self.secs))
    }

    /// "≥", "≤" or nothing: the bound is always said.
    pub fn prefix(self) -> &'static str {
        match self.bound {
            Bound::Exact => "",
            Bound::AtLeast => "≥",
            Bound::AtMost => "≤",
        }
    }
}

/// A duration in its largest unit: `45s`, `12m`, `3h`, `2d` (the queue list's, the message
/// list's and `watch`'s words for an age).
pub fn duration_words(secs: u64) -> String {
    match secs {
        s if s < 60 => format!("{s}s"),
        s if s < 3_600 => format!("{}m", s / 60),
        s if s < 86_400 => format!("{}h", s / 3_600),
        s => format!("{}d", s / 86_400),
    }
}

impl Arrival {
    /// From a message's death history, its framework's failure time and when Warren first saw
    /// it.
    pub fn of(
        deaths: &DeathHistory,
        failed_at: Option<Timestamp>,
        first_seen: Option<Timestamp>,
    ) -> Arrival {
        Arrival::from_parts(
            exact_death(deaths),
            newest_death(deaths).or(failed_at),
            first_seen,
        )
    }

    /// From what a compact row keeps: the exact arrival when the history makes it so, the
    /// earliest it can have arrived, and when Warren first saw it.
    pub fn from_parts(
        exact: Option<Timestamp>,
        from: Option<Timestamp>,
        first_seen: Option<Timestamp>,
    ) -> Arrival {
        match exact {
            Some(t) => Arrival::At(t),
            None => Arrival::Between {
                from,
                to: first_seen,
            },
        }
    }

    /// The time it is dated by: exact when known; else when Warren first saw it (the latest
    /// it can have arrived: its age is at least that); else the earliest it can have arrived.
    pub fn since(self) -> Option<Timestamp> {
        match self {
            Arrival::At(t) => Some(t),
            Arrival::Between { from, to } => to.or(from),
        }
    }

    pub fn is_exact(self) -> bool {
        matches!(self, Arrival::At(_))
    }

    /// How old it is at `now` (never negative), by [`Arrival::since`], with its bound.
    pub fn age(self, now: Timestamp) -> Option<Age> {
        let bound = match self {
            Arrival::At(_) => Bound::Exact,
            Arrival::Between { to: Some(_), .. } => Bound::AtLeast,
            Arrival::Between { from: Some(_), .. } => Bound::AtMost,
            Arrival::Between { .. } => return None,
        };
        let since = self.since()?;
        Some(Age {
            secs: u64::try_from(now.as_second() - since.as_second()).unwrap_or(0),
            bound,
        })
    }

    /// Age in seconds at `now` (the filter language's `age`, the sort): see [`Arrival::age`].
    pub fn age_secs(self, now: Timestamp) -> Option<u64> {
        self.age(now).map(|a| a.secs)
    }

    /// The earliest it can have arrived, when that is not the time it is dated by (a range
    /// with both ends): for "≥ 15s, first died 2h ago".
    pub fn earliest(self) -> Option<Timestamp> {
        match self {
            Arrival::Between {
                from: Some(f),
                to: Some(_),
            } => Some(f),
            _ => None,
        }
    }
}

/// The newest death's time when it happened exactly once: then the message arrived at that
/// time.
pub fn exact_death(deaths: &DeathHistory) -> Option<Timestamp> {
    let newest = deaths.entries.first().filter(|_| !deaths.copied)?;
    (newest.count == Some(1)).then_some(newest.time).flatten()
}

/// The newest death's (first) time: the earliest the message can have arrived where it is.
pub fn newest_death(deaths: &DeathHistory) -> Option<Timestamp> {
    if deaths.copied {
        return None;
    }
    deaths.entries.first().and_then(|d| d.time)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::xdeath::Death;

    fn t(s: i64) -> Timestamp {
        Timestamp::from_second(s).unwrap()
    }

    fn history(entries: &[(i64, i64)]) -> DeathHistory {
        DeathHistory {
            entries: entries
                .iter()
                .map(|&(count, time)| Death {
                    count: Some(count),
                    time: Some(t(time)),
                    ..Default::default()
                })
                .collect(),
            ..Default::default()
        }
    }

    #[test]
    fn a_message_that_died_once_arrived_exactly_then_whatever_warren_saw_later() {
        // Died once two hours ago; a fresh Warren first saw it 15 s ago.
        let a = Arrival::of(&history(&[(1, 0)]), None, Some(t(7185)));
        assert_eq!(a, Arrival::At(t(0)));
        let age = a.age(t(7200)).unwrap();
        assert_eq!((age.secs, age.bound), (7200, Bound::Exact));
    }

    #[test]
    fn a_message_that_died_more_than_once_is_a_range_dated_by_first_seen() {
        let a = Arrival::of(&history(&[(3, 0), (1, 10)]), None, Some(t(7185)));
        assert_eq!(
            a,
            Arrival::Between {
                from: Some(t(0)),
                to: Some(t(7185))
            }
        );
        let age = a.age(t(7200)).unwrap();
        assert_eq!(
            (age.secs, age.bound, age.prefix()),
            (15, Bound::AtLeast, "≥")
        );
        assert_eq!(a.earliest(), Some(t(0)));
    }

    #[test]
    fn only_the_newest_entry_decides_not_the_latest_time() {
        // A ladder: rejected in the work queue (twice, first at 0), expired once in the wait
        // queue at 50. The newest entry is the work queue's: its last death is unknown.
        let a = Arrival::of(&history(&[(2, 0), (1, 50)]), None, Some(t(100)));
        assert!(!a.is_exact());
    }

    #[test]
    fn without_first_seen_the_newest_death_is_an_upper_bound_on_age() {
        let a = Arrival::of(&history(&[(2, 100)]), None, None);
        let age = a.age(t(160)).unwrap();
        assert_eq!(
            (age.secs, age.bound, age.prefix()),
            (60, Bound::AtMost, "≤")
        );
        assert_eq!(
            Arrival::of(&DeathHistory::default(), None, None).age(t(1)),
            None
        );
    }

    #[test]
    fn one_notation_for_every_age_never_a_bound_on_less_than_a_minute() {
        let at = |secs, bound| Age { secs, bound }.text();
        assert_eq!(at(30, Bound::Exact), "<1m");
        assert_eq!(at(45, Bound::AtLeast), "≥45s");
        assert_eq!(at(45, Bound::AtMost), "≤45s");
        assert_eq!(at(7 * 60, Bound::AtLeast), "≥7m");
        assert_eq!(at(4 * 86_400 + 18 * 3_600, Bound::AtMost), "≤4d");
        assert_eq!(at(2 * 3_600 + 14 * 60, Bound::Exact), "2h");
        for secs in [0, 59, 60, 3_599, 86_399, 10_000_000] {
            for b in [Bound::Exact, Bound::AtLeast, Bound::AtMost] {
                let t = at(secs, b);
                assert!(t.chars().count() <= 6, "{t} fits the narrowest column");
                assert!(!t.contains("≥<") && !t.contains("≤<"), "{t}");
            }
        }
    }

    #[test]
    fn a_framework_failure_time_bounds_a_republished_message() {
        let a = Arrival::of(&DeathHistory::default(), Some(t(10)), Some(t(40)));
        assert_eq!(a.since(), Some(t(40)));
        assert_eq!(a.earliest(), Some(t(10)));
    }
}
