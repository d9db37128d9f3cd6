//! Symfony Messenger's failure transport, known by the vhost's topology alone: the worker
//! *publishes* failed messages there, so nothing dead-letters into it and no edge finds it.
//! Discovery never reads a message to find it (a read marks the head redelivered, and a queue
//! taken for one by mistake may be an application's live work queue).
//!
//! Symfony's AMQP transport declares its exchange and queues (a queue named after its exchange
//! unless configured otherwise, bound to it), and its retries declare the `delays` exchange
//! (direct, at `setup()`) and short-lived `delay_<exchange>_<key>_<ms>[_retry|_delay]` queues
//! with a TTL, `x-expires` and a dead-letter route back. A vhost with either is Symfony's; in it
//! a queue is taken for a failure transport when
//! - its name has a part `failed`, `failure` or `failures` (split at `.`, `-`, `_`), and it is
//!   bound from an exchange whose name has one too (Symfony's transport exchange), or the
//!   configuration names it (`[discovery] patterns`), and
//! - it is shaped like a transport's queue, not a wait queue: no message TTL, no `x-expires`,
//!   no dead-letter exchange of its own, not auto-delete, in no retry loop (a delay queue
//!   returning into it makes it a work queue).
//!
//! One found by name and shape alone is marked [`DlqInfo::guessed`]; the broker layer hands it
//! back to the other queues when the live count says something consumes it
//! ([`Discovery::consumed_guesses_are_queues`]).

use std::collections::HashSet;

use super::classify::{Discovery, DlqInfo, DlqKind};
use super::settings::{PolicyIndex, effective_settings};
use super::topology::{DestinationType, ExchangeKind, QueueInfo, Topology};
use crate::domain::convention::Convention;

/// Symfony's default name for the exchange its delay queues are bound to.
const DELAYS_EXCHANGE: &str = "delays";

/// Whether the vhost shows Symfony Messenger's retry topology: the `delays` exchange (direct),
/// or a delay queue (named `delay_*`, with a TTL, `x-expires` and a dead-letter exchange, as
/// Symfony declares them, whatever the delay exchange is called).
pub fn is_symfony_vhost(topology: &Topology) -> bool {
    topology
        .exchanges
        .iter()
        .any(|e| e.name == DELAYS_EXCHANGE && e.kind == ExchangeKind::Direct)
        || topology.queues.iter().any(is_delay_queue)
}

/// A queue as Symfony's retry declares one: `delay_…` with `x-message-ttl`, `x-expires` and
/// `x-dead-letter-exchange` arguments.
fn is_delay_queue(q: &QueueInfo) -> bool {
    q.name.starts_with("delay_")
        && ["x-message-ttl", "x-expires", "x-dead-letter-exchange"]
            .iter()
            .all(|k| q.arguments.contains_key(*k))
}

/// A name with a part `failed`, `failure` or `failures` (`failed`, `failed_payments`,
/// `messages.failure`); not `failover`, `unfailed`, `failedx`.
pub fn named_like_failure(name: &str) -> bool {
    name.split(['.', '-', '_']).any(|part| {
        ["failed", "failure", "failures"]
            .iter()
            .any(|w| part.eq_ignore_ascii_case(w))
    })
}

/// Shaped like a transport's queue: no TTL, no `x-expires`, no dead-letter exchange (argument
/// or policy), not auto-delete, not a delay queue, in no retry loop of `found`.
fn transport_shaped(q: &QueueInfo, policies: &PolicyIndex, found: &Discovery) -> bool {
    let policy = policies.definition_for(q);
    let s = effective_settings(q, policy);
    let expires =
        q.arguments.contains_key("x-expires") || policy.is_some_and(|p| p.contains_key("expires"));
    !q.auto_delete
        && !expires
        && s.message_ttl_ms.is_none()
        && s.dead_letter_exchange.is_none()
        && !is_delay_queue(q)
        && found.retry_loop_of(&q.name).is_none()
}

/// The exchanges (not the default one, not `delays`) with a binding to queue `name`.
fn sources_of<'t>(topology: &'t Topology, name: &str) -> impl Iterator<Item = &'t str> {
    topology
        .bindings
        .iter()
        .filter(move |b| {
            b.destination_type == DestinationType::Queue
                && b.destination == name
                && !b.source.is_empty()
                && b.source != DELAYS_EXCHANGE
        })
        .map(|b| b.source.as_str())
}

/// Lists the vhost's Symfony failure transports among the dead-letter queues of `found` (a
/// discovery of `topology`): the other queues named and bound like one (marked
/// [`DlqInfo::guessed`]), and the dead-letter queues the configuration names (found by name
/// alone, convention unknown) that are shaped like one, now read as Symfony's. Nothing changes
/// in a vhost without Symfony's retry topology.
pub fn mark_failure_transports(topology: &Topology, found: &mut Discovery) {
    if !is_symfony_vhost(topology) {
        return;
    }
    let policies = PolicyIndex::new(&topology.policies);
    let shaped: HashSet<&str> = topology
        .queues
        .iter()
        .filter(|q| transport_shaped(q, &policies, found))
        .map(|q| q.name.as_str())
        .collect();
    for d in &mut found.dead_letter_queues {
        if d.convention == Convention::Unknown
            && d.by_name
            && !d.by_topology
            && shaped.contains(d.name.as_str())
            && sources_of(topology, &d.name).next().is_some()
        {
            d.convention = Convention::Symfony;
        }
    }
    let failure_transports: Vec<String> = found
        .other_queues
        .iter()
        .filter(|q| {
            named_like_failure(&q.name)
                && shaped.contains(q.name.as_str())
                && sources_of(topology, &q.name).any(named_like_failure)
        })
        .map(|q| q.name.clone())
        .collect();
    for name in failure_transports {
        let Some(i) = found.other_queues.iter().position(|q| q.name == name) else {
            continue;
        };
        let q = found.other_queues.remove(i);
        let mut d = DlqInfo::from_other(q, DlqKind::Error, Convention::Symfony);
        d.by_name = true;
        d.guessed = true;
        found.dead_letter_queues.push(d);
    }
}

impl Discovery {
    /// Hands back to the other queues every dead-letter queue [`DlqInfo::guessed`] that a live
    /// count says something consumes: a failure transport is not worked off by a consumer, so
    /// one with a consumer is an application's queue at work, and is not read as a DLQ (a
    /// watch would read it). An unknown count keeps it listed.
    pub fn consumed_guesses_are_queues(&mut self) {
        let (consumed, kept): (Vec<DlqInfo>, Vec<DlqInfo>) =
            std::mem::take(&mut self.dead_letter_queues)
                .into_iter()
                .partition(|d| d.guessed && d.consumers.is_some_and(|n| n > 0));
        self.dead_letter_queues = kept;
        for d in consumed {
            self.other_queues.push(super::classify::QueueSummary {
                vhost: d.vhost,
                name: d.name,
                queue_type: d.queue_type,
                depth: d.depth,
                consumers: d.consumers,
                dead_letter_exchange: d.dead_letter_exchange,
            });
        }
        self.other_queues
            .sort_by(|a, b| a.vhost.cmp(&b.vhost).then_with(|| a.name.cmp(&b.name)));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::discovery::{
        Binding, BrokerFeatures, ExchangeInfo, QueueType, Topology, discover,
    };
    use serde_json::json;

    fn ex(name: &str, kind: &str) -> ExchangeInfo {
        ExchangeInfo {
            name: name.into(),
            kind: ExchangeKind::parse(kind),
        }
    }

    /// Symfony's app: the `async` transport (exchange and queue `payments`), the failure
    /// transport (exchange and queue `failed_payments`), the `delays` exchange; `delay` adds a
    /// retry's delay queue, returning into `payments` by the default exchange.
    fn symfony(delay: bool) -> Topology {
        let mut t = Topology {
            queues: vec![
                QueueInfo::named("payments").with_messages(0),
                QueueInfo::named("failed_payments").with_messages(6),
            ],
            exchanges: vec![
                ex("payments", "fanout"),
                ex("failed_payments", "fanout"),
                ex("delays", "direct"),
            ],
            bindings: vec![
                Binding::to_queue("payments", "payments", ""),
                Binding::to_queue("failed_payments", "failed_payments", ""),
            ],
            policies: vec![],
        };
        if delay {
            let name = "delay_payments_payments_100_retry";
            t.queues.push(
                QueueInfo::named(name)
                    .with_arg("x-message-ttl", json!(100))
                    .with_arg("x-expires", json!(10100))
                    .with_arg("x-dead-letter-exchange", json!(""))
                    .with_arg("x-dead-letter-routing-key", json!("payments")),
            );
            t.bindings.push(Binding::to_queue("delays", name, name));
        }
        t
    }

    fn found(t: &Topology, patterns: &[regex::Regex]) -> Discovery {
        discover(t, &BrokerFeatures::from_version("4.3.6"), patterns)
    }

    fn dlq_names(d: &Discovery) -> Vec<&str> {
        d.dead_letter_queues
            .iter()
            .map(|q| q.name.as_str())
            .collect()
    }

    #[test]
    fn the_failure_transport_is_found_by_its_topology_and_nothing_else_is() {
        for delay in [false, true] {
            let d = found(&symfony(delay), &[]);
            assert_eq!(dlq_names(&d), ["failed_payments"], "delay queue: {delay}");
            let f = &d.dead_letter_queues[0];
            assert_eq!(
                (f.kind, f.convention),
                (DlqKind::Error, Convention::Symfony)
            );
            assert!(f.guessed && f.by_name && !f.by_topology && f.feeders.is_empty());
            let others: Vec<&str> = d.other_queues.iter().map(|q| q.name.as_str()).collect();
            assert!(others.contains(&"payments"), "{others:?}");
        }
    }

    #[test]
    fn a_delay_queue_alone_marks_the_vhost_as_symfony() {
        let mut t = symfony(true);
        t.exchanges.retain(|e| e.name != "delays");
        assert!(is_symfony_vhost(&t));
        assert_eq!(dlq_names(&found(&t, &[])), ["failed_payments"]);
        // A delays exchange of another kind, and no delay queue: not Symfony's.
        let mut t = symfony(false);
        t.exchanges.retain(|e| e.name != "delays");
        t.exchanges.push(ex("delays", "topic"));
        assert!(!is_symfony_vhost(&t));
    }

    #[test]
    fn without_symfony_s_retry_topology_a_failed_queue_is_an_application_s() {
        let mut t = symfony(false);
        t.exchanges.retain(|e| e.name != "delays");
        let d = found(&t, &[]);
        assert!(d.dead_letter_queues.is_empty(), "{:?}", dlq_names(&d));
    }

    #[test]
    fn names_a_failure_transport_is_known_by() {
        for n in [
            "failed",
            "failed_payments",
            "messages.failure",
            "FAILED-jobs",
            "x_failures",
        ] {
            assert!(named_like_failure(n), "{n}");
        }
        for n in ["failover", "payments", "unfailed", "failedx", "fail", ""] {
            assert!(!named_like_failure(n), "{n}");
        }
    }

    /// What is not shaped like a failure transport stays a queue, in a Symfony vhost: a queue
    /// named so but bound from an exchange that is not (an application's events), one not bound
    /// at all, one with a TTL, `x-expires`, a dead-letter exchange or auto-delete, a delay queue
    /// named for it, and a work queue a delay queue returns into.
    #[test]
    fn work_queues_and_wait_queues_named_like_failures_stay_queues() {
        let mut t = symfony(false);
        let mut add = |q: QueueInfo, exchange: Option<&str>| {
            if let Some(x) = exchange {
                t.exchanges.push(ex(x, "fanout"));
                t.bindings.push(Binding::to_queue(x, &q.name, ""));
            }
            t.queues.push(q);
        };
        add(QueueInfo::named("payment_failed_events"), Some("events"));
        add(QueueInfo::named("failed_unbound"), None);
        add(
            QueueInfo::named("failed_ttl").with_arg("x-message-ttl", json!(5000)),
            Some("failed_ttl"),
        );
        add(
            QueueInfo::named("failed_expires").with_arg("x-expires", json!(5000)),
            Some("failed_expires"),
        );
        add(
            QueueInfo::named("failed_dlx").with_arg("x-dead-letter-exchange", json!("x")),
            Some("failed_dlx"),
        );
        let mut auto = QueueInfo::named("failed_auto");
        auto.auto_delete = true;
        add(auto, Some("failed_auto"));
        add(
            QueueInfo::named("delay_failed_failed_100_retry")
                .with_arg("x-message-ttl", json!(100))
                .with_arg("x-expires", json!(10100))
                .with_arg("x-dead-letter-exchange", json!(""))
                .with_arg("x-dead-letter-routing-key", json!("failed_retried")),
            None,
        );
        add(QueueInfo::named("failed_retried"), Some("failed_retried"));
        t.bindings.push(Binding::to_queue(
            "delays",
            "delay_failed_failed_100_retry",
            "delay_failed_failed_100_retry",
        ));
        let d = found(&t, &[]);
        assert_eq!(dlq_names(&d), ["failed_payments"]);
    }

    #[test]
    fn a_configured_name_of_transport_shape_is_read_as_symfony_s() {
        let mut t = symfony(false);
        t.queues.push(QueueInfo::named("graveyard"));
        t.exchanges.push(ex("graveyard", "fanout"));
        t.bindings
            .push(Binding::to_queue("graveyard", "graveyard", ""));
        let pats = [regex::Regex::new("^graveyard$").unwrap()];
        let d = found(&t, &pats);
        let g = d.dlq("graveyard").expect("listed");
        assert_eq!(g.convention, Convention::Symfony);
        assert!(!g.guessed, "the operator named it");
        // Outside a Symfony vhost the configured name stays of unknown convention.
        t.exchanges.retain(|e| e.name != "delays");
        let d = found(&t, &pats);
        assert_eq!(
            d.dlq("graveyard").map(|g| g.convention),
            Some(Convention::Unknown)
        );
    }

    #[test]
    fn a_guess_something_consumes_goes_back_to_the_queues() {
        let mut d = found(&symfony(false), &[]);
        d.set_vhost("v");
        // Unknown: kept.
        d.consumed_guesses_are_queues();
        assert_eq!(dlq_names(&d), ["failed_payments"]);
        let live = std::collections::HashMap::from([("failed_payments".to_string(), 0)]);
        d.set_consumers("v", &live);
        d.consumed_guesses_are_queues();
        assert_eq!(dlq_names(&d), ["failed_payments"]);
        let live = std::collections::HashMap::from([("failed_payments".to_string(), 2)]);
        d.set_consumers("v", &live);
        d.consumed_guesses_are_queues();
        assert!(d.dead_letter_queues.is_empty());
        let back = d.other_queues.iter().find(|q| q.name == "failed_payments");
        assert_eq!(
            back.map(|q| (q.consumers, &q.queue_type)),
            Some((Some(2), &QueueType::Classic))
        );
    }
}
