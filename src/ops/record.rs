//! A run on the record: its row in the local store and its entries on the broker's audit stream
//! (replay, archive, restore and discard alike), begun before anything moves and finished with
//! what really happened. The one writer both front ends use, on the ports (`ops::ports`): the
//! memory port for the local row, the record port for the broker's entries.

use super::ports::{BrokerLog, MemoryPort, RecordPort};
use crate::broker::audit::{BrokerRecord, Consent};
use crate::broker::replay::Summary;
use crate::broker::session::SessionError;
use crate::broker::spool::Spool;
use crate::store::{AuditOutcome, AuditStart, Operation};

/// A run's record; `L` is its broker half (the audit stream's, on a `Session`).
pub struct Record<L = BrokerRecord> {
    op: Operation,
    audit_id: Option<i64>,
    broker: L,
    run_id: String,
    /// What could not be written (to the broker, mostly), said once by the front end.
    notes: Vec<String>,
}

impl Record {
    /// Writes the start in the local store: a run it cannot record does not start (`Err`, in
    /// words). Then [`Record::begin`].
    pub fn start_local<M: MemoryPort>(
        store: &M,
        op: Operation,
        start: &AuditStart,
    ) -> Result<i64, String> {
        store
            .start_run(op, start)
            .map_err(|e| format!("{e}; nothing moved"))
    }

    /// A run kept off the record (`--no-audit`): `why` says so.
    pub fn off(op: Operation, run_id: &str, why: &str) -> Record {
        Record {
            op,
            audit_id: None,
            broker: BrokerRecord::off(why),
            run_id: run_id.to_string(),
            notes: Vec::new(),
        }
    }
}

impl<L: BrokerLog> Record<L> {
    /// Writes the start on the broker's stream before anything moves (after
    /// [`Record::start_local`] gave `audit_id`); one the broker cannot record starts all the
    /// same and says so in [`Record::take_notes`].
    pub async fn begin<P: RecordPort<Log = L>>(
        p: &P,
        audit_id: i64,
        op: Operation,
        start: &AuditStart,
        consent: Consent<'_>,
    ) -> Record<L> {
        let (broker, note) = p.record_start(op, start, consent).await;
        Record {
            op,
            audit_id: Some(audit_id),
            broker,
            run_id: start.run_id.clone(),
            notes: note.into_iter().collect(),
        }
    }

    /// The local store's number for the run, when it has one.
    pub fn audit_id(&self) -> Option<i64> {
        self.audit_id
    }

    pub fn run_id(&self) -> &str {
        &self.run_id
    }

    /// Whether the broker's stream has the run's start.
    pub fn on_broker(&self) -> bool {
        self.broker.is_written()
    }

    /// What could not be written so far; each note is given once.
    pub fn take_notes(&mut self) -> Vec<String> {
        std::mem::take(&mut self.notes)
    }

    /// Writes how the run ended in the local store (then [`Record::finish_broker`]). A run
    /// kept off the record writes nothing.
    pub fn finish_local<M: MemoryPort>(
        &mut self,
        store: Option<&M>,
        out: &AuditOutcome,
        moved: &Spool,
    ) {
        if let (Some(st), Some(id)) = (store, self.audit_id) {
            let notes = st.finish_run(id, out, moved);
            self.notes.extend(notes);
        }
    }

    /// Writes how the run ended on the broker's stream, with the moved ids of `out` and of
    /// `moved`.
    pub async fn finish_broker(&mut self, out: AuditOutcome, moved: &Spool) {
        if self.audit_id.is_none() {
            return;
        }
        let note = self
            .broker
            .finish(self.op.as_str(), &self.run_id, out, moved)
            .await;
        self.notes.extend(note);
    }
}

/// How an engine run (replay, archive, discard) ended, as the audit keeps it: the counts, the
/// targets it reached (however it found them), the possible duplicates and the outcome in
/// words. `outcome` is the run's outcome text (see [`Summary::outcome`]).
pub fn outcome_of(result: &Result<Summary, SessionError>) -> AuditOutcome {
    match result {
        Ok(sum) => AuditOutcome {
            at: jiff::Timestamp::now(),
            moved: sum.progress.moved,
            returned: sum.progress.returned,
            failed: sum.progress.failed,
            remaining: sum.progress.remaining,
            // Read from the run's spool as the record is written (a million ids are tens of
            // MiB).
            message_ids: Vec::new(),
            duplicated: sum.counts.duplicated,
            duplicate_ids: sum.counts.duplicate_ids.clone(),
            outcome: sum.outcome(),
            targets: sum.counts.targets.keys().cloned().collect(),
            canary: sum.canary.clone(),
            edits: Vec::new(),
        },
        Err(e) => AuditOutcome {
            at: jiff::Timestamp::now(),
            outcome: format!("failed: {e}"),
            ..AuditOutcome::default()
        },
    }
}
