//! Notes on groups for the worker, kept and read through `ops::note`.

use super::*;

/// Keeps or forgets notes on groups, in the vhost's session.
pub(super) async fn notes_on(backend: &Backend, w: NoteWork, ticket: Ticket) -> Vec<Report> {
    let vhost = match &w {
        NoteWork::Set { vhost, .. } | NoteWork::Forget { vhost, .. } => vhost.clone(),
    };
    match broker_session(backend, &vhost, ticket).await {
        Ok(s) => notes(&s, w, ticket).await,
        Err(no) => no,
    }
}

/// The notes on `queue`'s groups (none, said in the log, without a store).
pub(super) fn group_notes(s: &Session, queue: &str) -> Vec<crate::domain::grouping::GroupNote> {
    crate::ops::note::list(s, queue).unwrap_or_else(|e| {
        tracing::warn!("reading group notes failed: {e}");
        Vec::new()
    })
}

/// Keeps or forgets notes through their home (`ops::note`); answers with the queue's notes as
/// the store now has them.
pub(super) async fn notes(s: &Session, work: NoteWork, ticket: Ticket) -> Vec<Report> {
    let fail = |e: String| Report::Error(Failure::in_generation(e, ticket.generation));
    let (queue, notice) = match work {
        NoteWork::Set { note, .. } => {
            let req = crate::ops::note::NoteRequest {
                queue: note.queue,
                by: note.by,
                key: note.key,
                text: note.text,
            };
            match crate::ops::note::set(s, req).await {
                Ok(set) => {
                    let said = if set.kept {
                        "note kept on the group (until the group is gone)"
                    } else {
                        "note removed"
                    };
                    let notice = std::iter::once(said.to_string())
                        .chain(set.notes)
                        .collect::<Vec<_>>()
                        .join("; ");
                    (set.note.queue, Some(notice))
                }
                Err(stop) => return vec![fail(runs::stop_text(stop))],
            }
        }
        NoteWork::Forget { queue, notes, .. } => {
            let gone: Vec<&crate::domain::grouping::GroupNote> = notes.iter().collect();
            if let Err(e) = crate::ops::note::forget(s, &gone) {
                return vec![fail(e)];
            }
            (queue, None)
        }
    };
    let mut out = vec![Report::GroupNotes {
        vhost: s.vhost().to_string(),
        notes: group_notes(s, &queue),
        queue,
        whole: false,
        ticket,
    }];
    out.extend(notice.map(Report::Notice));
    out
}
