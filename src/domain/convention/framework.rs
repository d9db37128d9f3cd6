//! The one interface every convention is behind: how a message is recognised as its (by its
//! headers, body or queue name), read into a [`Reading`], replayed (which headers go, which
//! counters a fresh budget resets, where it goes back to) and worded (the verdict's retries).
//! A convention module states one [`Framework`] value, starting from [`BASE`] and setting only
//! what differs; the registry in `convention/mod.rs` lists them all.

use super::{Convention, Conventions, IdPlace, Reading, RetryLimit, Source};
use crate::domain::message::DeadLetter;
use crate::domain::target::{ReplayTarget, ReplayWarning};
use crate::domain::value::Table;
use crate::domain::xdeath::DeathHistory;

/// What detection and reading see of one dead letter.
pub(crate) struct Letter<'a> {
    pub dl: &'a DeadLetter,
    pub deaths: &'a DeathHistory,
    /// The team's own ladder headers, from the config.
    pub own: &'a Conventions,
}

/// What a replay decides by, of an explained message (`Explanation`, which a convention does
/// not import: it is built from the convention's reading).
pub(crate) struct Told<'a> {
    pub dl: &'a DeadLetter,
    pub source: &'a Source,
    pub retries: Option<i64>,
    pub retry_limit: Option<RetryLimit>,
}

/// What a queue's name says it holds, in a framework's own naming.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Role {
    DeadLetter,
    /// A framework's error queue.
    Error,
    /// Messages no consumer handled (MassTransit's `_skipped`).
    Skipped,
}

/// A queue name a framework claims: what it holds, and whether the name is the framework's own
/// (`orders_error`) rather than a shape others use too (`orders.group.dlq`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Named {
    pub role: Role,
    pub specific: bool,
}

/// A header name a replay removes: exactly this one, or every one starting so.
pub(crate) enum Rule {
    Exact(&'static str),
    Prefix(&'static str),
}

impl Rule {
    pub(crate) fn matches(&self, name: &str) -> bool {
        match self {
            Rule::Exact(n) => name == *n,
            Rule::Prefix(p) => name.starts_with(p),
        }
    }
}

/// Where a framework keeps a retry counter.
pub(crate) enum Counter {
    Header(&'static str),
    /// A key of a table header.
    Nested(&'static str, &'static str),
    /// In the body, which a replay never changes: the path for people.
    Body(&'static str),
}

/// What a replay does with a convention's messages (unless attempts are kept, for the first
/// three).
pub(crate) struct Replay {
    /// Headers removed besides the broker's: its record of the failure and its counters.
    pub strips: &'static [Rule],
    /// Every retry counter it keeps, besides the broker's: "attempts reset" only when each is.
    pub counters: &'static [Counter],
    /// Counters set to zero rather than removed: its protocol needs them.
    pub zeroed: &'static [&'static str],
    /// Resets beyond the stripped headers, on the headers that go out (rascal's nested
    /// counters); pushes what it removed.
    pub reset: fn(&mut Table, &mut Vec<String>),
    /// The header holding its deadline (`Reading::deadline`), which `--clear-expiry` removes.
    pub deadline: Option<&'static str>,
    /// Where its messages go back to when no `--to` is given; `None` with the warning why.
    pub target: fn(&Told<'_>, &mut Vec<ReplayWarning>) -> Option<ReplayTarget>,
    /// What the operator should know about its message first (a body's retry budget).
    pub warn: fn(&Told<'_>, &mut Vec<ReplayWarning>),
    /// Its last word on the headers that go out, told whether `--strip-failure-stamp` was
    /// given (Symfony's failure stamp): pushes what it removed and what to warn of.
    pub finish: fn(&DeadLetter, bool, &mut Table, &mut Vec<String>, &mut Vec<ReplayWarning>),
    /// A counter still set in the headers that go out that `counters` cannot name (Symfony's
    /// last `RedeliveryStamp`, which may be in the body).
    pub surviving: fn(&DeadLetter, &Table) -> Option<String>,
}

/// How a convention's failures are told and grouped, where it differs from the rest.
#[derive(Clone, Copy)]
pub(crate) struct Story {
    /// It records the task and never the exception (Celery): the verdict tells the task and the
    /// broker's story, and failures group by task.
    pub task_not_fault: bool,
    /// Failures group by the actor too (dramatiq: two actors failing alike are two fixes).
    pub by_actor: bool,
    /// `Fault::consumer` is a class name, shown short (MassTransit).
    pub consumer_is_type: bool,
    /// Without a source queue the message is a poison message (NServiceBus: no `FailedQ`).
    pub poison_without_source: bool,
    /// The app may copy the message here from a wait queue itself (a ladder), making the
    /// newest death where it waited rather than where it failed.
    pub copies_from_wait: bool,
}

/// One convention: everything Warren knows of it, behind one interface.
pub(crate) struct Framework {
    pub convention: Convention,
    /// Its stable name (filters, `--json`, help text).
    pub name: &'static str,
    /// Its name for people ("Spring AMQP").
    pub label: &'static str,
    /// Whether a message follows it. Asked in the registry's order; the first yes wins.
    pub detect: fn(&Letter<'_>) -> bool,
    /// Its record of the message; `convention::read` then adds what every convention shares.
    pub read: fn(&Letter<'_>) -> Reading,
    /// What a queue's name alone says, in its naming.
    pub queue_name: fn(&str) -> Option<Named>,
    /// The id it gives the message itself, kept through retries and replays.
    pub id: fn(&DeadLetter) -> Option<(IdPlace, String)>,
    /// The verdict's words for its retries ("after 3 retries"), given the reading.
    pub retries_phrase: fn(&DeadLetter, &Reading) -> Option<String>,
    pub story: Story,
    pub replay: Replay,
}

/// A convention that says nothing beyond its name: the start of every module's value.
pub(crate) const BASE: Framework = Framework {
    convention: Convention::Unknown,
    name: "unknown",
    label: "unknown",
    detect: |_| false,
    read: |_| Reading::empty(Convention::Unknown),
    queue_name: |_| None,
    id: |_| None,
    retries_phrase: |_, _| None,
    story: Story {
        task_not_fault: false,
        by_actor: false,
        consumer_is_type: false,
        poison_without_source: false,
        copies_from_wait: false,
    },
    replay: Replay {
        strips: &[],
        counters: &[],
        zeroed: &[],
        reset: |_, _| {},
        deadline: None,
        target: to_source_queue,
        warn: |_, _| {},
        finish: |_, _, _, _, _| {},
        surviving: |_, _| None,
    },
};

/// The usual way back: the queue it failed in, through the default exchange (exactly that
/// queue); without one, nothing says where, and the plan says so.
pub(crate) fn to_source_queue(
    t: &Told<'_>,
    warnings: &mut Vec<ReplayWarning>,
) -> Option<ReplayTarget> {
    match t.source.queue.as_deref().filter(|q| !q.is_empty()) {
        Some(q) => Some(ReplayTarget::queue(q)),
        None => {
            warnings.push(ReplayWarning::UnknownOrigin);
            None
        }
    }
}

/// `name` ends in `suffix` after something: `orders_error`, not `_error`.
pub(crate) fn has_stem(name: &str, suffix: &str) -> bool {
    name.strip_suffix(suffix).is_some_and(|s| !s.is_empty())
}

/// "after 3 retries", "after 1 delivery".
pub(crate) fn after(n: i64, one: &str, many: &str) -> String {
    format!("after {}", plural(n, one, many))
}

pub(crate) fn plural(n: i64, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}
