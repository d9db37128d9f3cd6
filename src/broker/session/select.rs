//! The selected messages at the head of a queue, for an archive, a discard or a restore.

use std::collections::HashMap;

use crate::domain::identity;

use super::{
    Explained, Remembered, ReplaySpec, Session, SessionError, age_secs, explain_all, into_messages,
};

/// The selected messages at the head of a queue, for an archive, a discard or a restore.
#[derive(Clone, Debug, Default)]
pub struct Selected {
    pub messages: Vec<Explained>,
    /// Messages looked at.
    pub examined: u64,
    /// The queue's depth when it was read.
    pub depth: u64,
    /// Messages that matched the selection (before `--limit`).
    pub matched: u64,
    /// When Warren first saw each message looked at, by key (for `age:`).
    pub first_seen: HashMap<String, jiff::Timestamp>,
}

impl Session {
    /// Reads the head of `spec.queue` (up to the window; as a browse, nothing moves; a queue
    /// whose reads cost deliveries is read as `browse_with_cap` decides), keeping `body_cap`
    /// bytes of each body, and returns the messages `spec.selection` picks, at most `spec.limit`.
    pub async fn select(
        &self,
        spec: &ReplaySpec,
        body_cap: usize,
        remember: impl FnOnce(&[String]) -> Remembered,
    ) -> Result<Selected, SessionError> {
        let page = self
            .browse_with_cap(&spec.queue, spec.window.max(1), body_cap, spec.consent)
            .await?;
        let examined = page.messages.len() as u64;
        let depth = page.queue_depth_at_start.max(examined);
        let keys: Vec<String> = page.messages.iter().map(identity::message_key).collect();
        let memory = remember(&keys);
        let explained = explain_all(
            into_messages(page),
            &memory,
            &self.handle.target.settings.conventions,
        );
        let now = jiff::Timestamp::now();
        let mut out = Selected {
            examined,
            depth,
            ..Default::default()
        };
        for e in explained {
            let age = age_secs(&e, now);
            if let Some(t) = e.first_seen {
                out.first_seen.insert(e.key.clone(), t);
            }
            if !spec
                .selection
                .selects(&e.message, &e.explanation, &e.key, age)
            {
                continue;
            }
            out.matched += 1;
            if spec.limit.is_none_or(|l| (out.messages.len() as u64) < l) {
                out.messages.push(e);
            }
        }
        Ok(out)
    }
}
