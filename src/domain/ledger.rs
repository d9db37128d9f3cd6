//! What Warren remembers of reading a queue whose reads cost deliveries, so that the decision to
//! read again is made before anything is consumed — in this run and in the next one.
//!
//! A quorum queue with a delivery limit charges a delivery for every message a browse hands back
//! (RabbitMQ 3.x with a limit, and 4.0–4.2; see [`super::quorum`]). The count a message carries
//! is only visible once it has been delivered, which is too late: by then the return is owed.
//! The ledger keeps, per queue, the highest count a message will carry at its next delivery, so
//! a second `warren show` (or `Ctrl-R`) can refuse without touching the queue. A read is written
//! to the ledger *before* it starts, charged the worst case (the page returned by a channel close,
//! which counts even on 4.3), and settled when it ends; a read that fails or crashes (a message
//! too large for a frame kills the connection) stays charged, so repeated failures reach the
//! safety margin like repeated reads. The record is forgotten only when the queue is seen empty
//! with nothing unacknowledged and no consumer, by the management API and over AMQP, and no read
//! is unsettled: messages held by a dying connection are not yet back, and a queue that looked
//! empty once must not lose what the ledger knows of them.
//!
//! Pure: the store persists [`ReadRecord`]s, the session decides with [`decide`].

use super::quorum::BrowsePolicy;

/// One queue's reading history, as kept in Warren's store.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ReadRecord {
    /// The broker version the last read was decided for (`"4.0.5"`).
    pub version: String,
    /// The effective delivery limit at the last read.
    pub limit: Option<u64>,
    /// Deliveries each read adds to every message it reads, at the last read.
    pub cost: u32,
    /// The highest `x-delivery-count` a message of this queue will show at its next delivery,
    /// as far as Warren's reads know. `None` when a read was begun and nothing is known yet.
    pub next_count: Option<u64>,
    /// RabbitMQ 4.3+: the highest `x-acquired-count` seen (every return, counted or not).
    pub acquired: Option<u64>,
    /// Reads finished.
    pub reads: u64,
    /// A read was begun and never finished (Warren stopped mid-read, or the read failed): it is
    /// charged its worst case in `next_count`.
    pub unfinished: bool,
    /// While `unfinished`: `next_count` as it stood before that read, what a settled read
    /// starts from.
    pub before_read: Option<u64>,
    /// When the last read began or ended, milliseconds since the epoch.
    pub at_ms: i64,
    /// Why the last read stopped early for safety, if it did.
    pub stopped: Option<String>,
}

/// What one delivered page tells the ledger.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ReadOutcome {
    /// Messages delivered to Warren by this read (read, or drained after the cancel).
    pub delivered: u64,
    /// The highest `x-delivery-count` among them, as delivered.
    pub max_delivery_count: Option<u64>,
    /// The highest `x-acquired-count` among them (4.3+).
    pub max_acquired_count: Option<u64>,
    /// Whether every delivered message was handed back with the explicit nack (the cheap
    /// return); false when the channel or connection was lost, which counts on every version.
    pub returned_explicitly: bool,
    /// Set when the read stopped at a message too close to its limit.
    pub stopped: Option<String>,
}

/// Whether to read a queue, decided before anything is consumed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ReadDecision {
    /// Reading costs nothing that counts towards a limit (classic, stream, 4.3 quorum, no limit).
    Free,
    /// The first read Warren knows of: it costs `cost` deliveries per message read.
    First { cost: u32, limit: u64 },
    /// Warren has read this queue before: reading again costs `cost` per message, the worst
    /// message will then stand at `next_count + cost`, and `reads_left` reads remain safe.
    Again {
        cost: u32,
        limit: u64,
        next_count: Option<u64>,
        reads_left: Option<u64>,
        reads: u64,
        unfinished: bool,
    },
    /// Reading must not happen: it would bring a message within the safety margin of its limit.
    Refuse(String),
}

impl ReadDecision {
    /// True when the read spends deliveries and Warren has read the queue before: an action
    /// that would read again must say what it costs and ask.
    pub fn needs_consent(&self) -> bool {
        matches!(self, ReadDecision::Again { .. })
    }

    /// What reading costs, in the user's words (`None` when it is free).
    pub fn cost_text(&self, queue: &str) -> Option<String> {
        match self {
            ReadDecision::Free => None,
            ReadDecision::First { cost, limit } => Some(format!(
                "reading '{queue}' costs each message read {cost} deliver{} of its limit of {limit}",
                plural_y(*cost)
            )),
            ReadDecision::Again {
                cost,
                limit,
                next_count,
                reads_left,
                reads,
                unfinished,
            } => {
                let seen = match next_count {
                    Some(c) => format!("its most-read message stands at {c} of {limit}"),
                    None => format!("the delivery counts are unknown (limit {limit})"),
                };
                let left = reads_left.map_or(String::new(), |n| {
                    format!("; {n} more read{} stay safe", if n == 1 { "" } else { "s" })
                });
                let crash = if *unfinished {
                    " A previous read did not finish, so its messages may have been charged too."
                } else {
                    ""
                };
                Some(format!(
                    "Warren has read '{queue}' {reads} time{} before: reading again costs each message \
                     read {cost} more deliver{}; {seen}{left}.{crash}",
                    if *reads == 1 { "" } else { "s" },
                    plural_y(*cost)
                ))
            }
            ReadDecision::Refuse(why) => Some(why.clone()),
        }
    }
}

fn plural_y(n: u32) -> &'static str {
    if n == 1 { "y" } else { "ies" }
}

/// What the read just made cost on this broker, in the user's words: RabbitMQ 4.3 counts only
/// failed deliveries against the limit (`x-delivery-count`) and every return in
/// `x-acquired-count`; earlier versions count every return. `None` where nothing is counted.
pub fn cost_note(
    policy: &BrowsePolicy,
    version: &str,
    delivered: u64,
    max_delivery_count: Option<u64>,
    max_acquired_count: Option<u64>,
) -> Option<String> {
    let limit = policy.limit?;
    if delivered == 0 {
        return None;
    }
    let seen = max_delivery_count.map_or(String::new(), |c| {
        format!("; the most-delivered message had x-delivery-count {c} when read")
    });
    Some(if policy.cost_per_browse == 0 {
        let acquired = max_acquired_count.map_or(String::new(), |a| {
            format!(" (x-acquired-count, which counts every return, reached {a})")
        });
        format!(
            "RabbitMQ {version} counts only failed deliveries against this queue's limit of {limit}: reading {delivered} message(s) cost none of it{acquired}{seen}"
        )
    } else {
        let left = max_delivery_count
            .map(|c| c.saturating_add(u64::from(policy.cost_per_browse)))
            .and_then(|c| policy.browses_left(c))
            .map_or(String::new(), |n| format!("; {n} more read(s) stay safe"));
        format!(
            "RabbitMQ {version} counts every return: this read cost each of {delivered} message(s) {} deliver{} of the limit of {limit}{seen}{left}",
            policy.cost_per_browse,
            plural_y(policy.cost_per_browse)
        )
    })
}

/// Decides whether reading is allowed, before any message is consumed.
pub fn decide(policy: &BrowsePolicy, record: Option<&ReadRecord>) -> ReadDecision {
    if !policy.allowed {
        return ReadDecision::Refuse(
            policy
                .reason
                .clone()
                .unwrap_or_else(|| "browsing this queue is not safe".to_string()),
        );
    }
    let Some(limit) = policy.limit else {
        return ReadDecision::Free;
    };
    // An unsettled read is already charged its worst case in `next_count`. Where an explicit
    // return is free (4.3+), only reads that never settled are charged (their page went back
    // by a close, which counts): the queue is refused once one more such read could bring a
    // message within the margin.
    let worst = record.and_then(|r| r.next_count);
    if let (Some(r), Some(c)) = (record, worst)
        && !survives_a_lost_read(policy, c)
    {
        let unsettled = if r.unfinished {
            " Its last read did not finish (the connection was lost or Warren stopped), so it \
             is counted as spent."
        } else {
            ""
        };
        return ReadDecision::Refuse(format!(
            "{} Warren remembers this from its last read{}, and refuses before touching the queue.{unsettled}",
            policy.explain(Some(c)),
            r.stopped
                .as_deref()
                .map_or(String::new(), |s| format!(" ({s})"))
        ));
    }
    if policy.cost_per_browse == 0 {
        return ReadDecision::Free;
    }
    let Some(r) = record else {
        return ReadDecision::First {
            cost: policy.cost_per_browse,
            limit,
        };
    };
    ReadDecision::Again {
        cost: policy.cost_per_browse,
        limit,
        next_count: worst,
        reads_left: worst.and_then(|c| policy.browses_left(c)),
        reads: r.reads,
        unfinished: r.unfinished,
    }
}

/// True when a message with this count stays outside the margin even if the next read is lost
/// (a close counts on every version, at least one delivery).
fn survives_a_lost_read(policy: &BrowsePolicy, count: u64) -> bool {
    policy.limit.is_none_or(|limit| {
        count
            .saturating_add(u64::from(policy.cost_per_browse.max(1)))
            .saturating_add(policy.margin)
            <= limit
    })
}

/// The record to write before a read starts, charged the worst case: Warren stops or the
/// connection dies mid-read and the broker returns the page by closing the channel (one
/// delivery each, on every version). [`finish`] settles it.
pub fn begin(
    policy: &BrowsePolicy,
    version: &str,
    prev: Option<&ReadRecord>,
    now_ms: i64,
) -> ReadRecord {
    let mut r = prev.cloned().unwrap_or_default();
    r.version = version.to_string();
    r.limit = policy.limit;
    r.cost = policy.cost_per_browse;
    r.before_read = r.next_count;
    let worst = u64::from(policy.cost_per_browse.max(1));
    r.next_count = Some(r.next_count.unwrap_or(0).saturating_add(worst));
    r.unfinished = true;
    r.at_ms = now_ms;
    r
}

/// The record after a read ended (successfully or not).
pub fn finish(
    policy: &BrowsePolicy,
    begun: &ReadRecord,
    outcome: &ReadOutcome,
    now_ms: i64,
) -> ReadRecord {
    let mut r = begun.clone();
    r.at_ms = now_ms;
    if r.unfinished {
        // Settled: from what was known before this read, not from its worst case.
        r.next_count = r.before_read;
    }
    r.unfinished = false;
    r.before_read = None;
    r.reads = r.reads.saturating_add(1);
    r.stopped = outcome.stopped.clone();
    if outcome.delivered > 0 {
        let charge = if outcome.returned_explicitly {
            u64::from(policy.cost_per_browse)
        } else {
            // A close counts even where an explicit return is free.
            u64::from(policy.cost_per_browse.max(1))
        };
        let seen = outcome
            .max_delivery_count
            .unwrap_or(0)
            .saturating_add(charge);
        // The head of a quorum queue is where returned messages go: what this read saw is the
        // freshest picture, but a message it did not reach may still carry an older, higher count.
        r.next_count = Some(r.next_count.map_or(seen, |c| c.max(seen)));
        r.acquired = match (r.acquired, outcome.max_acquired_count) {
            (Some(a), Some(b)) => Some(a.max(b.saturating_add(1))),
            (a, b) => a.or(b.map(|b| b.saturating_add(1))),
        };
    }
    r
}

/// What the broker says of a queue's emptiness, as [`forget_when_empty`] needs it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Emptiness {
    /// The management API reports no message (ready or unacknowledged) and no consumer.
    pub reported: bool,
    /// A passive declare over AMQP, now: no ready message and no consumer.
    pub declared: bool,
}

impl Emptiness {
    /// The management API's part: every figure present and zero.
    pub fn reported(messages: Option<u64>, unacked: Option<u64>, consumers: Option<u64>) -> bool {
        messages == Some(0) && unacked.unwrap_or(0) == 0 && consumers.unwrap_or(0) == 0
    }
}

/// Every message the ledger counted is gone only when the queue is empty with nothing held by
/// anyone (both views agree) and no read of Warren's is unsettled: a dying connection's
/// messages are unacknowledged, not gone, until the broker takes them back. Then a queue
/// refilled later starts from a clean record. An unsettled read seen so is settled at its worst
/// case instead (the caller writes it back): the record goes at the next such look, never at
/// the first.
pub fn forget_when_empty(record: Option<ReadRecord>, seen: Emptiness) -> Option<ReadRecord> {
    let empty = seen.reported && seen.declared;
    match record {
        Some(r) if empty && !r.unfinished => None,
        Some(mut r) if empty => {
            r.unfinished = false;
            r.before_read = None;
            Some(r)
        }
        other => other,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::features::{BrokerVersion, QueueType};

    fn policy_4_0() -> BrowsePolicy {
        BrowsePolicy::decide(BrokerVersion::new(4, 0, 5), &QueueType::Quorum, Some(20))
    }

    /// Reads a queue the way `warren show` does, many times: with the ledger the head message
    /// never gets past the margin, and once refused, the queue is not touched again.
    #[test]
    fn repeated_reads_stop_before_the_limit_and_then_touch_nothing() {
        let p = policy_4_0();
        let mut broker_count = 0u64; // the message's real x-delivery-count
        let mut record: Option<ReadRecord> = None;
        let mut reads = 0;
        let mut refused = 0;
        for _ in 0..30 {
            match decide(&p, record.as_ref()) {
                ReadDecision::Refuse(_) => {
                    refused += 1;
                    continue;
                }
                ReadDecision::Free => panic!("4.0 quorum with a limit is not free"),
                _ => {}
            }
            let begun = begin(&p, "4.0.5", record.as_ref(), 0);
            let stopped = (!p.message_safe(broker_count)).then(|| "too close".to_string());
            let outcome = ReadOutcome {
                delivered: 1,
                max_delivery_count: Some(broker_count),
                max_acquired_count: None,
                returned_explicitly: true,
                stopped,
            };
            broker_count += 1; // the return
            reads += 1;
            record = Some(finish(&p, &begun, &outcome, 1));
        }
        assert_eq!(reads, 15, "15 reads fit under 20 with a margin of 5");
        assert_eq!(refused, 15);
        assert!(broker_count < 20, "the message survives: {broker_count}");
        assert!(broker_count + p.margin <= 20);
    }

    #[test]
    fn a_crashed_read_is_charged_the_worst_case() {
        let p = policy_4_0();
        let done = finish(
            &p,
            &begin(&p, "4.0.5", None, 0),
            &ReadOutcome {
                delivered: 3,
                max_delivery_count: Some(13),
                returned_explicitly: true,
                ..Default::default()
            },
            1,
        );
        assert_eq!(done.next_count, Some(14));
        assert!(!done.unfinished && done.before_read.is_none());
        assert!(matches!(
            decide(&p, Some(&done)),
            ReadDecision::Again {
                next_count: Some(14),
                reads_left: Some(1),
                ..
            }
        ));
        // Begun again and never finished: one more delivery may have been charged.
        let crashed = begin(&p, "4.0.5", Some(&done), 2);
        assert!(crashed.unfinished);
        assert_eq!(crashed.next_count, Some(15));
        assert!(matches!(
            decide(&p, Some(&crashed)),
            ReadDecision::Refuse(_)
        ));
    }

    /// Reads that fail before they settle (a message too large for a frame kills the connection
    /// and the broker returns the page, one delivery each) reach the margin like reads do.
    #[test]
    fn failed_reads_are_charged_until_refused() {
        let p = policy_4_0();
        let mut record: Option<ReadRecord> = None;
        let mut failed = 0;
        while !matches!(decide(&p, record.as_ref()), ReadDecision::Refuse(_)) {
            record = Some(begin(&p, "4.0.5", record.as_ref(), failed));
            failed += 1;
            assert!(failed <= 20, "never refused");
        }
        assert_eq!(failed, 15, "20 - margin 5");
        // A read that then settles starts from what the failures were charged, not from zero.
        let begun = begin(&p, "4.0.5", record.as_ref(), 99);
        let done = finish(&p, &begun, &ReadOutcome::default(), 100);
        assert_eq!(done.next_count, Some(15));
    }

    /// 4.3 returns a page for free, but a lost connection's close still counts: failed reads
    /// are charged there too, and only they.
    #[test]
    fn on_4_3_only_failed_reads_are_charged() {
        let p = BrowsePolicy::decide(BrokerVersion::new(4, 3, 6), &QueueType::Quorum, Some(20));
        let read = |r: Option<&ReadRecord>| {
            finish(
                &p,
                &begin(&p, "4.3.6", r, 0),
                &ReadOutcome {
                    delivered: 6,
                    max_delivery_count: Some(0),
                    returned_explicitly: true,
                    ..Default::default()
                },
                1,
            )
        };
        let mut record = Some(read(None));
        for _ in 0..30 {
            assert_eq!(decide(&p, record.as_ref()), ReadDecision::Free);
            record = Some(read(record.as_ref()));
        }
        assert_eq!(record.as_ref().and_then(|r| r.next_count), Some(0));
        let mut failed = 0;
        while decide(&p, record.as_ref()) == ReadDecision::Free {
            record = Some(begin(&p, "4.3.6", record.as_ref(), 2));
            failed += 1;
            assert!(failed <= 20, "never refused");
        }
        assert_eq!(failed, 15);
        assert!(matches!(
            decide(&p, record.as_ref()),
            ReadDecision::Refuse(_)
        ));
    }

    #[test]
    fn forgotten_only_when_both_views_are_empty_and_never_at_the_first_look_after_a_failed_read() {
        let p = policy_4_0();
        let settled = finish(
            &p,
            &begin(&p, "4.0.5", None, 0),
            &ReadOutcome {
                delivered: 1,
                max_delivery_count: Some(3),
                returned_explicitly: true,
                ..Default::default()
            },
            1,
        );
        let both = Emptiness {
            reported: true,
            declared: true,
        };
        let once = Emptiness {
            reported: true,
            declared: false,
        };
        assert_eq!(forget_when_empty(Some(settled.clone()), both), None);
        assert_eq!(
            forget_when_empty(Some(settled.clone()), once),
            Some(settled.clone())
        );
        let crashed = begin(&p, "4.0.5", Some(&settled), 2);
        let once = forget_when_empty(Some(crashed.clone()), both);
        assert!(
            once.as_ref()
                .is_some_and(|r| !r.unfinished && r.next_count == crashed.next_count),
            "settled at its worst case, kept: {once:?}"
        );
        assert_eq!(
            forget_when_empty(once, both),
            None,
            "gone at the second look"
        );
        assert!(Emptiness::reported(Some(0), Some(0), Some(0)));
        assert!(!Emptiness::reported(Some(0), Some(2), Some(0)), "held");
        assert!(!Emptiness::reported(Some(0), None, Some(1)), "a consumer");
        assert!(!Emptiness::reported(None, None, None), "not reported");
    }

    #[test]
    fn free_reads_and_first_reads() {
        let free = BrowsePolicy::decide(BrokerVersion::new(4, 3, 6), &QueueType::Quorum, Some(20));
        assert_eq!(decide(&free, None), ReadDecision::Free);
        assert_eq!(
            decide(&BrowsePolicy::unrestricted(), None),
            ReadDecision::Free
        );
        let p = policy_4_0();
        let first = decide(&p, None);
        assert_eq!(first, ReadDecision::First { cost: 1, limit: 20 });
        assert!(!first.needs_consent());
        assert!(
            first
                .cost_text("dlq")
                .is_some_and(|t| t.contains("1 delivery"))
        );
        let again = decide(
            &p,
            Some(&ReadRecord {
                next_count: Some(3),
                reads: 3,
                ..Default::default()
            }),
        );
        assert!(again.needs_consent());
        let text = again.cost_text("dlq").unwrap_or_default();
        assert!(
            text.contains("3 times") && text.contains("12 more reads"),
            "{text}"
        );
    }

    #[test]
    fn a_lost_channel_counts_even_on_4_3() {
        let p = BrowsePolicy::decide(BrokerVersion::new(3, 10, 8), &QueueType::Quorum, Some(20));
        let r = finish(
            &p,
            &begin(&p, "3.10.8", None, 0),
            &ReadOutcome {
                delivered: 2,
                max_delivery_count: Some(4),
                returned_explicitly: false,
                ..Default::default()
            },
            1,
        );
        assert_eq!(r.next_count, Some(5));
        let empty = Emptiness {
            reported: true,
            declared: true,
        };
        assert_eq!(forget_when_empty(Some(r.clone()), empty), None);
        assert_eq!(forget_when_empty(None, empty), None);
    }

    #[test]
    fn refusal_up_front_is_kept() {
        let p = BrowsePolicy::decide(BrokerVersion::new(4, 0, 5), &QueueType::Quorum, Some(5));
        assert!(matches!(decide(&p, None), ReadDecision::Refuse(_)));
    }
}
