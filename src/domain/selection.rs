//! Which messages a replay (or the TUI) picks: all, explicit messages picked in a browse, one
//! failure group, or a filter query. Shared by `warren replay` and the TUI so both select the
//! same messages for the same words.

use std::collections::HashSet;

use super::explain::Explanation;
use super::filter::{Filter, Subject};
use super::message::DeadLetter;

#[derive(Clone, Debug, Default)]
pub enum Selection {
    /// Everything the queue held when the replay started.
    #[default]
    All,
    /// Messages picked in a browse, by `identity::message_key`.
    Keys(HashSet<String>),
    /// One failure group, by fingerprint key.
    Group(String),
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
            Selection::Group(fp) => exp.fingerprint.key == *fp,
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
            Selection::Group(fp) => format!("group {fp}"),
            Selection::Filter(f) => format!("filter {f}"),
            Selection::AllOf(all) => all
                .iter()
                .map(Selection::describe)
                .collect::<Vec<_>>()
                .join(" and "),
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
        verdict: &exp.verdict,
        exception_type: fault.and_then(|f| f.exception_type.as_deref()),
        exception_message: fault.and_then(|f| f.message.as_deref()),
        reasons: exp
            .deaths
            .entries
            .iter()
            .filter_map(|d| d.reason.as_ref().map(|r| r.as_str()))
            .collect(),
        origin_queue: exp.source.queue.as_deref(),
        message_type: exp
            .message_type
            .as_deref()
            .or(msg.properties.kind.as_deref()),
        convention: exp.convention.as_str(),
        headers: &msg.headers,
        body: &msg.body,
        age_secs,
    }
}
