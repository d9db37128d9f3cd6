//! Reading a queue for the worker: a broker queue in pages, or the local archive.

use super::listing::local_archive_path;
use super::notes::group_notes;
use super::*;

/// Reads `at`'s queue for the message list; `again`: read again from the start, which its status
/// line says.
pub(super) async fn browse(
    backend: &Backend,
    (at, again): (QueueRef, bool),
    limit: usize,
    consent: ReadConsent,
    ticket: Ticket,
    ops: &Ops,
) -> Vec<Report> {
    let QueueRef {
        vhost, name: queue, ..
    } = at;
    let s = match backend {
        Backend::Snapshot(snapshots) => {
            let messages: Vec<Packed> = snapshots
                .iter()
                .filter(|(h, _)| h.queue == queue && h.vhost == vhost)
                .flat_map(|(_, m)| m.iter())
                .take(limit)
                .map(|m| Packed::pack(m.clone()))
                .collect();
            let n = messages.len();
            return vec![Report::MessagesLoaded {
                vhost,
                queue,
                messages,
                first_seen: vec![None; n],
                replays: Vec::new(),
                authors: HashMap::new(),
                stop: format!("{n} messages from the snapshot"),
                ticket,
            }];
        }
        Backend::Contexts(_) => {
            return vec![Report::Error(Failure::in_generation(
                contexts::LOOK_ONLY,
                ticket.generation,
            ))];
        }
        Backend::Broker(ss) => match session_of(ss, &vhost).await {
            Ok(s) => s,
            Err(e) => {
                return vec![Report::Error(Failure::in_generation(e, ticket.generation))];
            }
        },
    };
    let s = &s;
    if queue == crate::domain::archive::LOCAL_QUEUE {
        return vec![browse_local_archive(s, vhost, limit, ticket)];
    }
    // The read and the listing run side by side: each message is listed as it arrives.
    let (to, from) = tokio::sync::mpsc::channel(page::CHUNK);
    let (read, listing) = tokio::join!(
        s.browse_to(&queue, limit, consent, to),
        page::list(s, (&vhost, &queue), ticket, &ops.0, from)
    );
    match read {
        Ok(page) => {
            let n = page.len();
            let end = page.end();
            let mut stop = end.text();
            if again {
                stop = format!("read again from the start: {stop}");
            }
            // What the read spent on a quorum queue, in this broker's own terms.
            let cost = if page.reused {
                None
            } else {
                s.handle.cost_note(&queue, &page).await
            };
            if page.reused {
                stop = format!(
                    "{stop}, as read earlier this session (reading this quorum queue again costs deliveries: Ctrl-R twice)"
                );
            } else if let Some(note) = &cost {
                stop = format!("{stop}; {note}");
            }
            if let Some(problem) = &listing.problem {
                stop = format!("{stop}; {problem}");
            }
            if !page.reused {
                ops.report(
                    OperationKind::Read,
                    format!(
                        "browsed {queue}: {n} of {} messages, all left in place; {}",
                        page.queue_depth_at_start,
                        cost.as_deref().unwrap_or("cost no deliveries")
                    ),
                )
                .await;
            }
            // Every message the queue held when the read began (not a page kept from earlier,
            // which may be out of date): only such a look can say a group is gone.
            let whole = !page.reused && end.whole();
            let notes = Report::GroupNotes {
                vhost: vhost.clone(),
                queue: queue.clone(),
                notes: group_notes(s, &queue),
                whole,
                ticket,
            };
            let authors = crate::broker::audit::authors_of(s, listing.runs).await;
            let redirects = redirect::in_force(s, ticket).await;
            let mut out = vec![
                Report::MessagesLoaded {
                    vhost,
                    queue,
                    messages: listing.tail.into_iter().map(Packed::pack).collect(),
                    first_seen: listing.first_seen,
                    replays: listing.replays,
                    authors,
                    stop,
                    ticket,
                },
                notes,
            ];
            out.extend(redirects);
            out
        }
        Err(e) => {
            let failed = read_failure(QueueRef::new(&vhost, &queue), e, ticket);
            if listing.chunked {
                // The chunks already sent are of a page that will not be: the UI drops them.
                vec![Report::MessagesDropped { ticket }, failed]
            } else {
                vec![failed]
            }
        }
    }
}

/// The vhost's local archive file read as a queue: its expired entries dropped first (the
/// context's `archive_max_age`), then up to `limit` messages, oldest first.
pub(super) fn browse_local_archive(
    s: &Session,
    vhost: String,
    limit: usize,
    ticket: Ticket,
) -> Report {
    let queue = crate::domain::archive::LOCAL_QUEUE.to_string();
    let read = (|| {
        let path = local_archive_path(s)?;
        let r = keep::read_local_all(&path, &s.handle.target.archive.max_age)?;
        Ok::<_, String>((path, r.expired, r.messages, r.torn))
    })();
    let (path, expired, mut messages, torn) = match read {
        Ok(r) => r,
        Err(e) => return Report::Error(Failure::in_generation(e, ticket.generation)),
    };
    let held = messages.len();
    messages.truncate(limit);
    for m in &mut messages {
        m.queue = queue.clone();
    }
    let n = messages.len();
    let mut stop = format!(
        "{n} of {held} messages from the local archive {}",
        sanitize::one_line(&path.display().to_string(), 200)
    );
    if expired > 0 {
        stop.push_str(&format!(
            "; {expired} expired, dropped (archived longer ago than archive_max_age)"
        ));
    }
    stop.extend(torn.map(|t| format!("; {t}")));
    Report::MessagesLoaded {
        vhost,
        queue,
        messages: messages.into_iter().map(Packed::pack).collect(),
        first_seen: vec![None; n],
        replays: Vec::new(),
        authors: HashMap::new(),
        stop,
        ticket,
    }
}

/// A failed read as the UI event that says what to do: a cost to confirm, or an error.
pub(super) fn read_failure(at: QueueRef, e: SessionError, ticket: Ticket) -> Report {
    match e {
        SessionError::NeedsConsent { text, .. } => Report::ReadCost {
            vhost: at.vhost,
            queue: at.name,
            text,
            ticket,
        },
        other => Report::Error(Failure::in_generation(other.to_string(), ticket.generation)),
    }
}

pub(super) fn spec_for(
    s: &Session,
    queue: String,
    selection: Selection,
    rate: Option<f64>,
    (keep_attempts, strip_failure_stamp): (bool, bool),
) -> ReplaySpec {
    ReplaySpec {
        selection,
        rate,
        keep_attempts,
        strip_failure_stamp,
        // The TUI plans from what it already read (`ReadConsent::Reuse`): a quorum queue is not
        // read again for a plan.
        ..ReplaySpec::all_of(&queue, s.handle.target.settings.replay.window)
    }
}
