//! A queue's effective settings: its arguments combined with the policy in force the way
//! RabbitMQ combines them, and the delivery limit that results.

use std::collections::HashMap;

use regex::Regex;
use serde_json::Value;

use super::topology::{JsonMap, Policy, QueueInfo};
use crate::domain::features::{self, BrokerFeatures, QueueType};

/// A queue's dead-letter and limit settings after arguments and policy are combined the way
/// RabbitMQ combines them.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct EffectiveSettings {
    pub dead_letter_exchange: Option<String>,
    pub dead_letter_routing_key: Option<String>,
    pub message_ttl_ms: Option<u64>,
    /// `x-delivery-limit` argument and `delivery-limit` policy key, as set (negative = none);
    /// [`features::resolve_delivery_limit`] decides how the broker combines them.
    pub delivery_limit_arg: Option<i64>,
    pub delivery_limit_policy: Option<i64>,
    /// `x-max-length` / `max-length`: the lower of argument and policy.
    pub max_length: Option<u64>,
    /// `x-max-length-bytes` / `max-length-bytes`: the lower of argument and policy.
    pub max_length_bytes: Option<u64>,
    /// `x-overflow` / `overflow` (`drop-head` when unset): the argument wins.
    pub overflow: Option<String>,
    /// `x-dead-letter-strategy` / `dead-letter-strategy` (quorum queues; `at-most-once` when
    /// unset): the argument wins.
    pub dead_letter_strategy: Option<String>,
}

/// Policies compiled once for a whole vhost.
pub(super) struct PolicyIndex<'a> {
    by_name: HashMap<&'a str, &'a Policy>,
    compiled: Vec<(&'a Policy, Regex)>,
}

impl<'a> PolicyIndex<'a> {
    pub(super) fn new(policies: &'a [Policy]) -> Self {
        let by_name = policies.iter().map(|p| (p.name.as_str(), p)).collect();
        let mut compiled: Vec<(&Policy, Regex)> = policies
            .iter()
            .filter(|p| p.apply_to != "exchanges")
            .filter_map(|p| Regex::new(&p.pattern).ok().map(|r| (p, r)))
            .collect();
        // Highest priority wins; ties go to the first name so the answer is stable.
        compiled.sort_by(|(a, _), (b, _)| b.priority.cmp(&a.priority).then(a.name.cmp(&b.name)));
        PolicyIndex { by_name, compiled }
    }

    /// The definition in force: what the broker reported, else the named policy, else the best
    /// matching policy by pattern (when the listing carried neither column).
    pub(super) fn definition_for(&self, q: &'a QueueInfo) -> Option<&'a JsonMap> {
        if let Some(def) = q.effective_policy.as_ref().filter(|d| !d.is_empty()) {
            return Some(def);
        }
        if let Some(name) = &q.policy {
            return self.by_name.get(name.as_str()).map(|p| &p.definition);
        }
        self.compiled
            .iter()
            .find(|(p, re)| applies_to(&p.apply_to, &q.queue_type) && re.is_match(&q.name))
            .map(|(p, _)| &p.definition)
    }
}

/// The policy definition in force for one queue: what the broker reported, else the named
/// policy, else the best match by pattern — for a queue whose stats (and policy columns) the
/// broker does not report yet, a few seconds after it was declared or a policy was set.
pub fn policy_definition<'a>(q: &'a QueueInfo, policies: &'a [Policy]) -> Option<&'a JsonMap> {
    PolicyIndex::new(policies).definition_for(q)
}

/// The policy that applies to a queue: the one the broker named, else the best match by pattern
/// (highest priority, ties to the first name), as the broker chooses.
pub fn policy_in_force<'a>(q: &QueueInfo, policies: &'a [Policy]) -> Option<&'a Policy> {
    if let Some(name) = &q.policy {
        return policies.iter().find(|p| &p.name == name);
    }
    PolicyIndex::new(policies)
        .compiled
        .into_iter()
        .find(|(p, re)| applies_to(&p.apply_to, &q.queue_type) && re.is_match(&q.name))
        .map(|(p, _)| p)
}

fn applies_to(apply_to: &str, t: &QueueType) -> bool {
    match apply_to {
        "all" | "queues" => true,
        "classic_queues" => *t == QueueType::Classic,
        "quorum_queues" => *t == QueueType::Quorum,
        "streams" => *t == QueueType::Stream,
        _ => false,
    }
}

fn json_str(v: Option<&Value>) -> Option<String> {
    v.and_then(Value::as_str).map(str::to_string)
}

fn json_int(v: Option<&Value>) -> Option<i64> {
    match v? {
        Value::Number(n) => n
            .as_i64()
            .or_else(|| n.as_f64().filter(|f| f.is_finite()).map(|f| f as i64)),
        Value::String(s) => s.trim().parse().ok(),
        _ => None,
    }
}

/// Combines a queue's arguments with its policy definition: arguments win for the dead-letter
/// exchange and key; the smaller TTL wins; for the delivery limit the smaller non-negative value
/// wins, and a `-1` on one side yields to a real limit on the other (what 4.3 reports, and the
/// cautious reading for older brokers).
pub fn effective_settings(q: &QueueInfo, policy: Option<&JsonMap>) -> EffectiveSettings {
    let arg = |k: &str| q.arguments.get(k);
    let pol = |k: &str| policy.and_then(|p| p.get(k));
    let dlx =
        json_str(arg("x-dead-letter-exchange")).or_else(|| json_str(pol("dead-letter-exchange")));
    let dlrk = json_str(arg("x-dead-letter-routing-key"))
        .or_else(|| json_str(pol("dead-letter-routing-key")));
    let ttl = |v: Option<i64>| v.and_then(|n| u64::try_from(n).ok());
    let ttl_ms = match (
        ttl(json_int(arg("x-message-ttl"))),
        ttl(json_int(pol("message-ttl"))),
    ) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    };
    EffectiveSettings {
        dead_letter_exchange: dlx,
        dead_letter_routing_key: dlrk,
        message_ttl_ms: ttl_ms,
        delivery_limit_arg: json_int(arg("x-delivery-limit")),
        delivery_limit_policy: json_int(pol("delivery-limit")),
        max_length: lower(
            ttl(json_int(arg("x-max-length"))),
            ttl(json_int(pol("max-length"))),
        ),
        max_length_bytes: lower(
            ttl(json_int(arg("x-max-length-bytes"))),
            ttl(json_int(pol("max-length-bytes"))),
        ),
        overflow: json_str(arg("x-overflow")).or_else(|| json_str(pol("overflow"))),
        dead_letter_strategy: json_str(arg("x-dead-letter-strategy"))
            .or_else(|| json_str(pol("dead-letter-strategy"))),
    }
}

fn lower(a: Option<u64>, b: Option<u64>) -> Option<u64> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}

/// The delivery limit that applies to a queue: only quorum queues have one; the broker's own
/// figure wins when reported; otherwise argument and policy resolved by the version's rules
/// (an unknown version gets the cautious ones).
pub fn effective_delivery_limit(
    q: &QueueInfo,
    settings: &EffectiveSettings,
    features: &BrokerFeatures,
) -> Option<u64> {
    if q.queue_type != QueueType::Quorum {
        return None;
    }
    if let Some(n) = q.reported_delivery_limit {
        return u64::try_from(n).ok();
    }
    features::resolve_delivery_limit(
        features.rules_version(),
        &q.queue_type,
        settings.delivery_limit_arg,
        settings.delivery_limit_policy,
    )
}

/// Is `q` a wait queue — does a message published into it leave by expiry? A TTL and a
/// dead-letter exchange, and no consumer to take messages before they expire.
pub fn is_wait_queue(q: &QueueInfo, s: &EffectiveSettings) -> bool {
    s.message_ttl_ms.is_some() && s.dead_letter_exchange.is_some() && q.consumers.unwrap_or(0) == 0
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn features(v: &str) -> BrokerFeatures {
        BrokerFeatures::from_version(v)
    }

    #[test]
    fn delivery_limit_sources() {
        let f = features("4.0.5");
        let q = QueueInfo::named("q").with_arg("x-queue-type", json!("quorum"));
        let pol: JsonMap = serde_json::from_value(json!({"delivery-limit": 5})).unwrap();
        let s = effective_settings(&q, Some(&pol));
        assert_eq!(effective_delivery_limit(&q, &s, &f), Some(5));
        let q2 = q.clone().with_arg("x-delivery-limit", json!(-1));
        let s2 = effective_settings(&q2, None);
        assert_eq!(effective_delivery_limit(&q2, &s2, &f), None);
        // -1 on one side yields to a real limit on the other, as 4.3 reports.
        let s3 = effective_settings(&q2, Some(&pol));
        assert_eq!(effective_delivery_limit(&q2, &s3, &f), Some(5));
        let q3 = q.clone().with_arg("x-delivery-limit", json!(3));
        assert_eq!(
            effective_delivery_limit(&q3, &effective_settings(&q3, Some(&pol)), &f),
            Some(3)
        );
        let classic = QueueInfo::named("c").with_arg("x-delivery-limit", json!(3));
        assert_eq!(
            effective_delivery_limit(&classic, &effective_settings(&classic, None), &f),
            None
        );
        let mut reported = q.clone();
        reported.reported_delivery_limit = Some(7);
        assert_eq!(effective_delivery_limit(&reported, &s, &f), Some(7));
    }

    #[test]
    fn effective_policy_shapes() {
        // A reported definition wins; an empty one falls back to the named policy.
        let mut q = QueueInfo::named("q");
        q.policy = Some("p".into());
        q.effective_policy = Some(JsonMap::new());
        let policies = vec![Policy {
            name: "p".into(),
            pattern: "^nomatch$".into(),
            apply_to: "queues".into(),
            priority: 0,
            definition: serde_json::from_value(json!({"dead-letter-exchange": "x"})).unwrap(),
        }];
        let idx = PolicyIndex::new(&policies);
        let s = effective_settings(&q, idx.definition_for(&q));
        assert_eq!(s.dead_letter_exchange.as_deref(), Some("x"));
        // Arguments beat the policy for the DLX.
        let q2 = q.clone().with_arg("x-dead-letter-exchange", json!("arg"));
        assert_eq!(
            effective_settings(&q2, idx.definition_for(&q2))
                .dead_letter_exchange
                .as_deref(),
            Some("arg")
        );
    }
}
