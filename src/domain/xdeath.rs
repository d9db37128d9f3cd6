//! The broker's own death record: the `x-death` array and the `x-first-death-*` /
//! `x-last-death-*` summaries RabbitMQ writes when it dead-letters a message.
//!
//! The header comes from outside the process, often from clients that rewrote it, so parsing keeps
//! every field it can read and records, in `problems`, everything it could not. Entries stay in
//! the array's order (newest first as the broker writes it); nothing here assumes they are sorted
//! by `time`, which 3.13.0–3.13.2 got wrong.

use std::fmt;

use jiff::Timestamp;

use super::value::{HeaderValue, Table};

/// Why the broker dead-lettered a message.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum DeathReason {
    /// A consumer rejected or nacked it without requeue.
    Rejected,
    /// Its TTL (per-message or the queue's) ran out.
    Expired,
    /// The queue's max-length dropped it from the head.
    MaxLen,
    /// A quorum queue's delivery limit was reached.
    DeliveryLimit,
    /// A reason this version of Warren does not know, kept as written.
    Other(String),
}

impl DeathReason {
    pub fn parse(s: &str) -> DeathReason {
        match s {
            "rejected" => DeathReason::Rejected,
            "expired" => DeathReason::Expired,
            "maxlen" => DeathReason::MaxLen,
            "delivery_limit" => DeathReason::DeliveryLimit,
            other => DeathReason::Other(other.to_string()),
        }
    }

    /// The broker's spelling.
    pub fn as_str(&self) -> &str {
        match self {
            DeathReason::Rejected => "rejected",
            DeathReason::Expired => "expired",
            DeathReason::MaxLen => "maxlen",
            DeathReason::DeliveryLimit => "delivery_limit",
            DeathReason::Other(s) => s,
        }
    }

    /// True for the reasons that mean a consumer had the message and failed it.
    pub fn is_consumer_failure(&self) -> bool {
        matches!(self, DeathReason::Rejected | DeathReason::DeliveryLimit)
    }
}

impl fmt::Display for DeathReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One `x-death` entry: one `{queue, reason}` pair and how often it happened.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Death {
    pub queue: Option<String>,
    pub reason: Option<DeathReason>,
    /// How many times this pair happened; `None` when the entry had no readable count.
    pub count: Option<i64>,
    /// When this pair *first* happened (the broker does not update it on repeats).
    pub time: Option<Timestamp>,
    /// The exchange the message had been published to before this death.
    pub exchange: Option<String>,
    pub routing_keys: Vec<String>,
    /// The per-message TTL the broker removed when the message expired, in milliseconds as text.
    pub original_expiration: Option<String>,
}

impl Death {
    /// The count, 1 when the entry did not say (an entry exists because it happened at least once).
    pub fn times(&self) -> i64 {
        self.count.unwrap_or(1).max(1)
    }
}

/// `x-first-death-*` or `x-last-death-*`.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct DeathSummary {
    pub queue: Option<String>,
    pub reason: Option<DeathReason>,
    pub exchange: Option<String>,
}

/// Everything the broker recorded about a message's deaths.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct DeathHistory {
    /// In header order: newest first as the broker writes it.
    pub entries: Vec<Death>,
    pub first: Option<DeathSummary>,
    /// Only on RabbitMQ 3.13+.
    pub last: Option<DeathSummary>,
    /// What could not be read, in words, for display next to the history.
    pub problems: Vec<String>,
    /// A framework carried this history over from the delivery that failed when it published
    /// the message here (Symfony's failure transport: its delay queue's expiry): shown as what it
    /// is, never taken for how or when the message came here.
    pub copied: bool,
}

impl DeathHistory {
    /// The routing key the message had when it died in `queue` (the first the broker recorded
    /// there): a wait queue without a dead-letter routing key sends it on with that key.
    pub fn routing_key_in(&self, queue: &str) -> Option<&str> {
        self.entries
            .iter()
            .find(|d| d.queue.as_deref() == Some(queue))
            .and_then(|d| d.routing_keys.first())
            .map(String::as_str)
    }

    /// True when the broker dead-lettered the message at least once.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty() && self.first.is_none() && self.last.is_none()
    }

    /// The entry for the queue the message failed in: the newest entry whose reason is a consumer
    /// failure (a retry ladder ends with an expiry in its wait queue, but the failure happened in
    /// the work queue); otherwise the newest entry.
    pub fn origin_entry(&self) -> Option<&Death> {
        self.entries
            .iter()
            .find(|d| {
                d.reason
                    .as_ref()
                    .is_some_and(DeathReason::is_consumer_failure)
                    && d.queue.is_some()
            })
            .or_else(|| self.entries.iter().find(|d| d.queue.is_some()))
    }

    /// The queue the message failed in (see `origin_entry`), falling back to the
    /// `x-last-death-queue` / `x-first-death-queue` summaries when no entry names one.
    pub fn origin_queue(&self) -> Option<&str> {
        self.origin_entry()
            .and_then(|d| d.queue.as_deref())
            .or_else(|| self.last.as_ref().and_then(|s| s.queue.as_deref()))
            .or_else(|| self.first.as_ref().and_then(|s| s.queue.as_deref()))
    }

    /// The latest `time` of any entry: the start of the most recent phase the header knows of.
    pub fn latest_time(&self) -> Option<Timestamp> {
        self.entries.iter().filter_map(|d| d.time).max()
    }
}

/// Reads the death headers of a message. Never fails: unreadable parts end up in `problems`.
pub fn parse(headers: &Table) -> DeathHistory {
    let mut history = DeathHistory::default();
    match headers.get("x-death") {
        None => {}
        Some(HeaderValue::Array(items)) => {
            for (i, item) in items.iter().enumerate() {
                match item {
                    HeaderValue::Table(t) => {
                        history
                            .entries
                            .push(parse_entry(i, t, &mut history.problems));
                    }
                    other => history.problems.push(format!(
                        "x-death entry {i} is a {} instead of a table; skipped",
                        other.type_name()
                    )),
                }
            }
        }
        // Some clients flatten a one-entry history into the table itself.
        Some(HeaderValue::Table(t)) => {
            history.problems.push(
                "x-death is a single table instead of an array; read as one entry".to_string(),
            );
            history
                .entries
                .push(parse_entry(0, t, &mut history.problems));
        }
        Some(other) => history.problems.push(format!(
            "x-death is a {} instead of an array of tables; ignored",
            other.type_name()
        )),
    }
    history.first = summary(headers, "x-first-death", &mut history.problems);
    history.last = summary(headers, "x-last-death", &mut history.problems);
    history
}

fn parse_entry(i: usize, t: &Table, problems: &mut Vec<String>) -> Death {
    let mut text = |field: &str, required: bool| -> Option<String> {
        match t.get(field) {
            None => {
                if required {
                    problems.push(format!("x-death entry {i} has no {field}"));
                }
                None
            }
            Some(v) => match value_text(v) {
                Some(s) => Some(s),
                None => {
                    problems.push(format!(
                        "x-death entry {i}: {field} is a {} instead of a string",
                        v.type_name()
                    ));
                    None
                }
            },
        }
    };
    let queue = text("queue", true);
    let reason = text("reason", true).map(|r| DeathReason::parse(&r));
    let exchange = text("exchange", false);
    let original_expiration = text("original-expiration", false);

    let count = match t.get("count") {
        None => {
            problems.push(format!("x-death entry {i} has no count"));
            None
        }
        Some(v) => match v.as_i64() {
            Some(n) if n >= 0 => Some(n),
            _ => {
                problems.push(format!(
                    "x-death entry {i}: count {v} is not a number of times"
                ));
                None
            }
        },
    };
    let time = match t.get("time") {
        None => None,
        Some(v) => {
            let parsed = timestamp_from_value(v);
            if parsed.is_none() {
                problems.push(format!("x-death entry {i}: time is not a timestamp"));
            }
            parsed
        }
    };
    let routing_keys = match t.get("routing-keys") {
        None => Vec::new(),
        Some(HeaderValue::Array(keys)) => keys
            .iter()
            .filter_map(|k| {
                let s = value_text(k);
                if s.is_none() {
                    problems.push(format!(
                        "x-death entry {i}: a routing key is a {}",
                        k.type_name()
                    ));
                }
                s
            })
            .collect(),
        // A lone string is a readable if unusual way to write one key.
        Some(v) => match value_text(v) {
            Some(s) => vec![s],
            None => {
                problems.push(format!(
                    "x-death entry {i}: routing-keys is a {}",
                    v.type_name()
                ));
                Vec::new()
            }
        },
    };
    Death {
        queue,
        reason,
        count,
        time,
        exchange,
        routing_keys,
        original_expiration,
    }
}

fn summary(headers: &Table, prefix: &str, problems: &mut Vec<String>) -> Option<DeathSummary> {
    // `{prefix}-{name}` found without building it: this runs twice for every message a run
    // reads, and six `format!`s were a tenth of a replay's work per message (callgrind).
    let mut field = |name: &str| -> Option<String> {
        let (key, v) = headers.iter().find(|(k, _)| {
            k.strip_prefix(prefix).and_then(|r| r.strip_prefix('-')) == Some(name)
        })?;
        let s = value_text(v);
        if s.is_none() {
            problems.push(format!("{key} is a {} instead of a string", v.type_name()));
        }
        s
    };
    let s = DeathSummary {
        queue: field("queue"),
        reason: field("reason").map(|r| DeathReason::parse(&r)),
        exchange: field("exchange"),
    };
    (s.queue.is_some() || s.reason.is_some() || s.exchange.is_some()).then_some(s)
}

/// Text of a string header, lossily decoded: broker-written names are UTF-8, and a name with a
/// bad byte is still better shown than dropped.
pub(crate) fn value_text(v: &HeaderValue) -> Option<String> {
    match v {
        HeaderValue::ShortString(b) | HeaderValue::LongString(b) => {
            Some(String::from_utf8_lossy(b).into_owned())
        }
        _ => None,
    }
}

/// An AMQP timestamp, or the plain integer the management API turns it into (seconds).
pub(crate) fn timestamp_from_value(v: &HeaderValue) -> Option<Timestamp> {
    match v {
        HeaderValue::Timestamp(s) => i64::try_from(*s)
            .ok()
            .and_then(|s| Timestamp::from_second(s).ok()),
        HeaderValue::ShortString(_) | HeaderValue::LongString(_) => {
            let s = v.as_str()?.trim();
            s.parse::<Timestamp>().ok().or_else(|| {
                s.parse::<i64>()
                    .ok()
                    .and_then(|n| Timestamp::from_second(n).ok())
            })
        }
        other => other.as_i64().and_then(|s| Timestamp::from_second(s).ok()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(v: &str) -> HeaderValue {
        HeaderValue::string(v)
    }

    fn entry(count: i64, reason: &str, queue: &str) -> HeaderValue {
        HeaderValue::Table(
            [
                ("count".to_string(), HeaderValue::I64(count)),
                ("reason".to_string(), s(reason)),
                ("queue".to_string(), s(queue)),
                ("time".to_string(), HeaderValue::Timestamp(1_759_042_215)),
            ]
            .into_iter()
            .collect(),
        )
    }

    #[test]
    fn ladder_origin_is_the_rejecting_queue() {
        let mut h = Table::new();
        h.insert(
            "x-death",
            HeaderValue::Array(vec![
                entry(2, "expired", "orders.retry.wait"),
                entry(2, "rejected", "orders.process"),
            ]),
        );
        let d = parse(&h);
        assert!(d.problems.is_empty(), "{:?}", d.problems);
        assert_eq!(d.origin_queue(), Some("orders.process"));
        assert_eq!(
            d.entries.first().and_then(|e| e.reason.clone()),
            Some(DeathReason::Expired)
        );
    }

    #[test]
    fn unknown_reason_is_kept() {
        let mut h = Table::new();
        h.insert(
            "x-death",
            HeaderValue::Array(vec![entry(1, "poisoned", "q")]),
        );
        let d = parse(&h);
        assert_eq!(
            d.entries.first().and_then(|e| e.reason.clone()),
            Some(DeathReason::Other("poisoned".into()))
        );
    }

    #[test]
    fn malformed_shapes_keep_what_parses() {
        let mut bad_entry = Table::new();
        bad_entry.insert("count", s("many"));
        bad_entry.insert("queue", HeaderValue::I32(4));
        bad_entry.insert("reason", s("rejected"));
        bad_entry.insert("routing-keys", HeaderValue::Bool(true));
        let mut h = Table::new();
        h.insert(
            "x-death",
            HeaderValue::Array(vec![
                HeaderValue::I8(1),
                HeaderValue::Table(bad_entry),
                entry(1, "maxlen", "q"),
            ]),
        );
        h.insert("x-first-death-queue", HeaderValue::Bool(false));
        let d = parse(&h);
        assert_eq!(d.entries.len(), 2);
        assert_eq!(
            d.entries.first().and_then(|e| e.reason.clone()),
            Some(DeathReason::Rejected)
        );
        assert_eq!(d.entries.first().and_then(|e| e.count), None);
        assert!(d.problems.len() >= 5, "{:?}", d.problems);
        assert_eq!(d.origin_queue(), Some("q"));

        let mut scalar = Table::new();
        scalar.insert("x-death", s("rejected"));
        let d = parse(&scalar);
        assert!(d.entries.is_empty());
        assert_eq!(d.problems.len(), 1);
    }

    #[test]
    fn management_api_integers_are_times() {
        assert_eq!(
            timestamp_from_value(&HeaderValue::I64(1_759_042_215)).map(|t| t.as_second()),
            Some(1_759_042_215)
        );
        assert!(timestamp_from_value(&HeaderValue::I64(i64::MAX)).is_none());
    }
}
