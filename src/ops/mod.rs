//! One home for each operation, below both front ends. The CLI (`crate::cli`) and the TUI's
//! worker (`crate::worker`) only ask the user and render: each operation here takes a typed
//! request and owns, in this order, the rights (`rights`), the consent, the plan, the
//! go-ahead, the audit's start before the first message moves (`record`), the run, and the
//! audit's finish. A guarantee built here holds on every path.
//!
//! An operation is prepared (`prepare`: everything up to the audit's start), then run by the
//! front end (which owns the signals and the progress display), then finished (the record).

pub mod archive;
mod canary;
mod edit;
#[cfg(test)]
mod fake;
#[cfg(test)]
mod fake_runs;
pub mod note;
pub mod ports;
pub mod protect;
pub(crate) mod read;
pub mod record;
pub mod redirect;
pub mod replay;
pub mod restore;
pub mod rights;
#[cfg(test)]
mod tests_archive;
#[cfg(test)]
mod tests_notes;
#[cfg(test)]
mod tests_ports;
#[cfg(test)]
mod tests_replay;
#[cfg(test)]
mod tests_restore;

use crate::broker::audit::Consent;
use crate::domain::run::RunKind;

pub use crate::domain::refusal::Refusal;

/// Why an operation stopped before anything moved.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Stop {
    /// Refused (read-only, a refused target, nothing selected, the store): nothing moved.
    /// Front ends decide by the variant and show its words.
    Refused(Refusal),
    /// The command cannot go on as asked (no terminal to ask on, a snapshot file exists).
    Usage(String),
    /// The broker could not be reached or answered with an error.
    Broker(String),
    /// Reading `queue` again would spend quorum deliveries and nobody accepted the cost.
    ReadCost { queue: String, text: String },
    /// A question this front end could not ask in the middle of the work (the TUI's worker):
    /// nothing changed; the front end asks it and tries again with the answer.
    Unanswered(String),
    /// The operator said no.
    Declined,
    /// A dry run: the plan was shown, nothing moved.
    DryRun,
}

impl Stop {
    /// A refusal: typed, or words another layer wrote (`Refusal::Said`).
    pub fn refused(r: impl Into<Refusal>) -> Stop {
        Stop::Refused(r.into())
    }
}

/// What an operation asks of its front end: the CLI asks on the terminal and prints; the TUI's
/// worker answers from what the operator already confirmed in a modal and sends reports.
pub trait Front: Send {
    /// The plan is known: show it (the CLI prints it; the TUI's modal showed it already).
    fn plan(&mut self, plan: Plan<'_>);
    /// The go-ahead for a run of `kind` taking `count` messages (`typed`: the operator types
    /// the count; `RunKind::verb` and `undone` say it). `Err`: it cannot be asked (no
    /// terminal), with what to do instead.
    fn go_ahead(&mut self, count: u64, kind: RunKind, typed: bool) -> Result<bool, String>;
    /// May Warren create the broker's audit stream? `configured`: the context's
    /// `create_audit_stream`, when set.
    fn audit_consent(&mut self, configured: Option<bool>) -> Consent<'_>;
    /// Reading `queue` again would spend quorum deliveries (`cost` says how many): may it?
    /// `Err`: it cannot be asked, with what to do instead.
    fn read_again(&mut self, queue: &str, cost: &str) -> Result<bool, String>;
    /// May Warren create the archive stream `what` describes? `Err`: it cannot be asked.
    fn create_archive(&mut self, what: &str) -> Result<bool, String>;
    /// A line the operator should read (a warning, what a step did).
    fn say(&mut self, text: &str);
    /// The run is on the record and about to move its first message.
    fn started(&mut self, run_id: &str, on_broker: bool);
    /// A plan's long read goes on: `read` messages of `what` so far (a restore looks through
    /// the whole archive, a page at a time). Told as it goes; nothing is asked.
    fn reading(&mut self, what: &str, read: u64) {
        let _ = (what, read);
    }
    /// Edit, then replay: the operator edits `document` (`problem`: why the last save could
    /// not be read, with its line). `Ok(None)`: they gave up; `Err`: no editor can be opened
    /// here, with what to do instead.
    fn edit(&mut self, document: &str, problem: Option<&str>) -> Result<Option<String>, String> {
        let _ = (document, problem);
        Err("no editor can be opened here".into())
    }
}

/// What a front end asks before a run moves anything, decided here with the plan: the CLI asks
/// it on the terminal, the TUI's modal shows it, and neither decides what to ask.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Questions {
    /// The operator types the count, not only a yes (`domain::confirm::typed_count`).
    pub typed_count: bool,
}

impl Questions {
    /// What is asked before a run of `kind` moves `count` messages.
    pub fn before(kind: RunKind, count: u64) -> Questions {
        Questions {
            typed_count: crate::domain::confirm::typed_count(kind, count),
        }
    }
}

/// A plan as a front end shows it.
pub enum Plan<'a> {
    Replay {
        preview: &'a crate::broker::session::Preview,
        spec: &'a crate::broker::session::ReplaySpec,
        dry_run: bool,
        /// The canary, when the replay has one.
        canary: Option<&'a crate::domain::canary::CanaryPlan>,
        /// What the go-ahead will ask.
        asks: Questions,
    },
    Archive(&'a archive::Planned),
    Restore(&'a restore::Planned),
}

impl Plan<'_> {
    /// What the go-ahead after this plan asks.
    pub fn asks(&self) -> Questions {
        match self {
            Plan::Replay { asks, .. } => *asks,
            Plan::Archive(p) => p.asks,
            Plan::Restore(p) => p.asks,
        }
    }
}

/// Records first-seen times and reads earlier replays for a look at `queue` (best effort:
/// without the store, "dead since" is unknown and only Warren's headers say a message was
/// replayed before). It opens the store itself: a look runs across awaits, and a store is not
/// shared between threads.
pub(crate) fn remember<P: ports::RecordPort>(
    s: &P,
    queue: &str,
    keys: &[String],
) -> crate::broker::session::Remembered {
    let store = crate::store::Store::open_default().map_err(|e| e.to_string());
    remember_in(s, store.as_ref(), queue, keys)
}

/// [`remember`] in a store already opened (or why it could not be), as a page read in chunks
/// does once for all of them.
pub(crate) fn remember_in<P: ports::RecordPort>(
    s: &P,
    store: Result<&crate::store::Store, &String>,
    queue: &str,
    keys: &[String],
) -> crate::broker::session::Remembered {
    match store {
        Ok(st) => recall(s, st, queue, keys, jiff::Timestamp::now()).unwrap_or_else(|e| {
            tracing::warn!("recording first-seen times failed: {e}");
            Default::default()
        }),
        Err(e) => {
            tracing::warn!("{e}");
            Default::default()
        }
    }
}

/// What Warren remembers of the messages with `keys` in `queue`, through the memory port `m`:
/// `now` is recorded as the first-seen time of those not seen before, and the audited replays
/// in `p`'s context and vhost that moved each are counted.
pub(crate) fn recall<P: ports::RecordPort, M: ports::MemoryPort>(
    p: &P,
    m: &M,
    queue: &str,
    keys: &[String],
    now: jiff::Timestamp,
) -> Result<crate::broker::session::Remembered, String> {
    // Only an id links a message to its replays: a queue of content hashes costs no scan.
    let ids: Vec<String> = keys
        .iter()
        .filter(|k| crate::domain::identity::is_id_key(k))
        .cloned()
        .collect();
    let who = p.operator();
    Ok(crate::broker::session::Remembered {
        first_seen: m.seen(&p.memory_key(), queue, keys, now)?,
        replays: m.replays(&who.context, &who.vhost, &ids)?,
    })
}
