//! Consumer counts, live: the management API's queue listing carries none (its cheap form,
//! `disable_stats`, leaves `consumers` out) and its per-queue figure lags a queue's declaration
//! by seconds (absent, or 0 on 4.x, with a consumer attached). A count the broker did not give
//! stays `None`, never 0: "nothing consumes the work queue" is said only when it is so. The
//! broker layer counts the queues named here over AMQP (a passive declare's `consumer_count`).

use std::collections::{BTreeSet, HashMap};

use super::classify::Discovery;

impl Discovery {
    /// The queues of `vhost` whose consumers a listing shows or decides on: every dead-letter
    /// queue and every queue feeding one, by name, at most `max`. Dead-letter queues first
    /// (their own count decides whether a guess stays listed), then the feeders.
    pub fn consumer_counts_wanted(&self, vhost: &str, max: usize) -> Vec<String> {
        let dlqs = self.dead_letter_queues.iter().filter(|d| d.vhost == vhost);
        let mut seen = BTreeSet::new();
        let mut out = Vec::new();
        let names = dlqs
            .clone()
            .map(|d| d.name.as_str())
            .chain(dlqs.flat_map(|d| d.feeders.iter().map(String::as_str)));
        for name in names {
            if out.len() >= max {
                break;
            }
            if seen.insert(name) {
                out.push(name.to_string());
            }
        }
        out
    }

    /// Sets the consumers of the queues of `vhost` counted in `live` (by name), over whatever
    /// the listing said: the live figure is the newer one.
    pub fn set_consumers(&mut self, vhost: &str, live: &HashMap<String, u64>) {
        for d in &mut self.dead_letter_queues {
            if d.vhost == vhost
                && let Some(&n) = live.get(&d.name)
            {
                d.consumers = Some(n);
            }
        }
        for q in &mut self.other_queues {
            if q.vhost == vhost
                && let Some(&n) = live.get(&q.name)
            {
                q.consumers = Some(n);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::discovery::{
        Binding, BrokerFeatures, ExchangeInfo, ExchangeKind, QueueInfo, Topology, discover,
    };
    use serde_json::json;

    fn two_dlqs() -> Discovery {
        let work = |n: &str, dlq: &str| {
            QueueInfo::named(n)
                .with_arg("x-dead-letter-exchange", json!(""))
                .with_arg("x-dead-letter-routing-key", json!(dlq))
        };
        let t = Topology {
            queues: vec![
                work("a", "a.dlq"),
                work("b", "a.dlq"),
                work("c", "c.dlq"),
                QueueInfo::named("a.dlq"),
                QueueInfo::named("c.dlq"),
                QueueInfo::named("idle"),
            ],
            exchanges: vec![ExchangeInfo {
                name: "x".into(),
                kind: ExchangeKind::Direct,
            }],
            bindings: vec![Binding::to_queue("x", "idle", "idle")],
            policies: vec![],
        };
        let mut d = discover(&t, &BrokerFeatures::from_version("4.3.6"), &[]);
        d.set_vhost("v");
        d
    }

    #[test]
    fn the_dead_letter_queues_then_their_feeders_are_counted_each_once() {
        let d = two_dlqs();
        assert_eq!(
            d.consumer_counts_wanted("v", 100),
            ["a.dlq", "c.dlq", "a", "b", "c"]
        );
        assert_eq!(d.consumer_counts_wanted("v", 3), ["a.dlq", "c.dlq", "a"]);
        assert!(d.consumer_counts_wanted("other", 100).is_empty());
    }

    #[test]
    fn live_counts_replace_the_listing_s_and_the_rest_stay_unknown() {
        let mut d = two_dlqs();
        let live = HashMap::from([("a".to_string(), 1), ("a.dlq".to_string(), 0)]);
        d.set_consumers("v", &live);
        let other = |n: &str| {
            d.other_queues
                .iter()
                .find(|q| q.name == n)
                .map(|q| q.consumers)
        };
        assert_eq!(other("a"), Some(Some(1)));
        assert_eq!(other("b"), Some(None), "not counted: unknown, never 0");
        assert_eq!(d.dlq("a.dlq").map(|q| q.consumers), Some(Some(0)));
        assert_eq!(d.dlq("c.dlq").map(|q| q.consumers), Some(None));
        // Another vhost's count never lands here.
        let mut e = two_dlqs();
        e.set_consumers("w", &live);
        assert!(e.other_queues.iter().all(|q| q.consumers.is_none()));
    }
}
