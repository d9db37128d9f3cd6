//! The worker's reports: one handler for each kind, each dropping answers to a session no
//! longer shown.

use std::collections::HashMap;

use super::*;
use crate::domain::discovery::Discovery;
use crate::domain::packed::Packed;
use crate::domain::urgency::{ReadHead, Sample};
use crate::worker::protocol::{
    Failure, Operation, OperationKind, Overview, ReplayOutcome, ReplayPreview, ReplayProgress,
    RestoreHow, RestorePreview, RunSummary, Ticket,
};

pub(super) fn on_report(state: &mut State, report: Report) -> Vec<Command> {
    match report {
        Report::Question { text, yes, ticket } => {
            if current(state, ticket.generation) {
                state.overlay = Overlay::Question(Box::new(Question { text, yes: *yes }));
                state.dirty = true;
            }
            Vec::new()
        }
        Report::QueuesLoaded {
            overview,
            discovery,
            ticket,
        } => on_queues_loaded(state, overview, discovery, ticket),
        Report::DepthHistory {
            samples,
            heads,
            ticket,
        } => on_depth_history(state, samples, heads, ticket),
        Report::DepthsRefreshed { depths, ticket } => on_depths_refreshed(state, depths, ticket),
        Report::MessagesLoaded {
            vhost,
            queue,
            messages,
            first_seen,
            replays,
            authors,
            stop,
            ticket,
        } => {
            // The chunks that came before this last part, if any (see `worker::page`).
            let before = state
                .msgs
                .arriving
                .take_if(|a| a.ticket.request <= ticket.request)
                .filter(|a| a.ticket == ticket && a.vhost == vhost && a.queue == queue);
            if page_is_stale(state, ticket) {
                return Vec::new();
            }
            if is_queue(state.msgs.loading.as_ref(), &vhost, &queue) {
                state.msgs.loading = None;
            }
            let mut rows = before.map(|a| a.rows).unwrap_or_default();
            rows.extend(page_rows(state, messages, &first_seen, &replays));
            // The room kept for a page the queue's depth promised and the read did not fill.
            if rows.capacity() > rows.len() + rows.len() / 8 {
                rows.shrink_to_fit();
            }
            on_messages_loaded(state, vhost, queue, rows, stop, authors, ticket)
        }
        Report::MessagesChunk {
            vhost,
            queue,
            rows,
            ticket,
        } => on_messages_chunk(state, vhost, queue, rows, ticket),
        Report::MessagesDropped { ticket } => {
            state.msgs.arriving.take_if(|a| a.ticket == ticket);
            Vec::new()
        }
        Report::GroupNotes {
            vhost,
            queue,
            notes,
            whole,
            ticket,
        } => on_group_notes(state, &vhost, &queue, notes, whole, ticket),
        Report::Redirects {
            vhost,
            redirects,
            ticket,
        } => {
            if current(state, ticket.generation) {
                state.redirects.insert(vhost, redirects);
                state.dirty = true;
            }
            Vec::new()
        }
        Report::ReadCost {
            vhost,
            queue,
            text,
            ticket,
        } => on_read_cost(state, &vhost, &queue, &text, ticket),
        Report::ReplayPreview(preview) => on_replay_preview(state, preview),
        Report::RestorePreview(preview) => on_restore_preview(state, preview),
        Report::RestoreReading {
            vhost,
            queue,
            how,
            read,
            ticket,
        } => on_restore_reading(state, (vhost, queue, how), read, ticket),
        Report::ReplayProgress(progress) => on_replay_progress(state, progress),
        Report::ReplayFinished(outcome) => on_replay_finished(state, outcome),
        Report::SwitchFailed { generation, text } => on_switch_failed(state, generation, &text),
        Report::Notice(message) => on_notice(state, message),
        Report::Error(failure) => on_error(state, failure),
        Report::ReplaysLoaded {
            runs,
            unreached,
            ticket,
        } => on_replays_loaded(state, runs, unreached, ticket),
        Report::Operation(op) => on_operation(state, op),
        Report::Connection(conn) => on_connection(state, conn),
    }
}

/// A queue listing: the end of a switch under way (then the queue asked for from every context
/// is opened), or fresh depths and rights for the place shown.
fn on_queues_loaded(
    state: &mut State,
    overview: Overview,
    discovery: Discovery,
    ticket: Ticket,
) -> Vec<Command> {
    // The first listing of the place a switch went to: the switch is done, and
    // everything shown from here on belongs to the new place.
    let switched = state
        .switching
        .as_ref()
        .is_some_and(|s| s.generation == ticket.generation);
    let mut open_now = None;
    if switched {
        let to = state.switching.take().map(|s| s.to).unwrap_or_default();
        enter_new_place(state, ticket.generation);
        state.banner.notice = Some(format!("switched to {to}"));
        open_now = state.pending.open_after_switch.take();
        state.from_every_context = open_now.is_some();
    } else if !current(state, ticket.generation) {
        return Vec::new();
    }
    // Read-only is this place's: the flag, or what the worker found here.
    state.read_only = state.settings.read_only_flag || overview.read_only;
    state.read_only_reason = if overview.read_only && !overview.read_only_reason.is_empty() {
        sanitize::one_line(&overview.read_only_reason, 300)
    } else if state.read_only {
        crate::tui::state::FLAG_READ_ONLY_REASON.into()
    } else {
        String::new()
    };
    let keep = state.queue_at_cursor();
    state.overview = overview;
    state.queues.discovery = discovery;
    state.msgs.content_serial += 1;
    state.queues.loaded = true;
    state.queues.depths_at = Some(state.now);
    state.connection = if state.overview.snapshot {
        ConnectionState::Snapshot
    } else {
        ConnectionState::Connected
    };
    state.queues.sample_depths(state.now);
    state.refresh_urgency(keep);
    state.dirty = true;
    match open_now {
        Some(queue) => open_listed(state, &queue),
        None => {
            // The first screen answers for the queue under the cursor.
            super::glance::cursor_moved(state);
            Vec::new()
        }
    }
}

/// The store's depth samples and oldest dead letters, merged under what this session read.
fn on_depth_history(
    state: &mut State,
    samples: HashMap<QueueRef, Vec<Sample>>,
    heads: HashMap<QueueRef, ReadHead>,
    ticket: Ticket,
) -> Vec<Command> {
    if !current(state, ticket.generation) {
        return Vec::new();
    }
    let keep = state.queue_at_cursor();
    state.queues.merge_history(samples);
    for (queue, head) in heads {
        // A read of this session is newer than the store's.
        let newer = state
            .queues
            .heads
            .get(&queue)
            .is_some_and(|h| h.at >= head.at);
        if !newer {
            state.queues.heads.insert(queue, head);
        }
    }
    state.refresh_urgency(keep);
    state.dirty = true;
    Vec::new()
}

/// Fresh depths for the listed queues; redraws only when one changed or they were stale.
fn on_depths_refreshed(
    state: &mut State,
    depths: Vec<(QueueRef, Option<u64>)>,
    ticket: Ticket,
) -> Vec<Command> {
    if !current(state, ticket.generation) {
        return Vec::new();
    }
    let stale_before = depths_stale(state);
    state.queues.depths_at = Some(state.now);
    let mut changed = stale_before;
    // One map and one pass over each list: a refresh of 10,000 queues is linear. Keyed
    // by the reported queues themselves (moved in, not copied), looked up with one key
    // refilled for each queue.
    let mut depths: FnvHashMap<QueueRef, Option<u64>> = depths.into_iter().collect();
    let mut key = QueueRef::default();
    for d in &mut state.queues.discovery.dead_letter_queues {
        if let Some(depth) = depths.remove(key.set_to(d)) {
            changed |= d.depth != depth;
            d.depth = depth;
        }
    }
    for q in &mut state.queues.discovery.other_queues {
        if let Some(depth) = depths.remove(key.set(&q.vhost, &q.name)) {
            changed |= q.depth != depth;
            q.depth = depth;
        }
    }
    let keep = state.queue_at_cursor();
    state.queues.sample_depths(state.now);
    state.refresh_urgency(keep);
    state.dirty |= changed;
    Vec::new()
}

/// Whether a page of messages is not for the screen: asked in another session, or older than
/// the page shown.
fn page_is_stale(state: &State, ticket: Ticket) -> bool {
    // Of two pages the later request wins, whichever lands last (the worker numbers
    // requests as it receives them).
    let older = state
        .msgs
        .browse
        .as_ref()
        .is_some_and(|b| b.ticket.request > ticket.request);
    !current(state, ticket.generation) || older
}

/// Part of a page arriving: kept aside until its last part comes; an older page's parts never
/// replace a newer one's.
fn on_messages_chunk(
    state: &mut State,
    vhost: String,
    queue: String,
    rows: Vec<crate::worker::protocol::Listed>,
    ticket: Ticket,
) -> Vec<Command> {
    if page_is_stale(state, ticket)
        || state
            .msgs
            .arriving
            .as_ref()
            .is_some_and(|a| a.ticket.request > ticket.request)
    {
        return Vec::new();
    }
    let rows = rows.into_iter().map(Row::listed);
    match &mut state.msgs.arriving {
        Some(a) if a.ticket == ticket => a.rows.extend(rows),
        _ => {
            // Room for the whole page at once: growing a million rows by doubling would hold
            // one and a half copies of them at the last step.
            let depth = state
                .dlq_of(&QueueRef::new(&vhost, &queue))
                .and_then(|d| d.depth)
                .and_then(|d| usize::try_from(d).ok())
                .unwrap_or(0);
            let mut all = Vec::with_capacity(depth.min(state.settings.browse_limit));
            all.extend(rows);
            state.msgs.arriving = Some(crate::tui::state::Arriving {
                vhost,
                queue,
                ticket,
                rows: all,
            })
        }
    }
    // The title counts what has arrived.
    state.dirty = true;
    Vec::new()
}

/// The rows of a page, each message moved in as it is with when it was first seen and how
/// often it was replayed.
fn page_rows(
    state: &State,
    messages: Vec<Packed>,
    first_seen: &[Option<jiff::Timestamp>],
    replays: &[i64],
) -> Vec<Row> {
    // The page stays packed: each message moves into its row as it is, explained from
    // a copy unpacked for the moment, so no second full copy of the page exists.
    let mut strings = Interner::default();
    messages
        .into_iter()
        .enumerate()
        .map(|(i, m)| {
            let seen = first_seen.get(i).copied().flatten();
            let n = replays.get(i).copied().unwrap_or(0);
            Row::with_replays(m, seen, &state.settings.conventions, n, &mut strings)
        })
        .collect::<Vec<Row>>()
}

/// A page of the open queue (or of another, which resets the cursors and picks): shown, and
/// what it found dates the queue's oldest dead letter.
fn on_messages_loaded(
    state: &mut State,
    vhost: String,
    queue: String,
    rows: Vec<Row>,
    stop: String,
    authors: HashMap<String, String>,
    ticket: Ticket,
) -> Vec<Command> {
    let same_queue = state
        .msgs
        .browse
        .as_ref()
        .is_some_and(|b| b.is(&vhost, &queue));
    // By the keys' hashes: a set of a million keys' hashes is half a set of the keys, and a
    // collision only makes a selection count message by message, which is right either way.
    let shared_keys = rows
        .iter()
        .map(|r| {
            use std::hash::{BuildHasher, BuildHasherDefault};
            BuildHasherDefault::<fnv::FnvHasher>::default().hash_one(r.key.as_str())
        })
        .collect::<HashSet<u64>>()
        .len()
        < rows.len();
    if !same_queue {
        // The filter typed on the queue left is put away with it; this one's comes back.
        filter_follows_queue(state, QueueRef::new(&vhost, &queue));
        state.msgs.selected.clear();
        state.msgs.anchor = None;
        state.msgs.cursor = 0;
        state.msgs.group_cursor = 0;
        state.msgs.detail_scroll = 0;
        // Another queue's notes (the same name in another vhost is another queue).
        state.msgs.group_notes.clear();
    }
    state.msgs.browse = Some(Browse {
        vhost,
        queue,
        rows,
        stop,
        visible: Vec::new(),
        groups: Vec::new(),
        ticket,
        shared_keys,
        authors,
        grouped_by: state.msgs.group_by,
        filtered_by: None,
        orders: Default::default(),
        job: None,
    });
    state.msgs.content_serial += 1;
    state.refresh_view_now();
    // What this read found dates the queue's oldest dead letter.
    if let Some(b) = &state.msgs.browse {
        let head = ReadHead::of(state.now, b.rows.iter().map(|r| r.arrival()));
        state.queues.heads.insert(b.id(), head);
        let keep = state.queue_at_cursor();
        state.refresh_urgency(keep);
    }
    // Keep only picks that are still in the queue.
    if let Some(b) = state
        .msgs
        .browse
        .as_ref()
        .filter(|_| !state.msgs.selected.is_empty())
    {
        let present: HashSet<&str> = b.rows.iter().map(|r| r.key.as_str()).collect();
        state.msgs.selected.retain(|k| present.contains(k.as_str()));
    }
    state.dirty = true;
    Vec::new()
}

/// The open queue's group notes; after a whole read, the notes of groups gone are forgotten.
fn on_group_notes(
    state: &mut State,
    vhost: &str,
    queue: &str,
    notes: Vec<GroupNote>,
    whole: bool,
    ticket: Ticket,
) -> Vec<Command> {
    // Only the open queue's notes are kept: another's come again when it is opened.
    let open = state
        .msgs
        .browse
        .as_ref()
        .is_some_and(|b| b.is(vhost, queue));
    if !current(state, ticket.generation) || !open {
        return Vec::new();
    }
    state.msgs.group_notes = notes;
    state.dirty = true;
    forget_gone_notes(state, whole, ticket)
}

/// A read that would cost deliveries was not made: says so, and Enter again confirms.
fn on_read_cost(
    state: &mut State,
    vhost: &str,
    queue: &str,
    text: &str,
    ticket: Ticket,
) -> Vec<Command> {
    if !current(state, ticket.generation) {
        return Vec::new();
    }
    let queue = QueueRef::new(vhost, queue);
    if state.msgs.loading.as_ref() == Some(&queue) {
        state.msgs.loading = None;
    }
    state.banner.notice = Some(format!(
        "{} Press Enter (or Ctrl-R) again to read it anyway; Esc keeps what is on screen.",
        sanitize::one_line(text, 600)
    ));
    state.pending.reread = Some(queue);
    // Nothing was read: back on the queue list, where Enter again confirms.
    state.focus = Focus::Queues;
    state.dirty = true;
    Vec::new()
}

/// A replay plan, kept only by the modal it was asked for.
fn on_replay_preview(state: &mut State, preview: ReplayPreview) -> Vec<Command> {
    if !current(state, preview.ticket.generation) {
        return Vec::new();
    }
    let (above, size) = (state.settings.canary_above, state.settings.canary_size);
    let answered = state.answers.audit.get(&state.overview.context).copied();
    if let Overlay::Replay(modal) = &mut state.overlay
        && modal.queue == preview.queue
        && modal.vhost == preview.vhost
        && modal.keep_attempts == preview.keep_attempts
        && modal.strip_failure_stamp == preview.strip_failure_stamp
    {
        // A large replay starts with a canary, until the operator says otherwise.
        if !modal.canary_touched {
            modal.canary = (above > 0 && preview.count > above).then_some(size);
        }
        // Asked once per context: an earlier answer stands.
        if preview.create_audit.is_some() && modal.create_audit.is_none() {
            modal.create_audit = answered;
        }
        modal.preview = Some(preview);
        state.dirty = true;
    }
    Vec::new()
}

/// A restore plan, kept only by the modal with the same toggles.
fn on_restore_preview(state: &mut State, preview: RestorePreview) -> Vec<Command> {
    if !current(state, preview.ticket.generation) {
        return Vec::new();
    }
    // Only the plan for the toggles in force: one for the others is stale.
    if let Overlay::Restore(modal) = &mut state.overlay
        && modal.vhost == preview.vhost
        && modal.queue == preview.queue
        && modal.how == preview.how
    {
        modal.preview = Some(preview);
        state.dirty = true;
    }
    Vec::new()
}

/// How far the restore plan's read is, while the modal waits for that plan (not for another
/// toggle's, nor once the plan came).
fn on_restore_reading(
    state: &mut State,
    (vhost, queue, how): (String, String, RestoreHow),
    read: u64,
    ticket: Ticket,
) -> Vec<Command> {
    if !current(state, ticket.generation) {
        return Vec::new();
    }
    if let Overlay::Restore(modal) = &mut state.overlay
        && modal.vhost == vhost
        && modal.queue == queue
        && modal.how == how
        && modal.preview.is_none()
    {
        modal.read = Some(read);
        state.dirty = true;
    }
    Vec::new()
}

/// A run's counts so far, shown in the progress overlay.
fn on_replay_progress(state: &mut State, progress: ReplayProgress) -> Vec<Command> {
    if let Overlay::Progress(run) = &mut state.overlay {
        run.progress = progress;
        state.dirty = true;
    }
    Vec::new()
}

/// A run's outcome, shown in the progress overlay.
fn on_replay_finished(state: &mut State, outcome: ReplayOutcome) -> Vec<Command> {
    if let Overlay::Progress(run) = &mut state.overlay {
        run.progress = outcome.progress.clone();
        run.outcome = Some(outcome);
        state.dirty = true;
    }
    Vec::new()
}

/// The switch under way failed: says where the operator still is.
fn on_switch_failed(state: &mut State, generation: u64, text: &str) -> Vec<Command> {
    // Only the switch under way: an older one was replaced and is not news.
    if state
        .switching
        .as_ref()
        .is_none_or(|s| s.generation != generation)
    {
        return Vec::new();
    }
    let to = state.switching.take().map(|s| s.to).unwrap_or_default();
    state.pending.open_after_switch = None;
    state.banner.error = Some(format!(
        "could not switch to {to}: {}; still on {}",
        sanitize::one_line(text, 400),
        place(state)
    ));
    state.dirty = true;
    Vec::new()
}

/// A notice from the worker, on the notice line; during a run (its progress window open) into
/// the command log (`@`) instead, so that the line a run leaves is its outcome, not a note
/// from along the way ("created a stream", "canary: …").
fn on_notice(state: &mut State, message: String) -> Vec<Command> {
    if let Overlay::Progress(run) = &mut state.overlay {
        run.notes += 1;
        state.oplog.push(Operation {
            at: state.now,
            kind: OperationKind::Replay,
            text: format!("note: {message}"),
        });
        state.dirty = true;
        return Vec::new();
    }
    pager::news(state);
    state.banner.notice = Some(message);
    state.dirty = true;
    Vec::new()
}

/// A failure from the worker, on the error line unless it belongs to a session no longer shown.
fn on_error(state: &mut State, failure: Failure) -> Vec<Command> {
    if failure.generation.is_some_and(|g| !current(state, g)) {
        return Vec::new();
    }
    if state.msgs.loading.is_some() {
        state.msgs.loading = None;
    }
    pager::news(state);
    state.banner.error = Some(failure.text);
    state.dirty = true;
    Vec::new()
}

/// The past runs for the Replays view.
fn on_replays_loaded(
    state: &mut State,
    runs: Vec<RunSummary>,
    unreached: Vec<String>,
    ticket: Ticket,
) -> Vec<Command> {
    if !current(state, ticket.generation) {
        return Vec::new();
    }
    state.replay_runs = Some((runs, unreached));
    state.dirty = true;
    Vec::new()
}

/// A line for the command log.
fn on_operation(state: &mut State, op: Operation) -> Vec<Command> {
    state.oplog.push(op);
    if let Overlay::Log(scroll) = &mut state.overlay {
        // Scrolled down: the lines in view stay in view as the new one lands on top.
        if *scroll > 0 {
            *scroll = scroll.saturating_add(1);
        }
        state.dirty = true;
    }
    Vec::new()
}

/// The connection's state, redrawn when it changed.
fn on_connection(state: &mut State, conn: ConnectionState) -> Vec<Command> {
    state.dirty |= state.connection != conn;
    state.connection = conn;
    Vec::new()
}

/// After a browse that read every message of the open queue (`whole`, and the page shown is
/// that browse's): the notes whose group has no message left are forgotten, here and in the
/// store.
pub(super) fn forget_gone_notes(state: &mut State, whole: bool, ticket: Ticket) -> Vec<Command> {
    let Some(b) = state
        .msgs
        .browse
        .as_ref()
        .filter(|b| whole && b.ticket == ticket)
    else {
        return Vec::new();
    };
    let of_queue: Vec<GroupNote> = state
        .msgs
        .group_notes
        .iter()
        .filter(|n| n.queue == b.queue)
        .cloned()
        .collect();
    if of_queue.is_empty() {
        return Vec::new();
    }
    let messages: Vec<_> = b.rows.iter().map(|r| r.brief.facets()).collect();
    let gone: Vec<GroupNote> = grouping::notes_gone(&of_queue, &messages, &state.wait_queues())
        .into_iter()
        .cloned()
        .collect();
    if gone.is_empty() {
        return Vec::new();
    }
    let (vhost, queue) = (b.vhost.clone(), b.queue.clone());
    state.msgs.group_notes.retain(|n| !gone.contains(n));
    vec![Command::ForgetGroupNotes {
        vhost,
        queue,
        notes: gone,
    }]
}

/// Whether `at` is `queue` of `vhost`.
pub(super) fn is_queue(at: Option<&QueueRef>, vhost: &str, queue: &str) -> bool {
    at.is_some_and(|q| q.name == queue && q.vhost == vhost)
}

pub(super) fn depths_stale(state: &State) -> bool {
    state.queues.loaded
        && state
            .queues
            .depths_at
            .is_some_and(|t| state.now.as_second().saturating_sub(t.as_second()) > STALE_AFTER_SECS)
}
