//! Which queues of a vhost hold failed messages: by name (framework conventions and configured
//! patterns) and by dead-letter topology, who feeds them, and which queue pairs are retry loops
//! rather than dead ends.

use std::collections::{HashMap, HashSet};

use regex::Regex;

use super::routing::{Routing, RoutingTable};
use super::settings::{
    EffectiveSettings, PolicyIndex, effective_delivery_limit, effective_settings, is_wait_queue,
};
use super::topology::Topology;
use crate::domain::convention::framework::Role;
use crate::domain::convention::{self, Convention};
use crate::domain::features::{self, BrokerFeatures, BrokerVersion, QueueType};

/// How a vhost's local archive file is named in the queue list: RabbitMQ refuses to let a client
/// declare a queue whose name begins with `amq.`, so no queue of the broker can be taken for it.
pub const LOCAL_QUEUE: &str = "amq.warren.local-archive";
/// The type shown for the local archive in the queue list.
pub const LOCAL_TYPE: &str = "local file";

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
    /// Warren's archive stream (`warren.archive` or the context's `archive_stream`): read like
    /// a DLQ, never drained by one.
    Archive,
}

impl DlqKind {
    pub fn label(self) -> &'static str {
        match self {
            DlqKind::DeadLetter => "dlq",
            DlqKind::Error => "error",
            DlqKind::Skipped => "skipped",
            DlqKind::ParkingLot => "parking",
            DlqKind::Archive => "archive",
        }
    }
}

/// One dead-letter queue and what is needed to read it safely.
#[derive(Clone, Debug, PartialEq)]
pub struct DlqInfo {
    /// The context it was listed in, when every context of the config is listed at once
    /// (`:ctx *`); empty otherwise (the context is the session's).
    pub context: String,
    /// The vhost it lives in (set by the broker layer for the vhost it listed; empty until then).
    pub vhost: String,
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
    /// Found by a framework's topology and its name alone (Symfony's failure transport, see
    /// [`super::symfony`]): no feeder, no configured name. The least sure kind of finding:
    /// listed only while no live count says something consumes it.
    pub guessed: bool,
    /// Quorum queues only: the delivery limit in force (`None` = unlimited or not quorum).
    pub delivery_limit: Option<u64>,
    /// Its `x-delivery-limit` argument, when it was declared with one: on 4.x no policy can
    /// lift it (see `domain::protect::refusal`).
    pub delivery_limit_arg: Option<i64>,
    /// The DLQ's own dead-letter exchange: with one, a quorum message over its limit moves on;
    /// without, it is dropped.
    pub dead_letter_exchange: Option<String>,
}

impl DlqInfo {
    /// A queue listed among the others, taken for a dead end of `kind` by something other than
    /// its feeders (nothing feeds it): the archive stream, or what its messages are.
    pub(crate) fn from_other(q: QueueSummary, kind: DlqKind, convention: Convention) -> DlqInfo {
        DlqInfo {
            context: String::new(),
            vhost: q.vhost,
            name: q.name,
            kind,
            convention,
            depth: q.depth,
            messages_ready: q.depth,
            messages_unacknowledged: None,
            consumers: q.consumers,
            queue_type: q.queue_type,
            feeders: Vec::new(),
            feeders_uncertain: false,
            by_topology: false,
            by_name: false,
            guessed: false,
            delivery_limit: None,
            delivery_limit_arg: None,
            dead_letter_exchange: q.dead_letter_exchange,
        }
    }

    /// Its identity across vhosts (and contexts, when every context is listed).
    pub fn id(&self) -> QueueRef {
        QueueRef::in_context(&self.context, &self.vhost, &self.name)
    }

    /// Whether it is the queue `id`, without building its key.
    pub fn is(&self, id: &QueueRef) -> bool {
        self.name == id.name && self.vhost == id.vhost && self.context == id.context
    }

    /// Browsing can destroy messages here on a broker of this version: returns cost deliveries
    /// (quorum before 4.3, or an unknown version) and a delivery limit is in force. The queue
    /// list's ⚠ and the TUI's prompts ask this, so on 4.3 they stay quiet where reads are free.
    pub fn limit_applies(&self, version: Option<BrokerVersion>) -> bool {
        features::reads_spend_deliveries(version, &self.queue_type, self.delivery_limit)
    }
}

/// A queue's identity across the vhosts of a context: its vhost and its name. Within one vhost
/// the name is enough; a view of every vhost (`:vhost *`) may hold two queues of one name, and
/// a view of every context (`:ctx *`) two of one vhost and name: there the context is part of
/// it too (empty everywhere else, where the context is the session's).
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct QueueRef {
    pub context: String,
    pub vhost: String,
    pub name: String,
}

impl QueueRef {
    pub fn new(vhost: &str, name: &str) -> QueueRef {
        QueueRef::in_context("", vhost, name)
    }

    /// A queue of the context `context`, in a view of every context.
    pub fn in_context(context: &str, vhost: &str, name: &str) -> QueueRef {
        QueueRef {
            context: context.to_string(),
            vhost: vhost.to_string(),
            name: name.to_string(),
        }
    }

    /// Makes this key `vhost`/`name` (of the session's context) in place, reusing its buffers:
    /// a lookup per queue of a long list without an allocation per queue.
    pub fn set(&mut self, vhost: &str, name: &str) -> &QueueRef {
        self.context.clear();
        self.vhost.clear();
        self.vhost.push_str(vhost);
        self.name.clear();
        self.name.push_str(name);
        self
    }

    /// [`QueueRef::set`] to the identity of `d`, its context included.
    pub fn set_to(&mut self, d: &DlqInfo) -> &QueueRef {
        self.set(&d.vhost, &d.name);
        self.context.push_str(&d.context);
        self
    }
}

/// A work queue that dead-letters (or whose app republishes) into a wait queue whose TTL sends
/// messages back: a retry ladder. x-death only keeps the *first* time of each `{queue, reason}`
/// pair, so a timeline needs `ttl_ms` to estimate when the last cycle happened.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RetryLoop {
    /// The vhost of both queues (as [`DlqInfo::vhost`]).
    pub vhost: String,
    pub work_queue: String,
    pub wait_queue: String,
    pub ttl_ms: u64,
}

/// Any queue that is not a dead-letter queue.
#[derive(Clone, Debug, PartialEq)]
pub struct QueueSummary {
    /// The vhost it lives in (as [`DlqInfo::vhost`]).
    pub vhost: String,
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
    /// Quorum queues holding dead letters no dead-letter queue takes (at-least-once), by name.
    pub stuck: Vec<super::stuck::Stuck>,
}

impl Discovery {
    pub fn dlq(&self, name: &str) -> Option<&DlqInfo> {
        self.dead_letter_queues.iter().find(|d| d.name == name)
    }

    /// The dead-letter queue `id` (its vhost and name): a discovery of every vhost may list
    /// two of one name.
    pub fn dlq_of(&self, id: &QueueRef) -> Option<&DlqInfo> {
        self.dead_letter_queues.iter().find(|d| d.is(id))
    }

    /// Names `context` as where every dead-letter queue (and stuck queue) listed was found (a listing of every
    /// context at once).
    pub fn set_context(&mut self, context: &str) {
        for d in &mut self.dead_letter_queues {
            d.context = context.to_string();
        }
        for s in &mut self.stuck {
            s.context = context.to_string();
        }
    }

    /// Names `vhost` as the home of every queue listed (the listing was of that vhost).
    pub fn set_vhost(&mut self, vhost: &str) {
        for d in &mut self.dead_letter_queues {
            d.vhost = vhost.to_string();
        }
        for q in &mut self.other_queues {
            q.vhost = vhost.to_string();
        }
        for l in &mut self.retry_loops {
            l.vhost = vhost.to_string();
        }
        for s in &mut self.stuck {
            s.vhost = vhost.to_string();
        }
    }

    /// One discovery of several vhosts' (each already named with [`Discovery::set_vhost`]),
    /// in the order given: two queues of one name in two vhosts stay two.
    pub fn merged(parts: Vec<Discovery>) -> Discovery {
        let mut all = Discovery::default();
        for d in parts {
            all.dead_letter_queues.extend(d.dead_letter_queues);
            all.retry_loops.extend(d.retry_loops);
            all.other_queues.extend(d.other_queues);
            all.stuck.extend(d.stuck);
        }
        all
    }

    /// The retry loop a queue takes part in, as work or wait queue.
    pub fn retry_loop_of(&self, queue: &str) -> Option<&RetryLoop> {
        self.retry_loops
            .iter()
            .find(|l| l.work_queue == queue || l.wait_queue == queue)
    }

    /// [`Discovery::retry_loop_of`] among the loops of `vhost` (a discovery of every vhost
    /// holds several).
    pub fn retry_loop_in(&self, vhost: &str, queue: &str) -> Option<&RetryLoop> {
        self.retry_loops
            .iter()
            .filter(|l| l.vhost == vhost)
            .find(|l| l.work_queue == queue || l.wait_queue == queue)
    }

    /// Lists the archive stream `name`, when the vhost has it as a stream, with the dead-letter
    /// queues, marked as the archive (last: it is read, not worked off). Nothing else changes.
    pub fn mark_archive(&mut self, name: &str) {
        if let Some(i) = self
            .dead_letter_queues
            .iter()
            .position(|d| d.name == name && d.queue_type == QueueType::Stream)
        {
            let mut d = self.dead_letter_queues.remove(i);
            d.kind = DlqKind::Archive;
            self.dead_letter_queues.push(d);
            return;
        }
        let Some(i) = self
            .other_queues
            .iter()
            .position(|q| q.name == name && q.queue_type == QueueType::Stream)
        else {
            return;
        };
        let q = self.other_queues.remove(i);
        let mut d = DlqInfo::from_other(q, DlqKind::Archive, Convention::Broker);
        d.by_name = true;
        self.dead_letter_queues.push(d);
    }

    /// Lists `vhost`'s local archive file (holding `entries` messages) with the DLQs, as the
    /// archive, under [`LOCAL_QUEUE`]: read and restored from like the stream, never drained by a
    /// replay.
    pub fn add_local_archive(&mut self, vhost: &str, entries: u64) {
        self.dead_letter_queues.push(DlqInfo {
            context: String::new(),
            vhost: vhost.to_string(),
            name: LOCAL_QUEUE.to_string(),
            kind: DlqKind::Archive,
            convention: Convention::Broker,
            depth: Some(entries),
            messages_ready: Some(entries),
            messages_unacknowledged: None,
            consumers: Some(0),
            queue_type: QueueType::Other(LOCAL_TYPE.to_string()),
            feeders: Vec::new(),
            feeders_uncertain: false,
            by_topology: false,
            by_name: false,
            guessed: false,
            delivery_limit: None,
            delivery_limit_arg: None,
            dead_letter_exchange: None,
        });
    }
}

/// What a queue's name alone says about it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct NameMatch {
    pub kind: DlqKind,
    pub convention: Convention,
    /// A framework-specific name, as opposed to a generic `*.dlq`-style one.
    pub specific: bool,
}

fn ends_with_ci(name: &str, suffix: &str) -> bool {
    name.len() > suffix.len()
        && name
            .get(name.len() - suffix.len()..)
            .is_some_and(|tail| tail.eq_ignore_ascii_case(suffix))
}

/// Each framework's naming (`convention::by_queue_name`), then the generic shapes, then the
/// configured patterns. No name fits both a framework's and a generic shape, so the order
/// between them decides nothing. `error` is claimed for NServiceBus although Rebus uses the
/// same name: the message headers settle which.
pub fn classify_name(name: &str, patterns: &[Regex]) -> Option<NameMatch> {
    if let Some((convention, named)) = convention::by_queue_name(name) {
        let kind = match named.role {
            Role::DeadLetter => DlqKind::DeadLetter,
            Role::Error => DlqKind::Error,
            Role::Skipped => DlqKind::Skipped,
        };
        return Some(NameMatch {
            kind,
            convention,
            specific: named.specific,
        });
    }
    let m = |kind| {
        Some(NameMatch {
            kind,
            convention: Convention::Unknown,
            specific: false,
        })
    };
    match name {
        "parking-lot" | "parking_lot" | "parkinglot" => return m(DlqKind::ParkingLot),
        "dlq" | "dead-letter" | "deadletter" | "dead-letters" | "dead_letter" => {
            return m(DlqKind::DeadLetter);
        }
        _ => {}
    }
    for suffix in [
        ".parking-lot",
        ".parkinglot",
        ".parking_lot",
        "-parking-lot",
        "_parking_lot",
    ] {
        if ends_with_ci(name, suffix) {
            return m(DlqKind::ParkingLot);
        }
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
            return m(DlqKind::DeadLetter);
        }
    }
    if patterns.iter().any(|p| p.is_match(name)) {
        return m(DlqKind::DeadLetter);
    }
    None
}

/// A name such as `orders.wait`, `orders-retry-2`, `mail.delay30s` or dramatiq's `default.DQ`:
/// a part (split at `.`, `-`, `_`) that is or starts with wait, retry, delay or backoff.
fn named_like_wait_queue(name: &str) -> bool {
    name.ends_with(".DQ")
        || name.split(['.', '-', '_']).any(|part| {
            let p = part.to_ascii_lowercase();
            ["wait", "retry", "delay", "backoff"]
                .iter()
                .any(|w| p.starts_with(w))
        })
}

/// Dead-letter edges: feeder index → (target index, certain).
type Edges = Vec<Vec<(usize, bool)>>;

/// What each step of [`discover`] reads about the vhost's queues, by queue index.
struct Vhost<'a> {
    topology: &'a Topology,
    settings: Vec<EffectiveSettings>,
    index: HashMap<&'a str, usize>,
    named_dlq: Vec<bool>,
}

/// Classifies every queue of a vhost. Linear in queues + bindings, so 10,000 queues are cheap.
pub fn discover(topology: &Topology, features: &BrokerFeatures, patterns: &[Regex]) -> Discovery {
    let policies = PolicyIndex::new(&topology.policies);
    let table = RoutingTable::new(&topology.exchanges, &topology.bindings);
    let v = Vhost {
        topology,
        settings: topology
            .queues
            .iter()
            .map(|q| effective_settings(q, policies.definition_for(q)))
            .collect(),
        index: topology
            .queues
            .iter()
            .enumerate()
            .map(|(i, q)| (q.name.as_str(), i))
            .collect(),
        named_dlq: topology
            .queues
            .iter()
            .map(|q| classify_name(&q.name, patterns).is_some())
            .collect(),
    };
    let edges = dead_letter_edges(&v, &table);
    let (mut loop_edges, mut retry_loops) = ttl_loops(&v, &edges);
    let (feeders, ladder_returns) = feeders(&v, &edges, &loop_edges, &retry_loops);
    add_ladder_loops(&v, ladder_returns, &mut loop_edges, &mut retry_loops);
    retry_loops.sort_by(|a, b| {
        a.work_queue
            .cmp(&b.work_queue)
            .then(a.wait_queue.cmp(&b.wait_queue))
    });
    retry_loops.dedup();

    let in_loop: HashSet<usize> = loop_edges.iter().flat_map(|&(a, b)| [a, b]).collect();
    let (dead_letter_queues, other_queues) =
        sort_queues(&v, features, patterns, &feeders, &in_loop);
    let stuck = super::stuck::find(topology, &v.settings);
    let mut found = Discovery {
        dead_letter_queues,
        retry_loops,
        other_queues,
        stuck,
    };
    super::symfony::mark_failure_transports(topology, &mut found);
    found.dead_letter_queues.sort_by(|a, b| {
        let has = |d: &DlqInfo| d.depth.unwrap_or(0) > 0;
        has(b).cmp(&has(a)).then_with(|| a.name.cmp(&b.name))
    });
    found.other_queues.sort_by(|a, b| a.name.cmp(&b.name));
    found
}

/// Where each queue's dead letters go, through its dead-letter exchange and routing key.
fn dead_letter_edges(v: &Vhost, table: &RoutingTable) -> Edges {
    let mut edges: Edges = vec![Vec::new(); v.topology.queues.len()];
    for (i, s) in v.settings.iter().enumerate() {
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
            if let Some(&t) = v.index.get(target.as_str())
                && t != i
                && let Some(list) = edges.get_mut(i)
            {
                list.push((t, routing.exact));
            }
        }
    }
    edges
}

/// Retry loops: work → wait (wait has a TTL) and wait → work. Returns both directions of each
/// loop's edges and the loops.
fn ttl_loops(v: &Vhost, edges: &Edges) -> (HashSet<(usize, usize)>, Vec<RetryLoop>) {
    let mut loop_edges: HashSet<(usize, usize)> = HashSet::new();
    let mut retry_loops = Vec::new();
    for (work, targets) in edges.iter().enumerate() {
        for &(wait, _) in targets {
            let ttl = v.settings.get(wait).and_then(|s| s.message_ttl_ms);
            let back = edges
                .get(wait)
                .is_some_and(|t| t.iter().any(|&(w, _)| w == work));
            if let (Some(ttl_ms), true) = (ttl, back) {
                loop_edges.insert((work, wait));
                loop_edges.insert((wait, work));
                if let (Some(wq), Some(tq)) =
                    (v.topology.queues.get(work), v.topology.queues.get(wait))
                {
                    retry_loops.push(RetryLoop {
                        vhost: String::new(),
                        work_queue: wq.name.clone(),
                        wait_queue: tq.name.clone(),
                        ttl_ms,
                    });
                }
            }
        }
    }
    (loop_edges, retry_loops)
}

/// Incoming dead-letter edges per queue, without retry returns: the edges of a loop, every
/// edge out of a loop's wait queue (it may return through the main exchange to every queue
/// bound there), and an edge from any queue with a TTL (a delay queue) into a queue that has
/// its own dead-letter exchange (a work queue: DLQs rarely dead-letter onwards). A target
/// named like a DLQ is always fed. Also returns the (wait, work) pairs of hand-rolled ladders:
/// a wait queue is known by what it does, whatever its name and whether its work queue is
/// consumed at the moment (the listing carries no consumer counts): a TTL queue with no
/// consumer that dead-letters through an exchange by each message's own routing key (no
/// dead-letter routing key: back to where it was published) to one queue alone.
fn feeders(
    v: &Vhost,
    edges: &Edges,
    loop_edges: &HashSet<(usize, usize)>,
    retry_loops: &[RetryLoop],
) -> (Edges, Vec<(usize, usize)>) {
    let queues = &v.topology.queues;
    let wait_queues: HashSet<usize> = retry_loops
        .iter()
        .filter_map(|l| v.index.get(l.wait_queue.as_str()).copied())
        .collect();
    // A wait queue of a hand-rolled ladder is fed by the app's republish, not by dead-lettering,
    // so no loop edge shows it: its return into a live (consumed) queue, or out of a queue named
    // like a wait queue, is a retry return too, and the pair a retry loop.
    let is_wait: Vec<bool> = queues
        .iter()
        .zip(&v.settings)
        .map(|(q, s)| is_wait_queue(q, s))
        .collect();
    let mut ladder_returns = Vec::new();
    let mut feeders: Edges = vec![Vec::new(); queues.len()];
    for (from, targets) in edges.iter().enumerate() {
        let from_delay = v
            .settings
            .get(from)
            .is_some_and(|s| s.message_ttl_ms.is_some());
        let from_wait = is_wait.get(from).copied().unwrap_or(false);
        let from_wait_named = queues
            .get(from)
            .is_some_and(|q| named_like_wait_queue(&q.name));
        let returns_by_own_key = v.settings.get(from).is_some_and(|s| {
            s.dead_letter_routing_key.is_none()
                && s.dead_letter_exchange
                    .as_deref()
                    .is_some_and(|x| !x.is_empty())
        }) && targets.len() == 1;
        for &(to, certain) in targets {
            let to_named = v.named_dlq.get(to).copied().unwrap_or(false);
            let to_work = v
                .settings
                .get(to)
                .is_some_and(|s| s.dead_letter_exchange.is_some());
            let to_live = queues.get(to).is_some_and(|q| q.consumers.unwrap_or(0) > 0);
            let ladder = from_wait && (to_live || from_wait_named || returns_by_own_key);
            let retry_return = loop_edges.contains(&(from, to))
                || (!to_named
                    && (wait_queues.contains(&from) || (from_delay && to_work) || ladder));
            if retry_return {
                // A loop only when the wait queue returns to this one queue alone.
                if from_wait && !to_named && targets.len() == 1 && !loop_edges.contains(&(from, to))
                {
                    ladder_returns.push((from, to));
                }
                continue;
            }
            if let Some(list) = feeders.get_mut(to) {
                list.push((from, certain));
            }
        }
    }
    (feeders, ladder_returns)
}

/// Adds each hand-rolled ladder's (wait, work) pair as a retry loop.
fn add_ladder_loops(
    v: &Vhost,
    ladder_returns: Vec<(usize, usize)>,
    loop_edges: &mut HashSet<(usize, usize)>,
    retry_loops: &mut Vec<RetryLoop>,
) {
    for (wait, work) in ladder_returns {
        if let (Some(tq), Some(wq), Some(ttl_ms)) = (
            v.topology.queues.get(wait),
            v.topology.queues.get(work),
            v.settings.get(wait).and_then(|s| s.message_ttl_ms),
        ) {
            loop_edges.insert((work, wait));
            loop_edges.insert((wait, work));
            retry_loops.push(RetryLoop {
                vhost: String::new(),
                work_queue: wq.name.clone(),
                wait_queue: tq.name.clone(),
                ttl_ms,
            });
        }
    }
}

/// Sorts each queue into a dead end (with its kind, convention and feeders) or another queue.
fn sort_queues(
    v: &Vhost,
    features: &BrokerFeatures,
    patterns: &[Regex],
    feeders: &Edges,
    in_loop: &HashSet<usize>,
) -> (Vec<DlqInfo>, Vec<QueueSummary>) {
    let mut dlqs = Vec::new();
    let mut others = Vec::new();
    for (i, q) in v.topology.queues.iter().enumerate() {
        let default_settings = EffectiveSettings::default();
        let s = v.settings.get(i).unwrap_or(&default_settings);
        let fed = feeders.get(i).map(Vec::as_slice).unwrap_or(&[]);
        let named = if v.named_dlq.get(i).copied().unwrap_or(false) {
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
                vhost: String::new(),
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
            .filter_map(|&(f, _)| v.topology.queues.get(f).map(|fq| fq.name.clone()))
            .collect();
        feeder_names.sort();
        feeder_names.dedup();
        let via_spring_dlx = fed.iter().any(|&(f, _)| {
            v.settings
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
            context: String::new(),
            vhost: String::new(),
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
            guessed: false,
            delivery_limit: effective_delivery_limit(q, s, features),
            delivery_limit_arg: s.delivery_limit_arg,
            dead_letter_exchange: s.dead_letter_exchange.clone(),
        });
    }
    (dlqs, others)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::discovery::{Binding, ExchangeInfo, ExchangeKind, Policy, QueueInfo};
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
        assert!(inv.limit_applies(Some(BrokerVersion::new(4, 0, 5))));
        let err = d.dlq("billing_error").unwrap();
        assert_eq!(
            (err.kind, err.convention),
            (DlqKind::Error, Convention::MassTransit)
        );
        assert!(err.feeders.is_empty());
        assert_eq!(
            d.retry_loops,
            vec![RetryLoop {
                vhost: String::new(),
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
        // retry.wait returns to two queues; mail.delay to mail alone: a ladder's wait queue.
        let waits: Vec<&str> = d
            .retry_loops
            .iter()
            .map(|l| l.wait_queue.as_str())
            .collect();
        assert_eq!(waits, vec!["mail.delay", "retry.wait"]);
    }

    /// A hand-rolled ladder: the app republishes a failed message to the `wait` exchange, the
    /// wait queue's TTL dead-letters it back to the work queue, and after N tries the app copies
    /// it into `orders.dlq` itself. Only `orders.dlq` is a dead-letter queue.
    fn ladder(wait_name: &str, work_consumers: Option<u64>) -> Topology {
        let mut work = QueueInfo::named("orders");
        work.consumers = work_consumers;
        Topology {
            queues: vec![
                work,
                QueueInfo::named(wait_name)
                    .with_arg("x-message-ttl", json!(1000))
                    .with_arg("x-dead-letter-exchange", json!("work")),
                QueueInfo::named("orders.dlq").with_messages(5),
            ],
            exchanges: vec![ex("wait", "direct"), ex("work", "direct")],
            bindings: vec![
                Binding::to_queue("wait", wait_name, "orders"),
                Binding::to_queue("work", "orders", "orders"),
            ],
            policies: vec![],
        }
    }

    #[test]
    fn a_work_queue_fed_back_by_a_wait_queue_is_not_a_dlq() {
        for (wait, consumers) in [
            // Named like a wait queue: a work queue even while its worker is down.
            ("orders.wait", None),
            ("orders-retry-1", Some(0)),
            // Any name, when the work queue is consumed.
            ("orders.holding", Some(2)),
            // Any name, unconsumed too: it returns each message by the key it was published
            // with, to one queue alone.
            ("orders.holding", Some(0)),
            ("orders.holding", None),
        ] {
            let d = discover(&ladder(wait, consumers), &features("4.3.6"), &[]);
            let names: Vec<&str> = d
                .dead_letter_queues
                .iter()
                .map(|q| q.name.as_str())
                .collect();
            assert_eq!(names, vec!["orders.dlq"], "{wait}");
            assert_eq!(
                d.retry_loops,
                vec![RetryLoop {
                    vhost: String::new(),
                    work_queue: "orders".into(),
                    wait_queue: wait.into(),
                    ttl_ms: 1000
                }],
                "{wait}"
            );
            let others: Vec<&str> = d.other_queues.iter().map(|q| q.name.as_str()).collect();
            assert_eq!(others, vec!["orders", wait], "{wait}");
        }
        // A TTL queue that dead-letters to one named queue (its dead-letter routing key), not
        // back by each message's own key, not named like a wait queue and its target not
        // consumed: where its expired messages stop is a DLQ (its expiries are the dead letters).
        let mut t = ladder("orders.holding", Some(0));
        if let Some(q) = t.queues.iter_mut().find(|q| q.name == "orders.holding") {
            q.arguments
                .insert("x-dead-letter-exchange".into(), json!(""));
            q.arguments
                .insert("x-dead-letter-routing-key".into(), json!("orders"));
        }
        let d = discover(&t, &features("4.3.6"), &[]);
        let names: Vec<&str> = d
            .dead_letter_queues
            .iter()
            .map(|q| q.name.as_str())
            .collect();
        assert_eq!(names, vec!["orders.dlq", "orders"]);
        assert_eq!(d.dlq("orders").unwrap().feeders, vec!["orders.holding"]);
        assert!(d.retry_loops.is_empty());
    }

    #[test]
    fn wait_queue_names() {
        for n in [
            "orders.wait",
            "orders-retry-2",
            "mail.delay30s",
            "x_backoff",
            "default.DQ",
        ] {
            assert!(named_like_wait_queue(n), "{n}");
        }
        for n in ["orders", "quotes", "await.things", "orders.dlq"] {
            assert!(!named_like_wait_queue(n), "{n}");
        }
    }

    fn quorum_dlq(limit: Option<u64>) -> DlqInfo {
        DlqInfo {
            context: String::new(),
            vhost: String::new(),
            name: "orders.dlq".into(),
            kind: DlqKind::DeadLetter,
            convention: Convention::Broker,
            depth: Some(3),
            messages_ready: Some(3),
            messages_unacknowledged: Some(0),
            consumers: Some(0),
            queue_type: QueueType::Quorum,
            feeders: vec!["orders".into()],
            feeders_uncertain: false,
            by_topology: true,
            by_name: true,
            guessed: false,
            delivery_limit: limit,
            delivery_limit_arg: None,
            dead_letter_exchange: None,
        }
    }

    #[test]
    fn limit_applies_asks_the_version() {
        let v = |s: &str| BrokerVersion::parse(s);
        let limited = quorum_dlq(Some(20));
        // 3.10: returns count, and a set limit bites.
        assert!(limited.limit_applies(v("3.10.8")));
        // 4.0: the default limit of 20, every return counts.
        assert!(limited.limit_applies(v("4.0.5")));
        // 4.3: an explicit nack is free, so the list warns of nothing.
        assert!(!limited.limit_applies(v("4.3.6")));
        // Unknown version: cautious.
        assert!(limited.limit_applies(v("not a version")));
        assert!(limited.limit_applies(None));
        // No limit in force (3.x without one): nothing to lose on any version.
        let unlimited = quorum_dlq(None);
        for version in [v("3.10.8"), v("4.0.5"), v("4.3.6"), None] {
            assert!(!unlimited.limit_applies(version));
        }
        // Classic and stream queues never spend deliveries, whatever limit is recorded.
        for t in [QueueType::Classic, QueueType::Stream] {
            let q = DlqInfo {
                queue_type: t,
                ..quorum_dlq(Some(5))
            };
            assert!(!q.limit_applies(v("4.0.5")) && !q.limit_applies(None));
        }
    }

    #[test]
    fn discovered_limits_follow_the_version() {
        // The same quorum DLQ without a configured limit, as each version's discovery sees it.
        let limit_applies = |version: &str| {
            let d = discover(&topology_fixture(), &features(version), &[]);
            let dlq = d.dlq("invoices.failed").cloned().unwrap();
            dlq.limit_applies(BrokerVersion::parse(version))
        };
        assert!(!limit_applies("3.10.8"), "3.x has no default limit");
        assert!(limit_applies("4.0.5"));
        assert!(!limit_applies("4.3.6"), "4.3 reads are free");
        assert!(limit_applies("unknown"));
    }
}
