//! What Warren remembers of messages (first seen, audited replays) and of groups (notes), and
//! messages explained with it.

use std::collections::HashMap;

use crate::domain::convention::Conventions;
use crate::domain::explain::{self, Explanation};
use crate::domain::grouping::GroupNote;
use crate::domain::identity;
use crate::domain::message::DeadLetter;
use crate::store::Store;

use super::{Session, SessionError};

/// A message with its explanation and what Warren remembers of it.
#[derive(Clone, Debug)]
pub struct Explained {
    pub message: DeadLetter,
    pub explanation: Explanation,
    pub key: String,
    pub first_seen: Option<jiff::Timestamp>,
}

impl Session {
    /// Records `now` as the first-seen time of the messages with `keys` in `queue` not seen
    /// before, and reads what the store remembers of them: first-seen times and how many
    /// audited replays in this context and vhost moved each.
    pub fn remember(
        &self,
        st: &Store,
        queue: &str,
        keys: &[String],
        now: jiff::Timestamp,
    ) -> crate::store::Result<Remembered> {
        // Only an id links a message to its replays: a queue of content hashes costs no scan.
        let ids: Vec<String> = keys
            .iter()
            .filter(|k| identity::is_id_key(k))
            .cloned()
            .collect();
        Ok(Remembered {
            first_seen: st.record_seen(&self.memory_key(), queue, keys, now)?,
            replays: st.replay_counts(&self.target.context, self.vhost(), &ids)?,
        })
    }

    /// Keeps `note` as the note of its group (an empty text removes it) in Warren's store and
    /// mirrors it to the broker's audit stream: the one way a note is set, from `warren groups
    /// --note` and the TUI alike. Returns whether a note is now kept and, when the broker's copy
    /// could not be written, what to tell the operator (the note is then only local).
    pub async fn set_group_note(
        &self,
        note: &GroupNote,
    ) -> Result<(bool, Option<String>), SessionError> {
        // The store is opened and closed before anything is awaited (it is not `Sync`).
        let kept = Store::open_default()
            .and_then(|st| st.set_group_note(&self.memory_key(), note))
            .map_err(|e| SessionError::Refused(format!("the note was not kept: {e}")))?;
        let warning = self
            .mirror_group_note(note)
            .await
            .err()
            .map(|e| e.to_string());
        Ok((kept, warning))
    }

    /// The notes on `queue`'s groups in this context and vhost.
    pub fn group_notes(&self, st: &Store, queue: &str) -> crate::store::Result<Vec<GroupNote>> {
        st.group_notes(&self.memory_key(), queue)
    }

    /// Forgets the notes whose group a look at the whole queue found gone.
    pub fn forget_group_notes(
        &self,
        st: &Store,
        gone: &[&GroupNote],
    ) -> crate::store::Result<usize> {
        st.forget_group_notes(&self.memory_key(), gone)
    }

    /// Appends a group note to the broker's audit stream (kind `note`, event `set`, or
    /// `forget` for an empty text), so the rota sees it in `warren audit`. The config decides,
    /// as for every audit entry, and no one is asked (the TUI cannot): the stream is created
    /// only with `create_audit_stream = true`. A read-only session, or a context with the
    /// stream turned off, publishes nothing: the note stays local and that is no failure.
    /// `Err` says why the broker's copy was not written.
    pub async fn mirror_group_note(&self, note: &GroupNote) -> Result<(), SessionError> {
        use crate::broker::audit::{BrokerRecord, Consent, configured_consent, new_run_id};
        if self.target.read_only || self.target.audit.stream.is_none() {
            return Ok(());
        }
        let consent = match configured_consent(self, false) {
            Some(true) => Consent::Create,
            _ => Consent::Refuse,
        };
        let record = crate::store::NoteRecord {
            at: note.at,
            author: note.author.clone(),
            broker_user: self.whoami.name.clone(),
            context: self.target.context.clone(),
            vhost: self.vhost().to_string(),
            queue: note.queue.clone(),
            by: note.by.as_str().to_string(),
            key: note.key.clone(),
            text: note.text.clone(),
        };
        let event = if note.text.is_empty() {
            "forget"
        } else {
            "set"
        };
        let mut broker = BrokerRecord::open(self, consent).await;
        match broker
            .append("note", event, &new_run_id(note.at), &record)
            .await
        {
            None => Ok(()),
            Some(why) => Err(SessionError::Refused(format!(
                "{why}; the note is kept on this machine only"
            ))),
        }
    }
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
