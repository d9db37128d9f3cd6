//! Where a replay sends one message, and what the operator is told about it first: the words
//! the replay plan (`replay`), the conventions (which decide per framework where their messages
//! go back to) and redirects share. Its own module, importing none of them, so that each of
//! those depends on it and not on the others.

use std::fmt;

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct ReplayTarget {
    pub exchange: String,
    pub routing_key: String,
    /// The queue the message should reach; `None` when only the broker's bindings can tell.
    pub expected_queue: Option<String>,
}

impl ReplayTarget {
    /// Straight to queue `q` through the default exchange, which reaches exactly that queue.
    pub(crate) fn queue(q: &str) -> ReplayTarget {
        ReplayTarget {
            exchange: String::new(),
            routing_key: q.to_string(),
            expected_queue: Some(q.to_string()),
        }
    }

    /// True when the target is the default exchange, which delivers to exactly one queue.
    pub fn is_direct(&self) -> bool {
        self.exchange.is_empty()
    }
}

impl fmt::Display for ReplayTarget {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.exchange.is_empty() {
            write!(f, "{} (default exchange)", self.routing_key)
        } else {
            write!(f, "exchange {} key \"{}\"", self.exchange, self.routing_key)?;
            if let Some(q) = &self.expected_queue {
                write!(f, " → {q}")?;
            }
            Ok(())
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ReplayWarning {
    /// A MassTransit `_skipped` message: the endpoint has no consumer for its type.
    Skipped { endpoint: Option<String> },
    /// The target is an exchange that may deliver to several queues.
    MayFanOut { exchange: String },
    /// An NServiceBus message without `NServiceBus.FailedQ`.
    PoisonWithoutFailedQ,
    /// Nothing says where the message came from, and no `--to` was given.
    UnknownOrigin,
    /// Warren replayed it before and it failed again.
    ReplayedBefore { count: i64 },
    /// The framework keeps its retry counter in the body, which a replay does not change: what
    /// is left of its limit is all it will give the message.
    RetryBudget(BodyBudget),
    /// EasyNetQ: the body is the error envelope, not the original message.
    BodyIsEnvelope,
    /// Attempts kept: the death and retry headers go out unchanged.
    AttemptsKept,
    /// The per-message TTL the broker removed on expiry is not put back.
    ExpirationNotRestored { ms: String },
    /// Symfony 5.4 drops a message carrying `SentToFailureTransportStamp` that fails all its
    /// retries again. `strippable`: the stamp is a header (JSON serializer), which
    /// `--strip-failure-stamp` removes; with the PhpSerializer it is in the body.
    SymfonyDropsOnFailure { strippable: bool },
}

impl fmt::Display for ReplayWarning {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ReplayWarning::Skipped { endpoint } => write!(
                f,
                "it was skipped: no consumer on {} handles its type, so replaying it there skips it again; deploy the consumer first or replay to another queue with --to",
                endpoint.as_deref().unwrap_or("its endpoint")
            ),
            ReplayWarning::MayFanOut { exchange } => write!(
                f,
                "exchange {exchange} may deliver it to more than one queue; check which queues its bindings reach, or replay to one queue with --to"
            ),
            ReplayWarning::PoisonWithoutFailedQ => f.write_str(
                "NServiceBus recorded no source queue (NServiceBus.FailedQ is missing, a poison message); choose a queue with --to",
            ),
            ReplayWarning::UnknownOrigin => f.write_str(
                "nothing records where it came from; choose a queue with --to",
            ),
            ReplayWarning::ReplayedBefore { count } => write!(
                f,
                "replayed {count} time{} before and failed again",
                if *count == 1 { "" } else { "s" }
            ),
            ReplayWarning::RetryBudget(b) => b.fmt(f),
            ReplayWarning::BodyIsEnvelope => f.write_str(
                "the body is EasyNetQ's error envelope, not the original message; a replay leaves it as it is and the consumer receives the envelope",
            ),
            ReplayWarning::AttemptsKept => f.write_str(
                "attempts kept: death and retry headers go out unchanged, so a consumer that counts them may reject it on arrival",
            ),
            ReplayWarning::ExpirationNotRestored { ms } => write!(
                f,
                "its per-message TTL of {ms} ms is not restored (it would expire again)"
            ),
            ReplayWarning::SymfonyDropsOnFailure { strippable: true } => f.write_str(
                "Symfony will drop it if it fails its retries again: it carries SentToFailureTransportStamp, and Symfony 5.4 never sends a message to the failure transport twice; --strip-failure-stamp removes the stamp so a second failure comes back",
            ),
            ReplayWarning::SymfonyDropsOnFailure { strippable: false } => f.write_str(
                "Symfony will drop it if it fails its retries again: it carries SentToFailureTransportStamp inside its PhpSerializer body, which a replay never changes, and Symfony 5.4 never sends a message to the failure transport twice",
            ),
        }
    }
}

/// What a framework that counts retries in the body still gives a replayed message: the count
/// goes out as it is, so only what is left of the limit (dramatiq: a failed delivery is retried
/// while `options.retries` is below `max_retries`, each retry counting one).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BodyBudget {
    pub framework: &'static str,
    /// The counter's place in the body, for people (`options.retries`).
    pub counter: &'static str,
    /// The limit's name (`max_retries`).
    pub limit_name: &'static str,
    /// The count the body holds (0 when it holds none); `None` when the body was cut before it.
    pub retries: Option<i64>,
    pub limit: BudgetLimit,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BudgetLimit {
    /// The message states its limit.
    Stated(i64),
    /// The message states no limit at all: retried for ever.
    Unlimited,
    /// The message states none: the worker's setting decides, which Warren cannot see; this is
    /// the framework's default.
    Default(i64),
}

impl BodyBudget {
    /// Retries left should the replayed delivery fail; `None` without limit or when the count
    /// is not known.
    pub fn left(&self) -> Option<i64> {
        match (self.limit, self.retries) {
            (BudgetLimit::Stated(m) | BudgetLimit::Default(m), Some(r)) => {
                Some(m.saturating_sub(r.max(0)).max(0))
            }
            _ => None,
        }
    }
}

impl fmt::Display for BodyBudget {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (fw, counter, name) = (self.framework, self.counter, self.limit_name);
        let times = |n: i64| format!("{n} more time{}", if n == 1 { "" } else { "s" });
        let untouched = "in the body, which a replay leaves untouched";
        let Some(r) = self.retries else {
            return write!(
                f,
                "{fw} keeps its retry count ({counter}) {untouched}, past the part read here: what is left of its {name} is not known; attempts are not reset"
            );
        };
        match (self.limit, self.left()) {
            (BudgetLimit::Stated(m), Some(0)) => write!(
                f,
                "{fw} will not retry it if it fails again: {counter} is {r} of {name} {m} ({untouched}); attempts are not reset"
            ),
            (BudgetLimit::Stated(m), Some(n)) => write!(
                f,
                "{fw} will retry it {} if it fails again: {counter} is {r} of {name} {m} ({untouched}); attempts are not reset",
                times(n)
            ),
            (BudgetLimit::Default(m), Some(0)) => write!(
                f,
                "{fw} will not retry it if it fails again, unless its actor allows more than {fw}'s default {name} of {m} (the message states none): {counter} is {r} {untouched}"
            ),
            (BudgetLimit::Default(m), Some(n)) => write!(
                f,
                "{fw} will retry it up to {m} − {r} = {} if it fails again ({fw}'s default {name}; the message states none, and its actor may set its own): {counter} is {r} {untouched}",
                times(n)
            ),
            (_, _) => write!(
                f,
                "{fw} retries it without limit ({name} is none): {counter} is {r} {untouched}"
            ),
        }
    }
}
