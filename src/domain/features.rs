//! What a RabbitMQ version and a queue type mean for reading dead letters: the version parsed,
//! the queue types, the delivery limit a quorum queue ends up with, and the one rule for whether
//! handing a browsed message back costs it a delivery. Discovery, browsing, `protect` and the
//! TUI all ask here, so they cannot disagree.
//!
//! The rules are the ones *measured* on 3.10.8, 4.0.5 and 4.3.6 (tests/browse_quorum.rs prints
//! the counts): 3.x counts returns but has no limit unless one is set; 4.0–4.2 give a quorum
//! queue a limit of 20 and count every return; 4.3+ treat an explicit nack as a free return.
//! An unknown version gets 4.0's rules, the cautious answer everywhere, because guessing wrong
//! destroys messages.

use std::fmt;

/// The delivery limit RabbitMQ 4.0+ gives a quorum queue that sets none (none before 4.0).
pub const DEFAULT_QUORUM_DELIVERY_LIMIT: u64 = 20;

/// The version whose rules apply when the broker's is unknown: 4.0 has a default limit and
/// counts every return, so nothing is assumed free.
pub const CAUTIOUS_VERSION: BrokerVersion = BrokerVersion::new(4, 0, 0);

/// A RabbitMQ version as the management API reports it (`"3.10.8"`, `"4.0.5"`, `"4.1.0-rc.1"`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct BrokerVersion {
    pub major: u32,
    pub minor: u32,
    pub patch: u32,
}

impl BrokerVersion {
    pub const fn new(major: u32, minor: u32, patch: u32) -> Self {
        BrokerVersion {
            major,
            minor,
            patch,
        }
    }

    /// Parses `MAJOR.MINOR[.PATCH]` followed by anything (pre-release or build suffixes, which
    /// do not change the rules here). `None` for anything that does not start that way.
    pub fn parse(s: &str) -> Option<BrokerVersion> {
        let s = s.trim();
        let s = s.strip_prefix('v').unwrap_or(s);
        let mut parts = s.splitn(3, '.');
        let major = leading_number(parts.next()?)?;
        let minor = leading_number(parts.next()?)?;
        let patch = parts.next().and_then(leading_number).unwrap_or(0);
        Some(BrokerVersion::new(major, minor, patch))
    }

    pub fn at_least(self, major: u32, minor: u32) -> bool {
        (self.major, self.minor) >= (major, minor)
    }

    /// The version whose rules apply: this one, or [`CAUTIOUS_VERSION`] when unknown.
    pub fn or_cautious(version: Option<BrokerVersion>) -> BrokerVersion {
        version.unwrap_or(CAUTIOUS_VERSION)
    }
}

/// The digits a version component starts with (`"8-rc"` → 8); none when it starts otherwise.
fn leading_number(part: &str) -> Option<u32> {
    let end = part
        .char_indices()
        .find(|(_, c)| !c.is_ascii_digit())
        .map_or(part.len(), |(i, _)| i);
    part.get(..end)?.parse().ok()
}

impl fmt::Display for BrokerVersion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{}.{}", self.major, self.minor, self.patch)
    }
}

#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum QueueType {
    Classic,
    Quorum,
    Stream,
    /// A type this version of Warren does not know (plugins can add some); read like a classic
    /// queue, and its name is shown as the broker sent it.
    Other(String),
}

impl QueueType {
    /// The management API's `type` or the `x-queue-type` argument; absent or empty means
    /// classic. Known names are matched without regard to case or surrounding space.
    pub fn parse(text: &str) -> QueueType {
        let trimmed = text.trim();
        match trimmed.to_ascii_lowercase().as_str() {
            "" | "classic" => QueueType::Classic,
            "quorum" => QueueType::Quorum,
            "stream" => QueueType::Stream,
            _ => QueueType::Other(text.to_string()),
        }
    }

    pub fn as_str(&self) -> &str {
        match self {
            QueueType::Classic => "classic",
            QueueType::Quorum => "quorum",
            QueueType::Stream => "stream",
            QueueType::Other(s) => s,
        }
    }
}

impl fmt::Display for QueueType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The delivery limit the broker applies to a queue from its `x-delivery-limit` argument and
/// `delivery-limit` policy key, `None` when messages may be returned forever. Only quorum
/// queues have one.
///
/// - 4.0+: [`DEFAULT_QUORUM_DELIVERY_LIMIT`] when neither is set. When both are set the lower
///   wins, except that a negative value (`-1` = unlimited) only wins when the other is negative
///   too: the broker takes `max` when either is negative
///   (`rabbit_quorum_queue:resolve_delivery_limit/2`), so a policy of `-1` does *not* lift an
///   argument of 5.
/// - 3.x: no default; the lower of the two when both are set; negative means none.
pub fn resolve_delivery_limit(
    version: BrokerVersion,
    queue_type: &QueueType,
    arg: Option<i64>,
    policy: Option<i64>,
) -> Option<u64> {
    if *queue_type != QueueType::Quorum {
        return None;
    }
    let four = version.at_least(4, 0);
    let resolved = match (arg, policy) {
        (None, None) => return four.then_some(DEFAULT_QUORUM_DELIVERY_LIMIT),
        (Some(v), None) | (None, Some(v)) => v,
        (Some(a), Some(p)) if four && (a < 0 || p < 0) => a.max(p),
        (Some(a), Some(p)) => a.min(p),
    };
    u64::try_from(resolved).ok()
}

/// Deliveries one Warren browse adds to `x-delivery-count` of every message it reads — the one
/// rule for "does a return cost a delivery".
///
/// - classic queues, streams and unknown types: 0 (classic only sets `redelivered`; streams
///   are logs).
/// - quorum, 4.3+: 0 — an explicit `basic.nack(requeue=true)` is a plain return there.
/// - quorum, 4.0–4.2: 1 — every return counts.
/// - quorum, 3.x: 1 — counted, and harmful only when a limit is set.
///
/// The shared reference measured +2 for "consume, then nack": a nack sent while the consumer
/// is still active gets the messages delivered again (and a close racing the nack returns
/// them a second time). Warren cancels first and waits for the return, so it pays 1; the
/// browse safety margin absorbs the difference should the broker ever charge 2.
pub fn return_cost(version: BrokerVersion, queue_type: &QueueType) -> u32 {
    match queue_type {
        QueueType::Quorum if version.at_least(4, 3) => 0,
        QueueType::Quorum => 1,
        QueueType::Classic | QueueType::Stream | QueueType::Other(_) => 0,
    }
}

/// How long after a channel processed an ack the queue may still lose it. A quorum queue's
/// settle is a Raft command its leader commits after the channel passed it on: when the node
/// goes down first, the message comes back (a replay after node loss found 19 copies where the
/// channel had proven all but 16). Classic queues settle in the channel's own round trip.
pub fn settle_lag(queue_type: &QueueType) -> std::time::Duration {
    match queue_type {
        QueueType::Quorum => std::time::Duration::from_secs(2),
        QueueType::Classic | QueueType::Stream | QueueType::Other(_) => std::time::Duration::ZERO,
    }
}

/// Whether reading a queue with this effective delivery limit spends its messages' deliveries,
/// so that browsing can end in loss: returns cost here and a limit is in force. An unknown
/// version is answered by [`CAUTIOUS_VERSION`]'s rules.
pub fn reads_spend_deliveries(
    version: Option<BrokerVersion>,
    queue_type: &QueueType,
    delivery_limit: Option<u64>,
) -> bool {
    delivery_limit.is_some() && return_cost(BrokerVersion::or_cautious(version), queue_type) > 0
}

/// What a broker version means for reading dead letters, worked out once per connection.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BrokerFeatures {
    /// The version as the broker reported it (may be empty).
    pub version_text: String,
    pub version: Option<BrokerVersion>,
    /// 3.13+ writes `x-last-death-*` headers.
    pub has_last_death: bool,
    /// The delivery limit of a quorum queue that sets none: 20 on 4.0+, none on 3.x.
    pub default_quorum_delivery_limit: Option<u64>,
    /// Whether an explicit `basic.nack(requeue=true)` counts as a delivery attempt on a quorum
    /// queue (from [`return_cost`]): yes before 4.3, no from 4.3. Only matters when a limit
    /// applies — see [`reads_spend_deliveries`].
    pub explicit_nack_counts: bool,
}

impl BrokerFeatures {
    pub fn from_version(text: &str) -> BrokerFeatures {
        let version = BrokerVersion::parse(text);
        let rules = BrokerVersion::or_cautious(version);
        BrokerFeatures {
            version_text: text.to_string(),
            version,
            has_last_death: version.is_some_and(|v| v.at_least(3, 13)),
            default_quorum_delivery_limit: resolve_delivery_limit(
                rules,
                &QueueType::Quorum,
                None,
                None,
            ),
            explicit_nack_counts: return_cost(rules, &QueueType::Quorum) > 0,
        }
    }

    /// The version whose rules apply: the broker's, or [`CAUTIOUS_VERSION`] when unknown.
    pub fn rules_version(&self) -> BrokerVersion {
        BrokerVersion::or_cautious(self.version)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const V3_10: BrokerVersion = BrokerVersion::new(3, 10, 8);
    const V4_0: BrokerVersion = BrokerVersion::new(4, 0, 5);
    const V4_2: BrokerVersion = BrokerVersion::new(4, 2, 1);
    const V4_3: BrokerVersion = BrokerVersion::new(4, 3, 6);

    #[test]
    fn parses_versions() {
        assert_eq!(BrokerVersion::parse("3.10.8"), Some(V3_10));
        assert_eq!(BrokerVersion::parse("4.0.5"), Some(V4_0));
        assert_eq!(BrokerVersion::parse(" 4.3.6 "), Some(V4_3));
        assert_eq!(
            BrokerVersion::parse("4.1.0-rc.1"),
            Some(BrokerVersion::new(4, 1, 0))
        );
        assert_eq!(
            BrokerVersion::parse("3.13.7+12.gabc"),
            Some(BrokerVersion::new(3, 13, 7))
        );
        assert_eq!(
            BrokerVersion::parse("4.0"),
            Some(BrokerVersion::new(4, 0, 0))
        );
        assert_eq!(
            BrokerVersion::parse("v4.2.0"),
            Some(BrokerVersion::new(4, 2, 0))
        );
        assert_eq!(BrokerVersion::parse(""), None);
        assert_eq!(BrokerVersion::parse("four"), None);
        assert_eq!(BrokerVersion::parse("4"), None);
        assert_eq!(BrokerVersion::parse("99999999999.1"), None);
        assert!(V4_3 > V4_0 && V4_0 > V3_10);
        assert_eq!(BrokerVersion::or_cautious(None), CAUTIOUS_VERSION);
        assert_eq!(BrokerVersion::or_cautious(Some(V4_3)), V4_3);
    }

    #[test]
    fn queue_type_names() {
        assert_eq!(QueueType::parse("quorum"), QueueType::Quorum);
        assert_eq!(QueueType::parse("Classic"), QueueType::Classic);
        assert_eq!(QueueType::parse(" stream "), QueueType::Stream);
        assert_eq!(QueueType::parse(""), QueueType::Classic);
        let other = QueueType::parse("rabbit_mqtt_qos0_queue");
        assert_eq!(other, QueueType::Other("rabbit_mqtt_qos0_queue".into()));
        assert_eq!(other.to_string(), "rabbit_mqtt_qos0_queue");
        assert_eq!(QueueType::Quorum.as_str(), "quorum");
    }

    #[test]
    fn delivery_limit_defaults() {
        let q = &QueueType::Quorum;
        assert_eq!(resolve_delivery_limit(V3_10, q, None, None), None);
        assert_eq!(resolve_delivery_limit(V4_0, q, None, None), Some(20));
        assert_eq!(resolve_delivery_limit(V4_3, q, None, None), Some(20));
        for v in [V3_10, V4_0, V4_3] {
            assert_eq!(
                resolve_delivery_limit(v, &QueueType::Classic, Some(5), Some(3)),
                None
            );
            assert_eq!(
                resolve_delivery_limit(v, &QueueType::Stream, None, None),
                None
            );
            assert_eq!(
                resolve_delivery_limit(v, &QueueType::Other("x".into()), Some(5), None),
                None
            );
        }
    }

    #[test]
    fn delivery_limit_argument_and_policy() {
        let q = &QueueType::Quorum;
        for v in [V3_10, V4_0, V4_3] {
            assert_eq!(resolve_delivery_limit(v, q, Some(7), None), Some(7));
            assert_eq!(resolve_delivery_limit(v, q, None, Some(9)), Some(9));
            // Both set: the lower wins.
            assert_eq!(resolve_delivery_limit(v, q, Some(7), Some(9)), Some(7));
            assert_eq!(resolve_delivery_limit(v, q, Some(12), Some(3)), Some(3));
            assert_eq!(resolve_delivery_limit(v, q, Some(-1), None), None);
            assert_eq!(resolve_delivery_limit(v, q, None, Some(-1)), None);
            assert_eq!(resolve_delivery_limit(v, q, Some(-1), Some(-1)), None);
        }
        // 4.x: a negative value only wins when both are negative.
        assert_eq!(resolve_delivery_limit(V4_0, q, Some(5), Some(-1)), Some(5));
        assert_eq!(resolve_delivery_limit(V4_3, q, Some(-1), Some(5)), Some(5));
        // 3.x: plain min, so -1 wins and there is no limit.
        assert_eq!(resolve_delivery_limit(V3_10, q, Some(5), Some(-1)), None);
        assert_eq!(resolve_delivery_limit(V4_0, q, Some(0), None), Some(0));
    }

    /// The measured rows: classic keeps everything; quorum 3.10 +1 per browse (harmless
    /// without a limit); 4.0–4.2 +1 and lost at 20; 4.3 free.
    #[test]
    fn costs_per_version_row() {
        for v in [V3_10, V4_0, V4_2, V4_3] {
            assert_eq!(return_cost(v, &QueueType::Classic), 0);
            assert_eq!(return_cost(v, &QueueType::Stream), 0);
            assert_eq!(return_cost(v, &QueueType::Other("x".into())), 0);
        }
        assert_eq!(return_cost(V3_10, &QueueType::Quorum), 1);
        assert_eq!(return_cost(V4_0, &QueueType::Quorum), 1);
        assert_eq!(return_cost(V4_2, &QueueType::Quorum), 1);
        assert_eq!(return_cost(V4_3, &QueueType::Quorum), 0);
    }

    #[test]
    fn reads_spend_deliveries_per_version() {
        let q = &QueueType::Quorum;
        // 3.x: counted, but only a set limit bites.
        assert!(reads_spend_deliveries(Some(V3_10), q, Some(5)));
        assert!(!reads_spend_deliveries(Some(V3_10), q, None));
        // 4.0–4.2: every return counts against the limit.
        assert!(reads_spend_deliveries(Some(V4_0), q, Some(20)));
        assert!(reads_spend_deliveries(Some(V4_2), q, Some(20)));
        // 4.3+: an explicit nack is free, whatever the limit.
        assert!(!reads_spend_deliveries(Some(V4_3), q, Some(20)));
        // Unknown version: the cautious answer.
        assert!(reads_spend_deliveries(None, q, Some(20)));
        assert!(!reads_spend_deliveries(None, q, None));
        for v in [Some(V3_10), Some(V4_0), None] {
            assert!(!reads_spend_deliveries(v, &QueueType::Classic, Some(5)));
            assert!(!reads_spend_deliveries(v, &QueueType::Stream, Some(5)));
        }
    }

    #[test]
    fn versions_map_to_features() {
        let features = BrokerFeatures::from_version;
        let v310 = features("3.10.8");
        assert!(!v310.has_last_death);
        assert_eq!(v310.default_quorum_delivery_limit, None);
        assert!(v310.explicit_nack_counts);
        assert_eq!(v310.rules_version(), V3_10);
        let v313 = features("3.13.1");
        assert!(v313.has_last_death);
        let v40 = features("4.0.5");
        assert_eq!(v40.default_quorum_delivery_limit, Some(20));
        assert!(v40.explicit_nack_counts);
        let v43 = features("4.3.6");
        assert!(v43.has_last_death);
        assert!(!v43.explicit_nack_counts);
        assert_eq!(v43.default_quorum_delivery_limit, Some(20));
        let unknown = features("garbage");
        assert_eq!(unknown.version, None);
        assert!(!unknown.has_last_death);
        assert_eq!(unknown.default_quorum_delivery_limit, Some(20));
        assert!(unknown.explicit_nack_counts);
        assert_eq!(unknown.rules_version(), CAUTIOUS_VERSION);
        assert_eq!(unknown.version_text, "garbage");
        assert_eq!(
            BrokerVersion::parse("4.3.0-rc.1"),
            Some(BrokerVersion {
                major: 4,
                minor: 3,
                patch: 0
            })
        );
    }
}
