//! Acknowledging DLQ deliveries: which ack frames settle which tags.

use std::collections::BTreeSet;

/// Settles DLQ deliveries with as few frames as possible: one `multiple` ack for a run of ready
/// tags below anything still held or in flight, single acks above. Never acks a tag twice (the
/// broker closes the channel for that) and never acks a held tag.
#[derive(Debug, Default)]
pub struct AckTracker {
    ready: BTreeSet<u64>,
    /// Received and not yet decided (being planned or awaiting a confirm).
    pending: BTreeSet<u64>,
    /// To be handed back at the end.
    held: BTreeSet<u64>,
    max_seen: u64,
}

/// One ack frame to send.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AckOp {
    pub tag: u64,
    pub multiple: bool,
}

impl AckTracker {
    pub fn received(&mut self, tag: u64) {
        self.pending.insert(tag);
        self.max_seen = self.max_seen.max(tag);
    }
    pub fn ready(&mut self, tag: u64) {
        self.pending.remove(&tag);
        self.ready.insert(tag);
    }
    pub fn hold(&mut self, tag: u64) {
        self.pending.remove(&tag);
        self.held.insert(tag);
    }
    pub fn held(&self) -> usize {
        self.held.len()
    }
    pub fn pending(&self) -> usize {
        self.pending.len()
    }
    /// Confirmed tags not yet acknowledged.
    pub fn ready_len(&self) -> usize {
        self.ready.len()
    }
    /// Confirmed tags not yet acknowledged, lowest first.
    pub fn ready_tags(&self) -> impl Iterator<Item = u64> + '_ {
        self.ready.iter().copied()
    }
    pub fn max_seen(&self) -> u64 {
        self.max_seen
    }
    /// Tags that are not yet acknowledged (held, pending or ready).
    pub fn unsettled(&self) -> usize {
        self.held.len() + self.pending.len() + self.ready.len()
    }

    /// The ack frames that settle the ready tags that can be settled well now. Tags above a
    /// pending one wait for it: confirms resolve in bursts and out of order, and acknowledging
    /// them one by one then would cost a frame each, where waiting lets one `multiple` ack cover
    /// the run. Tags above a held one can never be covered by a `multiple` ack (it would take the
    /// held message too), so those are acknowledged singly.
    pub fn flush(&mut self) -> Vec<AckOp> {
        self.flush_into(&mut Vec::new())
    }

    /// [`flush`](Self::flush), also appending every tag the frames settle to `settled`.
    pub fn flush_into(&mut self, settled: &mut Vec<u64>) -> Vec<AckOp> {
        let eligible: Vec<u64> = match self.pending.first() {
            Some(&low) => self.ready.range(..low).copied().collect(),
            None => self.ready.iter().copied().collect(),
        };
        let held_low = self.held.first().copied();
        let mut ops = Vec::new();
        let (covered, single): (Vec<u64>, Vec<u64>) = eligible
            .iter()
            .partition(|&&t| held_low.is_none_or(|h| t < h));
        if let Some(&top) = covered.last() {
            ops.push(AckOp {
                tag: top,
                multiple: true,
            });
        }
        ops.extend(single.iter().map(|&tag| AckOp {
            tag,
            multiple: false,
        }));
        for t in &eligible {
            self.ready.remove(t);
        }
        settled.extend(eligible);
        ops
    }
}
