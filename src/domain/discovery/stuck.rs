//! Dead letters stuck in the queue they died in. With `dead-letter-strategy: at-least-once`
//! (quorum queues, `overflow: reject-publish`) a quorum queue keeps each dead letter until a
//! queue behind its dead-letter exchange has confirmed it: one the exchange routes nowhere, or a
//! full dead-letter queue refuses, stays inside the source queue, counted by the management API
//! as `messages_dlx` and neither ready nor unacknowledged. No DLQ shows them: this says where
//! they are and why they do not move.

use super::routing::RoutingTable;
use super::settings::{EffectiveSettings, PolicyIndex, effective_settings};
use super::topology::{QueueInfo, Topology};
use crate::domain::features::QueueType;

/// Why the dead letters do not reach a dead-letter queue.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Why {
    /// The dead-letter exchange does not exist.
    NoExchange,
    /// The exchange routes them to no queue (with `routing_key`, the dead-letter routing key;
    /// without, whatever key each message had: no binding at all then).
    NoRoute { routing_key: Option<String> },
    /// Every queue it routes to is full and refuses more (`overflow: reject-publish`).
    Full { queues: Vec<String> },
    /// Some route exists and no target is known to be full: in transit, or refused for a reason
    /// the listing does not show (a key without a binding, an unavailable queue).
    Unclear { routes_to: Vec<String> },
}

impl Why {
    /// A word for scripts (`warren queues --json`'s `why`).
    pub fn code(&self) -> &'static str {
        match self {
            Why::NoExchange => "no_exchange",
            Why::NoRoute { .. } => "no_route",
            Why::Full { .. } => "dlq_full",
            Why::Unclear { .. } => "unclear",
        }
    }
}

/// One quorum queue holding dead letters it could not hand on.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Stuck {
    /// The context it was listed in (every context at once, as [`super::DlqInfo::context`]),
    /// else empty.
    pub context: String,
    /// The vhost (set by the broker layer, as [`super::DlqInfo::vhost`]).
    pub vhost: String,
    pub queue: String,
    /// `messages_dlx`: dead letters waiting inside the queue.
    pub count: u64,
    /// Every message the queue holds (`messages`), the stuck ones included.
    pub depth: Option<u64>,
    pub dead_letter_exchange: String,
    pub why: Why,
}

impl Stuck {
    /// Why, in words (not sanitised: names come from the broker).
    pub fn explain(&self) -> String {
        let x = &self.dead_letter_exchange;
        let ex = if x.is_empty() {
            "the default exchange".to_string()
        } else {
            format!("dead-letter exchange '{x}'")
        };
        match &self.why {
            Why::NoExchange => format!("{ex} does not exist"),
            Why::NoRoute {
                routing_key: Some(k),
            } => format!("{ex} routes key '{k}' to no queue"),
            Why::NoRoute { routing_key: None } => format!("{ex} has no binding to any queue"),
            Why::Full { queues } => match queues.as_slice() {
                [q] => format!(
                    "the dead-letter queue '{q}' is full and refuses more (overflow reject-publish)"
                ),
                qs => format!(
                    "the dead-letter queues '{}' are full and refuse more (overflow reject-publish)",
                    qs.join("', '")
                ),
            },
            Why::Unclear { routes_to } => format!(
                "{ex} routes to '{}', which has not taken them (in transit, a key without a binding, or a queue unavailable)",
                routes_to.join("', '")
            ),
        }
    }

    /// What an operator can do about it, in words (not sanitised: names come from the broker).
    /// The fix is always the broker's: once a queue takes them, it moves them on by itself.
    pub fn remedy(&self) -> String {
        let x = &self.dead_letter_exchange;
        let fix = match &self.why {
            Why::NoExchange => {
                format!("declare the exchange '{x}' and bind a dead-letter queue to it")
            }
            Why::NoRoute {
                routing_key: Some(k),
            } => format!("bind a dead-letter queue to '{x}' with the key '{k}'"),
            Why::NoRoute { routing_key: None } => {
                format!("bind a dead-letter queue to '{x}' for the keys they carry")
            }
            Why::Full { queues } => format!(
                "make room in '{}' (replay, archive or discard from it, or raise its length limit)",
                queues.join("', '")
            ),
            Why::Unclear { routes_to } => format!(
                "check that '{}' is available and bound for the keys they carry",
                routes_to.join("', '")
            ),
        };
        format!("{fix}; the broker then moves them on by itself")
    }
}

/// Whether the broker dead-letters `q` at least once: a quorum queue with a dead-letter
/// exchange, `dead-letter-strategy: at-least-once` and `overflow: reject-publish` (with another
/// overflow the broker falls back to at-most-once).
pub fn at_least_once(q: &QueueInfo, s: &EffectiveSettings) -> bool {
    q.queue_type == QueueType::Quorum
        && s.dead_letter_exchange.is_some()
        && s.dead_letter_strategy.as_deref() == Some("at-least-once")
        && s.overflow.as_deref() == Some("reject-publish")
}

/// The queues whose `messages_dlx` the broker layer must ask for (the queue listing does not
/// carry it), by index into `t.queues`: those dead-lettering at least once, at most `max`.
pub fn candidates(t: &Topology, max: usize) -> Vec<usize> {
    let policies = PolicyIndex::new(&t.policies);
    t.queues
        .iter()
        .enumerate()
        .filter(|(_, q)| q.queue_type == QueueType::Quorum)
        .filter(|(_, q)| at_least_once(q, &effective_settings(q, policies.definition_for(q))))
        .map(|(i, _)| i)
        .take(max)
        .collect()
}

/// Every queue of `t` holding dead letters it could not hand on, with why, by queue name.
pub(crate) fn find(t: &Topology, settings: &[EffectiveSettings]) -> Vec<Stuck> {
    let table = RoutingTable::new(&t.exchanges, &t.bindings);
    let mut out = Vec::new();
    for (q, s) in t.queues.iter().zip(settings) {
        let Some(count) = q.messages_dlx.filter(|n| *n > 0) else {
            continue;
        };
        let Some(dlx) = s.dead_letter_exchange.clone() else {
            continue;
        };
        let exists = dlx.is_empty() || t.exchanges.iter().any(|e| e.name == dlx);
        let routing = match &s.dead_letter_routing_key {
            Some(k) => table.route(&dlx, k),
            None => table.reachable(&dlx),
        };
        // The default exchange names a queue by the key, whether or not it exists.
        let routed: Vec<String> = routing
            .queues
            .iter()
            .filter(|name| t.queues.iter().any(|tq| &&tq.name == name))
            .cloned()
            .collect();
        let full: Vec<String> = routed
            .iter()
            .filter(|name| {
                t.queues
                    .iter()
                    .any(|tq| &&tq.name == name && is_full(t, tq))
            })
            .cloned()
            .collect();
        let why = if !exists {
            Why::NoExchange
        } else if routed.is_empty() {
            Why::NoRoute {
                routing_key: s.dead_letter_routing_key.clone(),
            }
        } else if full.len() == routed.len() {
            Why::Full { queues: full }
        } else {
            Why::Unclear { routes_to: routed }
        };
        out.push(Stuck {
            context: String::new(),
            vhost: String::new(),
            queue: q.name.clone(),
            count,
            depth: q.messages,
            dead_letter_exchange: dlx,
            why,
        });
    }
    out.sort_by(|a, b| a.queue.cmp(&b.queue));
    out
}

/// A queue at its length limit that refuses publishes.
fn is_full(t: &Topology, q: &QueueInfo) -> bool {
    let s = effective_settings(q, PolicyIndex::new(&t.policies).definition_for(q));
    let refuses = matches!(
        s.overflow.as_deref(),
        Some("reject-publish" | "reject-publish-dlx")
    );
    let at_length = s
        .max_length
        .zip(q.messages)
        .is_some_and(|(max, n)| n >= max);
    let at_bytes = s
        .max_length_bytes
        .zip(q.message_bytes)
        .is_some_and(|(max, n)| n >= max);
    refuses && (at_length || at_bytes)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::discovery::{Binding, ExchangeInfo, ExchangeKind};
    use serde_json::json;

    fn source(dlx: &str) -> QueueInfo {
        let mut q = QueueInfo::named("orders")
            .with_arg("x-queue-type", json!("quorum"))
            .with_arg("x-dead-letter-exchange", json!(dlx))
            .with_arg("x-dead-letter-strategy", json!("at-least-once"))
            .with_arg("x-overflow", json!("reject-publish"))
            .with_messages(5);
        q.messages_dlx = Some(3);
        q
    }

    fn topology(queues: Vec<QueueInfo>, bindings: Vec<Binding>) -> Topology {
        Topology {
            queues,
            exchanges: vec![ExchangeInfo {
                name: "dlx".into(),
                kind: ExchangeKind::Direct,
            }],
            bindings,
            policies: vec![],
        }
    }

    fn found(t: &Topology) -> Vec<Stuck> {
        let settings: Vec<_> = t
            .queues
            .iter()
            .map(|q| effective_settings(q, None))
            .collect();
        find(t, &settings)
    }

    #[test]
    fn no_binding_means_no_route() {
        let t = topology(vec![source("dlx")], vec![]);
        assert_eq!(candidates(&t, 10), vec![0]);
        let s = found(&t);
        assert_eq!(s.len(), 1);
        assert_eq!(s[0].count, 3);
        assert_eq!(s[0].why, Why::NoRoute { routing_key: None });
        assert_eq!(
            s[0].explain(),
            "dead-letter exchange 'dlx' has no binding to any queue"
        );
        assert!(
            s[0].remedy()
                .starts_with("bind a dead-letter queue to 'dlx'")
        );
    }

    #[test]
    fn a_missing_exchange_and_a_full_dlq() {
        let t = topology(vec![source("gone")], vec![]);
        assert_eq!(found(&t)[0].why, Why::NoExchange);
        let dlq = QueueInfo::named("orders.dlq")
            .with_arg("x-max-length", json!(2))
            .with_arg("x-overflow", json!("reject-publish"))
            .with_messages(2);
        let t = topology(
            vec![source("dlx"), dlq],
            vec![Binding::to_queue("dlx", "orders.dlq", "orders")],
        );
        let s = found(&t);
        assert_eq!(
            s[0].why,
            Why::Full {
                queues: vec!["orders.dlq".into()]
            }
        );
        assert!(s[0].explain().contains("'orders.dlq' is full"));
        assert!(s[0].remedy().starts_with("make room in 'orders.dlq'"));
    }

    #[test]
    fn only_at_least_once_quorum_queues_are_candidates() {
        let mut q = source("dlx");
        q.arguments.remove("x-overflow");
        let classic = QueueInfo::named("c").with_arg("x-dead-letter-exchange", json!("dlx"));
        let t = topology(vec![q, classic], vec![]);
        assert!(candidates(&t, 10).is_empty());
        // Nothing counted, nothing stuck.
        let mut q = source("dlx");
        q.messages_dlx = Some(0);
        assert!(found(&topology(vec![q], vec![])).is_empty());
    }
}
