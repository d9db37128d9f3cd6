//! Whether looking at a queue can destroy what it looks at. AMQP 0.9.1 has no "peek": Warren
//! consumes messages and returns them, and quorum queues count some returns as deliveries. Past
//! the queue's delivery limit a message is dead-lettered again or, for a DLQ without a
//! dead-letter exchange, dropped. This module decides, from the broker version, the queue type
//! and the effective delivery limit, when browsing must stop; what one browse costs is the one
//! rule in [`crate::domain::features`].
//!
//! The costs are the *measured* ones (see the shared RabbitMQ reference) for Warren's browse
//! method: consume with manual acks, then one explicit `basic.nack(multiple, requeue=true)`.

use crate::domain::features::{self, BrokerVersion, QueueType};

/// Browsing stops before a message could come within this many deliveries of its limit.
pub const DEFAULT_SAFETY_MARGIN: u64 = 5;

/// What a look that returned its messages does to a quorum queue's order: it does not put
/// them back where they were (measured on 4.0: the next look lists them in another order),
/// so the list's `#` is this look's order, not the queue's for good. Classic queues put
/// returns back in place: nothing to say.
pub fn order_note(queue_type: &QueueType) -> Option<&'static str> {
    (*queue_type == QueueType::Quorum).then_some(
        "a quorum queue does not put the messages a look returns back in their places: the next look may list them in another order (# is this look's)",
    )
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
    pub fn decide(version: BrokerVersion, queue_type: &QueueType, limit: Option<u64>) -> Self {
        Self::decide_with_margin(version, queue_type, limit, DEFAULT_SAFETY_MARGIN)
    }

    pub fn decide_with_margin(
        version: BrokerVersion,
        queue_type: &QueueType,
        limit: Option<u64>,
        margin: u64,
    ) -> Self {
        let cost = features::return_cost(version, queue_type);
        let limit = if *queue_type == QueueType::Quorum {
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
    use crate::domain::features::resolve_delivery_limit;

    const V3_10: BrokerVersion = BrokerVersion::new(3, 10, 8);
    const V4_0: BrokerVersion = BrokerVersion::new(4, 0, 5);
    const V4_3: BrokerVersion = BrokerVersion::new(4, 3, 6);

    #[test]
    fn only_a_quorum_look_warns_that_the_order_changes() {
        assert!(order_note(&QueueType::Quorum).is_some_and(|n| n.contains("another order")));
        assert_eq!(order_note(&QueueType::Classic), None);
        assert_eq!(order_note(&QueueType::Stream), None);
    }

    #[test]
    fn quorum_3_10_without_limit_is_free() {
        let p = BrowsePolicy::decide(V3_10, &QueueType::Quorum, None);
        assert!(p.allowed);
        assert!(p.message_safe(1_000_000));
        assert_eq!(p.browses_left(50), None);
    }

    #[test]
    fn quorum_3_10_with_limit_behaves_like_4_0() {
        let limit = resolve_delivery_limit(V3_10, &QueueType::Quorum, Some(20), None);
        let p = BrowsePolicy::decide(V3_10, &QueueType::Quorum, limit);
        assert!(p.allowed);
        // 20 - 5 margin - 1 cost = 14 is the highest count still safe.
        assert!(p.message_safe(14));
        assert!(!p.message_safe(15));
    }

    #[test]
    fn quorum_4_0_default_limit_stops_long_before_loss() {
        let limit = resolve_delivery_limit(V4_0, &QueueType::Quorum, None, None);
        let p = BrowsePolicy::decide(V4_0, &QueueType::Quorum, limit);
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
        let p = BrowsePolicy::decide(V4_3, &QueueType::Quorum, Some(20));
        assert!(p.allowed);
        assert_eq!(p.cost_per_browse, 0);
        assert!(p.message_safe(19));
        assert_eq!(p.browses_left(19), None);
    }

    #[test]
    fn low_limit_refuses_up_front_with_a_fix() {
        let p = BrowsePolicy::decide(V4_0, &QueueType::Quorum, Some(5));
        assert!(!p.allowed);
        let reason = p.reason.unwrap_or_default();
        assert!(reason.contains("delivery limit is 5"), "{reason}");
        assert!(reason.contains("delivery-limit: -1"), "{reason}");
        // A limit of 6 leaves exactly one browse (0 + 1 + 5 <= 6).
        let p = BrowsePolicy::decide(V4_0, &QueueType::Quorum, Some(6));
        assert!(p.allowed && p.message_safe(0) && !p.message_safe(1));
    }

    #[test]
    fn classic_and_stream_ignore_limits() {
        for t in [QueueType::Classic, QueueType::Stream] {
            let p = BrowsePolicy::decide(V4_0, &t, Some(1));
            assert!(p.allowed);
            assert_eq!(p.limit, None);
            assert!(p.message_safe(u64::MAX));
        }
        assert!(BrowsePolicy::unrestricted().message_safe(u64::MAX));
    }
}
