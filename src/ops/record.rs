//! The one writer of every record, on the ports (`ops::ports`): the memory port for Warren's
//! local store, the record port for the broker's audit stream. A run (replay, archive, restore
//! and discard alike) is on the record before anything moves and finished with what really
//! happened (`Record`); a change that is no run — a protect's policy ([`protect`]), a redirect
//! ([`redirect`]), a group note ([`note`]) — is recorded once it is made. What could not be written is said in the
//! operator's words, once.

use super::ports::{BrokerLog, MemoryPort, RecordPort};
use crate::broker::audit::{BrokerRecord, Consent, new_run_id};
use crate::broker::replay::Summary;
use crate::broker::session::SessionError;
use crate::domain::grouping::GroupNote;
use crate::domain::protect::ProtectPlan;
use crate::domain::redirect::RedirectRecord;
use crate::domain::run::RunKind;
use crate::local::spool::Spool;
use crate::store::{AuditOutcome, AuditStart, NoteRecord, ProtectRecord};

/// What still holds a change whose broker record could not be written.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Kept {
    /// The local store has it (a run, a protect).
    Locally,
    /// The redirect stream has it (a redirect has no local record).
    OnRedirectStream,
    /// Only this machine's store has it (a group note).
    OnThisMachine,
}

/// The broker's record of a change was not written (`why`): said in the operator's words.
pub(crate) fn unwritten(why: &str, kept: Kept) -> String {
    let kept = match kept {
        Kept::Locally => "the local record was",
        Kept::OnRedirectStream => "the redirect stream has the change",
        Kept::OnThisMachine => "the note is kept on this machine only",
    };
    format!("the broker audit record was not written ({why}); {kept}")
}

/// A run's record; `L` is its broker half (the audit stream's, on a `Session`).
pub struct Record<L = BrokerRecord> {
    op: RunKind,
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
        op: RunKind,
        start: &AuditStart,
    ) -> Result<i64, super::Refusal> {
        store
            .start_run(op, start)
            .map_err(|why| super::Refusal::Store {
                why,
                undone: "nothing moved",
            })
    }
}

impl<L: BrokerLog> Record<L> {
    /// A run kept off the record (`--no-audit`): `why` says so.
    pub fn off(op: RunKind, run_id: &str, why: &str) -> Record<L> {
        Record {
            op,
            audit_id: None,
            broker: L::off(why),
            run_id: run_id.to_string(),
            notes: Vec::new(),
        }
    }

    /// Writes the start on the broker's stream before anything moves (after
    /// [`Record::start_local`] gave `audit_id`); one the broker cannot record starts all the
    /// same and says so in [`Record::take_notes`].
    pub async fn begin<P: RecordPort<Log = L>>(
        p: &P,
        audit_id: i64,
        op: RunKind,
        start: &AuditStart,
        consent: Consent<'_>,
    ) -> Record<L> {
        let mut broker = p.open_log(consent).await;
        // The broker's copy of the start, before the first message moves, so a crash reads
        // "interrupted" there too.
        let note = broker
            .append(op.as_str(), "start", &start.run_id, start)
            .await
            .map(|why| unwritten(&why, Kept::Locally));
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
        self.notes
            .extend(note.map(|why| unwritten(&why, Kept::Locally)));
    }
}

/// Puts the policy a protect set on the record: locally (when the store opens), then on the
/// broker's audit stream as `consent` allows. Returns what could not be written.
pub(crate) async fn protect<P: RecordPort>(
    p: &P,
    queue: &str,
    plan: &ProtectPlan,
    consent: Consent<'_>,
) -> Vec<String> {
    let who = p.operator();
    let at = jiff::Timestamp::now();
    let rec = ProtectRecord {
        run_id: new_run_id(at),
        at,
        os_user: crate::store::current_os_user(),
        broker_user: who.broker_user,
        context: who.context,
        vhost: who.vhost,
        queue: queue.to_string(),
        policy: plan.policy.name.clone(),
        replaces: plan.replaces.clone(),
        limit_before: plan.limit_before,
        limit_after: plan.limit_after,
    };
    let mut notes = Vec::new();
    // The store is not `Sync`: it is used and dropped before the first await.
    if let Err(e) = p.memory().and_then(|m| m.keep_protect(&rec)) {
        notes.push(format!("the protect was not recorded locally: {e}"));
    }
    let mut log = p.open_log(consent).await;
    let note = log.append("protect", "done", &rec.run_id, &rec).await;
    notes.extend(note.map(|why| unwritten(&why, Kept::Locally)));
    notes
}

/// Puts a redirect kept on the redirect stream on the broker's audit stream too, as `consent`
/// allows (there is no local record of a redirect). Returns what could not be written.
pub(crate) async fn redirect<P: RecordPort>(
    p: &P,
    event: &str,
    rec: &RedirectRecord,
    consent: Consent<'_>,
) -> Vec<String> {
    let run_id = new_run_id(jiff::Timestamp::now());
    let mut log = p.open_log(consent).await;
    let note = log
        .append(crate::broker::redirects::KIND, event, &run_id, rec)
        .await;
    note.map(|why| unwritten(&why, Kept::OnRedirectStream))
        .into_iter()
        .collect()
}

/// Puts a group note set (or removed: an empty text) on the broker's audit stream, kind `note`,
/// event `set` or `forget`, as `consent` allows (the store kept it first, `ops::note`).
/// Returns what could not be written.
pub(crate) async fn note<P: RecordPort>(
    p: &P,
    note: &GroupNote,
    consent: Consent<'_>,
) -> Vec<String> {
    let who = p.operator();
    let rec = NoteRecord {
        at: note.at,
        author: note.author.clone(),
        broker_user: who.broker_user,
        context: who.context,
        vhost: who.vhost,
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
    let mut log = p.open_log(consent).await;
    let written = log.append("note", event, &new_run_id(note.at), &rec).await;
    written
        .map(|why| unwritten(&why, Kept::OnThisMachine))
        .into_iter()
        .collect()
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
            outcome: crate::domain::outcome::RunOutcome::Failed(e.to_string()),
            ..AuditOutcome::default()
        },
    }
}
