//! Redirects: "replays that would go to queue A go to queue B", for an endpoint renamed, split
//! or retired. Pure: the broker layer keeps the changes (a stream beside the audit, see
//! `broker::redirects`), this module folds them into the redirects in force and applies them to
//! a replay's target (`domain::replay::plan`, the one place a message's target is decided).
//!
//! Rules: a change counts only when the broker vouches for who wrote it (the entry's AMQP
//! `user_id`, which the broker refuses from any other user) and that user is the one the record
//! names; the newest change for a queue wins; a redirect is one hop (B is never redirected in
//! turn: adding a chain is refused); an explicit `--to` is the operator's choice and is not
//! redirected.

use std::collections::BTreeMap;

use jiff::Timestamp;
use serde::{Deserialize, Serialize};

use super::sanitize::one_line;
use super::target::ReplayTarget;

/// The event of an entry that sets a redirect.
pub const ADD: &str = "add";
/// The event of an entry that removes one.
pub const REMOVE: &str = "remove";

/// One change as kept on the broker (the `record` of a `redirect` entry): a redirect set
/// (event `add`) or removed (event `remove`, `to` and `reason` empty), with who and why.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RedirectRecord {
    pub at: Timestamp,
    /// The queue whose replays are redirected.
    pub from: String,
    /// Where they go instead (empty for a removal).
    #[serde(default)]
    pub to: String,
    #[serde(default)]
    pub reason: String,
    /// The local account that set it, and the broker user it was set as.
    pub os_user: String,
    pub broker_user: String,
    pub context: String,
    pub vhost: String,
}

/// One entry read back: its event, its record, and the broker user the broker vouches wrote it
/// (`None`: not vouched for).
#[derive(Clone, Debug)]
pub struct Entry {
    pub event: String,
    pub record: RedirectRecord,
    pub vouched: Option<String>,
}

/// The redirects in force, by the queue they redirect from.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Redirects {
    by_from: BTreeMap<String, RedirectRecord>,
}

/// What a plan says about a target it redirected: "redirected from orders: renamed".
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Redirected {
    pub from: String,
    pub reason: String,
}

impl Redirected {
    /// In words, terminal-safe.
    pub fn describe(&self) -> String {
        if self.reason.trim().is_empty() {
            format!("redirected from {}", one_line(&self.from, 80))
        } else {
            format!(
                "redirected from {}: {}",
                one_line(&self.from, 80),
                one_line(&self.reason, 120)
            )
        }
    }
}

/// The redirects in force after `entries` (stream order, oldest first), and how many entries
/// were not acted on (not vouched for, or naming another user than the broker vouches for).
pub fn fold(entries: impl IntoIterator<Item = Entry>) -> (Redirects, usize) {
    let mut r = Redirects::default();
    let mut ignored = 0;
    for e in entries {
        if e.vouched.as_deref() != Some(e.record.broker_user.as_str()) {
            ignored += 1;
            continue;
        }
        match e.event.as_str() {
            ADD if !e.record.to.is_empty() => {
                r.by_from.insert(e.record.from.clone(), e.record);
            }
            REMOVE => {
                r.by_from.remove(&e.record.from);
            }
            _ => ignored += 1,
        }
    }
    (r, ignored)
}

impl RedirectRecord {
    /// "orders → orders.v2 (endpoint renamed)", terminal-safe.
    pub fn describe(&self) -> String {
        let why = if self.reason.trim().is_empty() {
            String::new()
        } else {
            format!(" ({})", one_line(&self.reason, 200))
        };
        format!(
            "{} → {}{why}",
            one_line(&self.from, 100),
            one_line(&self.to, 100)
        )
    }
}

impl Redirects {
    /// The redirect of `queue`, if one is in force.
    pub fn get(&self, queue: &str) -> Option<&RedirectRecord> {
        self.by_from.get(queue)
    }

    pub fn is_empty(&self) -> bool {
        self.by_from.is_empty()
    }

    /// Every redirect in force, by the queue redirected.
    pub fn list(&self) -> impl Iterator<Item = &RedirectRecord> {
        self.by_from.values()
    }

    /// Where a message planned for `target` goes: a target whose queue is redirected goes
    /// straight to the redirect's queue through the default exchange (which reaches exactly
    /// that queue), with what the plan says about it. `None` target stays `None`.
    pub fn route(
        &self,
        target: Option<ReplayTarget>,
    ) -> (Option<ReplayTarget>, Option<Redirected>) {
        let Some(t) = target else {
            return (None, None);
        };
        let Some(r) = t.expected_queue.as_deref().and_then(|q| self.get(q)) else {
            return (Some(t), None);
        };
        (
            Some(ReplayTarget {
                exchange: String::new(),
                routing_key: r.to.clone(),
                expected_queue: Some(r.to.clone()),
            }),
            Some(Redirected {
                from: r.from.clone(),
                reason: r.reason.clone(),
            }),
        )
    }
}

/// What the broker says of the queue a new redirect points to.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Destination {
    Missing,
    /// A wait queue (a TTL and a dead-letter exchange, no consumer): messages would only pass
    /// through it.
    WaitQueue,
    Queue,
}

/// Whether `from → to` may be set over `current`: `Err` says why not. A redirect to a queue
/// that does not exist or to a wait queue is refused, and so is one that would chain.
pub fn check_add(
    current: &Redirects,
    from: &str,
    to: &str,
    dest: &Destination,
) -> Result<(), String> {
    let (f, t) = (one_line(from, 100), one_line(to, 100));
    if from.trim().is_empty() || to.trim().is_empty() {
        return Err("a redirect needs a queue to redirect and a queue to send to".into());
    }
    if from == to {
        return Err(format!("'{f}' cannot be redirected to itself"));
    }
    if let Some(next) = current.get(to) {
        return Err(format!(
            "'{t}' is itself redirected to '{}': redirect '{f}' there directly (redirects are one hop)",
            one_line(&next.to, 100)
        ));
    }
    if let Some(into) = current.list().find(|r| r.to == from) {
        return Err(format!(
            "'{}' is redirected to '{f}': remove or change that redirect first (redirects are one hop)",
            one_line(&into.from, 100)
        ));
    }
    match dest {
        Destination::Missing => Err(format!(
            "the queue '{t}' does not exist: a redirect must name a queue that is there to consume its messages"
        )),
        Destination::WaitQueue => Err(format!(
            "'{t}' is a wait queue (a TTL and a dead-letter exchange): messages would only pass through it; redirect to the queue that consumes them"
        )),
        Destination::Queue => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rec(from: &str, to: &str, user: &str) -> RedirectRecord {
        RedirectRecord {
            at: Timestamp::UNIX_EPOCH,
            from: from.into(),
            to: to.into(),
            reason: "renamed".into(),
            os_user: "ops".into(),
            broker_user: user.into(),
            context: "c".into(),
            vhost: "/".into(),
        }
    }

    fn entry(event: &str, from: &str, to: &str, vouched: Option<&str>) -> Entry {
        Entry {
            event: event.into(),
            record: rec(from, to, "alice"),
            vouched: vouched.map(str::to_string),
        }
    }

    #[test]
    fn newest_change_wins_and_removal_restores() {
        let (r, ignored) = fold([
            entry(ADD, "orders", "orders.v1", Some("alice")),
            entry(ADD, "orders", "orders.v2", Some("alice")),
            entry(ADD, "billing", "billing.v2", Some("alice")),
            entry(REMOVE, "billing", "", Some("alice")),
        ]);
        assert_eq!(ignored, 0);
        assert_eq!(r.get("orders").map(|x| x.to.as_str()), Some("orders.v2"));
        assert!(r.get("billing").is_none());
    }

    #[test]
    fn unvouched_or_forged_entries_are_not_acted_on() {
        let (r, ignored) = fold([
            entry(ADD, "orders", "evil", None),
            entry(ADD, "orders", "evil", Some("mallory")),
        ]);
        assert!(r.is_empty());
        assert_eq!(ignored, 2);
        // A forged removal does not remove.
        let (r, _) = fold([
            entry(ADD, "orders", "orders.v2", Some("alice")),
            entry(REMOVE, "orders", "", None),
        ]);
        assert!(r.get("orders").is_some());
    }

    #[test]
    fn route_sends_a_redirected_queue_to_its_new_home_only() {
        let (r, _) = fold([entry(ADD, "orders", "orders.v2", Some("alice"))]);
        let q = |n: &str| ReplayTarget {
            exchange: String::new(),
            routing_key: n.into(),
            expected_queue: Some(n.into()),
        };
        let (t, why) = r.route(Some(q("orders")));
        assert_eq!(t, Some(q("orders.v2")));
        assert_eq!(
            why.map(|w| w.describe()).as_deref(),
            Some("redirected from orders: renamed")
        );
        assert_eq!(r.route(Some(q("billing"))), (Some(q("billing")), None));
        assert_eq!(r.route(None), (None, None));
    }

    #[test]
    fn refuses_missing_wait_self_and_chains() {
        let (r, _) = fold([entry(ADD, "orders", "orders.v2", Some("alice"))]);
        let q = Destination::Queue;
        assert!(check_add(&r, "a", "b", &Destination::Missing).is_err());
        assert!(check_add(&r, "a", "b", &Destination::WaitQueue).is_err());
        assert!(check_add(&r, "a", "a", &q).is_err());
        assert!(check_add(&r, "a", "orders", &q).is_err());
        assert!(check_add(&r, "orders.v2", "x", &q).is_err());
        assert!(check_add(&r, "orders", "orders.v3", &q).is_ok());
        assert!(check_add(&r, "a", "b", &q).is_ok());
    }
}
