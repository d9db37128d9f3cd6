//! Which messages a replay (or the TUI) picks: all, explicit messages picked in a browse, one
//! failure group, or a filter query. Shared by `warren replay` and the TUI so both select the
//! same messages for the same words.

use std::collections::HashSet;

use super::explain::Explanation;
use super::filter::{Filter, Subject};
use super::grouping::{self, GroupBy, WaitQueues};
use super::message::DeadLetter;

#[derive(Clone, Debug, Default)]
pub enum Selection {
    /// Everything the queue held when the replay started.
    #[default]
    All,
    /// Messages picked in a browse, by `identity::message_key`.
    Keys(HashSet<String>),
    /// One group (see `domain::grouping`): by default a failure fingerprint.
    Group(GroupChoice),
    /// A filter query.
    Filter(Filter),
    /// Several conditions that must all hold (e.g. `--group` and `--filter` together).
    AllOf(Vec<Selection>),
}

impl Selection {
    /// Whether `msg` is selected. `key` is its `identity::message_key`, `age_secs` how long ago
    /// it died as far as Warren knows (first seen, else first death).
    pub fn selects(
        &self,
        msg: &DeadLetter,
        exp: &Explanation,
        key: &str,
        age_secs: Option<u64>,
    ) -> bool {
        match self {
            Selection::All => true,
            Selection::Keys(keys) => keys.contains(key),
            Selection::Group(g) => g.selects(msg, exp),
            Selection::Filter(f) => f.matches(&subject(msg, exp, age_secs)),
            Selection::AllOf(all) => all.iter().all(|s| s.selects(msg, exp, key, age_secs)),
        }
    }

    /// Whether choosing by this selection reads a message's verdict or fingerprint (a group,
    /// a filter); "all" and picked keys do not.
    pub fn reads_story(&self) -> bool {
        match self {
            Selection::All | Selection::Keys(_) => false,
            Selection::Group(_) | Selection::Filter(_) => true,
            Selection::AllOf(all) => all.iter().any(Selection::reads_story),
        }
    }

    /// A short description for the audit record and the plan.
    pub fn describe(&self) -> String {
        match self {
            Selection::All => "all".into(),
            Selection::Keys(k) => format!("{} picked messages", k.len()),
            Selection::Group(g) => g.describe(),
            Selection::Filter(f) => format!("filter {f}"),
            Selection::AllOf(all) => all
                .iter()
                .map(Selection::describe)
                .collect::<Vec<_>>()
                .join(" and "),
        }
    }
}

/// One group of one grouping mode, named by its key or its value (`GroupKey::named`).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct GroupChoice {
    pub by: GroupBy,
    pub name: String,
    /// For the endpoint mode: where a replay goes on to past a wait queue.
    pub waits: WaitQueues,
}

impl GroupChoice {
    /// A failure group by its fingerprint, as `--group FINGERPRINT` always meant.
    pub fn fingerprint(key: impl Into<String>) -> GroupChoice {
        GroupChoice {
            by: GroupBy::Fingerprint,
            name: key.into(),
            waits: WaitQueues::default(),
        }
    }

    pub fn selects(&self, msg: &DeadLetter, exp: &Explanation) -> bool {
        match self.by {
            // The common case without building a key.
            GroupBy::Fingerprint => {
                exp.fingerprint.key == self.name || exp.fingerprint.summary == self.name
            }
            by => grouping::group_key(by, msg, exp, &self.waits).named(&self.name),
        }
    }

    /// "group 1a2b…" for a fingerprint (as the audit always wrote it), "group exception X"
    /// for the other modes.
    pub fn describe(&self) -> String {
        match self.by {
            GroupBy::Fingerprint => format!("group {}", self.name),
            by => format!("group {by} {}", self.name),
        }
    }

    /// What the audit records as the group: the fingerprint alone, else "by:name".
    pub fn audit_label(&self) -> String {
        match self.by {
            GroupBy::Fingerprint => self.name.clone(),
            by => format!("{by}:{}", self.name),
        }
    }
}

/// The filter language's view of a message.
pub fn subject<'a>(
    msg: &'a DeadLetter,
    exp: &'a Explanation,
    age_secs: Option<u64>,
) -> Subject<'a> {
    let fault = exp.fault.as_ref();
    Subject {
        verdict: std::borrow::Cow::Borrowed(&exp.verdict),
        exception_type: fault.and_then(|f| f.exception_type.as_deref()),
        exception_message: fault.and_then(|f| f.message.as_deref()),
        reasons: exp
            .deaths
            .entries
            .iter()
            .filter_map(|d| d.reason.as_ref().map(|r| r.as_str()))
            .collect(),
        origin_queue: exp.source.queue.as_deref(),
        message_type: super::brief::message_type(msg, exp),
        convention: exp.convention.as_str(),
        headers: &msg.headers,
        body: &msg.body,
        age_secs,
    }
}
