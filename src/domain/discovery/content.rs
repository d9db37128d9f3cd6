//! Dead-letter queues known by what their messages are, not by name or topology: Symfony
//! Messenger's failure transport is a queue of the user's naming that nothing dead-letters into
//! (the worker publishes there). Which queues are worth a look at their head message, and what
//! that message says, are decided here; the broker layer reads the one message.

use super::classify::{Discovery, DlqInfo, DlqKind};
use super::settings::{PolicyIndex, effective_settings};
use super::topology::Topology;
use crate::domain::convention::Convention;
use crate::domain::features::QueueType;
use crate::domain::message::DeadLetter;

/// Most queues looked into per vhost and discovery.
pub const MAX_LOOKS: usize = 8;

/// The queues whose head message may say they are a failure transport: classic queues that
/// discovery did not take for dead-letter queues, holding ready messages, that are not
/// auto-delete, without a dead-letter exchange of their own, in no retry loop and no delay queue (no message TTL, no `x-expires`: a
/// Symfony delay queue is never a DLQ). Reading the head of a classic queue with a requeue
/// puts it back in its place; quorum queues (a read costs a delivery) and streams are left out.
pub fn candidates(topology: &Topology, found: &Discovery) -> Vec<String> {
    let policies = PolicyIndex::new(&topology.policies);
    let others: std::collections::HashSet<&str> =
        found.other_queues.iter().map(|o| o.name.as_str()).collect();
    let mut out = Vec::new();
    // The cheap tests first: most queues of a large vhost are empty or consumed.
    let worth = topology.queues.iter().filter(|q| {
        q.messages_ready.unwrap_or(0) > 0
            && q.consumers.unwrap_or(0) == 0
            && q.queue_type == QueueType::Classic
            && !q.auto_delete
            && others.contains(q.name.as_str())
    });
    for q in worth {
        let policy = policies.definition_for(q);
        let s = effective_settings(q, policy);
        let expires = q.arguments.contains_key("x-expires")
            || policy.is_some_and(|p| p.contains_key("expires"));
        // A queue that dead-letters onwards is a work queue: a failure transport does not.
        if s.message_ttl_ms.is_none()
            && !expires
            && s.dead_letter_exchange.is_none()
            && found.retry_loop_of(&q.name).is_none()
        {
            out.push(q.name.clone());
        }
        if out.len() >= MAX_LOOKS {
            break;
        }
    }
    out
}

/// What the head message `dl` of queue `dl.queue` says the queue is: Symfony's failure
/// transport when the message carries `SentToFailureTransportStamp` and was sent here from
/// another queue (Symfony routes it with the failed queue's name; a replayed message waiting in
/// its work queue carries the stamp too, but is routed by that queue's own name).
pub fn convention_of(dl: &DeadLetter) -> Option<Convention> {
    let from_elsewhere = !dl.delivery.routing_key.is_empty() && dl.delivery.routing_key != dl.queue;
    (from_elsewhere && crate::domain::symfony::is_failure_message(dl))
        .then_some(Convention::Symfony)
}

impl Discovery {
    /// Lists the queue `name` among the dead-letter queues, found by its messages.
    pub fn found_by_content(&mut self, name: &str, convention: Convention) {
        let Some(i) = self.other_queues.iter().position(|q| q.name == name) else {
            return;
        };
        let q = self.other_queues.remove(i);
        self.dead_letter_queues
            .push(DlqInfo::from_other(q, DlqKind::Error, convention));
    }
}
