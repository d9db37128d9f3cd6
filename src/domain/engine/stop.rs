//! Why a replay ended, and how that reads to the user.

/// Why the run ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum StopReason {
    /// Went through everything the queue held when the replay started.
    ReachedStartDepth,
    /// The broker said the DLQ holds no ready message.
    QueueEmpty,
    LimitReached,
    Cancelled,
    /// The hold-back window filled: more matching messages may lie further down.
    WindowFull {
        window: usize,
    },
    /// Messages the broker returned or refused, held to go back to the DLQ in order, filled the
    /// consumer's prefetch: the broker sends no more, so the run stops (a target that stopped
    /// routing mid-run).
    RefusedFillPrefetch {
        held: usize,
        refused: u64,
    },
    /// A quorum message came close to its delivery limit; returning more would risk losing it.
    QuorumSafety(String),
    /// The connection or a channel failed.
    ConnectionLost(String),
    /// Nothing was delivered for a while although the broker says the queue holds messages.
    Stalled {
        idle_secs: u64,
        ready: u64,
    },
    /// The broker did not answer a request in time (a frozen node, a partition).
    NoAnswer(String),
    /// Publishes were not confirmed in time.
    NoConfirm {
        secs: u64,
        unconfirmed: u64,
    },
    /// The broker blocked publishing (`connection.blocked`, a resource alarm) for too long.
    Blocked {
        secs: u64,
        reason: String,
    },
    /// `--max-backlog`: the run waited for the target's backlog, which did not go down for
    /// `secs` (its consumer is gone or stuck).
    BacklogStalled {
        queue: String,
        ready: u64,
        max: u64,
        secs: u64,
    },
}

impl StopReason {
    /// A stop that is an error of the broker or the connection, not a decision of the run.
    pub fn is_fault(&self) -> bool {
        matches!(
            self,
            StopReason::ConnectionLost(_)
                | StopReason::Stalled { .. }
                | StopReason::NoAnswer(_)
                | StopReason::NoConfirm { .. }
                | StopReason::Blocked { .. }
        )
    }
    /// The run went as far as it was asked to.
    pub fn is_finished(&self) -> bool {
        matches!(
            self,
            StopReason::ReachedStartDepth | StopReason::QueueEmpty | StopReason::LimitReached
        )
    }
}

impl std::fmt::Display for StopReason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            StopReason::ReachedStartDepth => {
                f.write_str("went through every message the queue held at the start")
            }
            StopReason::QueueEmpty => f.write_str("the queue is empty"),
            StopReason::LimitReached => f.write_str("the limit was reached"),
            StopReason::Cancelled => {
                f.write_str("cancelled; in-flight messages were settled, the rest untouched")
            }
            StopReason::WindowFull { window } => write!(
                f,
                "held back {window} unselected messages (the window); more matching messages may lie further down — raise --window or replay again"
            ),
            StopReason::RefusedFillPrefetch { held, refused } => write!(
                f,
                "{refused} published message(s) came back returned or refused by the broker (see problems); with the others held to go back to the DLQ in order they fill the consumer's prefetch ({held}), so the broker sends no more: stopped — fix the target's routing and replay again"
            ),
            StopReason::QuorumSafety(why) => write!(f, "stopped for quorum safety: {why}"),
            StopReason::ConnectionLost(why) => write!(f, "the connection was lost: {why}"),
            StopReason::Stalled { idle_secs, ready } => write!(
                f,
                "no delivery for {idle_secs}s while the queue holds {ready} ready message(s) (another consumer? the broker stalled?); stopped"
            ),
            StopReason::NoAnswer(why) => write!(f, "the broker stopped answering: {why}"),
            StopReason::NoConfirm { secs, unconfirmed } => write!(
                f,
                "{unconfirmed} publish(es) were not confirmed within {secs}s (target overloaded or node unresponsive); stopped"
            ),
            StopReason::Blocked { secs, reason } => write!(
                f,
                "the broker blocked publishing for {secs}s ({reason}); stopped — clear the alarm and replay again"
            ),
            StopReason::BacklogStalled {
                queue,
                ready,
                max,
                secs,
            } => write!(
                f,
                "waited for {queue} to hold fewer than {max} ready messages, but its {ready} did not go down for {secs}s (is its consumer running?); stopped — the rest is still in the DLQ"
            ),
        }
    }
}
