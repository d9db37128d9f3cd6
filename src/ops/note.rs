//! Group notes ("carrier outage, replay after 10:00"): the one home of `warren groups --note`
//! and the TUI's `n`. A note is kept in Warren's store (the memory port) and put on the
//! broker's audit stream by the one writer (`ops::record::note`); the rights decide first
//! whether the broker half may be written: a read-only session publishes nothing, and its note
//! stays on this machine. No one is asked about creating the audit stream (a note is too small
//! a thing to create a stream for): the context decides (`create_audit_stream = true`).

use super::ports::{MemoryPort, RecordPort, Rights};
use super::{Refusal, Stop};
use crate::broker::audit::Consent;
use crate::domain::grouping::{self, Facets, GroupBy, GroupNote, WaitQueues};

/// A note on a group, as the operator wrote it: an empty text removes the group's note.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NoteRequest {
    pub queue: String,
    pub by: GroupBy,
    /// The group's key (`grouping::GroupKey::key`).
    pub key: String,
    pub text: String,
}

/// A note kept (or removed), and what its broker record could not keep.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NoteSet {
    /// The note as kept: its text trimmed to one line, who wrote it and when.
    pub note: GroupNote,
    /// Whether a note is now kept on the group (`false`: removed).
    pub kept: bool,
    /// What could not be written (the broker's copy), said once by the front end.
    pub notes: Vec<String>,
}

/// Keeps the note (or removes it) in Warren's store, then puts it on the broker's audit stream
/// unless this session is read-only or the context keeps no audit stream. `Err`: the store did
/// not keep it, and nothing was published.
pub async fn set<P: Rights + RecordPort>(p: &P, req: NoteRequest) -> Result<NoteSet, Stop> {
    // The rights first, before anything is written: a read-only session publishes nothing.
    let read_only = p.read_only().await.is_some();
    let note = GroupNote {
        queue: req.queue,
        by: req.by,
        key: req.key,
        text: grouping::note_text(&req.text),
        // Who wrote it and when are the home's to say, as for a run's audit.
        author: crate::store::current_os_user(),
        at: jiff::Timestamp::now(),
    };
    let who = p.operator();
    // The store is not `Sync`: it is used and dropped before the first await.
    let kept = p
        .memory()
        .and_then(|m| m.set_note(&p.memory_key(), &note))
        .map_err(|why| Stop::Refused(Refusal::NoteNotKept { why }))?;
    let notes = if read_only || !who.audit_stream {
        Vec::new()
    } else {
        let consent = match who.create_streams {
            Some(true) => Consent::Create,
            _ => Consent::Refuse,
        };
        super::record::note(p, &note, consent).await
    };
    Ok(NoteSet { note, kept, notes })
}

/// The notes on `queue`'s groups in this context and vhost (a look, allowed read-only).
pub fn list<P: RecordPort>(p: &P, queue: &str) -> Result<Vec<GroupNote>, String> {
    p.memory()?.notes(&p.memory_key(), queue)
}

/// Forgets `gone`, notes whose group a read of the whole queue found gone (kept locally only:
/// the broker's stream keeps their history). How many were forgotten.
pub fn forget<P: RecordPort>(p: &P, gone: &[&GroupNote]) -> Result<usize, String> {
    if gone.is_empty() {
        return Ok(0);
    }
    p.memory()?.forget_notes(&p.memory_key(), gone)
}

/// The notes on `queue`'s groups after a read: when the read took every message the queue held
/// (`whole`), the notes of groups with no message left are forgotten and not returned. The
/// second part says what could not be read or forgotten.
pub fn after_read<P: RecordPort>(
    p: &P,
    queue: &str,
    read: (&[Facets<'_>], bool),
    waits: &WaitQueues,
) -> (Vec<GroupNote>, Vec<String>) {
    let (messages, whole) = read;
    let notes = match list(p, queue) {
        Ok(n) => n,
        Err(e) => return (Vec::new(), vec![e]),
    };
    // Only a look at every message can say a group is gone.
    if !whole || notes.is_empty() {
        return (notes, Vec::new());
    }
    let gone = grouping::notes_gone(&notes, messages, waits);
    let said = forget(p, &gone).err().into_iter().collect();
    let gone: Vec<GroupNote> = gone.into_iter().cloned().collect();
    let notes = notes.into_iter().filter(|n| !gone.contains(n)).collect();
    (notes, said)
}
