//! Where a publish lands: exchanges and bindings indexed for routing, with AMQP topic
//! matching. Answers "where does a publish to exchange X with key K land?" for discovery's
//! dead-letter edges and for replay previews.

use std::collections::{BTreeSet, HashMap, HashSet};

use super::topology::{Binding, DestinationType, ExchangeInfo, ExchangeKind};

/// Where a publish lands, per the bindings.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Routing {
    /// Sorted, without duplicates.
    pub queues: Vec<String>,
    /// False when some hop could not be decided from the key (headers or plugin exchanges, or
    /// an exchange Warren has no type for): the list holds every queue it *might* reach.
    pub exact: bool,
}

/// Exchanges and bindings indexed for routing many keys.
pub struct RoutingTable<'a> {
    kinds: HashMap<&'a str, &'a ExchangeKind>,
    by_source: HashMap<&'a str, Vec<&'a Binding>>,
}

impl<'a> RoutingTable<'a> {
    pub fn new(exchanges: &'a [ExchangeInfo], bindings: &'a [Binding]) -> Self {
        let kinds = exchanges
            .iter()
            .map(|e| (e.name.as_str(), &e.kind))
            .collect();
        let mut by_source: HashMap<&str, Vec<&Binding>> = HashMap::new();
        for b in bindings {
            by_source.entry(b.source.as_str()).or_default().push(b);
        }
        RoutingTable { kinds, by_source }
    }

    /// Queues a publish to `exchange` with `routing_key` reaches. The default exchange (`""`)
    /// reaches the queue named by the key (whether or not it exists — the caller knows the queue
    /// list). Exchange-to-exchange bindings are followed, cycles cut.
    pub fn route(&self, exchange: &str, routing_key: &str) -> Routing {
        if exchange.is_empty() {
            return Routing {
                queues: vec![routing_key.to_string()],
                exact: true,
            };
        }
        let mut out = BTreeSet::new();
        let mut exact = true;
        let mut seen = HashSet::new();
        self.walk(exchange, Some(routing_key), &mut seen, &mut out, &mut exact);
        Routing {
            queues: out.into_iter().collect(),
            exact,
        }
    }

    /// Every queue an exchange can reach with *some* key: for dead-lettering without a routing
    /// key, where the key is each message's own.
    pub fn reachable(&self, exchange: &str) -> Routing {
        if exchange.is_empty() {
            return Routing {
                queues: Vec::new(),
                exact: false,
            };
        }
        let mut out = BTreeSet::new();
        let mut exact = true;
        let mut seen = HashSet::new();
        self.walk(exchange, None, &mut seen, &mut out, &mut exact);
        // Only a pure fanout path is certain when the key is unknown.
        Routing {
            queues: out.into_iter().collect(),
            exact,
        }
    }

    fn walk<'s>(
        &'s self,
        exchange: &'s str,
        key: Option<&str>,
        seen: &mut HashSet<&'s str>,
        out: &mut BTreeSet<String>,
        exact: &mut bool,
    ) {
        if !seen.insert(exchange) {
            return;
        }
        let Some(bindings) = self.by_source.get(exchange) else {
            return;
        };
        let kind = self.kinds.get(exchange).copied();
        for b in bindings {
            let matched = match (kind, key) {
                (Some(ExchangeKind::Fanout), _) => true,
                (Some(ExchangeKind::Direct), Some(k)) => b.routing_key == k,
                (Some(ExchangeKind::Topic), Some(k)) => topic_matches(&b.routing_key, k),
                // Unknown key, headers, plugin or unknown exchange type: possible, not certain.
                _ => {
                    *exact = false;
                    true
                }
            };
            if !matched {
                continue;
            }
            match b.destination_type {
                DestinationType::Queue => {
                    out.insert(b.destination.clone());
                }
                DestinationType::Exchange => self.walk(&b.destination, key, seen, out, exact),
            }
        }
    }
}

/// Which queues a publish to `exchange` with `routing_key` reaches per the bindings: default
/// exchange → the queue named by the key; direct → exact key; fanout → all bound; topic → `*`
/// (one word) and `#` (zero or more words) matching; headers and plugin types → all bound (see
/// [`resolve_routing_detail`] for whether the answer is exact).
pub fn resolve_routing(
    exchanges: &[ExchangeInfo],
    bindings: &[Binding],
    exchange: &str,
    routing_key: &str,
) -> Vec<String> {
    resolve_routing_detail(exchanges, bindings, exchange, routing_key).queues
}

/// [`resolve_routing`] with the flag saying whether the list is certain or only possible.
pub fn resolve_routing_detail(
    exchanges: &[ExchangeInfo],
    bindings: &[Binding],
    exchange: &str,
    routing_key: &str,
) -> Routing {
    RoutingTable::new(exchanges, bindings).route(exchange, routing_key)
}

/// AMQP topic matching: words split on `.`, `*` matches exactly one word, `#` zero or more.
/// Dynamic programming, so hostile patterns with many `#` stay linear in size.
pub fn topic_matches(pattern: &str, key: &str) -> bool {
    let pat: Vec<&str> = pattern.split('.').collect();
    let words: Vec<&str> = key.split('.').collect();
    // reach[j]: the pattern prefix so far can consume exactly the first j words.
    let mut reach = vec![false; words.len() + 1];
    reach[0] = true;
    for p in &pat {
        let mut next = vec![false; words.len() + 1];
        match *p {
            "#" => {
                let mut any = false;
                for j in 0..=words.len() {
                    any |= reach[j];
                    next[j] = any;
                }
            }
            _ => {
                for j in 0..words.len() {
                    if reach[j] && (*p == "*" || *p == words[j]) {
                        next[j + 1] = true;
                    }
                }
            }
        }
        reach = next;
    }
    reach[words.len()]
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::discovery::JsonMap;

    fn ex(name: &str, kind: &str) -> ExchangeInfo {
        ExchangeInfo {
            name: name.into(),
            kind: ExchangeKind::parse(kind),
        }
    }

    #[test]
    fn topic_wildcards() {
        assert!(topic_matches("order.*", "order.created"));
        assert!(!topic_matches("order.*", "order.created.eu"));
        assert!(!topic_matches("order.*", "order"));
        assert!(topic_matches("order.#", "order"));
        assert!(topic_matches("order.#", "order.created.eu"));
        assert!(topic_matches("#", ""));
        assert!(topic_matches("#", "a.b.c"));
        assert!(topic_matches("*.created.#", "order.created"));
        assert!(topic_matches("#.eu", "order.created.eu"));
        assert!(!topic_matches("#.eu", "order.created.us"));
        assert!(topic_matches("a.#.b.#.c", "a.x.b.y.z.c"));
        assert!(!topic_matches("a.*.c", "a.c"));
        assert!(topic_matches("", ""));
        let hostile = "#.".repeat(200) + "x";
        assert!(!topic_matches(&hostile, &"a.".repeat(200)));
    }

    #[test]
    fn routing_by_exchange_type() {
        let exchanges = vec![
            ex("orders", "topic"),
            ex("direct", "direct"),
            ex("fan", "fanout"),
            ex("hdr", "headers"),
            ex("inner", "direct"),
        ];
        let bindings = vec![
            Binding::to_queue("orders", "all-orders", "order.#"),
            Binding::to_queue("orders", "created", "order.created"),
            Binding::to_queue("orders", "eu", "*.*.eu"),
            Binding::to_queue("direct", "a", "k1"),
            Binding::to_queue("direct", "b", "k2"),
            Binding::to_queue("fan", "f1", "ignored"),
            Binding::to_queue("fan", "f2", ""),
            Binding::to_queue("hdr", "h1", ""),
            Binding {
                source: "direct".into(),
                destination: "inner".into(),
                destination_type: DestinationType::Exchange,
                routing_key: "k1".into(),
                arguments: JsonMap::new(),
            },
            Binding::to_queue("inner", "via-inner", "k1"),
        ];
        assert_eq!(
            resolve_routing(&exchanges, &bindings, "orders", "order.created"),
            vec!["all-orders", "created"]
        );
        assert_eq!(
            resolve_routing(&exchanges, &bindings, "orders", "order.created.eu"),
            vec!["all-orders", "eu"]
        );
        assert!(resolve_routing(&exchanges, &bindings, "orders", "invoice.created").is_empty());
        assert_eq!(
            resolve_routing(&exchanges, &bindings, "direct", "k1"),
            vec!["a", "via-inner"]
        );
        assert_eq!(
            resolve_routing(&exchanges, &bindings, "fan", "whatever"),
            vec!["f1", "f2"]
        );
        assert_eq!(
            resolve_routing(&exchanges, &bindings, "", "some.queue"),
            vec!["some.queue"]
        );
        let h = resolve_routing_detail(&exchanges, &bindings, "hdr", "x");
        assert_eq!(h.queues, vec!["h1"]);
        assert!(!h.exact);
        assert!(resolve_routing_detail(&exchanges, &bindings, "orders", "order.x").exact);
    }

    #[test]
    fn exchange_binding_cycles_terminate() {
        let exchanges = vec![ex("a", "fanout"), ex("b", "fanout")];
        let e2e = |s: &str, d: &str| Binding {
            source: s.into(),
            destination: d.into(),
            destination_type: DestinationType::Exchange,
            routing_key: String::new(),
            arguments: JsonMap::new(),
        };
        let bindings = vec![
            e2e("a", "b"),
            e2e("b", "a"),
            Binding::to_queue("b", "q", ""),
        ];
        assert_eq!(resolve_routing(&exchanges, &bindings, "a", ""), vec!["q"]);
    }
}
