//! How a read of a queue ended, said honestly: the one rule that decides whether a read may be
//! called "all" of the queue, used by the TUI's status line and by the CLI (`show`, `groups`,
//! `export`, whose "whole" look may say a group is gone).
//!
//! A read that took every message ready when it began is not yet all of the queue: messages
//! handed back by an earlier read may still have been coming back (RabbitMQ makes them ready
//! again one consumer's batch at a time: a read of a million once began with 786,432 of them
//! ready and called that "all"), others may have arrived, and another consumer may hold some
//! unacknowledged. So "all" needs the broker's own figures to agree: what was ready at the
//! start, what the queue held at the end (asked while the read still held what it read), and
//! nothing held by anyone else.

/// Why a page ended where it did, as the read saw it (before [`judge`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum StopReason {
    /// `limit` messages were read.
    Limit,
    /// Every message that was ready when the read began was read (streams: the tail was
    /// reached). Not yet "all": [`judge`] decides that.
    Exhausted,
    /// The next message is too close to its delivery limit to be read again; `reason` says
    /// why and how to make the queue safe.
    QuorumSafety { delivery_count: u64, reason: String },
    /// The broker sent nothing for the idle timeout (another consumer may hold messages).
    Idle,
}

/// The broker's figures around one read.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ReadFigures {
    /// Messages the read kept.
    pub read: u64,
    /// The queue's count when the read began (ready messages; a stream's depth).
    pub at_start: u64,
    /// What the queue held when the read ended, asked while the read still held every message
    /// it was sent: ready beside them plus them. `None`: not asked (streams, a read kept from
    /// earlier).
    pub at_end: Option<u64>,
    /// Messages another consumer held unacknowledged when the read began (they are in the
    /// queue, and no read can see them).
    pub held_elsewhere: u64,
}

impl ReadFigures {
    /// The most the queue was seen to hold: at the start, at the end, with what others held.
    fn held(&self) -> u64 {
        self.at_start
            .max(self.at_end.unwrap_or(0))
            .saturating_add(self.held_elsewhere)
    }
}

/// A read's end, judged.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ReadEnd {
    /// Every message the queue held: what was read is what the broker counted, start and end.
    All { n: u64 },
    /// Stopped at the limit; `of` is the most the queue was seen to hold (0: not reported).
    Limit { n: u64, of: u64 },
    /// Everything ready at the start was read, but the queue's count changed meanwhile, or
    /// another consumer held some: `n` read of `held`.
    Changed {
        n: u64,
        at_start: u64,
        at_end: Option<u64>,
        held_elsewhere: u64,
    },
    /// A message too close to its delivery limit stopped the read.
    Safety { n: u64, of: u64, reason: String },
    /// The broker sent nothing more for the idle timeout.
    Idle { n: u64, of: u64 },
}

/// The rule: "all" only when the read got what the broker counted.
pub fn judge(stop: &StopReason, f: &ReadFigures) -> ReadEnd {
    let (n, of) = (f.read, f.held());
    match stop {
        StopReason::Limit => ReadEnd::Limit { n, of },
        StopReason::QuorumSafety { reason, .. } => ReadEnd::Safety {
            n,
            of,
            reason: reason.clone(),
        },
        StopReason::Idle => ReadEnd::Idle { n, of },
        StopReason::Exhausted
            if n == f.at_start && f.at_end.is_none_or(|e| e == n) && f.held_elsewhere == 0 =>
        {
            ReadEnd::All { n }
        }
        StopReason::Exhausted => ReadEnd::Changed {
            n,
            at_start: f.at_start,
            at_end: f.at_end,
            held_elsewhere: f.held_elsewhere,
        },
    }
}

impl ReadEnd {
    /// Every message the queue held was read: only such a look may say a group is gone.
    pub fn whole(&self) -> bool {
        matches!(self, ReadEnd::All { .. })
    }

    /// The words for the message list's status line and the CLI.
    pub fn text(&self) -> String {
        match self {
            ReadEnd::All { n } => format!("all {n} messages"),
            // Stopping at the limit must not look like the end of the queue.
            ReadEnd::Limit { n, of } if of > n => {
                format!("first {n} of {of} — :limit N reads more")
            }
            ReadEnd::Limit { n, .. } => format!("first {n} (the limit) — :limit N reads more"),
            ReadEnd::Changed {
                n,
                at_start,
                at_end,
                held_elsewhere,
            } => changed_text(*n, *at_start, *at_end, *held_elsewhere),
            ReadEnd::Safety { n, reason, .. } => format!("stopped after {n}: {reason}"),
            ReadEnd::Idle { n, of } if of > n => format!(
                "{n} of {of} messages: the broker sent nothing more (the rest are held by another consumer or arrived late)"
            ),
            ReadEnd::Idle { n, .. } => {
                format!("{n} messages (the rest are held by another consumer or arrived late)")
            }
        }
    }
}

/// A read of everything ready at its start, in a queue that held something else.
fn changed_text(n: u64, at_start: u64, at_end: Option<u64>, held_elsewhere: u64) -> String {
    let mut said = match at_end {
        Some(end) if end > n => format!(
            "{n} read, not all: the queue held {end} by the end of the read ({at_start} ready when it began; \
             more came back or arrived meanwhile)"
        ),
        Some(end) if end < n => format!(
            "{n} read; the queue held {end} by the end of the read ({at_start} ready when it began)"
        ),
        _ if at_start != n => format!("{n} read of the {at_start} ready when the read began"),
        _ => format!("{n} read"),
    };
    if held_elsewhere > 0 {
        said.push_str(&format!(
            "; {held_elsewhere} more held unacknowledged by another consumer, which no read can see"
        ));
    }
    said
}

#[cfg(test)]
mod tests {
    use super::*;

    fn figures(read: u64, at_start: u64, at_end: Option<u64>) -> ReadFigures {
        ReadFigures {
            read,
            at_start,
            at_end,
            held_elsewhere: 0,
        }
    }

    #[test]
    fn all_only_when_the_read_matches_the_count_at_start_and_at_end() {
        let end = judge(&StopReason::Exhausted, &figures(42, 42, Some(42)));
        assert_eq!(end, ReadEnd::All { n: 42 });
        assert!(end.whole());
        assert_eq!(end.text(), "all 42 messages");
        // No count at the end (a stream): the count at the start decides.
        assert!(judge(&StopReason::Exhausted, &figures(7, 7, None)).whole());
        assert!(judge(&StopReason::Exhausted, &figures(0, 0, Some(0))).whole());
    }

    /// The report: a read began while an earlier one's million were still coming back.
    #[test]
    fn a_read_of_what_was_ready_while_more_came_back_is_not_all() {
        let end = judge(
            &StopReason::Exhausted,
            &figures(786_432, 786_432, Some(1_000_000)),
        );
        assert!(!end.whole());
        let text = end.text();
        assert!(!text.contains("all "), "{text}");
        assert!(text.starts_with("786432 read, not all"), "{text}");
        assert!(text.contains("held 1000000 by the end"), "{text}");
        assert!(text.contains("786432 ready when it began"), "{text}");
    }

    #[test]
    fn messages_held_by_another_consumer_make_it_not_all() {
        let f = ReadFigures {
            held_elsewhere: 1,
            ..figures(9, 9, Some(9))
        };
        let end = judge(&StopReason::Exhausted, &f);
        assert!(!end.whole());
        assert_eq!(
            end.text(),
            "9 read; 1 more held unacknowledged by another consumer, which no read can see"
        );
    }

    #[test]
    fn a_read_short_of_its_start_count_is_not_all() {
        let end = judge(&StopReason::Exhausted, &figures(5, 8, None));
        assert!(!end.whole());
        assert_eq!(end.text(), "5 read of the 8 ready when the read began");
    }

    #[test]
    fn the_limit_names_the_most_the_queue_was_seen_to_hold() {
        let end = judge(&StopReason::Limit, &figures(500, 2600, Some(2700)));
        assert_eq!(end.text(), "first 500 of 2700 — :limit N reads more");
        assert!(!end.whole());
        // A stream reports no count: still not "all".
        let end = judge(&StopReason::Limit, &figures(500, 0, None));
        assert_eq!(end.text(), "first 500 (the limit) — :limit N reads more");
    }

    #[test]
    fn idle_and_safety_stops_are_never_all() {
        let idle = judge(&StopReason::Idle, &figures(3, 10, Some(3)));
        assert!(!idle.whole());
        assert!(
            idle.text().starts_with("3 of 10 messages"),
            "{}",
            idle.text()
        );
        let idle = judge(&StopReason::Idle, &figures(3, 3, None));
        assert_eq!(
            idle.text(),
            "3 messages (the rest are held by another consumer or arrived late)"
        );
        let safety = StopReason::QuorumSafety {
            delivery_count: 4,
            reason: "near its limit".into(),
        };
        let end = judge(&safety, &figures(2, 10, Some(10)));
        assert!(!end.whole());
        assert_eq!(end.text(), "stopped after 2: near its limit");
    }
}
