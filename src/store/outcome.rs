//! A run's outcome written into the local audit when the run ends: the row `begin_operation`
//! started, with every moved id read from the run's spool (`local::spool`) one at a time, tried
//! again while the store is locked or full, and kept in a pending file beside the store
//! (`pending`) when it still refuses. `MemoryPort::finish_run` (`ops::ports`) is this for
//! `Store`; `ops::record` is its one caller.

use std::time::{Duration, Instant};

use super::{AuditOutcome, Store, StoreError};
use crate::local::spool::Spool;

/// How long a run's outcome keeps trying a store that is locked by another process (each try
/// also waits the store's busy timeout) or full, before it is kept in a pending file instead.
const OUTCOME_PATIENCE: Duration = Duration::from_secs(15);

/// The pause between two tries.
const OUTCOME_RETRY: Duration = Duration::from_millis(500);

/// Writes how a run ended in the local audit (`store`'s record `id`), with every key of
/// `moved` after `out.message_ids`, read from the spool one at a time. Returns what to tell
/// the operator: a record not completed, ids that could not be read back.
///
/// A store locked or full is tried again for up to `OUTCOME_PATIENCE` (this blocks the calling
/// thread, as every store write does; it happens only when the store refuses). If it still
/// refuses, the outcome and its ids are kept in a pending file beside the store, which the
/// next open writes in (`Store::complete_pending`), and that is said.
pub fn record_outcome(store: &Store, id: i64, out: &AuditOutcome, moved: &Spool) -> Vec<String> {
    let mut notes = Vec::new();
    let deadline = Instant::now() + OUTCOME_PATIENCE;
    let (written, unread) = loop {
        let mut unread = None;
        let written = store.finish_replay_with(id, out, |put| {
            unread = moved.for_each(put).err();
        });
        match written {
            Err(e) if e.may_pass() && Instant::now() < deadline => {
                tracing::warn!("audit record #{id}: {e}; trying again");
                std::thread::sleep(OUTCOME_RETRY);
            }
            written => break (written, unread),
        }
    };
    match written {
        Ok(()) => {}
        Err(e) if e.may_pass() => notes.push(keep_in_pending(store, id, out, moved, &e)),
        Err(e) => notes.push(format!("could not complete the audit record #{id}: {e}")),
    }
    if let Some(why) = unread {
        notes.push(format!(
            "the audit record #{id} may lack some moved ids: {why}"
        ));
    }
    notes
}

/// The outcome the store would not take, kept in a pending file; what to say about it.
fn keep_in_pending(
    store: &Store,
    id: i64,
    out: &AuditOutcome,
    moved: &Spool,
    why: &StoreError,
) -> String {
    let secs = OUTCOME_PATIENCE.as_secs();
    let kept = super::keep_pending(store.path(), id, store.run_id_of(id), out, |put| {
        let _ = moved.for_each(put);
    });
    let said = match kept {
        Ok(file) => format!(
            "THE LOCAL AUDIT RECORD #{id} IS NOT COMPLETE: the store refused it for {secs} s ({why}); its outcome ({}, moved {}) and moved ids are kept in {} and written into the store the next time Warren opens it (e.g. `warren audit`)",
            out.outcome,
            out.moved,
            file.display()
        ),
        Err(e) => format!(
            "THE LOCAL AUDIT RECORD #{id} IS NOT COMPLETE: the store refused it for {secs} s ({why}), and it could not be kept beside the store either ({e}); it reads \"interrupted\" there. The run ended {}: moved {}, returned {}, failed {}, remaining {} (the broker's audit stream has its ids when it is on)",
            out.outcome, out.moved, out.returned, out.failed, out.remaining
        ),
    };
    tracing::error!("{said}");
    said
}
