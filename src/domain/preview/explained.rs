//! Messages explained with what Warren remembers of them (first seen, audited replays): what
//! is remembered is read and written through the memory port (`ops::recall`, `ops::note`).

use std::collections::HashMap;

use crate::domain::convention::Conventions;
use crate::domain::explain::{self, Explanation};
use crate::domain::identity;
use crate::domain::message::DeadLetter;

/// A message with its explanation and what Warren remembers of it.
#[derive(Clone, Debug)]
pub struct Explained {
    pub message: DeadLetter,
    pub explanation: Explanation,
    pub key: String,
    pub first_seen: Option<jiff::Timestamp>,
}

/// Explains messages and records when Warren first saw them.
pub fn explain_all(
    messages: Vec<DeadLetter>,
    memory: &Remembered,
    own: &Conventions,
) -> Vec<Explained> {
    messages
        .into_iter()
        .map(|m| {
            let key = identity::message_key(&m);
            let explanation = explain::explain_with(&m, own, memory.replays_of(&key));
            let first_seen = memory.first_seen.get(&key).copied();
            Explained {
                message: m,
                explanation,
                key,
                first_seen,
            }
        })
        .collect()
}

/// What Warren's store remembers about messages, by key.
#[derive(Clone, Debug, Default)]
pub struct Remembered {
    /// When Warren first saw each message in its queue ("dead since").
    pub first_seen: HashMap<String, jiff::Timestamp>,
    /// How many audited replays moved each message (see `Store::replay_counts`).
    pub replays: HashMap<String, i64>,
}

impl Remembered {
    /// The audited replays of the message with `key`: only an id key links (two messages with
    /// the same content hash may be two messages).
    pub fn replays_of(&self, key: &str) -> i64 {
        if identity::is_id_key(key) {
            self.replays.get(key).copied().unwrap_or(0)
        } else {
            0
        }
    }
}

/// When the message reached its DLQ, by the one rule (`domain::arrival`).
pub fn arrival(e: &Explained) -> crate::domain::arrival::Arrival {
    crate::domain::arrival::Arrival::of(
        &e.explanation.deaths,
        e.explanation.failed_at,
        e.first_seen,
    )
}

/// Age for the filter language and the sort (see [`arrival`]).
pub fn age_secs(e: &Explained, now: jiff::Timestamp) -> Option<u64> {
    arrival(e).age_secs(now)
}

/// The time a message is dated by (see [`arrival`]).
pub fn dead_since(e: &Explained) -> Option<jiff::Timestamp> {
    arrival(e).since()
}
