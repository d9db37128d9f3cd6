//! One dead letter, explained: which convention put it there, its death history, the fault a
//! framework recorded, where it came from, how often it was retried, a one-sentence verdict and a
//! grouping fingerprint. Everything the list, the detail pane, grouping and replay show starts here.

use jiff::Timestamp;

use super::convention::{self, Convention, Conventions, RetryLimit};
pub use super::convention::{Fault, Source};
use super::fingerprint::{self, Fingerprint};
use super::message::DeadLetter;
use super::verdict;
use super::xdeath::{self, DeathHistory};

/// The header Warren's replay increments; read here so a message that failed again after a replay
/// can say so.
pub const REPLAY_COUNT_HEADER: &str = "warren-replay-count";

#[derive(Clone, Debug, PartialEq)]
pub struct Explanation {
    pub convention: Convention,
    pub deaths: DeathHistory,
    pub fault: Option<Fault>,
    pub source: Source,
    /// The convention's retry counter (broker: the failing queue's death count).
    pub retries: Option<i64>,
    pub failed_at: Option<Timestamp>,
    pub skipped: bool,
    /// How many times Warren replayed it before (`warren-replay-count`, or the audit's count by
    /// its key when that is larger: see `explain_with`), 0 if never.
    pub replay_count: i64,
    /// What the message asks for: the message type, or the task or actor name.
    pub message_type: Option<String>,
    /// The framework's deadline, after which its worker discards the message unrun.
    pub deadline: Option<Timestamp>,
    /// A retry ladder's counter and error-text headers on the message (see `Reading`).
    pub counter_headers: Vec<String>,
    pub error_headers: Vec<String>,
    /// The retry limit the message itself states (see `Reading::retry_limit`).
    pub retry_limit: Option<RetryLimit>,
    pub verdict: String,
    pub fingerprint: Fingerprint,
}

/// Explains one dead letter with the built-in ladder header names (tests, snapshots without a
/// config); a session passes the configured ones to [`explain_with`].
pub fn explain(dl: &DeadLetter) -> Explanation {
    explain_with(dl, &Conventions::default(), 0)
}

/// Explains one dead letter, reading a team's ladder headers by `own`, that Warren's audit says it
/// replayed `audited_replays` times (found by its key): the replay count is the larger of that
/// and `warren-replay-count`, which is lost when a framework republishes the message without its
/// headers (dramatiq's own retries do). Pure and total: any header table gives an explanation.
/// The parts are read first and the verdict and fingerprint computed from them, so no
/// half-built value exists.
pub fn explain_with(dl: &DeadLetter, own: &Conventions, audited_replays: i64) -> Explanation {
    explain_parts(dl, own, audited_replays, true)
}

/// [`explain_with`] without the verdict and the fingerprint (left empty): what a replay plan
/// reads, for a run whose selection does not look at them (see `Selection::reads_story`). The
/// replay explains every message it takes, and those two are much of that cost.
pub fn explain_for_replay(dl: &DeadLetter, own: &Conventions, audited_replays: i64) -> Explanation {
    explain_parts(dl, own, audited_replays, false)
}

fn explain_parts(
    dl: &DeadLetter,
    own: &Conventions,
    audited_replays: i64,
    story: bool,
) -> Explanation {
    let mut deaths = xdeath::parse(&dl.headers);
    let reading = convention::read(dl, &deaths, own);
    deaths.copied = reading.deaths_copied && !deaths.is_empty();
    let replay_count = super::amqp10::carrier::warren_mark(&dl.headers, REPLAY_COUNT_HEADER)
        .and_then(|v| v.as_i64())
        .unwrap_or(0)
        .max(audited_replays)
        .max(0);
    let (verdict, fingerprint) = if story {
        (
            verdict::verdict(dl, &reading, &deaths, replay_count),
            fingerprint::fingerprint(dl, &reading, &deaths),
        )
    } else {
        (String::new(), Fingerprint::default())
    };
    Explanation {
        convention: reading.convention,
        deaths,
        fault: reading.fault,
        source: reading.source,
        retries: reading.retries,
        failed_at: reading.failed_at,
        skipped: reading.skipped,
        replay_count,
        message_type: reading.message_type,
        deadline: reading.deadline,
        counter_headers: reading.counter_headers,
        error_headers: reading.error_headers,
        retry_limit: reading.retry_limit,
        verdict,
        fingerprint,
    }
}
