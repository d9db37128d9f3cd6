//! Finding the dead-letter queues of a vhost, pure: from queue arguments, policies, exchanges and
//! bindings (as plain structs the broker layer fills in) plus naming conventions, decide which
//! queues hold failed messages, who feeds them, which queue pairs are retry loops rather than
//! dead ends, and what the broker version means for browsing them safely. Also answers "where does
//! a publish to exchange X with key K land?" for replay previews.

use std::collections::{BTreeSet, HashMap, HashSet};
use std::fmt;

use regex::Regex;

use crate::domain::quorum;
use serde_json::{Map, Value};

/// A JSON object as the management API reports queue arguments and policy definitions.
pub type JsonMap = Map<String, Value>;

/// The delivery limit RabbitMQ 4.0+ gives a quorum queue that sets none.
pub const DEFAULT_QUORUM_DELIVERY_LIMIT: u64 = 20;

// ---------------------------------------------------------------------------------------------
// Broker version → behaviour

pub use crate::domain::quorum::BrokerVersion;

/// What a broker version means for reading dead letters. An unknown version gets the cautious
/// answer everywhere (limit assumed, returns counted), because the cost of guessing wrong is
/// destroyed messages.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BrokerFeatures {
    /// The version as the broker reported it (may be empty).
    pub version_text: String,
    pub version: Option<BrokerVersion>,
    /// 3.13+ writes `x-last-death-*` headers.
    pub has_last_death: bool,
    /// The delivery limit of a quorum queue that sets none: 20 on 4.0+, none on 3.x.
    pub default_quorum_delivery_limit: Option<u64>,
    /// Whether an explicit `basic.nack(requeue=true)` counts as a delivery attempt on a quorum
    /// queue: yes before 4.3, no from 4.3 (a plain return). Only matters when a limit applies —
    /// see [`BrokerFeatures::nack_return_counts`].
    pub explicit_nack_counts: bool,
}

impl BrokerFeatures {
    pub fn from_version(text: &str) -> BrokerFeatures {
        let version = BrokerVersion::parse(text);
        let (has_last_death, default_limit, nack_counts) = match version {
            Some(v) => (
                v.at_least(3, 13),
                v.at_least(4, 0).then_some(DEFAULT_QUORUM_DELIVERY_LIMIT),
                !v.at_least(4, 3),
            ),
            None => (false, Some(DEFAULT_QUORUM_DELIVERY_LIMIT), true),
        };
        BrokerFeatures {
            version_text: text.to_string(),
            version,
            has_last_death,
            default_quorum_delivery_limit: default_limit,
            explicit_nack_counts: nack_counts,
        }
    }

    /// Whether nacking a browsed message back onto a quorum queue with this effective delivery
    /// limit uses up one of its deliveries. On 3.x the count always moves but only bites when a
    /// limit is set; on 4.0–4.2 every return counts; on 4.3+ an explicit nack is free.
    pub fn nack_return_counts(&self, delivery_limit: Option<u64>) -> bool {
        self.explicit_nack_counts && delivery_limit.is_some()
    }
}

// ---------------------------------------------------------------------------------------------
// Input: what the broker layer gathered

#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum QueueType {
    Classic,
    Quorum,
    Stream,
    /// A type this version of Warren does not know (plugins can add some).
    Other(String),
}

impl QueueType {
    /// `x-queue-type` / the management API's `type`; absent or empty means classic.
    pub fn parse(text: &str) -> QueueType {
        match text {
            "" | "classic" => QueueType::Classic,
            "quorum" => QueueType::Quorum,
            "stream" => QueueType::Stream,
            other => QueueType::Other(other.to_string()),
        }
    }

    pub fn as_str(&self) -> &str {
        match self {
            QueueType::Classic => "classic",
            QueueType::Quorum => "quorum",
            QueueType::Stream => "stream",
            QueueType::Other(s) => s,
        }
    }
}

impl fmt::Display for QueueType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One queue as listed by the management API. Counters are `None` when the broker did not report
/// them (stats are missing for a few seconds after a queue is declared).
#[derive(Clone, Debug, PartialEq)]
pub struct QueueInfo {
    pub name: String,
    pub queue_type: QueueType,
    pub durable: bool,
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
}

impl QueueInfo {
    /// A durable classic queue with no arguments and no stats; for building inputs by hand.
    pub fn named(name: impl Into<String>) -> QueueInfo {
        QueueInfo {
            name: name.into(),
            queue_type: QueueType::Classic,
            durable: true,
            arguments: JsonMap::new(),
            policy: None,
            effective_policy: None,
            reported_delivery_limit: None,
            messages: None,
            messages_ready: None,
            messages_unacknowledged: None,
            consumers: None,
            message_bytes: None,
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

// ---------------------------------------------------------------------------------------------
// Output

/// What kind of dead end a queue is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum DlqKind {
    /// Broker dead-lettering or a generic `*.dlq`-style queue.
    DeadLetter,
    /// A framework's error queue (`*_error`, `error`, `*-error`, …).
    Error,
    /// MassTransit's `*_skipped`: no consumer handled the type.
    Skipped,
    /// A parking lot: messages set aside for good after retries.
    ParkingLot,
}

impl DlqKind {
    pub fn label(self) -> &'static str {
        match self {
            DlqKind::DeadLetter => "dlq",
            DlqKind::Error => "error",
            DlqKind::Skipped => "skipped",
            DlqKind::ParkingLot => "parking",
        }
    }
}

/// Whose convention put the queue there: the same conventions a message is read by; a queue
/// recognised only by a generic name or a configured pattern is `Unknown`.
pub use crate::domain::convention::Convention;

/// One dead-letter queue and what is needed to read it safely.
#[derive(Clone, Debug, PartialEq)]
pub struct DlqInfo {
    pub name: String,
    pub kind: DlqKind,
    pub convention: Convention,
    /// `messages` as reported; `None` while the broker has no stats for the queue yet.
    pub depth: Option<u64>,
    pub messages_ready: Option<u64>,
    pub messages_unacknowledged: Option<u64>,
    pub consumers: Option<u64>,
    pub queue_type: QueueType,
    /// Queues whose dead-lettering (argument or policy) can reach this queue, sorted.
    pub feeders: Vec<String>,
    /// True when some feeder dead-letters here only possibly (no routing key through a
    /// direct/topic/headers exchange), so the feeder list may overstate.
    pub feeders_uncertain: bool,
    /// Found through dead-letter topology (a feeder exists).
    pub by_topology: bool,
    /// Found by its name (built-in convention or configured pattern).
    pub by_name: bool,
    /// Quorum queues only: the delivery limit in force (`None` = unlimited or not quorum).
    pub delivery_limit: Option<u64>,
    /// The DLQ's own dead-letter exchange: with one, a quorum message over its limit moves on;
    /// without, it is dropped.
    pub dead_letter_exchange: Option<String>,
}

impl DlqInfo {
    /// Browsing can destroy messages here: a quorum queue with a delivery limit.
    pub fn limit_applies(&self) -> bool {
        self.queue_type == QueueType::Quorum && self.delivery_limit.is_some()
    }
}

/// A work queue that dead-letters into a wait queue whose TTL sends messages back: a retry
/// ladder. x-death only keeps the *first* time of each `{queue, reason}` pair, so a timeline
/// needs `ttl_ms` to estimate when the last cycle happened.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RetryLoop {
    pub work_queue: String,
    pub wait_queue: String,
    pub ttl_ms: u64,
}

/// Any queue that is not a dead-letter queue.
#[derive(Clone, Debug, PartialEq)]
pub struct QueueSummary {
    pub name: String,
    pub queue_type: QueueType,
    pub depth: Option<u64>,
    pub consumers: Option<u64>,
    /// Where this queue dead-letters to, when it does.
    pub dead_letter_exchange: Option<String>,
}

#[derive(Clone, Debug, Default, PartialEq)]
pub struct Discovery {
    /// Queues with messages first, then by name.
    pub dead_letter_queues: Vec<DlqInfo>,
    pub retry_loops: Vec<RetryLoop>,
    /// By name.
    pub other_queues: Vec<QueueSummary>,
}

impl Discovery {
    pub fn dlq(&self, name: &str) -> Option<&DlqInfo> {
        self.dead_letter_queues.iter().find(|d| d.name == name)
    }

    /// The retry loop a queue takes part in, as work or wait queue.
    pub fn retry_loop_of(&self, queue: &str) -> Option<&RetryLoop> {
        self.retry_loops
            .iter()
            .find(|l| l.work_queue == queue || l.wait_queue == queue)
    }
}

// ---------------------------------------------------------------------------------------------
// Effective settings of a queue

/// A queue's dead-letter and limit settings after arguments and policy are combined the way
/// RabbitMQ combines them.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct EffectiveSettings {
    pub dead_letter_exchange: Option<String>,
    pub dead_letter_routing_key: Option<String>,
    pub message_ttl_ms: Option<u64>,
    /// `x-delivery-limit` argument and `delivery-limit` policy key, as set (negative = none);
    /// `crate::domain::quorum` decides how the broker combines them.
    pub delivery_limit_arg: Option<i64>,
    pub delivery_limit_policy: Option<i64>,
    /// `x-max-length` / `max-length`: the lower of argument and policy.
    pub max_length: Option<u64>,
    /// `x-max-length-bytes` / `max-length-bytes`: the lower of argument and policy.
    pub max_length_bytes: Option<u64>,
    /// `x-overflow` / `overflow` (`drop-head` when unset): the argument wins.
    pub overflow: Option<String>,
}

/// Policies compiled once for a whole vhost.
struct PolicyIndex<'a> {
    by_name: HashMap<&'a str, &'a Policy>,
    compiled: Vec<(&'a Policy, Regex)>,
}

impl<'a> PolicyIndex<'a> {
    fn new(policies: &'a [Policy]) -> Self {
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
    fn definition_for(&self, q: &'a QueueInfo) -> Option<&'a JsonMap> {
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
    }
}

fn lower(a: Option<u64>, b: Option<u64>) -> Option<u64> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}

/// The delivery limit that applies to a queue: only quorum queues have one; the broker's own
/// figure wins when reported; otherwise the configured value, else the version's default.
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
    // An unknown version gets 4.0's rules: a default limit of 20, the cautious answer.
    let version = features.version.unwrap_or(BrokerVersion::new(4, 0, 0));
    quorum::effective_delivery_limit(
        version,
        quorum::QueueType::Quorum,
        settings.delivery_limit_arg,
        settings.delivery_limit_policy,
    )
}

// ---------------------------------------------------------------------------------------------
// Routing

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

// ---------------------------------------------------------------------------------------------
// Naming conventions

/// What a queue's name alone says about it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct NameMatch {
    pub kind: DlqKind,
    pub convention: Convention,
    /// A framework-specific name, as opposed to a generic `*.dlq`-style one.
    pub specific: bool,
}

fn stem_before<'n>(name: &'n str, suffix: &str) -> Option<&'n str> {
    name.strip_suffix(suffix).filter(|s| !s.is_empty())
}

fn ends_with_ci(name: &str, suffix: &str) -> bool {
    name.len() > suffix.len()
        && name
            .get(name.len() - suffix.len()..)
            .is_some_and(|tail| tail.eq_ignore_ascii_case(suffix))
}

/// Built-in naming conventions, then the configured patterns. `error` is claimed for
/// NServiceBus although Rebus uses the same name: the message headers settle which.
pub fn classify_name(name: &str, patterns: &[Regex]) -> Option<NameMatch> {
    let m = |kind, convention, specific| {
        Some(NameMatch {
            kind,
            convention,
            specific,
        })
    };
    match name {
        "error" => return m(DlqKind::Error, Convention::NServiceBus, true),
        "wolverine-dead-letter-queue" => {
            return m(DlqKind::DeadLetter, Convention::Wolverine, true);
        }
        "EasyNetQ_Default_Error_Queue" => return m(DlqKind::Error, Convention::EasyNetQ, true),
        "parking-lot" | "parking_lot" | "parkinglot" => {
            return m(DlqKind::ParkingLot, Convention::Unknown, false);
        }
        "dlq" | "dead-letter" | "deadletter" | "dead-letters" | "dead_letter" => {
            return m(DlqKind::DeadLetter, Convention::Unknown, false);
        }
        _ => {}
    }
    if stem_before(name, "_error").is_some() {
        return m(DlqKind::Error, Convention::MassTransit, true);
    }
    if stem_before(name, "_skipped").is_some() {
        return m(DlqKind::Skipped, Convention::MassTransit, true);
    }
    if stem_before(name, ".XQ").is_some() {
        return m(DlqKind::DeadLetter, Convention::Dramatiq, true);
    }
    if stem_before(name, "-error").is_some() {
        return m(DlqKind::Error, Convention::Sneakers, true);
    }
    for suffix in [
        ".parking-lot",
        ".parkinglot",
        ".parking_lot",
        "-parking-lot",
        "_parking_lot",
    ] {
        if ends_with_ci(name, suffix) {
            return m(DlqKind::ParkingLot, Convention::Unknown, false);
        }
    }
    if stem_before(name, ".dlq").is_some_and(|stem| stem.contains('.')) {
        // Spring Cloud Stream's binder names DLQs `<destination>.<group>.dlq`; a plain
        // `orders.dlq` is the generic broker convention (matched below).
        return m(DlqKind::DeadLetter, Convention::Spring, false);
    }
    for suffix in [
        ".dlq",
        "-dlq",
        "_dlq",
        ".dead-letter",
        ".deadletter",
        "-dead-letter",
        "_dead_letter",
    ] {
        if ends_with_ci(name, suffix) {
            return m(DlqKind::DeadLetter, Convention::Unknown, false);
        }
    }
    if patterns.iter().any(|p| p.is_match(name)) {
        return m(DlqKind::DeadLetter, Convention::Unknown, false);
    }
    None
}

// ---------------------------------------------------------------------------------------------
// Classification

/// Classifies every queue of a vhost. Linear in queues + bindings, so 10,000 queues are cheap.
pub fn discover(topology: &Topology, features: &BrokerFeatures, patterns: &[Regex]) -> Discovery {
    let policies = PolicyIndex::new(&topology.policies);
    let table = RoutingTable::new(&topology.exchanges, &topology.bindings);
    let settings: Vec<EffectiveSettings> = topology
        .queues
        .iter()
        .map(|q| effective_settings(q, policies.definition_for(q)))
        .collect();
    let index: HashMap<&str, usize> = topology
        .queues
        .iter()
        .enumerate()
        .map(|(i, q)| (q.name.as_str(), i))
        .collect();

    // Dead-letter edges: feeder index → (target index, certain).
    let mut edges: Vec<Vec<(usize, bool)>> = vec![Vec::new(); topology.queues.len()];
    for (i, s) in settings.iter().enumerate() {
        let Some(dlx) = &s.dead_letter_exchange else {
            continue;
        };
        let routing = match (&s.dead_letter_routing_key, dlx.is_empty()) {
            (Some(key), _) => table.route(dlx, key),
            // Default exchange with the message's own key: usually back to this very queue,
            // which the broker drops as a cycle. Nothing to find.
            (None, true) => Routing::default(),
            (None, false) => table.reachable(dlx),
        };
        for target in &routing.queues {
            if let Some(&t) = index.get(target.as_str())
                && t != i
                && let Some(list) = edges.get_mut(i)
            {
                list.push((t, routing.exact));
            }
        }
    }

    // Retry loops: work → wait (wait has a TTL) and wait → work.
    let mut loop_edges: HashSet<(usize, usize)> = HashSet::new();
    let mut retry_loops = Vec::new();
    for (work, targets) in edges.iter().enumerate() {
        for &(wait, _) in targets {
            let ttl = settings.get(wait).and_then(|s| s.message_ttl_ms);
            let back = edges
                .get(wait)
                .is_some_and(|t| t.iter().any(|&(w, _)| w == work));
            if let (Some(ttl_ms), true) = (ttl, back) {
                loop_edges.insert((work, wait));
                loop_edges.insert((wait, work));
                if let (Some(wq), Some(tq)) = (topology.queues.get(work), topology.queues.get(wait))
                {
                    retry_loops.push(RetryLoop {
                        work_queue: wq.name.clone(),
                        wait_queue: tq.name.clone(),
                        ttl_ms,
                    });
                }
            }
        }
    }
    retry_loops.sort_by(|a, b| {
        a.work_queue
            .cmp(&b.work_queue)
            .then(a.wait_queue.cmp(&b.wait_queue))
    });
    retry_loops.dedup();

    // Incoming dead-letter edges per queue, without retry returns: the edges of a loop, every
    // edge out of a loop's wait queue (it may return through the main exchange to every queue
    // bound there), and an edge from any queue with a TTL (a delay queue) into a queue that has
    // its own dead-letter exchange (a work queue: DLQs rarely dead-letter onwards). A target
    // named like a DLQ is always fed.
    let wait_queues: HashSet<usize> = retry_loops
        .iter()
        .filter_map(|l| index.get(l.wait_queue.as_str()).copied())
        .collect();
    let named_dlq: Vec<bool> = topology
        .queues
        .iter()
        .map(|q| classify_name(&q.name, patterns).is_some())
        .collect();
    let mut feeders: Vec<Vec<(usize, bool)>> = vec![Vec::new(); topology.queues.len()];
    for (from, targets) in edges.iter().enumerate() {
        let from_delay = settings
            .get(from)
            .is_some_and(|s| s.message_ttl_ms.is_some());
        for &(to, certain) in targets {
            let to_named = named_dlq.get(to).copied().unwrap_or(false);
            let to_work = settings
                .get(to)
                .is_some_and(|s| s.dead_letter_exchange.is_some());
            let retry_return = loop_edges.contains(&(from, to))
                || (!to_named && (wait_queues.contains(&from) || (from_delay && to_work)));
            if retry_return {
                continue;
            }
            if let Some(list) = feeders.get_mut(to) {
                list.push((from, certain));
            }
        }
    }

    let in_loop: HashSet<usize> = loop_edges.iter().flat_map(|&(a, b)| [a, b]).collect();
    let mut dlqs = Vec::new();
    let mut others = Vec::new();
    for (i, q) in topology.queues.iter().enumerate() {
        let default_settings = EffectiveSettings::default();
        let s = settings.get(i).unwrap_or(&default_settings);
        let fed = feeders.get(i).map(Vec::as_slice).unwrap_or(&[]);
        let named = if named_dlq.get(i).copied().unwrap_or(false) {
            classify_name(&q.name, patterns)
        } else {
            None
        };
        // A queue in a retry loop is only a DLQ if something else marks it as one.
        let by_topology = !fed.is_empty();
        let by_name = named.is_some();
        if !(by_topology || by_name)
            || (in_loop.contains(&i) && !by_topology && !named.is_some_and(|n| n.specific))
        {
            others.push(QueueSummary {
                name: q.name.clone(),
                queue_type: q.queue_type.clone(),
                depth: q.messages,
                consumers: q.consumers,
                dead_letter_exchange: s.dead_letter_exchange.clone(),
            });
            continue;
        }
        let mut feeder_names: Vec<String> = fed
            .iter()
            .filter_map(|&(f, _)| topology.queues.get(f).map(|fq| fq.name.clone()))
            .collect();
        feeder_names.sort();
        feeder_names.dedup();
        let via_spring_dlx = fed.iter().any(|&(f, _)| {
            settings
                .get(f)
                .and_then(|fs| fs.dead_letter_exchange.as_deref())
                == Some("DLX")
        });
        let (kind, convention) = match named {
            // Spring's binder dead-letters through its `DLX` exchange into `*.dlq`.
            Some(n) if n.convention == Convention::Spring && by_topology && !via_spring_dlx => {
                (n.kind, Convention::Broker)
            }
            Some(n) if n.specific || !by_topology => (n.kind, n.convention),
            Some(n) => (n.kind, Convention::Broker),
            None => (DlqKind::DeadLetter, Convention::Broker),
        };
        dlqs.push(DlqInfo {
            name: q.name.clone(),
            kind,
            convention,
            depth: q.messages,
            messages_ready: q.messages_ready,
            messages_unacknowledged: q.messages_unacknowledged,
            consumers: q.consumers,
            queue_type: q.queue_type.clone(),
            feeders: feeder_names,
            feeders_uncertain: fed.iter().any(|&(_, certain)| !certain),
            by_topology,
            by_name,
            delivery_limit: effective_delivery_limit(q, s, features),
            dead_letter_exchange: s.dead_letter_exchange.clone(),
        });
    }
    dlqs.sort_by(|a, b| {
        let has = |d: &DlqInfo| d.depth.unwrap_or(0) > 0;
        has(b).cmp(&has(a)).then_with(|| a.name.cmp(&b.name))
    });
    others.sort_by(|a, b| a.name.cmp(&b.name));
    Discovery {
        dead_letter_queues: dlqs,
        retry_loops,
        other_queues: others,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn features(v: &str) -> BrokerFeatures {
        BrokerFeatures::from_version(v)
    }

    fn ex(name: &str, kind: &str) -> ExchangeInfo {
        ExchangeInfo {
            name: name.into(),
            kind: ExchangeKind::parse(kind),
        }
    }

    #[test]
    fn versions_map_to_features() {
        let v310 = features("3.10.8");
        assert!(!v310.has_last_death);
        assert_eq!(v310.default_quorum_delivery_limit, None);
        assert!(v310.nack_return_counts(Some(5)));
        assert!(!v310.nack_return_counts(None));
        let v313 = features("3.13.1");
        assert!(v313.has_last_death);
        let v40 = features("4.0.5");
        assert_eq!(v40.default_quorum_delivery_limit, Some(20));
        assert!(v40.nack_return_counts(Some(20)));
        let v43 = features("4.3.6");
        assert!(v43.has_last_death);
        assert!(!v43.nack_return_counts(Some(20)));
        let unknown = features("garbage");
        assert_eq!(unknown.version, None);
        assert_eq!(unknown.default_quorum_delivery_limit, Some(20));
        assert!(unknown.explicit_nack_counts);
        assert_eq!(
            BrokerVersion::parse("4.3.0-rc.1"),
            Some(BrokerVersion {
                major: 4,
                minor: 3,
                patch: 0
            })
        );
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

    #[test]
    fn names() {
        let c = |n: &str| classify_name(n, &[]).map(|m| (m.kind, m.convention));
        assert_eq!(
            c("billing_error"),
            Some((DlqKind::Error, Convention::MassTransit))
        );
        assert_eq!(
            c("billing_skipped"),
            Some((DlqKind::Skipped, Convention::MassTransit))
        );
        assert_eq!(
            c("orders.group.dlq"),
            Some((DlqKind::DeadLetter, Convention::Spring))
        );
        assert_eq!(
            c("orders.DLQ"),
            Some((DlqKind::DeadLetter, Convention::Unknown))
        );
        assert_eq!(
            c("orders-dlq"),
            Some((DlqKind::DeadLetter, Convention::Unknown))
        );
        assert_eq!(
            c("orders_dlq"),
            Some((DlqKind::DeadLetter, Convention::Unknown))
        );
        assert_eq!(
            c("orders.dead-letter"),
            Some((DlqKind::DeadLetter, Convention::Unknown))
        );
        assert_eq!(
            c("orders.deadletter"),
            Some((DlqKind::DeadLetter, Convention::Unknown))
        );
        assert_eq!(c("error"), Some((DlqKind::Error, Convention::NServiceBus)));
        assert_eq!(
            c("orders.parking-lot"),
            Some((DlqKind::ParkingLot, Convention::Unknown))
        );
        assert_eq!(
            c("orders.parkinglot"),
            Some((DlqKind::ParkingLot, Convention::Unknown))
        );
        assert_eq!(
            c("orders.parking_lot"),
            Some((DlqKind::ParkingLot, Convention::Unknown))
        );
        assert_eq!(
            c("parking-lot"),
            Some((DlqKind::ParkingLot, Convention::Unknown))
        );
        assert_eq!(
            c("wolverine-dead-letter-queue"),
            Some((DlqKind::DeadLetter, Convention::Wolverine))
        );
        assert_eq!(
            c("EasyNetQ_Default_Error_Queue"),
            Some((DlqKind::Error, Convention::EasyNetQ))
        );
        assert_eq!(
            c("mailer-error"),
            Some((DlqKind::Error, Convention::Sneakers))
        );
        assert_eq!(
            c("default.XQ"),
            Some((DlqKind::DeadLetter, Convention::Dramatiq))
        );
        assert_eq!(c("orders"), None);
        assert_eq!(c("_error"), None);
        assert_eq!(c("errors"), None);
        assert_eq!(c("orders.dlx"), None);
        let pats = vec![Regex::new("^graveyard\\.").unwrap()];
        assert_eq!(
            classify_name("graveyard.orders", &pats).map(|m| m.convention),
            Some(Convention::Unknown)
        );
    }

    fn topology_fixture() -> Topology {
        Topology {
            queues: vec![
                // Argument DLX through a fanout exchange.
                QueueInfo::named("payments")
                    .with_arg("x-dead-letter-exchange", json!("payments.dlx")),
                QueueInfo::named("payments.dead").with_messages(5),
                // Default exchange + routing key.
                QueueInfo::named("orders.process")
                    .with_arg("x-dead-letter-exchange", json!("orders.retry"))
                    .with_arg("x-dead-letter-routing-key", json!("wait")),
                QueueInfo::named("orders.retry.wait")
                    .with_arg("x-message-ttl", json!(5000))
                    .with_arg("x-dead-letter-exchange", json!(""))
                    .with_arg("x-dead-letter-routing-key", json!("orders.process")),
                QueueInfo::named("shipping")
                    .with_arg("x-dead-letter-exchange", json!(""))
                    .with_arg("x-dead-letter-routing-key", json!("shipping.held")),
                QueueInfo::named("shipping.held").with_messages(0),
                // Policy DLX, quorum DLQ.
                QueueInfo::named("invoices"),
                QueueInfo::named("invoices.failed")
                    .with_arg("x-queue-type", json!("quorum"))
                    .with_messages(2),
                // Name only.
                QueueInfo::named("billing_error").with_messages(1),
                QueueInfo::named("plain"),
            ],
            exchanges: vec![
                ex("payments.dlx", "fanout"),
                ex("orders.retry", "direct"),
                ex("inv.dlx", "topic"),
            ],
            bindings: vec![
                Binding::to_queue("payments.dlx", "payments.dead", ""),
                Binding::to_queue("orders.retry", "orders.retry.wait", "wait"),
                Binding::to_queue("inv.dlx", "invoices.failed", "#"),
            ],
            policies: vec![Policy {
                name: "inv".into(),
                pattern: "^invoices$".into(),
                apply_to: "queues".into(),
                priority: 0,
                definition: serde_json::from_value(json!({"dead-letter-exchange": "inv.dlx"}))
                    .unwrap(),
            }],
        }
    }

    #[test]
    fn classifies_topology() {
        let d = discover(&topology_fixture(), &features("4.0.5"), &[]);
        let names: Vec<&str> = d
            .dead_letter_queues
            .iter()
            .map(|q| q.name.as_str())
            .collect();
        // With messages first, then by name.
        assert_eq!(
            names,
            vec![
                "billing_error",
                "invoices.failed",
                "payments.dead",
                "shipping.held"
            ]
        );
        let pay = d.dlq("payments.dead").unwrap();
        assert_eq!(pay.feeders, vec!["payments"]);
        assert_eq!(pay.convention, Convention::Broker);
        assert!(!pay.feeders_uncertain);
        assert_eq!(d.dlq("shipping.held").unwrap().feeders, vec!["shipping"]);
        let inv = d.dlq("invoices.failed").unwrap();
        assert_eq!(inv.feeders, vec!["invoices"]);
        // Topic exchange, no routing key: every bound queue is only possible.
        assert!(inv.feeders_uncertain);
        assert_eq!(inv.delivery_limit, Some(20));
        assert!(inv.limit_applies());
        let err = d.dlq("billing_error").unwrap();
        assert_eq!(
            (err.kind, err.convention),
            (DlqKind::Error, Convention::MassTransit)
        );
        assert!(err.feeders.is_empty());
        assert_eq!(
            d.retry_loops,
            vec![RetryLoop {
                work_queue: "orders.process".into(),
                wait_queue: "orders.retry.wait".into(),
                ttl_ms: 5000
            }]
        );
        let others: Vec<&str> = d.other_queues.iter().map(|q| q.name.as_str()).collect();
        assert!(others.contains(&"orders.process") && others.contains(&"orders.retry.wait"));
        assert!(others.contains(&"plain") && others.contains(&"payments"));
        // On 3.x the quorum DLQ has no limit unless one is set.
        let d3 = discover(&topology_fixture(), &features("3.10.8"), &[]);
        assert_eq!(d3.dlq("invoices.failed").unwrap().delivery_limit, None);
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
    fn policy_ttl_makes_a_retry_loop() {
        let t = Topology {
            queues: vec![
                QueueInfo::named("work")
                    .with_arg("x-dead-letter-exchange", json!(""))
                    .with_arg("x-dead-letter-routing-key", json!("work.wait")),
                QueueInfo::named("work.wait")
                    .with_arg("x-dead-letter-exchange", json!(""))
                    .with_arg("x-dead-letter-routing-key", json!("work")),
            ],
            policies: vec![Policy {
                name: "ttl".into(),
                pattern: "\\.wait$".into(),
                apply_to: "all".into(),
                priority: 1,
                definition: serde_json::from_value(json!({"message-ttl": 30000})).unwrap(),
            }],
            ..Topology::default()
        };
        let d = discover(&t, &features("3.10.8"), &[]);
        assert!(
            d.dead_letter_queues.is_empty(),
            "{:?}",
            d.dead_letter_queues
        );
        assert_eq!(d.retry_loops.len(), 1);
        assert_eq!(d.retry_loops[0].ttl_ms, 30000);
        // Without a TTL the pair is two queues dead-lettering into each other: both are DLQs.
        let mut no_ttl = t.clone();
        no_ttl.policies.clear();
        let d = discover(&no_ttl, &features("3.10.8"), &[]);
        assert_eq!(d.dead_letter_queues.len(), 2);
        assert!(d.retry_loops.is_empty());
    }

    #[test]
    fn delay_queues_returning_through_the_main_exchange_feed_no_dlq() {
        // Work queues dead-letter to a retry exchange; the wait queue's TTL sends messages back
        // through the main topic exchange (no routing key), which also reaches an audit queue.
        let t = Topology {
            queues: vec![
                QueueInfo::named("orders.process")
                    .with_arg("x-dead-letter-exchange", json!("retry"))
                    .with_arg("x-dead-letter-routing-key", json!("wait")),
                QueueInfo::named("orders.audit"),
                QueueInfo::named("retry.wait")
                    .with_arg("x-message-ttl", json!(1000))
                    .with_arg("x-dead-letter-exchange", json!("orders")),
                // An app-fed delay queue into a work queue (which has its own DLX).
                QueueInfo::named("mail.delay")
                    .with_arg("x-message-ttl", json!(60000))
                    .with_arg("x-dead-letter-exchange", json!(""))
                    .with_arg("x-dead-letter-routing-key", json!("mail")),
                QueueInfo::named("mail")
                    .with_arg("x-dead-letter-exchange", json!(""))
                    .with_arg("x-dead-letter-routing-key", json!("mail.failed")),
                QueueInfo::named("mail.failed"),
                // A TTL work queue whose expired messages are the dead letters.
                QueueInfo::named("quotes")
                    .with_arg("x-message-ttl", json!(3600000))
                    .with_arg("x-dead-letter-exchange", json!(""))
                    .with_arg("x-dead-letter-routing-key", json!("quotes.expired")),
                QueueInfo::named("quotes.expired"),
            ],
            exchanges: vec![ex("retry", "direct"), ex("orders", "topic")],
            bindings: vec![
                Binding::to_queue("retry", "retry.wait", "wait"),
                Binding::to_queue("orders", "orders.process", "order.*"),
                Binding::to_queue("orders", "orders.audit", "#"),
            ],
            policies: vec![],
        };
        let d = discover(&t, &features("4.3.6"), &[]);
        let names: Vec<&str> = d
            .dead_letter_queues
            .iter()
            .map(|q| q.name.as_str())
            .collect();
        assert_eq!(names, vec!["mail.failed", "quotes.expired"]);
        assert_eq!(d.dlq("mail.failed").unwrap().feeders, vec!["mail"]);
        assert_eq!(d.retry_loops.len(), 1);
        assert_eq!(d.retry_loops[0].wait_queue, "retry.wait");
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
