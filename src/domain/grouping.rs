//! Failure groups by what matters now: the fingerprint (how it failed, the default), or one
//! aspect of every message — its exception type, its message type, the queue it failed in, the
//! broker's reason for dead-lettering it, or the queue a replay would really deliver it to.
//! `warren groups --by`, `warren replay --by … --group`, the TUI's group view and group notes all
//! take their keys from [`group_key`], a pure function of the message and its explanation.
//!
//! A key is 16 hex digits (FNV-1a 64 of the aspect, as fingerprints are), so it can be stored and
//! typed whatever the broker strings hold; the fingerprint mode's key *is* the fingerprint, so
//! `--group FINGERPRINT` means what it always meant. A group can also be named by its value
//! (`--by reason --group rejected`): see [`GroupKey::named`].

use std::borrow::Cow;
use std::collections::{BTreeMap, HashMap};
use std::hash::{Hash, Hasher};

use fnv::FnvHasher;

use super::convention::Convention;
use super::discovery::Discovery;
use super::explain::Explanation;
use super::fingerprint::Fingerprint;
use super::message::DeadLetter;
use super::replay::{self, ReplayTarget};

/// What groups are made of.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum GroupBy {
    /// How it failed: exception type and masked message, or the broker's reason and queue.
    #[default]
    Fingerprint,
    /// The exception type the framework recorded.
    Exception,
    /// The message type (or the task, or the actor).
    Type,
    /// The queue it failed in.
    Origin,
    /// The broker's reason for the death that brought it here (`x-death`).
    Reason,
    /// The queue a replay would deliver it to, past a wait queue (as the replay plan names it).
    Endpoint,
}

impl GroupBy {
    /// Every mode, in the order the TUI cycles through them.
    pub const ALL: [GroupBy; 6] = [
        GroupBy::Fingerprint,
        GroupBy::Exception,
        GroupBy::Type,
        GroupBy::Origin,
        GroupBy::Reason,
        GroupBy::Endpoint,
    ];

    /// The command line's word (`--by exception`), also stored with a group's note.
    pub fn as_str(self) -> &'static str {
        match self {
            GroupBy::Fingerprint => "fingerprint",
            GroupBy::Exception => "exception",
            GroupBy::Type => "type",
            GroupBy::Origin => "origin",
            GroupBy::Reason => "reason",
            GroupBy::Endpoint => "endpoint",
        }
    }

    /// For people, in a pane title: "groups by exception type".
    pub fn label(self) -> &'static str {
        match self {
            GroupBy::Fingerprint => "failure",
            GroupBy::Exception => "exception type",
            GroupBy::Type => "message type",
            GroupBy::Origin => "origin queue",
            GroupBy::Reason => "death reason",
            GroupBy::Endpoint => "replay endpoint",
        }
    }

    pub fn parse(s: &str) -> Option<GroupBy> {
        let s = s.trim();
        GroupBy::ALL
            .into_iter()
            .find(|b| b.as_str().eq_ignore_ascii_case(s))
    }

    /// The next mode, wrapping round (the TUI's key).
    pub fn next(self) -> GroupBy {
        let i = GroupBy::ALL.iter().position(|b| *b == self).unwrap_or(0);
        GroupBy::ALL[(i + 1) % GroupBy::ALL.len()]
    }
}

impl std::fmt::Display for GroupBy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One message's group under one mode.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct GroupKey {
    /// 16 lowercase hex digits.
    pub key: String,
    /// The aspect as recorded ("Shop.CarrierUnavailableException", "rejected", "orders"), empty
    /// when the message records none; for the fingerprint, its summary.
    pub value: String,
    /// For people: the value, or what its absence means ("no exception recorded (Celery)").
    pub summary: String,
}

impl GroupKey {
    /// Whether `name` names this group: its key, or its value exactly (`--group rejected`).
    pub fn named(&self, name: &str) -> bool {
        let name = name.trim();
        !name.is_empty() && (self.key == name || self.value == name)
    }
}

/// Where a replay goes on to past a wait queue (a retry ladder's wait queue → the work queue it
/// routes back to), from the vhost's retry loops. Empty for a snapshot or when not known: then
/// the endpoint is the queue the plan names.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct WaitQueues(BTreeMap<String, String>);

impl WaitQueues {
    pub fn from_discovery(d: &Discovery) -> WaitQueues {
        WaitQueues(
            d.retry_loops
                .iter()
                .map(|l| (l.wait_queue.clone(), l.work_queue.clone()))
                .collect(),
        )
    }

    /// [`WaitQueues::from_discovery`] for the loops of `vhost` only (a discovery of every vhost
    /// holds several, and a wait queue's name means something in its own vhost).
    pub fn of_vhost(d: &Discovery, vhost: &str) -> WaitQueues {
        WaitQueues(
            d.retry_loops
                .iter()
                .filter(|l| l.vhost == vhost)
                .map(|l| (l.wait_queue.clone(), l.work_queue.clone()))
                .collect(),
        )
    }

    pub fn from_pairs(pairs: impl IntoIterator<Item = (String, String)>) -> WaitQueues {
        WaitQueues(pairs.into_iter().collect())
    }

    /// Where a message published into `queue` is consumed.
    pub fn rests_in<'a>(&'a self, queue: &'a str) -> &'a str {
        self.0.get(queue).map_or(queue, String::as_str)
    }

    /// The work queue `queue` is the wait queue of, when it is one.
    pub fn work_queue_of(&self, queue: &str) -> Option<&str> {
        self.0.get(queue).map(String::as_str)
    }
}

/// The broker's reason for the death that brought the message here: the newest `x-death` entry
/// (the broker writes the newest first), else the `x-last-death-reason` / `x-first-death-reason`
/// summaries. `None` when the broker never dead-lettered it (a framework republished it).
pub fn death_reason(ex: &Explanation) -> Option<&str> {
    let d = &ex.deaths;
    d.entries
        .iter()
        .find_map(|e| e.reason.as_ref())
        .or_else(|| d.last.as_ref().and_then(|s| s.reason.as_ref()))
        .or_else(|| d.first.as_ref().and_then(|s| s.reason.as_ref()))
        .map(|r| r.as_str())
}

/// The message type as the filter's `type:` sees it: the convention's, else the `type` property.
pub fn message_type<'a>(msg: &'a DeadLetter, exp: &'a Explanation) -> Option<&'a str> {
    exp.message_type
        .as_deref()
        .or(super::amqp10::message_type(&msg.properties))
}

/// What grouping reads of one message, in every mode: taken from the message and its
/// explanation ([`Facets::of`]), or from what a long list keeps of each message instead of the
/// message (`brief::Brief::facets`), so both group alike.
#[derive(Clone, Debug)]
pub struct Facets<'a> {
    pub exception_type: Option<&'a str>,
    /// The convention's message type, else the `type` property.
    pub message_type: Option<&'a str>,
    pub origin: Option<&'a str>,
    pub death_reason: Option<&'a str>,
    /// Where a replay would publish it ([`replay::default_target`]).
    pub endpoint: Option<Cow<'a, ReplayTarget>>,
    pub convention: Convention,
    pub fingerprint: &'a Fingerprint,
}

impl<'a> Facets<'a> {
    pub fn of(dl: &'a DeadLetter, ex: &'a Explanation) -> Facets<'a> {
        Facets {
            exception_type: ex.fault.as_ref().and_then(|f| f.exception_type.as_deref()),
            message_type: message_type(dl, ex),
            origin: ex.source.queue.as_deref(),
            death_reason: death_reason(ex),
            endpoint: replay::default_target(dl, ex).map(Cow::Owned),
            convention: ex.convention,
            fingerprint: &ex.fingerprint,
        }
    }
}

/// What one message records of one aspect (every mode but the fingerprint).
enum Aspect<'a> {
    /// The aspect as recorded.
    Given(&'a str),
    /// Nothing recorded: this says what is missing.
    Missing(&'static str),
    /// The queue a replay rests in, and the wait queue it goes past, if any.
    Rests { queue: String, past: Option<String> },
    /// An exchange whose bindings alone say where a replay lands.
    Exchange {
        exchange: String,
        routing_key: String,
    },
}

fn aspect<'a>(by: GroupBy, f: &Facets<'a>, waits: &WaitQueues) -> Aspect<'a> {
    let given = |v: Option<&'a str>, missing| match v.filter(|v| !v.is_empty()) {
        Some(v) => Aspect::Given(v),
        None => Aspect::Missing(missing),
    };
    match by {
        // The fingerprint is the explanation's own (see `group_key`, `key_of`); never asked here.
        GroupBy::Fingerprint | GroupBy::Exception => {
            given(f.exception_type, "no exception type recorded")
        }
        GroupBy::Type => given(f.message_type, "no message type recorded"),
        GroupBy::Origin => given(f.origin, "origin unknown"),
        GroupBy::Reason => given(
            f.death_reason,
            "not dead-lettered by the broker: republished",
        ),
        GroupBy::Endpoint => match f.endpoint.as_deref() {
            Some(t) => match &t.expected_queue {
                Some(q) => {
                    let rest = waits.rests_in(q).to_string();
                    let past = (rest != *q).then(|| q.clone());
                    Aspect::Rests { queue: rest, past }
                }
                None => Aspect::Exchange {
                    exchange: t.exchange.clone(),
                    routing_key: t.routing_key.clone(),
                },
            },
            None => Aspect::Missing("no known origin: replay needs --to"),
        },
    }
}

/// The key of an aspect: FNV-1a 64 of the mode and the parts, NUL-separated, so ("ab", "c") and
/// ("a", "bc") differ and "orders" as an origin and as an endpoint are two keys.
fn aspect_key(by: GroupBy, a: &Aspect<'_>, convention: Convention) -> String {
    let mut h = FnvHasher::default();
    h.write(by.as_str().as_bytes());
    let mut part = |p: &str| {
        h.write(b"\0");
        h.write(p.as_bytes());
    };
    match a {
        Aspect::Given(v) => part(v),
        // One "none recorded" group per convention: two conventions, two fixes.
        Aspect::Missing(_) => {
            part("");
            part(convention.as_str());
        }
        Aspect::Rests { queue, .. } => part(queue),
        Aspect::Exchange {
            exchange,
            routing_key,
        } => {
            part("exchange");
            part(exchange);
            part(routing_key);
        }
    }
    format!("{:016x}", h.finish())
}

/// The group of `dl` (explained as `ex`) under `by`. Pure and total: every message is in exactly
/// one group of every mode; a message that records nothing of the aspect is in the mode's
/// "none recorded" group of its convention.
pub fn group_key(by: GroupBy, dl: &DeadLetter, ex: &Explanation, waits: &WaitQueues) -> GroupKey {
    group_key_of(by, &Facets::of(dl, ex), waits)
}

/// [`group_key`] from a message's [`Facets`].
pub fn group_key_of(by: GroupBy, f: &Facets<'_>, waits: &WaitQueues) -> GroupKey {
    if by == GroupBy::Fingerprint {
        return GroupKey {
            key: f.fingerprint.key.clone(),
            value: f.fingerprint.summary.clone(),
            summary: f.fingerprint.summary.clone(),
        };
    }
    let a = aspect(by, f, waits);
    let key = aspect_key(by, &a, f.convention);
    let (value, summary) = match a {
        Aspect::Given(v) => (v.to_string(), v.to_string()),
        Aspect::Missing(what) => (String::new(), format!("{what} ({})", f.convention.label())),
        Aspect::Rests { queue, past: None } => (queue.clone(), queue),
        Aspect::Rests {
            queue,
            past: Some(wait),
        } => (
            queue.clone(),
            format!("{queue} (past the wait queue {wait})"),
        ),
        Aspect::Exchange {
            exchange,
            routing_key,
        } => (
            exchange.clone(),
            format!("exchange {exchange} key \"{routing_key}\" (its bindings decide)"),
        ),
    };
    GroupKey {
        key,
        value,
        summary,
    }
}

/// The key of `dl`'s group under `by` ([`GroupKey::key`]) without the words for people: borrowed
/// for the fingerprint (the default, and what a large list is grouped by on every filter
/// change), one string otherwise.
pub fn key_of<'a>(
    by: GroupBy,
    dl: &DeadLetter,
    ex: &'a Explanation,
    waits: &WaitQueues,
) -> Cow<'a, str> {
    match by {
        GroupBy::Fingerprint => Cow::Borrowed(ex.fingerprint.key.as_str()),
        by => Cow::Owned(key_of_facets(by, &Facets::of(dl, ex), waits).into_owned()),
    }
}

/// [`key_of`] from a message's [`Facets`].
pub fn key_of_facets<'a>(by: GroupBy, f: &Facets<'a>, waits: &WaitQueues) -> Cow<'a, str> {
    match by {
        GroupBy::Fingerprint => Cow::Borrowed(f.fingerprint.key.as_str()),
        by => Cow::Owned(aspect_key(by, &aspect(by, f, waits), f.convention)),
    }
}

/// Messages in groups: `keys[i]` is message `i`'s group key ([`key_of`]). The groups come in
/// the order their first message does, each with the indices of its messages in order; callers
/// build each group's [`GroupKey`] from its first message and sort the groups as their screen
/// needs (by size, then age or first appearance).
pub fn partition<K: Eq + Hash + Clone>(keys: impl IntoIterator<Item = K>) -> Vec<(K, Vec<usize>)> {
    let mut p = Partition::default();
    for (i, k) in keys.into_iter().enumerate() {
        p.push(k, i);
    }
    p.finish()
}

/// [`partition`] a few members at a time: the TUI groups a million messages in slices between
/// key presses (`tui::refresh`), keeping only each distinct key, not each member's.
#[derive(Clone, Debug)]
pub struct Partition<K> {
    at: HashMap<K, usize>,
    groups: Vec<(K, Vec<usize>)>,
}

impl<K> Default for Partition<K> {
    fn default() -> Self {
        Partition {
            at: HashMap::new(),
            groups: Vec::new(),
        }
    }
}

impl<K: Eq + Hash + Clone> Partition<K> {
    /// Puts `member` in the group of `key`; says which group, by its place in first appearance.
    pub fn push(&mut self, key: K, member: usize) -> usize {
        if let Some(&g) = self.at.get(&key) {
            if let Some((_, members)) = self.groups.get_mut(g) {
                members.push(member);
            }
            return g;
        }
        let g = self.groups.len();
        self.at.insert(key.clone(), g);
        self.groups.push((key, vec![member]));
        g
    }

    /// Puts `member` in the group of a borrowed key, which is made owned only for a new group.
    pub fn push_borrowed<Q>(&mut self, key: &Q, member: usize) -> usize
    where
        K: std::borrow::Borrow<Q>,
        Q: Eq + Hash + ToOwned<Owned = K> + ?Sized,
    {
        match self.at.get(key).copied() {
            Some(g) => {
                if let Some((_, members)) = self.groups.get_mut(g) {
                    members.push(member);
                }
                g
            }
            None => self.push(key.to_owned(), member),
        }
    }

    /// The groups in the order their first members came.
    pub fn finish(self) -> Vec<(K, Vec<usize>)> {
        self.groups
    }
}

/// Longest note kept, in characters: a sentence for the rota, not a document.
pub const MAX_NOTE_CHARS: usize = 500;

/// A note on a group of one queue ("carrier outage, replay after 10:00"), kept in Warren's store
/// until a look at the whole queue finds no message in the group ([`notes_gone`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GroupNote {
    pub queue: String,
    pub by: GroupBy,
    /// The group's key ([`GroupKey::key`]).
    pub key: String,
    pub text: String,
    /// Who wrote it (the OS user).
    pub author: String,
    pub at: jiff::Timestamp,
}

/// A note's text as kept: trimmed, on one line (line breaks become spaces), at most
/// [`MAX_NOTE_CHARS`]. Empty means "no note". It is still a stranger's text on screen: every
/// display sanitises it.
pub fn note_text(text: &str) -> String {
    text.split(['\n', '\r'])
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect::<Vec<_>>()
        .join(" ")
        .chars()
        .take(MAX_NOTE_CHARS)
        .collect()
}

/// The notes whose group is gone: no message of `messages` (the whole queue, as a look that read
/// all of it found it) is in it under the note's grouping. A look that read only part of the
/// queue cannot tell, and must not ask.
pub fn notes_gone<'n>(
    notes: &'n [GroupNote],
    messages: &[Facets<'_>],
    waits: &WaitQueues,
) -> Vec<&'n GroupNote> {
    let mut present: HashMap<GroupBy, std::collections::HashSet<String>> = HashMap::new();
    for n in notes {
        present.entry(n.by).or_insert_with(|| {
            messages
                .iter()
                .map(|f| key_of_facets(n.by, f, waits).into_owned())
                .collect()
        });
    }
    notes
        .iter()
        .filter(|n| !present.get(&n.by).is_some_and(|keys| keys.contains(&n.key)))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::fingerprint::fnv1a64;

    #[test]
    fn a_wait_queue_means_something_in_its_own_vhost() {
        let lp = |vhost: &str, work: &str| crate::domain::discovery::RetryLoop {
            vhost: vhost.into(),
            work_queue: work.into(),
            wait_queue: "retry.wait".into(),
            ttl_ms: 1000,
        };
        let d = Discovery {
            retry_loops: vec![lp("a", "orders"), lp("b", "invoices")],
            ..Default::default()
        };
        assert_eq!(
            WaitQueues::of_vhost(&d, "a").rests_in("retry.wait"),
            "orders"
        );
        assert_eq!(
            WaitQueues::of_vhost(&d, "b").rests_in("retry.wait"),
            "invoices"
        );
        assert_eq!(
            WaitQueues::of_vhost(&d, "c").rests_in("retry.wait"),
            "retry.wait"
        );
        assert_eq!(
            d.retry_loop_in("b", "retry.wait")
                .map(|l| l.work_queue.as_str()),
            Some("invoices")
        );
    }

    #[test]
    fn modes_parse_and_cycle() {
        for b in GroupBy::ALL {
            assert_eq!(GroupBy::parse(b.as_str()), Some(b));
        }
        assert_eq!(GroupBy::parse(" Exception "), Some(GroupBy::Exception));
        assert_eq!(GroupBy::parse("queue"), None);
        assert_eq!(GroupBy::Endpoint.next(), GroupBy::Fingerprint);
        assert_eq!(GroupBy::Fingerprint.next(), GroupBy::Exception);
    }

    #[test]
    fn keys_differ_by_mode_and_are_named_by_key_or_value() {
        let ex = crate::domain::explain::explain(&DeadLetter::default());
        let key = |by| aspect_key(by, &Aspect::Given("orders"), ex.convention);
        // FNV-1a 64 of the mode and the parts, NUL-separated.
        assert_eq!(
            key(GroupBy::Origin),
            format!("{:016x}", fnv1a64(b"origin\0orders"))
        );
        assert_ne!(key(GroupBy::Origin), key(GroupBy::Endpoint));
        let a = GroupKey {
            key: key(GroupBy::Origin),
            value: "orders".into(),
            summary: "orders".into(),
        };
        assert_eq!(a.key.len(), 16);
        assert!(a.named("orders") && a.named(&a.key.clone()));
        assert!(!a.named("") && !a.named("order"));
    }

    #[test]
    fn note_text_is_one_bounded_line() {
        assert_eq!(
            note_text("  carrier outage,\r\n replay after 10:00 \n"),
            "carrier outage, replay after 10:00"
        );
        assert_eq!(note_text(" \n "), "");
        assert_eq!(note_text(&"x".repeat(900)).chars().count(), MAX_NOTE_CHARS);
    }

    #[test]
    fn a_partition_made_a_few_at_a_time_is_the_partition_made_at_once() {
        let keys = ["a", "b", "a", "c", "b", "a"];
        let mut p: Partition<String> = Partition::default();
        // Borrowed and owned keys alike, as the TUI's slices push them.
        for (i, k) in keys.iter().enumerate() {
            let g = if i % 2 == 0 {
                p.push_borrowed(*k, i)
            } else {
                p.push((*k).to_string(), i)
            };
            assert_eq!(g, ["a", "b", "c"].iter().position(|x| x == k).unwrap());
        }
        let made: Vec<(String, Vec<usize>)> = partition(keys)
            .into_iter()
            .map(|(k, m)| (k.to_string(), m))
            .collect();
        assert_eq!(p.finish(), made);
    }

    #[test]
    fn partition_keeps_first_appearance() {
        let groups = partition(["a", "b", "a", "c", "b"]);
        let shape: Vec<(&str, Vec<usize>)> = groups.iter().map(|(g, m)| (*g, m.clone())).collect();
        assert_eq!(
            shape,
            vec![("a", vec![0, 2]), ("b", vec![1, 4]), ("c", vec![3])]
        );
    }
}
