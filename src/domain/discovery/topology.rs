//! What the broker layer gathers about a vhost for discovery: its queues, policies, exchanges
//! and bindings, as plain structs.

use serde_json::{Map, Value};

use crate::domain::features::QueueType;

/// A JSON object as the management API reports queue arguments and policy definitions.
pub type JsonMap = Map<String, Value>;

/// The queue arguments RabbitMQ itself reads (without `x-`, as a policy names them).
const BROKER_SETTINGS: [&str; 26] = [
    "message-ttl",
    "expires",
    "max-length",
    "max-length-bytes",
    "overflow",
    "dead-letter-exchange",
    "dead-letter-routing-key",
    "dead-letter-strategy",
    "single-active-consumer",
    "max-priority",
    "queue-mode",
    "queue-type",
    "queue-version",
    "queue-master-locator",
    "queue-leader-locator",
    "quorum-initial-group-size",
    "quorum-target-group-size",
    "delivery-limit",
    "max-age",
    "stream-max-segment-size-bytes",
    "stream-filter-size-bytes",
    "initial-cluster-size",
    "max-in-memory-length",
    "max-in-memory-bytes",
    "consumer-timeout",
    "ha-mode",
];

/// Of the other arguments (an application's own, which Warren never reads), how many are kept
/// and how large each may be, as JSON text.
const OTHER_SETTINGS: usize = 16;
const OTHER_BYTES: usize = 1024;

/// Queue arguments as far as Warren keeps them: every setting the broker reads, and of the rest
/// the first few small ones. A queue then costs a bounded amount of memory whatever arguments an
/// application gave it (a listing of 50 MB of arguments kept whole cost a gigabyte).
pub fn bounded_arguments(arguments: JsonMap) -> JsonMap {
    let mut others = 0;
    arguments
        .into_iter()
        .filter(|(key, value)| {
            let setting = key.strip_prefix("x-").unwrap_or(key);
            if BROKER_SETTINGS.contains(&setting) {
                return true;
            }
            let small = match value {
                Value::String(s) => s.len() <= OTHER_BYTES,
                Value::Array(_) | Value::Object(_) => {
                    serde_json::to_string(value).is_ok_and(|t| t.len() <= OTHER_BYTES)
                }
                _ => true,
            };
            others += usize::from(small);
            small && others <= OTHER_SETTINGS
        })
        .collect()
}

/// One queue as listed by the management API. Counters are `None` when the broker did not report
/// them (stats are missing for a few seconds after a queue is declared).
#[derive(Clone, Debug, PartialEq)]
pub struct QueueInfo {
    pub name: String,
    pub queue_type: QueueType,
    pub durable: bool,
    /// Deleted by the broker, with every message in it, when its last consumer cancels; true
    /// when the broker did not say (reading it then never becomes a consumer).
    pub auto_delete: bool,
    pub arguments: JsonMap,
    /// Name of the policy applied to the queue, when reported.
    pub policy: Option<String>,
    /// `effective_policy_definition` when reported and non-empty (brokers send `{}`, `[]` or
    /// `""` for "none").
    pub effective_policy: Option<JsonMap>,
    /// The broker's own figure for the effective delivery limit (4.3+ report it).
    pub reported_delivery_limit: Option<i64>,
    pub messages: Option<u64>,
    pub messages_ready: Option<u64>,
    pub messages_unacknowledged: Option<u64>,
    pub consumers: Option<u64>,
    /// Bytes of message bodies in the queue, when reported (for `max-length-bytes` room).
    pub message_bytes: Option<u64>,
    /// Quorum queues dead-lettering at least once: dead letters held inside the queue until a
    /// dead-letter queue takes them (`messages_dlx`). The listing does not carry it; the broker
    /// layer asks for it queue by queue (see `stuck::candidates`).
    pub messages_dlx: Option<u64>,
}

impl QueueInfo {
    /// A durable classic queue with no arguments and no stats; for building inputs by hand.
    pub fn named(name: impl Into<String>) -> QueueInfo {
        QueueInfo {
            name: name.into(),
            queue_type: QueueType::Classic,
            durable: true,
            auto_delete: false,
            arguments: JsonMap::new(),
            policy: None,
            effective_policy: None,
            reported_delivery_limit: None,
            messages: None,
            messages_ready: None,
            messages_unacknowledged: None,
            consumers: None,
            message_bytes: None,
            messages_dlx: None,
        }
    }

    /// Adds a queue argument (and keeps `queue_type` in step with `x-queue-type`).
    pub fn with_arg(mut self, key: &str, value: Value) -> QueueInfo {
        if key == "x-queue-type"
            && let Some(t) = value.as_str()
        {
            self.queue_type = QueueType::parse(t);
        }
        self.arguments.insert(key.to_string(), value);
        self
    }

    pub fn with_messages(mut self, messages: u64) -> QueueInfo {
        self.messages = Some(messages);
        self
    }
}

/// A policy of the vhost (`/api/policies/{vhost}`).
#[derive(Clone, Debug, PartialEq)]
pub struct Policy {
    pub name: String,
    pub pattern: String,
    /// `all`, `queues`, `exchanges`, `classic_queues`, `quorum_queues`, `streams`.
    pub apply_to: String,
    pub priority: i64,
    pub definition: JsonMap,
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum ExchangeKind {
    Direct,
    Fanout,
    Topic,
    Headers,
    /// Plugin types (`x-delayed-message`, `x-consistent-hash`, …): routing is not modelled.
    Other(String),
}

impl ExchangeKind {
    pub fn parse(text: &str) -> ExchangeKind {
        match text {
            "direct" => ExchangeKind::Direct,
            "fanout" => ExchangeKind::Fanout,
            "topic" => ExchangeKind::Topic,
            "headers" => ExchangeKind::Headers,
            other => ExchangeKind::Other(other.to_string()),
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ExchangeInfo {
    pub name: String,
    pub kind: ExchangeKind,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum DestinationType {
    Queue,
    Exchange,
}

/// A binding of the vhost: `source` exchange → `destination` queue or exchange.
#[derive(Clone, Debug, PartialEq)]
pub struct Binding {
    pub source: String,
    pub destination: String,
    pub destination_type: DestinationType,
    pub routing_key: String,
    pub arguments: JsonMap,
}

impl Binding {
    pub fn to_queue(source: &str, queue: &str, routing_key: &str) -> Binding {
        Binding {
            source: source.to_string(),
            destination: queue.to_string(),
            destination_type: DestinationType::Queue,
            routing_key: routing_key.to_string(),
            arguments: JsonMap::new(),
        }
    }
}

/// Everything discovery reads about one vhost.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Topology {
    pub queues: Vec<QueueInfo>,
    pub exchanges: Vec<ExchangeInfo>,
    pub bindings: Vec<Binding>,
    pub policies: Vec<Policy>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn arguments_keep_every_broker_setting_and_a_few_small_others() {
        let mut args = JsonMap::new();
        for i in 0..40 {
            args.insert(format!("x-app-{i:02}"), json!(i));
        }
        args.insert("x-big".into(), json!("b".repeat(2000)));
        args.insert("x-nested".into(), json!({"deep": ["c".repeat(2000)]}));
        args.insert("x-dead-letter-exchange".into(), json!("dlx"));
        args.insert("x-message-ttl".into(), json!(1500));
        let kept = bounded_arguments(args);
        assert_eq!(kept.get("x-dead-letter-exchange"), Some(&json!("dlx")));
        assert_eq!(kept.get("x-message-ttl"), Some(&json!(1500)));
        assert!(!kept.contains_key("x-big") && !kept.contains_key("x-nested"));
        let others: Vec<&String> = kept.keys().filter(|k| k.starts_with("x-app")).collect();
        assert_eq!(others.len(), OTHER_SETTINGS);
        assert_eq!(others[0], "x-app-00");
    }
}
