//! Whether looking at a queue can destroy what it looks at. AMQP 0.9.1 has no "peek": Warren
//! consumes messages and returns them, and quorum queues count some returns as deliveries. Past
//! the queue's delivery limit a message is dead-lettered again or, for a DLQ without a
//! dead-letter exchange, dropped. This module decides, from the broker version, the queue type
//! and the effective delivery limit, what one browse costs and when browsing must stop.
//!
//! The costs are the *measured* ones (see the shared RabbitMQ reference) for Warren's browse
//! method: consume with manual acks, then one explicit `basic.nack(multiple, requeue=true)`.

use std::fmt;

/// RabbitMQ's default quorum-queue delivery limit since 4.0 (none before).
pub const DEFAULT_DELIVERY_LIMIT_4X: u64 = 20;

/// Browsing stops before a message could come within this many deliveries of its limit.
pub const DEFAULT_SAFETY_MARGIN: u64 = 5;

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

/// The queue types that matter for browsing.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum QueueType {
    Classic,
    Quorum,
    Stream,
}

impl QueueType {
    /// From the management API's `type` field or the `x-queue-type` argument.
    pub fn from_name(name: &str) -> Option<QueueType> {
        match name.trim().to_ascii_lowercase().as_str() {
            "classic" => Some(QueueType::Classic),
            "quorum" => Some(QueueType::Quorum),
            "stream" => Some(QueueType::Stream),
            _ => None,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            QueueType::Classic => "classic",
            QueueType::Quorum => "quorum",
            QueueType::Stream => "stream",
        }
    }
}

impl fmt::Display for QueueType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The delivery limit the broker applies to a queue, `None` when messages may be returned
/// forever. Only quorum queues have one.
///
/// - 4.0+: 20 when neither the `x-delivery-limit` argument nor the `delivery-limit` policy is
///   set. When both are set the lower wins, except that a negative value (`-1` = unlimited)
///   only wins when the other is negative too: the broker takes `max` when either is negative
///   (`rabbit_quorum_queue:resolve_delivery_limit/2`), so a policy of `-1` does *not* lift an
///   argument of 5.
/// - 3.x: no default; the lower of the two when both are set; negative means none.
pub fn effective_delivery_limit(
    version: BrokerVersion,
    queue_type: QueueType,
    arg: Option<i64>,
    policy: Option<i64>,
) -> Option<u64> {
    if queue_type != QueueType::Quorum {
        return None;
    }
    let four = version.at_least(4, 0);
    let resolved = match (arg, policy) {
        (None, None) => return four.then_some(DEFAULT_DELIVERY_LIMIT_4X),
        (Some(v), None) | (None, Some(v)) => v,
        (Some(a), Some(p)) if four && (a < 0 || p < 0) => a.max(p),
        (Some(a), Some(p)) => a.min(p),
    };
    u64::try_from(resolved).ok()
}

/// Deliveries one Warren browse adds to `x-delivery-count` of every message it reads, as
/// measured on 3.10.8, 4.0.5 and 4.3.6 (tests/browse_quorum.rs prints the counts).
///
/// - classic queues and streams: 0 (classic only sets `redelivered`; streams are logs).
/// - quorum, 4.3+: 0 — an explicit `basic.nack(requeue=true)` is a plain return there.
/// - quorum, 4.0–4.2: 1 — every return counts.
/// - quorum, 3.x: 1 — counted, and harmful only when a limit is set.
///
/// The shared reference measured +2 for "consume, then nack": a nack sent while the consumer
/// is still active gets the messages delivered again (and a close racing the nack returns
/// them a second time). Warren cancels first and waits for the return, so it pays 1; the
/// safety margin absorbs the difference should the broker ever charge 2.
pub fn cost_per_browse(version: BrokerVersion, queue_type: QueueType) -> u32 {
    match queue_type {
        QueueType::Classic | QueueType::Stream => 0,
        QueueType::Quorum if version.at_least(4, 3) => 0,
        QueueType::Quorum => 1,
    }
}

/// What browsing a queue may do, decided before the first message is read.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BrowsePolicy {
    /// False when even a message nobody has touched could not be browsed once safely.
    pub allowed: bool,
    /// Deliveries each browse adds to every message it reads.
    pub cost_per_browse: u32,
    /// The effective delivery limit, if any.
    pub limit: Option<u64>,
    /// Stop this many deliveries short of the limit.
    pub margin: u64,
    /// Why browsing is refused, and how to make the queue safe. `None` when allowed.
    pub reason: Option<String>,
    /// The broker version the policy was decided for (`None` for [`Self::unrestricted`]).
    pub version: Option<BrokerVersion>,
}

impl BrowsePolicy {
    /// No restriction at all: classic queues, streams, quorum queues without a limit or where
    /// returns are free.
    pub fn unrestricted() -> BrowsePolicy {
        BrowsePolicy {
            allowed: true,
            cost_per_browse: 0,
            limit: None,
            margin: DEFAULT_SAFETY_MARGIN,
            reason: None,
            version: None,
        }
    }

    /// The policy for a queue, with the default safety margin.
    pub fn decide(version: BrokerVersion, queue_type: QueueType, limit: Option<u64>) -> Self {
        Self::decide_with_margin(version, queue_type, limit, DEFAULT_SAFETY_MARGIN)
    }

    pub fn decide_with_margin(
        version: BrokerVersion,
        queue_type: QueueType,
        limit: Option<u64>,
        margin: u64,
    ) -> Self {
        let cost = cost_per_browse(version, queue_type);
        let limit = if queue_type == QueueType::Quorum {
            limit
        } else {
            None
        };
        let mut policy = BrowsePolicy {
            allowed: true,
            cost_per_browse: cost,
            limit,
            margin,
            reason: None,
            version: Some(version),
        };
        if !policy.message_safe(0) {
            policy.allowed = false;
            policy.reason = Some(policy.explain(None));
        }
        policy
    }

    /// True when a message delivered to us with this `x-delivery-count` can be handed back by
    /// this browse and still stay at least `margin` deliveries away from its limit afterwards.
    /// A browse must not keep (or read past) a message for which this is false.
    pub fn message_safe(&self, delivery_count: u64) -> bool {
        match self.limit {
            Some(limit) if self.cost_per_browse > 0 => {
                delivery_count
                    .saturating_add(u64::from(self.cost_per_browse))
                    .saturating_add(self.margin)
                    <= limit
            }
            _ => true,
        }
    }

    /// How many more browses a message with this count survives safely; `None` = unlimited.
    pub fn browses_left(&self, delivery_count: u64) -> Option<u64> {
        let limit = self.limit?;
        if self.cost_per_browse == 0 {
            return None;
        }
        let room = limit
            .saturating_sub(self.margin)
            .saturating_sub(delivery_count);
        Some(room / u64::from(self.cost_per_browse))
    }

    /// Why browsing stops at a message with this delivery count (or refuses up front when
    /// `delivery_count` is `None`), and how to make the queue safe, in the user's words.
    pub fn explain(&self, delivery_count: Option<u64>) -> String {
        let limit = self
            .limit
            .map_or_else(|| "none".to_string(), |l| l.to_string());
        let head = match delivery_count {
            Some(c) => format!(
                "Stopped browsing: the next message has already been delivered {c} times and \
                 this quorum queue's delivery limit is {limit}."
            ),
            None => format!(
                "Browsing refused: this quorum queue's delivery limit is {limit}, too low to \
                 look at any message safely."
            ),
        };
        // Measured: 3.10 rejects `delivery-limit: -1` in a policy, and takes the lower of
        // argument and policy, so no policy can lift a 3.x limit.
        let fix = if self.version.is_some_and(|v| !v.at_least(4, 0)) {
            "On RabbitMQ 3.x no policy can lift the limit (it refuses `delivery-limit: -1`, and \
             the lower of argument and policy wins): give the DLQ a dead-letter exchange so \
             nothing past the limit is lost, move its messages into a queue declared without \
             `x-delivery-limit`, or upgrade to RabbitMQ 4.3+, where returns are free."
        } else {
            "To make the queue safe to browse, run `warren protect QUEUE` (a policy with \
             `delivery-limit: -1`; it does not lift an `x-delivery-limit` argument, the queue \
             would have to be re-declared), give the DLQ a dead-letter exchange so nothing past \
             the limit is lost, or upgrade to RabbitMQ 4.3+, where returns are free."
        };
        format!(
            "{head} On RabbitMQ {version} every look costs {cost} deliveries per message, and a \
             message past its limit is dead-lettered again or, without a dead-letter exchange, \
             dropped; Warren keeps a margin of {margin}. {fix}",
            cost = self.cost_per_browse,
            margin = self.margin,
            version = self
                .version
                .map_or_else(|| "this version".to_string(), |v| v.to_string()),
        )
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
    }

    #[test]
    fn queue_type_names() {
        assert_eq!(QueueType::from_name("quorum"), Some(QueueType::Quorum));
        assert_eq!(QueueType::from_name("Classic"), Some(QueueType::Classic));
        assert_eq!(QueueType::from_name("stream"), Some(QueueType::Stream));
        assert_eq!(QueueType::from_name("rabbit_mqtt_qos0_queue"), None);
    }

    #[test]
    fn delivery_limit_defaults() {
        let q = QueueType::Quorum;
        assert_eq!(effective_delivery_limit(V3_10, q, None, None), None);
        assert_eq!(effective_delivery_limit(V4_0, q, None, None), Some(20));
        assert_eq!(effective_delivery_limit(V4_3, q, None, None), Some(20));
        for v in [V3_10, V4_0, V4_3] {
            assert_eq!(
                effective_delivery_limit(v, QueueType::Classic, Some(5), Some(3)),
                None
            );
            assert_eq!(
                effective_delivery_limit(v, QueueType::Stream, None, None),
                None
            );
        }
    }

    #[test]
    fn delivery_limit_argument_and_policy() {
        let q = QueueType::Quorum;
        for v in [V3_10, V4_0, V4_3] {
            assert_eq!(effective_delivery_limit(v, q, Some(7), None), Some(7));
            assert_eq!(effective_delivery_limit(v, q, None, Some(9)), Some(9));
            // Both set: the lower wins.
            assert_eq!(effective_delivery_limit(v, q, Some(7), Some(9)), Some(7));
            assert_eq!(effective_delivery_limit(v, q, Some(12), Some(3)), Some(3));
            assert_eq!(effective_delivery_limit(v, q, Some(-1), None), None);
            assert_eq!(effective_delivery_limit(v, q, None, Some(-1)), None);
            assert_eq!(effective_delivery_limit(v, q, Some(-1), Some(-1)), None);
        }
        // 4.x: a negative value only wins when both are negative.
        assert_eq!(
            effective_delivery_limit(V4_0, q, Some(5), Some(-1)),
            Some(5)
        );
        assert_eq!(
            effective_delivery_limit(V4_3, q, Some(-1), Some(5)),
            Some(5)
        );
        // 3.x: plain min, so -1 wins and there is no limit.
        assert_eq!(effective_delivery_limit(V3_10, q, Some(5), Some(-1)), None);
        assert_eq!(effective_delivery_limit(V4_0, q, Some(0), None), Some(0));
    }

    /// The measured rows: classic keeps everything; quorum 3.10 +1 per browse (harmless
    /// without a limit); 4.0–4.2 +1 and lost at 20; 4.3 free.
    #[test]
    fn costs_per_version_row() {
        for v in [V3_10, V4_0, V4_2, V4_3] {
            assert_eq!(cost_per_browse(v, QueueType::Classic), 0);
            assert_eq!(cost_per_browse(v, QueueType::Stream), 0);
        }
        assert_eq!(cost_per_browse(V3_10, QueueType::Quorum), 1);
        assert_eq!(cost_per_browse(V4_0, QueueType::Quorum), 1);
        assert_eq!(cost_per_browse(V4_2, QueueType::Quorum), 1);
        assert_eq!(cost_per_browse(V4_3, QueueType::Quorum), 0);
    }

    #[test]
    fn quorum_3_10_without_limit_is_free() {
        let p = BrowsePolicy::decide(V3_10, QueueType::Quorum, None);
        assert!(p.allowed);
        assert!(p.message_safe(1_000_000));
        assert_eq!(p.browses_left(50), None);
    }

    #[test]
    fn quorum_3_10_with_limit_behaves_like_4_0() {
        let limit = effective_delivery_limit(V3_10, QueueType::Quorum, Some(20), None);
        let p = BrowsePolicy::decide(V3_10, QueueType::Quorum, limit);
        assert!(p.allowed);
        // 20 - 5 margin - 1 cost = 14 is the highest count still safe.
        assert!(p.message_safe(14));
        assert!(!p.message_safe(15));
    }

    #[test]
    fn quorum_4_0_default_limit_stops_long_before_loss() {
        let limit = effective_delivery_limit(V4_0, QueueType::Quorum, None, None);
        let p = BrowsePolicy::decide(V4_0, QueueType::Quorum, limit);
        assert!(p.allowed);
        assert_eq!(p.browses_left(0), Some(15));
        // Simulate browsing a fresh message until the rule says stop: it never reaches 20.
        let mut count = 0;
        let mut browses = 0;
        while p.message_safe(count) {
            count += u64::from(p.cost_per_browse);
            browses += 1;
        }
        assert_eq!(browses, 15);
        assert!(count + u64::from(p.cost_per_browse) < 20, "count {count}");
        let why = p.explain(Some(count));
        assert!(why.contains("delivery-limit: -1") && why.contains("dead-letter exchange"));
    }

    #[test]
    fn quorum_4_3_returns_are_free() {
        let p = BrowsePolicy::decide(V4_3, QueueType::Quorum, Some(20));
        assert!(p.allowed);
        assert_eq!(p.cost_per_browse, 0);
        assert!(p.message_safe(19));
        assert_eq!(p.browses_left(19), None);
    }

    #[test]
    fn low_limit_refuses_up_front_with_a_fix() {
        let p = BrowsePolicy::decide(V4_0, QueueType::Quorum, Some(5));
        assert!(!p.allowed);
        let reason = p.reason.unwrap_or_default();
        assert!(reason.contains("delivery limit is 5"), "{reason}");
        assert!(reason.contains("delivery-limit: -1"), "{reason}");
        // A limit of 6 leaves exactly one browse (0 + 1 + 5 <= 6).
        let p = BrowsePolicy::decide(V4_0, QueueType::Quorum, Some(6));
        assert!(p.allowed && p.message_safe(0) && !p.message_safe(1));
    }

    #[test]
    fn classic_and_stream_ignore_limits() {
        for t in [QueueType::Classic, QueueType::Stream] {
            let p = BrowsePolicy::decide(V4_0, t, Some(1));
            assert!(p.allowed);
            assert_eq!(p.limit, None);
            assert!(p.message_safe(u64::MAX));
        }
        assert!(BrowsePolicy::unrestricted().message_safe(u64::MAX));
    }
}
