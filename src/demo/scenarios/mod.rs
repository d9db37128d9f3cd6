//! The demo's failures as data. Each [`Scenario`] lists the exchanges, queues (with their
//! arguments and what they hold once the broker has settled), bindings and policies it needs,
//! the messages it publishes and the [`Fault`] that turns them into dead letters;
//! [`super::mechanics`] interprets it. Nothing here talks to a broker.
//!
//! [`broker`] holds the failures the broker produces itself, [`frameworks`] what MassTransit,
//! Spring and NServiceBus republish to their error queues.

mod broker;
mod frameworks;

use jiff::{SignedDuration, Timestamp};
use serde_json::Value;

use super::{DemoQueue, QueueRole};
use crate::domain::discovery::Policy;
use crate::domain::features::QueueType;
use crate::domain::fingerprint::fnv1a64;
use crate::domain::message::Properties;
use crate::domain::value::{HeaderValue, Table};

pub use broker::{LADDER_ATTEMPTS, RETRY_WAIT_TTL_MS};
use lapin::ExchangeKind;

/// Every scenario, in the order the report lists their queues.
pub fn all() -> Vec<Scenario> {
    vec![
        broker::orders(),
        broker::payments(),
        broker::notifications(),
        broker::telemetry(),
        broker::invoices(),
        broker::inventory(),
        frameworks::masstransit(),
        frameworks::spring(),
        frameworks::nservicebus(),
    ]
}

/// Every queue of the scenarios: dead-letter queues first, then the work queues feeding them,
/// each group in scenario order.
pub fn report(scenarios: &[Scenario]) -> Vec<DemoQueue> {
    let queues = || scenarios.iter().flat_map(|s| &s.queues);
    let of = |role: QueueRole| queues().filter(move |q| q.role == role);
    of(QueueRole::DeadLetter)
        .chain(of(QueueRole::Work))
        .map(|q| DemoQueue {
            name: q.name.to_string(),
            role: q.role,
            expected: q.expected,
            story: q.story.to_string(),
        })
        .collect()
}

/// One kind of failure, from its topology to the dead letters it leaves.
#[derive(Debug, Default)]
pub struct Scenario {
    /// Durable exchanges.
    pub exchanges: Vec<(&'static str, ExchangeKind)>,
    pub queues: Vec<Queue>,
    pub bindings: Vec<Binding>,
    /// Set through the management API before any queue is declared.
    pub policies: Vec<Policy>,
    /// Published in this order, each confirmed and routed (`mandatory`).
    pub messages: Vec<Message>,
    pub fault: Fault,
}

/// A durable queue and what it holds once the demo has settled.
#[derive(Debug)]
pub struct Queue {
    pub name: &'static str,
    /// Declared as `x-queue-type`.
    pub kind: QueueType,
    pub arguments: Table,
    pub role: QueueRole,
    pub expected: u64,
    /// How its messages got there, in a few words (the report's).
    pub story: &'static str,
}

impl Queue {
    fn new(name: &'static str, role: QueueRole, expected: usize, story: &'static str) -> Queue {
        Queue {
            name,
            kind: QueueType::Classic,
            arguments: Table::new(),
            role,
            expected: expected as u64,
            story,
        }
    }

    fn quorum(mut self) -> Queue {
        self.kind = QueueType::Quorum;
        self
    }

    fn with<const N: usize>(mut self, arguments: [(&str, HeaderValue); N]) -> Queue {
        for (k, v) in arguments {
            self.arguments.insert(k, v);
        }
        self
    }
}

/// A queue that holds dead letters, `expected` of them.
fn dead_letters(name: &'static str, expected: usize, story: &'static str) -> Queue {
    Queue::new(name, QueueRole::DeadLetter, expected, story)
}

/// A work (or retry) queue that feeds one, holding `expected` messages at the end.
fn work(name: &'static str, expected: usize, story: &'static str) -> Queue {
    Queue::new(name, QueueRole::Work, expected, story)
}

fn dlx(exchange: &str) -> (&'static str, HeaderValue) {
    ("x-dead-letter-exchange", s(exchange))
}

fn dl_routing_key(key: &str) -> (&'static str, HeaderValue) {
    ("x-dead-letter-routing-key", s(key))
}

fn message_ttl(ms: i32) -> (&'static str, HeaderValue) {
    ("x-message-ttl", HeaderValue::I32(ms))
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Binding {
    pub source: &'static str,
    pub destination: Destination,
    pub key: &'static str,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Destination {
    Queue(&'static str),
    Exchange(&'static str),
}

impl Binding {
    /// `queue` bound to `exchange` with `key`.
    pub fn queue(queue: &'static str, exchange: &'static str, key: &'static str) -> Binding {
        Binding {
            source: exchange,
            destination: Destination::Queue(queue),
            key,
        }
    }

    /// Exchange `destination` bound to exchange `source` with `key`.
    pub fn exchange(destination: &'static str, source: &'static str, key: &'static str) -> Binding {
        Binding {
            source,
            destination: Destination::Exchange(destination),
            key,
        }
    }
}

/// One message to publish.
#[derive(Clone, Debug)]
pub struct Message {
    /// `""` is the default exchange, which routes on the queue name.
    pub exchange: &'static str,
    pub routing_key: String,
    pub properties: Properties,
    pub headers: Table,
    pub body: Vec<u8>,
}

impl Message {
    /// A message without headers whose body is `body` as pretty-printed JSON.
    fn json(
        exchange: &'static str,
        routing_key: impl Into<String>,
        properties: Properties,
        body: &Value,
    ) -> Message {
        Message {
            exchange,
            routing_key: routing_key.into(),
            properties,
            headers: Table::new(),
            body: serde_json::to_vec_pretty(body).unwrap_or_default(),
        }
    }

    fn headers(mut self, headers: Table) -> Message {
        self.headers = headers;
        self
    }
}

/// What turns a scenario's published messages into dead letters.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Fault {
    /// Publishing is all it takes: the queue's own arguments (message TTL, max-length)
    /// dead-letter the messages, or they are published where a framework republishes a failed
    /// message.
    #[default]
    Published,
    /// A consumer takes every message from `queue` and rejects it without requeue.
    Rejected { queue: &'static str },
    /// A consumer rejects with requeue until quorum queue `queue` gives up on every message
    /// and dead-letters it into `dlq`.
    DeliveryLimit {
        queue: &'static str,
        dlq: &'static str,
    },
    /// A consumer climbs a retry ladder with every message.
    RetryLadder(Ladder),
}

/// A consumer of `work` rejects every message `attempts` times: each rejection goes through
/// exchange `retry` (bound to `wait` with `key`) to the TTL queue `wait`, which dead-letters it
/// back to `work`, except the last, which reaches `dlq`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Ladder {
    pub work: &'static str,
    pub retry: &'static str,
    pub key: &'static str,
    pub wait: &'static str,
    pub dlq: &'static str,
    pub attempts: usize,
}

impl Ladder {
    /// The binding every round but the last uses.
    pub fn wait_binding(self) -> Binding {
        Binding::queue(self.wait, self.retry, self.key)
    }

    /// The binding of the last round.
    pub fn dlq_binding(self) -> Binding {
        Binding::queue(self.dlq, self.retry, self.key)
    }
}

// ---------------------------------------------------------------------------------------------
// Message material

/// A GUID that is the same on every run, so two demos look alike.
fn guid(seed: &str) -> String {
    let a = fnv1a64(seed.as_bytes());
    let b = fnv1a64(format!("{seed}#2").as_bytes());
    format!(
        "{:08x}-{:04x}-4{:03x}-a{:03x}-{:012x}",
        a >> 32,
        (a >> 16) & 0xffff,
        a & 0x0fff,
        (b >> 48) & 0x0fff,
        b & 0xffff_ffff_ffff
    )
}

fn s(v: &str) -> HeaderValue {
    HeaderValue::string(v)
}

/// A header table with these entries, in this order.
fn table<const N: usize>(entries: [(&str, HeaderValue); N]) -> Table {
    entries
        .into_iter()
        .map(|(k, v)| (k.to_string(), v))
        .collect()
}

fn json_props(message_id: &str, kind: Option<&str>, app: &str) -> Properties {
    Properties {
        content_type: Some("application/json".into()),
        delivery_mode: Some(2),
        message_id: Some(message_id.into()),
        kind: kind.map(str::to_string),
        app_id: Some(app.into()),
        timestamp: u64::try_from(Timestamp::now().as_second()).ok(),
        ..Properties::default()
    }
}

fn ago(minutes: i64) -> Timestamp {
    Timestamp::now()
        .checked_sub(SignedDuration::from_mins(minutes))
        .unwrap_or_else(|_| Timestamp::now())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn guids_are_stable_and_well_formed() {
        let g = guid("x");
        assert_eq!(g, guid("x"));
        assert_ne!(g, guid("y"));
        let parts: Vec<usize> = g.split('-').map(str::len).collect();
        assert_eq!(parts, vec![8, 4, 4, 4, 12]);
        assert!(g.chars().all(|c| c == '-' || c.is_ascii_hexdigit()));
    }

    #[test]
    fn the_report_lists_every_queue_once_in_the_demos_order() {
        let shown: Vec<(String, QueueRole, u64)> = report(&all())
            .into_iter()
            .map(|q| (q.name, q.role, q.expected))
            .collect();
        let dlq = |n: &str, c: u64| (n.to_string(), QueueRole::DeadLetter, c);
        let work = |n: &str, c: u64| (n.to_string(), QueueRole::Work, c);
        assert_eq!(
            shown,
            vec![
                dlq("orders.dlq", 5),
                dlq("payments.dlq", 5),
                dlq("notifications.dlq", 4),
                dlq("telemetry.dlq", 7),
                dlq("invoices.dlq", 3),
                dlq("inventory.dlq", 3),
                dlq("shipping-label_error", 6),
                dlq("shipping-label_skipped", 2),
                dlq("inventory.reserve.group.dlq", 4),
                dlq("error", 4),
                work("orders.process", 0),
                work("orders.retry.wait", 0),
                work("payments.process", 0),
                work("notifications.email", 0),
                work("telemetry.ingest", 5),
                work("invoices.process", 0),
                work("inventory", 0),
                work("shipping-label", 0),
                work("inventory.reserve.group", 0),
                work("Sales", 0),
            ]
        );
    }

    #[test]
    fn every_name_a_scenario_uses_is_one_it_declares() {
        for s in all() {
            let queue = |name: &str| s.queues.iter().any(|q| q.name == name);
            match s.fault {
                Fault::Published => {}
                Fault::Rejected { queue: q } => assert!(queue(q), "{q}"),
                Fault::DeliveryLimit { queue: q, dlq } => assert!(queue(q) && queue(dlq)),
                Fault::RetryLadder(ladder) => {
                    assert!(queue(ladder.work) && queue(ladder.dlq));
                    // The ladder moves the wait queue's binding; the topology must declare it.
                    assert!(s.bindings.contains(&ladder.wait_binding()), "{ladder:?}");
                }
            }
            for m in &s.messages {
                let known =
                    m.exchange.is_empty() || s.exchanges.iter().any(|(x, _)| *x == m.exchange);
                assert!(known, "exchange '{}' is not declared", m.exchange);
                if m.exchange.is_empty() {
                    assert!(
                        s.queues.iter().any(|q| q.name == m.routing_key),
                        "no queue '{}'",
                        m.routing_key
                    );
                }
            }
            for b in &s.bindings {
                assert!(s.exchanges.iter().any(|(x, _)| *x == b.source), "{b:?}");
                let found = match b.destination {
                    Destination::Queue(q) => s.queues.iter().any(|d| d.name == q),
                    Destination::Exchange(x) => s.exchanges.iter().any(|(d, _)| *d == x),
                };
                assert!(found, "{b:?}");
            }
        }
    }
}
