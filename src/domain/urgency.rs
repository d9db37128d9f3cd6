//! Which dead-letter queue first: depth samples over time in, figures out (growth, age of the
//! oldest dead letter, when the last one arrived), and the order of the queue list. Pure: the
//! samples come from the listings the TUI and the command line already make (and from the
//! store, so a restart does not forget the last hour); nothing here reads a queue.

use super::arrival::Arrival;
use std::cmp::Ordering;
use std::collections::{HashMap, VecDeque};

use jiff::Timestamp;

use crate::domain::discovery::{Discovery, DlqInfo};

/// Kept samples are at least this far apart (the newest depth is always kept besides).
pub const SAMPLE_GAP_SECS: i64 = 20;
/// How far back samples are kept, in the session and in the store.
pub const KEEP_SECS: i64 = 3_600;
/// Growth is measured over this much of the newest history.
pub const GROWTH_WINDOW_SECS: i64 = 300;
/// At most this many kept samples per queue (an hour at [`SAMPLE_GAP_SECS`], with room).
pub const MAX_SAMPLES: usize = (KEEP_SECS / SAMPLE_GAP_SECS) as usize + 2;

/// One depth of one queue, when Warren saw it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Sample {
    pub at: Timestamp,
    pub depth: u64,
}

/// A queue's depth over time: samples at least [`SAMPLE_GAP_SECS`] apart over the last
/// [`KEEP_SECS`], and the newest depth seen.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct History {
    kept: VecDeque<Sample>,
    latest: Option<Sample>,
}

impl History {
    /// Adds a depth seen at `s.at` (older than what is kept: ignored) and forgets samples past
    /// [`KEEP_SECS`].
    pub fn record(&mut self, s: Sample) {
        if self.latest.is_some_and(|l| l.at > s.at) {
            return;
        }
        self.latest = Some(s);
        let due = self
            .kept
            .back()
            .is_none_or(|b| s.at.as_second() - b.at.as_second() >= SAMPLE_GAP_SECS);
        if due {
            self.kept.push_back(s);
        }
        let horizon = s.at.as_second() - KEEP_SECS;
        while self
            .kept
            .front()
            .is_some_and(|f| f.at.as_second() < horizon)
            || self.kept.len() > MAX_SAMPLES
        {
            self.kept.pop_front();
        }
    }

    /// A history from stored samples (any order).
    pub fn from_samples(mut samples: Vec<Sample>) -> History {
        samples.sort_by_key(|s| s.at);
        let mut h = History::default();
        for s in samples {
            h.record(s);
        }
        h
    }

    /// Every point, oldest first: the kept samples and the newest depth.
    pub fn points(&self) -> impl Iterator<Item = Sample> + '_ {
        let extra = self
            .latest
            .filter(|l| self.kept.back().is_none_or(|b| b.at < l.at));
        self.kept.iter().copied().chain(extra)
    }

    pub fn latest(&self) -> Option<Sample> {
        self.latest
    }

    pub fn is_empty(&self) -> bool {
        self.latest.is_none()
    }

    /// The depths for a sparkline, oldest first.
    pub fn depths(&self) -> Vec<u64> {
        self.points().map(|s| s.depth).collect()
    }
}

/// What was read from a queue, when it was read: its oldest and newest dead letter as Warren
/// dates them (`domain::arrival`), and whether the oldest is exact or a bound.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ReadHead {
    pub at: Timestamp,
    /// Whether `oldest` is when that message arrived, exactly: else it arrived at or before.
    pub oldest_exact: bool,
    pub oldest: Option<Timestamp>,
    pub newest: Option<Timestamp>,
}

impl ReadHead {
    /// The head of a read at `at`, from each message's arrival: the CLI's reads and the TUI's
    /// date a queue alike.
    pub fn of(at: Timestamp, arrivals: impl IntoIterator<Item = Arrival>) -> ReadHead {
        let mut head = ReadHead {
            at,
            ..ReadHead::default()
        };
        for a in arrivals {
            let Some(t) = a.since() else { continue };
            if head.oldest.is_none_or(|o| t < o) {
                head.oldest = Some(t);
                head.oldest_exact = a.is_exact();
            }
            if head.newest.is_none_or(|n| t > n) {
                head.newest = Some(t);
            }
        }
        head
    }
}

/// How old the oldest dead letter is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Oldest {
    /// From the messages read: this old, exactly.
    Read(Timestamp),
    /// At least this old: the oldest read was first seen then (its arrival is a range), or the
    /// queue was not read and has held dead letters at least since Warren's first sample.
    AtLeast(Timestamp),
}

impl Oldest {
    pub fn since(self) -> Timestamp {
        match self {
            Oldest::Read(t) | Oldest::AtLeast(t) => t,
        }
    }

    /// Age in seconds at `now` (never negative).
    pub fn age_secs(self, now: Timestamp) -> u64 {
        u64::try_from(now.as_second() - self.since().as_second()).unwrap_or(0)
    }

    pub fn is_lower_bound(self) -> bool {
        matches!(self, Oldest::AtLeast(_))
    }

    /// Its age at `now` with its bound: the queue's "dead since" is its oldest message's, in
    /// the same notation (`arrival::Age::text`).
    pub fn age(self, now: Timestamp) -> crate::domain::arrival::Age {
        use crate::domain::arrival::{Age, Bound};
        Age {
            secs: self.age_secs(now),
            bound: if self.is_lower_bound() {
                Bound::AtLeast
            } else {
                Bound::Exact
            },
        }
    }
}

/// A dead-letter queue's urgency figures.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Figures {
    pub depth: Option<u64>,
    /// Dead letters per minute over the newest [`GROWTH_WINDOW_SECS`]; `None` until two
    /// samples exist.
    pub growth_per_min: Option<f64>,
    pub oldest: Option<Oldest>,
    /// When the newest dead letter arrived (as Warren saw it: a rise in depth, or a read).
    pub last_arrival: Option<Timestamp>,
    /// Consumers on the queues that feed it (`None`: no feeder known).
    pub origin_consumers: Option<u64>,
}

impl Figures {
    pub fn growing(&self) -> bool {
        self.growth_per_min.is_some_and(|g| g > 0.0)
    }
}

/// The figures of one queue from its history, what was read of it (if anything) and its
/// feeders' consumers.
pub fn figures(
    history: &History,
    depth: Option<u64>,
    read: Option<ReadHead>,
    origin_consumers: Option<u64>,
    now: Timestamp,
) -> Figures {
    let points: Vec<Sample> = history.points().collect();
    let depth = depth.or(history.latest().map(|l| l.depth));
    Figures {
        depth,
        growth_per_min: growth(&points, now),
        oldest: oldest(&points, depth, read),
        last_arrival: last_arrival(&points, read),
        origin_consumers,
    }
}

/// Rises in depth per minute over the window (a drain at the same time does not hide arrivals
/// between samples; within a sample gap it does).
fn growth(points: &[Sample], now: Timestamp) -> Option<f64> {
    let start = now.as_second() - GROWTH_WINDOW_SECS;
    // The window's points, with the one before it as the baseline.
    let first_in = points
        .iter()
        .position(|p| p.at.as_second() >= start)
        .unwrap_or(points.len());
    let from = first_in.saturating_sub(1);
    let window = points.get(from..)?;
    let (first, last) = (window.first()?, window.last()?);
    let secs = last.at.as_second() - first.at.as_second();
    if window.len() < 2 || secs <= 0 {
        return None;
    }
    let rises: u64 = window
        .windows(2)
        .map(|w| w[1].depth.saturating_sub(w[0].depth))
        .sum();
    Some(rises as f64 * 60.0 / secs as f64)
}

fn oldest(points: &[Sample], depth: Option<u64>, read: Option<ReadHead>) -> Option<Oldest> {
    if depth == Some(0) {
        return None;
    }
    // A read tells while the queue has not been empty since.
    if let Some(r) = read
        && let Some(t) = r.oldest
        && !points.iter().any(|p| p.at >= r.at && p.depth == 0)
    {
        return Some(if r.oldest_exact {
            Oldest::Read(t)
        } else {
            Oldest::AtLeast(t)
        });
    }
    // Else: the start of the newest unbroken run of non-empty samples.
    let mut since = None;
    for p in points.iter().rev() {
        if p.depth == 0 {
            break;
        }
        since = Some(p.at);
    }
    since.map(Oldest::AtLeast)
}

fn last_arrival(points: &[Sample], read: Option<ReadHead>) -> Option<Timestamp> {
    let rise = points
        .windows(2)
        .rev()
        .find(|w| w[1].depth > w[0].depth)
        .map(|w| w[1].at);
    rise.max(read.and_then(|r| r.newest))
}

/// The depths a discovery reports for its dead-letter queues (those the broker has stats for).
pub fn dlq_depths(d: &Discovery) -> Vec<(String, u64)> {
    d.dead_letter_queues
        .iter()
        .filter_map(|q| Some((q.name.clone(), q.depth?)))
        .collect()
}

/// Consumers on the queues that feed each dead-letter queue (summed over the feeders whose
/// count is known), aligned with `d.dead_letter_queues`; `None` when no feeder is known, and
/// when the known ones have none but another is not counted (it may be the one consuming).
/// Feeders are looked up in the dead-letter queue's own vhost (a discovery of every vhost holds
/// several). One map, so a vhost of 10,000 queues costs a pass, not a search per feeder.
pub fn origin_consumers(d: &Discovery) -> Vec<Option<u64>> {
    let mut consumers: fnv::FnvHashMap<(&str, &str), Option<u64>> = Default::default();
    for q in &d.other_queues {
        consumers.insert((&q.vhost, &q.name), q.consumers);
    }
    for q in &d.dead_letter_queues {
        consumers.insert((&q.vhost, &q.name), q.consumers);
    }
    d.dead_letter_queues
        .iter()
        .map(|q| {
            let counts = q.feeders.iter().map(|f| {
                consumers
                    .get(&(q.vhost.as_str(), f.as_str()))
                    .copied()
                    .flatten()
            });
            let (mut known, mut unknown) = (None::<u64>, false);
            for n in counts {
                match n {
                    Some(n) => known = Some(known.unwrap_or(0) + n),
                    None => unknown = true,
                }
            }
            // "No consumer" only when every feeder was counted.
            known.filter(|&n| n > 0 || !unknown)
        })
        .collect()
}

/// The figures of every dead-letter queue of `d` (aligned with `d.dead_letter_queues`), from
/// the histories and reads by queue name (one vhost).
pub fn dlq_figures(
    d: &Discovery,
    histories: &HashMap<String, History>,
    heads: &HashMap<String, ReadHead>,
    now: Timestamp,
) -> Vec<Figures> {
    dlq_figures_by(d, |q| (histories.get(&q.name), heads.get(&q.name)), now)
}

/// [`dlq_figures`] with each queue's history and last read found by `look` (e.g. by vhost and
/// name, for a discovery of every vhost).
pub fn dlq_figures_by<'a>(
    d: &Discovery,
    mut look: impl FnMut(&DlqInfo) -> (Option<&'a History>, Option<&'a ReadHead>),
    now: Timestamp,
) -> Vec<Figures> {
    let empty = History::default();
    d.dead_letter_queues
        .iter()
        .zip(origin_consumers(d))
        .map(|(q, consumers)| {
            let (history, head) = look(q);
            figures(
                history.unwrap_or(&empty),
                q.depth,
                head.copied(),
                consumers,
                now,
            )
        })
        .collect()
}

/// How the queue list is ordered.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum SortBy {
    /// Growing first (fastest first), then deepest.
    #[default]
    Urgency,
    Depth,
    Growth,
    Age,
    LastArrival,
    Name,
}

impl SortBy {
    /// Every order, in the number keys' order (`1` is urgency).
    pub const ALL: [SortBy; 6] = [
        SortBy::Urgency,
        SortBy::Depth,
        SortBy::Growth,
        SortBy::Age,
        SortBy::LastArrival,
        SortBy::Name,
    ];

    pub fn label(self) -> &'static str {
        match self {
            SortBy::Urgency => "urgency",
            SortBy::Depth => "depth",
            SortBy::Growth => "growth",
            SortBy::Age => "age",
            SortBy::LastArrival => "last",
            SortBy::Name => "name",
        }
    }

    pub fn parse(text: &str) -> Result<SortBy, String> {
        SortBy::ALL
            .into_iter()
            .find(|s| s.label() == text)
            .ok_or_else(|| {
                let names: Vec<&str> = SortBy::ALL.iter().map(|s| s.label()).collect();
                format!("unknown sort '{text}': use one of {}", names.join(", "))
            })
    }
}

/// The order of `rows` (indices into it) for `by`; `reverse` turns it round. Ties go by name,
/// so the order is stable from one refresh to the next.
pub fn order(rows: &[(&str, Figures)], by: SortBy, reverse: bool) -> Vec<usize> {
    let mut idx: Vec<usize> = (0..rows.len()).collect();
    idx.sort_by(|&a, &b| {
        let (na, fa) = &rows[a];
        let (nb, fb) = &rows[b];
        let primary = match by {
            SortBy::Name => na.cmp(nb),
            _ => compare(fa, fb, by),
        };
        let primary = if reverse { primary.reverse() } else { primary };
        primary.then_with(|| na.cmp(nb))
    });
    idx
}

/// Most urgent first for each order (biggest, fastest, oldest, newest), names A to Z.
fn compare(a: &Figures, b: &Figures, by: SortBy) -> Ordering {
    let depth = |f: &Figures| f.depth.unwrap_or(0);
    let growth = |f: &Figures| f.growth_per_min.unwrap_or(0.0);
    match by {
        SortBy::Urgency => b
            .growing()
            .cmp(&a.growing())
            .then_with(|| growth(b).total_cmp(&growth(a)))
            .then_with(|| depth(b).cmp(&depth(a))),
        SortBy::Depth => depth(b).cmp(&depth(a)),
        SortBy::Growth => growth(b)
            .total_cmp(&growth(a))
            .then_with(|| depth(b).cmp(&depth(a))),
        // Oldest first: the earliest `since`; unknown last.
        SortBy::Age => match (a.oldest, b.oldest) {
            (Some(x), Some(y)) => x.since().cmp(&y.since()),
            (Some(_), None) => Ordering::Less,
            (None, Some(_)) => Ordering::Greater,
            (None, None) => Ordering::Equal,
        },
        SortBy::LastArrival => b.last_arrival.cmp(&a.last_arrival),
        // By the names themselves (see `order`).
        SortBy::Name => Ordering::Equal,
    }
}

/// A growth figure in words: `+12/min`, `+0.5/min`, `0`, or `—` when unknown.
pub fn growth_text(g: Option<f64>) -> String {
    match g {
        None => "—".into(),
        Some(g) if g <= 0.0 => "0".into(),
        Some(g) if g < 10.0 => format!("+{:.1}/min", g),
        Some(g) => format!("+{:.0}/min", g),
    }
}

/// A duration in the queue list's words: `45s`, `12m`, `3h`, `2d` (`arrival::duration_words`).
pub fn duration_text(secs: u64) -> String {
    crate::domain::arrival::duration_words(secs)
}

/// The oldest dead letter's age in the one notation (`arrival::Age::text`: `≥12m` when only a
/// lower bound is known), as its messages' ages are said.
pub fn age_text(oldest: Option<Oldest>, now: Timestamp) -> String {
    oldest.map_or("—".into(), |o| o.age(now).text())
}

/// When the last dead letter arrived, as an age (`3m ago` → `3m`).
pub fn last_text(last: Option<Timestamp>, now: Timestamp) -> String {
    last.map_or("—".into(), |t| {
        duration_text(u64::try_from(now.as_second() - t.as_second()).unwrap_or(0))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One DLQ fed by `a` and `b` with these consumer counts.
    fn fed(a: Option<u64>, b: Option<u64>) -> Discovery {
        use crate::domain::discovery::{QueueInfo, Topology};
        let work = |n: &str, c: Option<u64>| {
            let mut q = QueueInfo::named(n)
                .with_arg("x-dead-letter-exchange", serde_json::json!(""))
                .with_arg("x-dead-letter-routing-key", serde_json::json!("d.dlq"));
            q.consumers = c;
            q
        };
        let t = Topology {
            queues: vec![work("a", a), work("b", b), QueueInfo::named("d.dlq")],
            ..Topology::default()
        };
        let features = crate::domain::features::BrokerFeatures::from_version("4.3.6");
        crate::domain::discovery::discover(&t, &features, &[])
    }

    #[test]
    fn no_consumer_is_said_only_when_every_feeder_was_counted() {
        assert_eq!(origin_consumers(&fed(Some(0), Some(0))), [Some(0)]);
        assert_eq!(origin_consumers(&fed(Some(0), None)), [None]);
        assert_eq!(origin_consumers(&fed(Some(2), None)), [Some(2)]);
        assert_eq!(origin_consumers(&fed(None, None)), [None]);
        assert_eq!(origin_consumers(&fed(Some(1), Some(3))), [Some(4)]);
    }

    fn at(s: i64) -> Timestamp {
        Timestamp::from_second(1_800_000_000 + s).unwrap()
    }

    fn history(points: &[(i64, u64)]) -> History {
        History::from_samples(
            points
                .iter()
                .map(|&(s, depth)| Sample { at: at(s), depth })
                .collect(),
        )
    }

    #[test]
    fn growth_counts_rises_per_minute() {
        let h = history(&[(0, 10), (30, 20), (60, 40)]);
        let f = figures(&h, None, None, None, at(60));
        assert_eq!(f.growth_per_min, Some(30.0));
        assert_eq!(f.depth, Some(40));
        assert_eq!(f.last_arrival, Some(at(60)));
        // A drain does not count against arrivals.
        let h = history(&[(0, 10), (30, 40), (60, 0)]);
        assert_eq!(
            figures(&h, None, None, None, at(60)).growth_per_min,
            Some(30.0)
        );
        // One sample says nothing.
        let h = history(&[(0, 10)]);
        assert_eq!(figures(&h, None, None, None, at(0)).growth_per_min, None);
        // Flat is zero.
        let h = history(&[(0, 5), (40, 5)]);
        assert_eq!(
            figures(&h, None, None, None, at(40)).growth_per_min,
            Some(0.0)
        );
    }

    #[test]
    fn growth_is_over_the_newest_window_only() {
        // A burst an hour-minus ago, flat since.
        let h = history(&[(0, 0), (20, 500), (3_000, 500), (3_300, 500)]);
        let f = figures(&h, None, None, None, at(3_300));
        assert_eq!(f.growth_per_min, Some(0.0));
        assert_eq!(f.last_arrival, Some(at(20)));
    }

    #[test]
    fn samples_are_thinned_and_bounded() {
        let mut h = History::default();
        for s in 0..10_000 {
            h.record(Sample {
                at: at(s),
                depth: s as u64,
            });
        }
        assert!(h.kept.len() <= MAX_SAMPLES, "{}", h.kept.len());
        assert!(h.kept.front().unwrap().at >= at(10_000 - KEEP_SECS - 1));
        assert_eq!(h.latest().unwrap().depth, 9_999);
        assert_eq!(h.points().last().unwrap().depth, 9_999);
        // An older sample than the newest is ignored.
        h.record(Sample {
            at: at(5),
            depth: 1,
        });
        assert_eq!(h.latest().unwrap().depth, 9_999);
    }

    #[test]
    fn oldest_from_a_read_while_the_queue_was_never_empty_since() {
        let h = history(&[(0, 3), (30, 4), (60, 4)]);
        let read = ReadHead {
            at: at(10),
            oldest_exact: true,
            oldest: Some(at(-500)),
            newest: Some(at(25)),
        };
        let f = figures(&h, None, Some(read), None, at(60));
        assert_eq!(f.oldest, Some(Oldest::Read(at(-500))));
        assert_eq!(f.last_arrival, Some(at(30)));
        // Emptied after the read: the read no longer tells, the samples give a lower bound.
        let h = history(&[(0, 3), (30, 0), (60, 2)]);
        let f = figures(&h, None, Some(read), None, at(60));
        assert_eq!(f.oldest, Some(Oldest::AtLeast(at(60))));
        assert_eq!(age_text(f.oldest, at(120)), "≥1m");
        // Empty now: no age.
        let f = figures(&h, Some(0), Some(read), None, at(60));
        assert_eq!(f.oldest, None);
    }

    #[test]
    fn urgency_puts_growing_first_then_depth() {
        let fig = |depth: u64, growth: Option<f64>| Figures {
            depth: Some(depth),
            growth_per_min: growth,
            ..Figures::default()
        };
        let rows = vec![
            ("big", fig(1_000, Some(0.0))),
            ("slow", fig(3, Some(1.0))),
            ("fast", fig(2, Some(50.0))),
            ("unknown", fig(10, None)),
            ("a-big", fig(1_000, None)),
        ];
        let names = |o: Vec<usize>| o.into_iter().map(|i| rows[i].0).collect::<Vec<_>>();
        assert_eq!(
            names(order(&rows, SortBy::Urgency, false)),
            ["fast", "slow", "a-big", "big", "unknown"]
        );
        assert_eq!(
            names(order(&rows, SortBy::Name, false)),
            ["a-big", "big", "fast", "slow", "unknown"]
        );
        assert_eq!(
            names(order(&rows, SortBy::Name, true)),
            ["unknown", "slow", "fast", "big", "a-big"]
        );
        assert_eq!(
            names(order(&rows, SortBy::Depth, true)),
            ["fast", "slow", "unknown", "a-big", "big"]
        );
    }

    #[test]
    fn texts() {
        assert_eq!(growth_text(None), "—");
        assert_eq!(growth_text(Some(0.0)), "0");
        assert_eq!(growth_text(Some(2.25)), "+2.2/min");
        assert_eq!(growth_text(Some(120.4)), "+120/min");
        assert_eq!(duration_text(59), "59s");
        assert_eq!(duration_text(3_600 * 5), "5h");
        assert_eq!(SortBy::parse("age"), Ok(SortBy::Age));
        assert!(
            SortBy::parse("size")
                .unwrap_err()
                .contains("urgency, depth")
        );
    }
}
