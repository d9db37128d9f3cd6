//! `warren protect QUEUE`: the policy that makes a quorum DLQ free to read by lifting its
//! delivery limit. Pure: the broker layer fetches the queue and its policy and applies the plan.
//!
//! RabbitMQ applies exactly one policy per queue, the matching one of highest priority, and its
//! definition *replaces* the others. So the new policy carries every key of the policy in force
//! (its dead-letter exchange, length limit, …) plus `delivery-limit: -1`, and outranks it.
//! A policy cannot lift an `x-delivery-limit` *argument* on 4.x (the broker takes the higher of
//! a negative and a positive value), and 3.x refuses `-1` in a policy altogether: both are
//! refused with the way out.

use serde_json::Value;

use super::discovery::{JsonMap, Policy, QueueInfo};
use super::features::{BrokerVersion, QueueType, resolve_delivery_limit};

/// The policy Warren names after the queue it protects.
pub const POLICY_PREFIX: &str = "warren-protect-";

#[derive(Clone, Debug, PartialEq)]
pub struct ProtectPlan {
    pub policy: Policy,
    /// The policy it replaces in effect (whose keys it carries), if any.
    pub replaces: Option<String>,
    /// The delivery limit before and after (`None` = unlimited).
    pub limit_before: Option<u64>,
    pub limit_after: Option<u64>,
}

/// The plan, or why the queue cannot (or need not) be protected this way.
pub fn plan(
    version: BrokerVersion,
    q: &QueueInfo,
    in_force: Option<&Policy>,
) -> Result<ProtectPlan, String> {
    if q.queue_type != QueueType::Quorum {
        return Err(format!(
            "'{}' is a {} queue: reading it costs no deliveries, there is nothing to protect",
            q.name,
            q.queue_type.as_str()
        ));
    }
    let arg = q.arguments.get("x-delivery-limit").and_then(int);
    let policy_limit = in_force
        .and_then(|p| p.definition.get("delivery-limit"))
        .and_then(int);
    let before = resolve_delivery_limit(version, &QueueType::Quorum, arg, policy_limit);
    let after = resolve_delivery_limit(version, &QueueType::Quorum, arg, Some(-1));
    if let Some(why) = refusal(version, &q.name, before, arg) {
        return Err(why);
    }
    let mut definition: JsonMap = in_force.map(|p| p.definition.clone()).unwrap_or_default();
    definition.insert("delivery-limit".into(), Value::from(-1));
    let name = format!("{POLICY_PREFIX}{}", q.name);
    // Outrank the policy in force; replacing Warren's own (run again) keeps its place.
    let priority = in_force.map_or(0, |p| {
        if p.name == name {
            p.priority
        } else {
            p.priority.saturating_add(1)
        }
    });
    Ok(ProtectPlan {
        policy: Policy {
            name,
            pattern: format!("^{}$", regex::escape(&q.name)),
            apply_to: "queues".into(),
            priority,
            definition,
        },
        replaces: in_force.map(|p| p.name.clone()),
        limit_before: before,
        limit_after: after,
    })
}

/// Why no policy can make quorum queue `name` free to read, or `None` when one can: it has
/// a limit in force (`before`), the broker takes `-1` in a policy (4.x), and no
/// `x-delivery-limit` argument (`arg`) outranks it. The TUI asks this before it offers `P`,
/// so an operator is never offered a policy that is refused once accepted.
pub fn refusal(
    version: BrokerVersion,
    name: &str,
    before: Option<u64>,
    arg: Option<i64>,
) -> Option<String> {
    let Some(before) = before else {
        return Some(format!(
            "'{name}' has no delivery limit on RabbitMQ {version}: reading it is already safe"
        ));
    };
    if !version.at_least(4, 0) {
        return Some(format!(
            "'{name}' has a delivery limit of {before} that no policy can lift on RabbitMQ {version}: 3.x refuses `delivery-limit: -1` in a policy and takes the lower of argument and policy. \
             Give it a dead-letter exchange (so a message past its limit moves on instead of being dropped), or move its messages with `warren replay --to` into a queue declared without the argument"
        ));
    }
    let l = resolve_delivery_limit(version, &QueueType::Quorum, arg, Some(-1))?;
    Some(format!(
        "'{name}' was declared with the argument x-delivery-limit = {l}, which no policy can lift on RabbitMQ {version}. \
         To read it safely, give it a dead-letter exchange (so a message past its limit moves on instead of being dropped), \
         or move its messages with `warren replay --to` into a queue declared without the argument"
    ))
}

fn int(v: &Value) -> Option<i64> {
    v.as_i64()
        .or_else(|| v.as_str().and_then(|s| s.trim().parse().ok()))
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    const V4_0: BrokerVersion = BrokerVersion::new(4, 0, 5);
    const V3_10: BrokerVersion = BrokerVersion::new(3, 10, 8);

    fn quorum(name: &str) -> QueueInfo {
        QueueInfo::named(name).with_arg("x-queue-type", json!("quorum"))
    }

    #[test]
    fn carries_every_key_of_the_policy_it_outranks() {
        let existing = Policy {
            name: "dlx-all".into(),
            pattern: ".*".into(),
            apply_to: "all".into(),
            priority: 3,
            definition: json!({"dead-letter-exchange": "dlx", "max-length": 1000})
                .as_object()
                .cloned()
                .unwrap_or_default(),
        };
        let p = plan(V4_0, &quorum("orders.dlq"), Some(&existing)).expect("a plan");
        assert_eq!(p.policy.name, "warren-protect-orders.dlq");
        assert_eq!(p.policy.pattern, r"^orders\.dlq$");
        assert_eq!(p.policy.priority, 4);
        assert_eq!(
            p.policy.definition.get("dead-letter-exchange"),
            Some(&json!("dlx"))
        );
        assert_eq!(p.policy.definition.get("max-length"), Some(&json!(1000)));
        assert_eq!(p.policy.definition.get("delivery-limit"), Some(&json!(-1)));
        assert_eq!((p.limit_before, p.limit_after), (Some(20), None));
        assert_eq!(p.replaces.as_deref(), Some("dlx-all"));
    }

    #[test]
    fn an_argument_limit_cannot_be_lifted_on_4x_but_can_on_3x() {
        let q = quorum("d").with_arg("x-delivery-limit", json!(20));
        let err = plan(V4_0, &q, None).expect_err("refused");
        assert!(err.contains("x-delivery-limit = 20"), "{err}");
        // Measured on 3.10.8: a policy with delivery-limit -1 is rejected (400).
        assert!(plan(V3_10, &q, None).is_err_and(|e| e.contains("3.x refuses")));
        assert!(
            plan(V3_10, &quorum("free"), None).is_err(),
            "no limit on 3.x"
        );
        assert!(plan(V4_0, &QueueInfo::named("classic"), None).is_err());
    }
}
