//! What a session has read and found: the reads of queues whose reads cost deliveries (kept so
//! the plan, the dry run, the modal and the list after a replay use one copy), one lock per
//! queue so two reads never overlap, the read ledger's store, when depths were last written and
//! which queues the last discovery found to be dead-letter queues. No broker IO.

use std::collections::{HashMap, HashSet};

use crate::broker::browse::BrowsePage;
use crate::domain::identity;
use crate::store::Store;

/// What this session read from one queue whose reads cost deliveries: the one copy the plan,
/// the dry run, the replay modal and the list after a replay are computed from.
#[derive(Clone, Debug)]
pub(super) struct KeptRead {
    pub(super) page: std::sync::Arc<BrowsePage>,
    pub(super) body_cap: usize,
}

pub(crate) struct ReadCache {
    /// Reads of queues whose reads cost deliveries, by queue (see [`KeptRead`]).
    reads: std::sync::Mutex<HashMap<String, KeptRead>>,
    /// One lock per queue: two reads of one queue never overlap (they would split it between
    /// two consumers, and both could spend deliveries before either is kept).
    read_locks: std::sync::Mutex<HashMap<String, std::sync::Arc<tokio::sync::Mutex<()>>>>,
    /// Warren's store for the read ledger, opened on first need; `Err` once it failed.
    ledger: std::sync::Mutex<Option<Result<Store, String>>>,
    /// When depths were last written to the store (seconds; see [`ReadCache::depths_due`]).
    depths_written: std::sync::atomic::AtomicI64,
    /// The dead-letter queues the last discovery found (by vhost and name: a discovery of
    /// every vhost names several): a depth refresh records only theirs.
    dlq_names: std::sync::Mutex<HashSet<(String, String)>>,
}

impl Default for ReadCache {
    fn default() -> ReadCache {
        ReadCache {
            reads: Default::default(),
            read_locks: Default::default(),
            ledger: Default::default(),
            depths_written: std::sync::atomic::AtomicI64::new(i64::MIN),
            dlq_names: Default::default(),
        }
    }
}

impl ReadCache {
    /// Messages that left the queue (replayed) are dropped from what this session read, so the
    /// list after a replay is computed from the read already made rather than by reading again.
    pub fn forget_moved(&self, queue: &str, moved_keys: &crate::local::spool::Spool) {
        let mut reads = self.reads.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(k) = reads.get_mut(queue) {
            // Only where a read is kept, and the set is of the page's keys, read against the
            // moved ones one at a time: a set of a million moved ids is tens of MiB.
            let on_page: HashSet<String> =
                k.page.messages.iter().map(identity::message_key).collect();
            let mut moved: HashSet<String> = HashSet::new();
            let _ = moved_keys.for_each(|key| {
                if on_page.contains(&key) {
                    moved.insert(key);
                }
            });
            let mut page = (*k.page).clone();
            page.messages
                .retain(|m| !moved.contains(&identity::message_key(m)));
            page.queue_depth_at_start = page.queue_depth_at_start.saturating_sub(moved_keys.len());
            k.page = std::sync::Arc::new(page);
        }
    }
    pub(super) fn read_lock(&self, queue: &str) -> std::sync::Arc<tokio::sync::Mutex<()>> {
        let mut locks = self.read_locks.lock().unwrap_or_else(|e| e.into_inner());
        locks.entry(queue.to_string()).or_default().clone()
    }
    pub(super) fn kept(&self, queue: &str) -> Option<KeptRead> {
        let reads = self.reads.lock().unwrap_or_else(|e| e.into_inner());
        reads.get(queue).cloned()
    }
    pub(super) fn keep(&self, queue: &str, read: KeptRead) {
        let mut reads = self.reads.lock().unwrap_or_else(|e| e.into_inner());
        reads.insert(queue.to_string(), read);
    }
    /// Runs `f` on the ledger's store, opening it on first use.
    pub(super) fn with_ledger<T>(
        &self,
        f: impl FnOnce(&Store) -> crate::store::Result<T>,
    ) -> Result<T, String> {
        let mut slot = self.ledger.lock().unwrap_or_else(|e| e.into_inner());
        if slot.is_none() {
            *slot = Some(Store::open_default().map_err(|e| e.to_string()));
        }
        match slot.as_ref() {
            Some(Ok(store)) => f(store).map_err(|e| e.to_string()),
            Some(Err(e)) => Err(e.clone()),
            None => Err("Warren's store is not open".to_string()),
        }
    }

    /// Keeps which queues the discoveries found to be dead-letter queues.
    pub(super) fn found_dlqs(&self, found: &[crate::domain::discovery::Discovery]) {
        let names = found
            .iter()
            .flat_map(|d| &d.dead_letter_queues)
            .map(|q| (q.vhost.clone(), q.name.clone()))
            .collect();
        *self.dlq_names.lock().unwrap_or_else(|e| e.into_inner()) = names;
    }

    /// Whether the last discovery found `queue` of `vhost` to be a dead-letter queue.
    pub(super) fn is_dlq(&self, vhost: &str, queue: &str) -> bool {
        self.dlq_names
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .contains(&(vhost.to_string(), queue.to_string()))
    }

    /// Whether a depth refresh at `now` should be written to the store: one per sample gap.
    pub(super) fn depths_due(&self, now: jiff::Timestamp) -> bool {
        let last = self
            .depths_written
            .load(std::sync::atomic::Ordering::Relaxed);
        now.as_second().saturating_sub(last) >= crate::domain::urgency::SAMPLE_GAP_SECS
    }

    pub(super) fn depths_recorded(&self, now: jiff::Timestamp) {
        self.depths_written
            .store(now.as_second(), std::sync::atomic::Ordering::Relaxed);
    }
}
