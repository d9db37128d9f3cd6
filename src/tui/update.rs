//! The pure update: `update(&mut State, Event) -> Vec<Command>`. No IO, no terminal, no clock:
//! everything it needs arrives in the event, everything it wants done leaves as a command. Only
//! the replay modal's accept produces `Command::Replay`, and never in read-only mode.

use std::collections::HashSet;

use fnv::FnvHashMap;

use ratatui::crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
use ratatui_textarea::TextArea;

use super::custom;
use super::event::{ConnectionState, Event, Report};
use super::help;
use super::keys::{self, Action, Scope};
use super::state::{
    ArchiveKind, ArchiveModal, Browse, FilterInput, Focus, ListMode, MAX_REASON_CHARS, ModalField,
    NoteInput, Overlay, RATE_STEPS, ReplayModal, ReplayRun, RestoreModal, Row, STALE_AFTER_SECS,
    State, Switching,
};
use super::{pager, save};
use crate::domain::brief::Interner;
use crate::domain::discovery::QueueRef;
use crate::domain::filter::Filter;
use crate::domain::grouping::{self, GroupNote};
use crate::domain::sanitize;
use crate::domain::selection::{GroupChoice, Selection};
use crate::worker::protocol::{Command, ReplayRequest};

/// Rows a page key moves.
const PAGE: usize = 10;

pub fn update(state: &mut State, event: impl Into<Event>) -> Vec<Command> {
    let commands = on_event(state, event.into());
    // After any event: the message under the cursor, or what its detail depends on, may have
    // changed (a key, a new page, the day turning). Renders only when it did.
    state.refresh_detail();
    commands
}

/// Whether an answer was asked for in the session shown. This is the one place stale answers
/// are dropped: only here is it known what is already queued when a `:ctx` or `:vhost` lands
/// (the worker tags answers with the generation they were asked under, see `event::Ticket`).
fn current(state: &State, generation: u64) -> bool {
    generation == state.generation
}

fn on_event(state: &mut State, event: Event) -> Vec<Command> {
    match event {
        Event::Key(key) => {
            state.dirty = true;
            on_key(state, key)
        }
        Event::Resize { width, height } => {
            state.screen = (width, height);
            if let Overlay::Pager(p) = &mut state.overlay {
                p.layout(state.screen);
            }
            state.help_scroll = state
                .help_scroll
                .min(help::max_scroll(state.screen, custom::help_lines(state)));
            state.dirty = true;
            Vec::new()
        }
        Event::Tick(now) => on_tick(state, now),
        Event::FilterSettle => {
            if state.filter_pending {
                state.refresh_view();
                state.dirty = true;
            }
            Vec::new()
        }
        Event::Worker(report) => on_report(state, *report),
    }
}

fn on_report(state: &mut State, report: Report) -> Vec<Command> {
    match report {
        Report::QueuesLoaded {
            overview,
            discovery,
            ticket,
        } => {
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
                state.notice = Some(format!("switched to {to}"));
                open_now = state.open_after_switch.take();
                state.from_every_context = open_now.is_some();
            } else if !current(state, ticket.generation) {
                return Vec::new();
            }
            // Read-only is this place's: the flag, or what the worker found here.
            state.read_only = state.read_only_flag || overview.read_only;
            state.read_only_reason = if overview.read_only && !overview.read_only_reason.is_empty()
            {
                sanitize::one_line(&overview.read_only_reason, 300)
            } else if state.read_only {
                super::state::FLAG_READ_ONLY_REASON.into()
            } else {
                String::new()
            };
            let keep = state.queue_at_cursor();
            state.overview = overview;
            state.discovery = discovery;
            state.content_serial += 1;
            state.queues_loaded = true;
            state.depths_at = Some(state.now);
            state.connection = ConnectionState::Connected;
            state.sample_depths();
            state.refresh_urgency(keep);
            state.dirty = true;
            match open_now {
                Some(queue) => open_listed(state, &queue),
                None => Vec::new(),
            }
        }
        Report::DepthHistory {
            samples,
            heads,
            ticket,
        } => {
            if !current(state, ticket.generation) {
                return Vec::new();
            }
            let keep = state.queue_at_cursor();
            state.merge_history(samples);
            for (queue, head) in heads {
                // A read of this session is newer than the store's.
                let newer = state.heads.get(&queue).is_some_and(|h| h.at >= head.at);
                if !newer {
                    state.heads.insert(queue, head);
                }
            }
            state.refresh_urgency(keep);
            state.dirty = true;
            Vec::new()
        }
        Report::DepthsRefreshed { depths, ticket } => {
            if !current(state, ticket.generation) {
                return Vec::new();
            }
            let stale_before = depths_stale(state);
            state.depths_at = Some(state.now);
            let mut changed = stale_before;
            // One map and one pass over each list: a refresh of 10,000 queues is linear. Keyed
            // by the reported queues themselves (moved in, not copied), looked up with one key
            // refilled for each queue.
            let mut depths: FnvHashMap<QueueRef, Option<u64>> = depths.into_iter().collect();
            let mut key = QueueRef::default();
            for d in &mut state.discovery.dead_letter_queues {
                if let Some(depth) = depths.remove(key.set_to(d)) {
                    changed |= d.depth != depth;
                    d.depth = depth;
                }
            }
            for q in &mut state.discovery.other_queues {
                if let Some(depth) = depths.remove(key.set(&q.vhost, &q.name)) {
                    changed |= q.depth != depth;
                    q.depth = depth;
                }
            }
            let keep = state.queue_at_cursor();
            state.sample_depths();
            state.refresh_urgency(keep);
            state.dirty |= changed;
            Vec::new()
        }
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
            // Of two pages the later request wins, whichever lands last (the worker numbers
            // requests as it receives them).
            let older = state
                .browse
                .as_ref()
                .is_some_and(|b| b.ticket.request > ticket.request);
            if !current(state, ticket.generation) || older {
                return Vec::new();
            }
            if is_queue(state.loading.as_ref(), &vhost, &queue) {
                state.loading = None;
            }
            let same_queue = state.browse.as_ref().is_some_and(|b| b.is(&vhost, &queue));
            // The page stays packed: each message moves into its row as it is, explained from
            // a copy unpacked for the moment, so no second full copy of the page exists.
            let mut strings = Interner::default();
            let rows = messages
                .into_iter()
                .enumerate()
                .map(|(i, m)| {
                    let seen = first_seen.get(i).copied().flatten();
                    let n = replays.get(i).copied().unwrap_or(0);
                    Row::with_replays(m, seen, &state.conventions, n, &mut strings)
                })
                .collect::<Vec<Row>>();
            let shared_keys = rows
                .iter()
                .map(|r| r.key.as_str())
                .collect::<HashSet<_>>()
                .len()
                < rows.len();
            if !same_queue {
                state.selected.clear();
                state.anchor = None;
                state.msg_cursor = 0;
                state.group_cursor = 0;
                state.detail_scroll = 0;
                // Another queue's notes (the same name in another vhost is another queue).
                state.group_notes.clear();
            }
            state.browse = Some(Browse {
                vhost,
                queue,
                rows,
                stop,
                visible: Vec::new(),
                groups: Vec::new(),
                ticket,
                shared_keys,
                authors,
            });
            state.content_serial += 1;
            state.refresh_view();
            // What this read found dates the queue's oldest dead letter.
            if let Some(b) = &state.browse {
                let head = crate::domain::urgency::ReadHead::of(
                    state.now,
                    b.rows.iter().map(|r| r.arrival()),
                );
                state.heads.insert(b.id(), head);
                let keep = state.queue_at_cursor();
                state.refresh_urgency(keep);
            }
            // Keep only picks that are still in the queue.
            if let Some(b) = &state.browse {
                let present: HashSet<&str> = b.rows.iter().map(|r| r.key.as_str()).collect();
                state.selected.retain(|k| present.contains(k.as_str()));
            }
            state.dirty = true;
            Vec::new()
        }
        Report::GroupNotes {
            vhost,
            queue,
            notes,
            whole,
            ticket,
        } => {
            // Only the open queue's notes are kept: another's come again when it is opened.
            let open = state.browse.as_ref().is_some_and(|b| b.is(&vhost, &queue));
            if !current(state, ticket.generation) || !open {
                return Vec::new();
            }
            state.group_notes = notes;
            state.dirty = true;
            forget_gone_notes(state, whole, ticket)
        }
        Report::ReadCost {
            vhost,
            queue,
            text,
            ticket,
        } => {
            if !current(state, ticket.generation) {
                return Vec::new();
            }
            let queue = QueueRef::new(&vhost, &queue);
            if state.loading.as_ref() == Some(&queue) {
                state.loading = None;
            }
            state.notice = Some(format!(
                "{} Press Enter (or Ctrl-R) again to read it anyway; Esc keeps what is on screen.",
                sanitize::one_line(&text, 600)
            ));
            state.pending_reread = Some(queue);
            // Nothing was read: back on the queue list, where Enter again confirms.
            state.focus = Focus::Queues;
            state.dirty = true;
            Vec::new()
        }
        Report::ReplayPreview(preview) => {
            if !current(state, preview.ticket.generation) {
                return Vec::new();
            }
            if let Overlay::Replay(modal) = &mut state.overlay
                && modal.queue == preview.queue
                && modal.vhost == preview.vhost
                && modal.keep_attempts == preview.keep_attempts
            {
                modal.preview = Some(preview);
                state.dirty = true;
            }
            Vec::new()
        }
        Report::RestorePreview(preview) => {
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
        Report::ReplayProgress(progress) => {
            if let Overlay::Progress(run) = &mut state.overlay {
                run.progress = progress;
                state.dirty = true;
            }
            Vec::new()
        }
        Report::ReplayFinished(outcome) => {
            if let Overlay::Progress(run) = &mut state.overlay {
                run.progress = outcome.progress.clone();
                run.outcome = Some(outcome);
                state.dirty = true;
            }
            Vec::new()
        }
        Report::SwitchFailed { generation, text } => {
            // Only the switch under way: an older one was replaced and is not news.
            if state
                .switching
                .as_ref()
                .is_none_or(|s| s.generation != generation)
            {
                return Vec::new();
            }
            let to = state.switching.take().map(|s| s.to).unwrap_or_default();
            state.open_after_switch = None;
            state.error = Some(format!(
                "could not switch to {to}: {}; still on {}",
                sanitize::one_line(&text, 400),
                place(state)
            ));
            state.dirty = true;
            Vec::new()
        }
        Report::Notice(message) => {
            pager::news(state);
            state.notice = Some(message);
            state.dirty = true;
            Vec::new()
        }
        Report::Error(failure) => {
            if failure.generation.is_some_and(|g| !current(state, g)) {
                return Vec::new();
            }
            if state.loading.is_some() {
                state.loading = None;
            }
            pager::news(state);
            state.error = Some(failure.text);
            state.dirty = true;
            Vec::new()
        }
        Report::ReplaysLoaded {
            runs,
            unreached,
            ticket,
        } => {
            if !current(state, ticket.generation) {
                return Vec::new();
            }
            state.replay_runs = Some((runs, unreached));
            state.dirty = true;
            Vec::new()
        }
        Report::Operation(op) => {
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
        Report::Connection(conn) => {
            state.dirty |= state.connection != conn;
            state.connection = conn;
            Vec::new()
        }
    }
}

/// After a browse that read every message of the open queue (`whole`, and the page shown is
/// that browse's): the notes whose group has no message left are forgotten, here and in the
/// store.
fn forget_gone_notes(
    state: &mut State,
    whole: bool,
    ticket: crate::worker::protocol::Ticket,
) -> Vec<Command> {
    let Some(b) = state
        .browse
        .as_ref()
        .filter(|b| whole && b.ticket == ticket)
    else {
        return Vec::new();
    };
    let of_queue: Vec<GroupNote> = state
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
    state.group_notes.retain(|n| !gone.contains(n));
    vec![Command::ForgetGroupNotes {
        vhost,
        queue,
        notes: gone,
    }]
}

/// Whether `at` is `queue` of `vhost`.
fn is_queue(at: Option<&QueueRef>, vhost: &str, queue: &str) -> bool {
    at.is_some_and(|q| q.name == queue && q.vhost == vhost)
}

fn depths_stale(state: &State) -> bool {
    state.queues_loaded
        && state
            .depths_at
            .is_some_and(|t| state.now.as_second().saturating_sub(t.as_second()) > STALE_AFTER_SECS)
}

/// The clock: redraw only when something shown changes (ages are shown to the minute, and the
/// stale marker), and ask for fresh depths.
fn on_tick(state: &mut State, now: jiff::Timestamp) -> Vec<Command> {
    let stale_before = depths_stale(state);
    let minute_before = state.now.as_second().div_euclid(60);
    state.now = now;
    if now.as_second().div_euclid(60) != minute_before || depths_stale(state) != stale_before {
        state.dirty = true;
    }
    if state.queues_loaded && state.connection == ConnectionState::Connected {
        vec![Command::RefreshDepths]
    } else {
        Vec::new()
    }
}

fn scope(state: &State) -> Scope {
    match state.focus {
        Focus::Queues => Scope::Queues,
        Focus::Messages if state.list_mode == ListMode::Groups => Scope::Groups,
        Focus::Messages => Scope::Messages,
        Focus::Detail => Scope::Detail,
    }
}

fn on_key(state: &mut State, key: KeyEvent) -> Vec<Command> {
    let is_ctrl_c = key.code == KeyCode::Char('c') && key.modifiers.contains(KeyModifiers::CONTROL);
    if is_ctrl_c {
        return force_quit(state);
    }
    // Saving the screen works on every screen (a modal, the pager, help) and changes nothing.
    if keys::lookup(Scope::Global, &key) == Some(Action::SaveScreen) {
        save::screen(state);
        return Vec::new();
    }
    match &state.overlay {
        Overlay::Help => {
            on_help_key(state, key);
            return Vec::new();
        }
        Overlay::Log(_) => {
            on_log_key(state, key);
            return Vec::new();
        }
        Overlay::Replays(_) => {
            on_replays_key(state, key);
            return Vec::new();
        }
        Overlay::Replay(_) => return on_modal_key(state, key),
        Overlay::Archive(_) => return on_archive_key(state, key),
        Overlay::Restore(_) => return on_restore_key(state, key),
        Overlay::Progress(_) => return on_progress_key(state, key),
        Overlay::Pager(_) => return pager::on_key(state, key),
        Overlay::None => {}
    }
    if state.command_input.is_some() {
        return on_command_key(state, key);
    }
    if state.filter_input.is_some() {
        on_filter_key(state, key);
        return Vec::new();
    }
    if state.note_input.is_some() {
        return on_note_key(state, key);
    }
    let action = keys::lookup(scope(state), &key);
    // A pending quorum browse is confirmed only by the same Enter, anything else drops it.
    let pending = state.pending_browse.take();
    let reread = state.pending_reread.take();
    let protecting = state.pending_protect.take();
    // Reading the whole of a prompt does not answer it.
    if action == Some(Action::WholeText) {
        state.banner_whole = !state.banner_whole;
        state.pending_browse = pending;
        state.pending_reread = reread;
        state.pending_protect = protecting;
        return Vec::new();
    }
    if action == Some(Action::Protect) {
        state.pending_protect = protecting;
    }
    let Some(action) = action else {
        run_custom(state, &key);
        return Vec::new();
    };
    // A confirmed read of a queue whose reads cost deliveries: the same key, on the same queue.
    if let Some(queue) = reread {
        let on_it = match action {
            Action::Open => {
                state.focus == Focus::Queues && state.queue_at_cursor().as_ref() == Some(&queue)
            }
            Action::Reload => state
                .browse
                .as_ref()
                .is_none_or(|b| b.is(&queue.vhost, &queue.name)),
            _ => false,
        };
        if on_it {
            state.notice = None;
            state.focus = Focus::Messages;
            state.list_mode = ListMode::Messages;
            return browse(state, queue, true);
        }
    }
    on_action(state, action, pending)
}

/// Keys in the command log: close, or scroll with the keys that scroll a pane.
fn on_log_key(state: &mut State, key: KeyEvent) {
    if keys::lookup(Scope::Log, &key) == Some(Action::Cancel) {
        state.overlay = Overlay::None;
        return;
    }
    // Scrolled by entries: the last one (or the line that counts the dropped ones) stays
    // reachable however each wraps.
    let entries = state.oplog.len() + usize::from(state.oplog.dropped() > 0);
    let last = u16::try_from(entries.saturating_sub(1)).unwrap_or(u16::MAX);
    if let Overlay::Log(scroll) = &mut state.overlay {
        *scroll = scrolled(*scroll, last, &key);
    }
}

/// Where a list overlay scrolled by entries is after `key`, with the keys that scroll a pane:
/// between the newest (0) and `last`.
fn scrolled(scroll: u16, last: u16, key: &KeyEvent) -> u16 {
    let by = |n: i32| {
        let moved = i32::from(scroll)
            .saturating_add(n)
            .clamp(0, i32::from(last));
        u16::try_from(moved).unwrap_or(0)
    };
    match keys::lookup(Scope::Detail, key) {
        Some(Action::Up) => by(-1),
        Some(Action::Down) => by(1),
        Some(Action::PageUp) => by(-(PAGE as i32)),
        Some(Action::PageDown) => by(PAGE as i32),
        Some(Action::Top) => 0,
        Some(Action::Bottom) => last,
        _ => scroll,
    }
}

/// Keys in the Replays view: close, or scroll by runs.
fn on_replays_key(state: &mut State, key: KeyEvent) {
    if keys::lookup(Scope::Replays, &key) == Some(Action::Cancel) {
        state.overlay = Overlay::None;
        return;
    }
    let runs = state.replay_runs.as_ref().map_or(0, |(r, _)| r.len());
    let last = u16::try_from(runs.saturating_sub(1)).unwrap_or(u16::MAX);
    if let Overlay::Replays(scroll) = &mut state.overlay {
        *scroll = scrolled(*scroll, last, &key);
    }
}

/// A configured command's key on a message: hand it to the loop to run (see `custom`).
fn run_custom(state: &mut State, key: &KeyEvent) {
    if !custom::SCOPES.contains(&scope(state)) {
        return;
    }
    let Some(cmd) = custom::find(&state.custom_commands, key).cloned() else {
        return;
    };
    if let Some(why) = custom::refusal(state, &cmd) {
        state.error = Some(why);
        return;
    }
    let Some(row) = state.current_opened() else {
        state.notice = Some(format!(
            "{} ({}) runs on a message: open a queue and move to one",
            cmd.key, cmd.name
        ));
        return;
    };
    state.handover = Some(custom::Run {
        name: cmd.name,
        command: cmd.run,
        env: custom::environment(state, &row),
    });
}

/// Inside the help overlay: scroll it (the keys of the detail pane), or close it.
fn on_help_key(state: &mut State, key: KeyEvent) {
    let last = help::max_scroll(state.screen, custom::help_lines(state));
    let page = PAGE as u16;
    let s = state.help_scroll;
    state.help_scroll = match key.code {
        KeyCode::Esc | KeyCode::Char('?') | KeyCode::Char('q') | KeyCode::Enter => {
            state.overlay = Overlay::None;
            0
        }
        KeyCode::Char('j') | KeyCode::Down => s.saturating_add(1),
        KeyCode::Char('k') | KeyCode::Up => s.saturating_sub(1),
        KeyCode::PageDown => s.saturating_add(page),
        KeyCode::PageUp => s.saturating_sub(page),
        KeyCode::Char('g') | KeyCode::Home => 0,
        KeyCode::Char('G') | KeyCode::End => last,
        _ => s,
    }
    .min(last);
}

fn force_quit(state: &mut State) -> Vec<Command> {
    state.quit = true;
    if state.replay_running() {
        vec![Command::CancelReplay, Command::Quit]
    } else {
        vec![Command::Quit]
    }
}

fn on_action(state: &mut State, action: Action, pending: Option<QueueRef>) -> Vec<Command> {
    if state.every_context()
        && let Some(what) = not_in_every_context(action)
    {
        state.error = Some(format!("{what}: {EVERY_CONTEXT_LOOKS}"));
        return Vec::new();
    }
    match action {
        Action::Quit => {
            state.quit = true;
            return vec![Command::Quit];
        }
        Action::ForceQuit => return force_quit(state),
        Action::Help => state.overlay = Overlay::Help,
        Action::CommandLog => state.overlay = Overlay::Log(0),
        Action::ReplaysView => {
            state.overlay = Overlay::Replays(0);
            state.replay_runs = None;
            return vec![Command::LoadReplays];
        }
        // Handled in `on_key`, which keeps a pending prompt for it.
        Action::WholeText => {}
        Action::CommandLine => state.command_input = Some(TextArea::default()),
        Action::Filter => open_filter(state),
        Action::NextPane => {
            state.focus = match state.focus {
                Focus::Queues if state.browse.is_some() => Focus::Messages,
                Focus::Queues => Focus::Queues,
                Focus::Messages => Focus::Detail,
                Focus::Detail => Focus::Queues,
            }
        }
        Action::PrevPane => {
            state.focus = match state.focus {
                Focus::Queues if state.browse.is_some() => Focus::Detail,
                Focus::Queues => Focus::Queues,
                Focus::Messages => Focus::Queues,
                Focus::Detail => Focus::Messages,
            }
        }
        Action::Up => move_cursor(state, -1),
        Action::Down => move_cursor(state, 1),
        Action::PageUp => move_cursor(state, -(PAGE as isize)),
        Action::PageDown => move_cursor(state, PAGE as isize),
        Action::Top => move_cursor(state, isize::MIN),
        Action::Bottom => move_cursor(state, isize::MAX),
        Action::Open if state.every_context() && state.focus == Focus::Queues => {
            return open_in_its_context(state);
        }
        Action::Open => return open(state, pending),
        Action::EveryContext => return run_command_line(state, "ctx *"),
        Action::Back => {
            state.banner_whole = false;
            if state.error.take().is_none() && state.notice.take().is_none() {
                state.focus = match state.focus {
                    Focus::Detail => Focus::Messages,
                    _ => Focus::Queues,
                };
            }
        }
        Action::Reload => {
            // The list is refreshed either way.
            let mut cmds = vec![Command::LoadQueues];
            cmds.extend(read_open_queue_again(state));
            return cmds;
        }
        Action::Sort(by) => {
            let keep = state.queue_at_cursor();
            if state.sort == by {
                state.sort_reverse = !state.sort_reverse;
            } else {
                state.sort = by;
                state.sort_reverse = false;
            }
            state.refresh_urgency(keep);
        }
        Action::ToggleOrdinary => {
            state.show_ordinary = !state.show_ordinary;
            state.queue_cursor = state
                .queue_cursor
                .min(state.queue_rows().len().saturating_sub(1));
        }
        Action::ToggleGroups => {
            state.list_mode = match state.list_mode {
                ListMode::Messages => ListMode::Groups,
                ListMode::Groups => ListMode::Messages,
            };
            state.detail_scroll = 0;
            if state.focus == Focus::Detail {
                state.focus = Focus::Messages;
            }
        }
        Action::CycleGrouping => {
            state.group_by = state.group_by.next();
            state.group_cursor = 0;
            // The pane title says which.
            state.refresh_view();
        }
        Action::GroupNote => open_note(state),
        Action::ToggleSelect => toggle_select(state),
        Action::SelectRange => select_range(state),
        Action::SelectAll => {
            let keys: Vec<String> = state.visible_rows().iter().map(|r| r.key.clone()).collect();
            state.selected.extend(keys);
        }
        Action::InvertSelection => {
            let keys: Vec<String> = state.visible_rows().iter().map(|r| r.key.clone()).collect();
            for k in keys {
                if !state.selected.remove(&k) {
                    state.selected.insert(k);
                }
            }
        }
        Action::ToggleTrace => state.trace_open = !state.trace_open,
        Action::PageBody => pager::open_body(state),
        Action::PageTrace => pager::open_trace(state),
        Action::SaveScreen => save::screen(state),
        Action::SaveSnapshot => save::snapshot(state),
        Action::Replay => return start_replay(state),
        Action::Archive => return start_archive(state, ArchiveKind::Archive),
        Action::Discard => return start_archive(state, ArchiveKind::Discard),
        Action::Protect => return protect(state),
        // Modal, progress and pager actions never reach here (their scopes are not pane scopes).
        Action::Accept
        | Action::Cancel
        | Action::ToggleKeep
        | Action::ToggleDryRun
        | Action::RateUp
        | Action::RateDown
        | Action::SwitchField
        | Action::ToggleOrigin
        | Action::ToggleAgain
        | Action::Search
        | Action::NextMatch
        | Action::PrevMatch => {}
    }
    Vec::new()
}

/// Why work is not done from every context at once: each context has its own rights.
pub const EVERY_CONTEXT_LOOKS: &str = "every context at once is for looking, and each context keeps its own rights: Enter opens the queue in its own context (read-only there only if that context is), * comes back here";

/// What `action` would do that every context at once does not, in words; `None` for what it
/// does (look, sort, move, open, switch).
fn not_in_every_context(action: Action) -> Option<&'static str> {
    Some(match action {
        Action::Replay => "replay",
        Action::Archive => "archive",
        Action::Discard => "discard",
        Action::Protect => "protect",
        Action::GroupNote => "a note on a group",
        Action::ReplaysView => "the Replays view",
        Action::SaveSnapshot => "a snapshot",
        Action::ToggleOrdinary => "ordinary queues are listed in their context",
        _ => return None,
    })
}

/// Enter on every context's queue list: to the queue's context (and vhost), where it is
/// opened once the switch has landed (see `open_listed`), with that context's own rights.
fn open_in_its_context(state: &mut State) -> Vec<Command> {
    let Some(QueueRef {
        context,
        vhost,
        name,
    }) = state.queue_at_cursor()
    else {
        return Vec::new();
    };
    if context.is_empty() {
        return Vec::new();
    }
    let to = format!(
        "context {} to open {}",
        sanitize::one_line(&context, 40),
        sanitize::one_line(&name, 60)
    );
    let cmds = switch(state, context, Some(vhost.clone()), true, to);
    if !cmds.is_empty() {
        state.open_after_switch = Some(QueueRef::new(&vhost, &name));
    }
    cmds
}

/// After a switch from every context: `queue` opened, as Enter opens it (asking first where a
/// read costs deliveries), when the new place lists it.
fn open_listed(state: &mut State, queue: &QueueRef) -> Vec<Command> {
    let Some(at) = state.queue_rows().iter().position(|r| r.is(queue)) else {
        state.notice = Some(format!(
            "{} is not listed here any more",
            shown(state, queue)
        ));
        return Vec::new();
    };
    state.queue_cursor = at;
    state.focus = Focus::Queues;
    open(state, None)
}

/// Reads the open queue again, up to `browse_limit` (Ctrl-R, `:limit`). Reading a quorum queue
/// with a limit again spends deliveries: that says so and waits for Ctrl-R again.
fn read_open_queue_again(state: &mut State) -> Vec<Command> {
    let Some(b) = &state.browse else {
        return Vec::new();
    };
    let queue = b.id();
    if let Some(dlq) = state.dlq_of(&queue)
        && dlq.limit_applies(crate::domain::features::BrokerVersion::parse(
            &state.overview.broker_version,
        ))
    {
        state.notice = Some(format!(
            "Reading {} again costs each message a delivery of its limit of {} (dropped past it). Press Ctrl-R again to read it; anything else keeps what is on screen.",
            shown(state, &queue),
            dlq.delivery_limit.unwrap_or(0)
        ));
        state.pending_reread = Some(queue);
        return Vec::new();
    }
    browse(state, queue, false)
}

/// Reads `queue` (of its vhost) up to `browse_limit`; `read_again`: the operator accepted what
/// reading it again costs.
fn browse(state: &mut State, queue: QueueRef, read_again: bool) -> Vec<Command> {
    state.loading = Some(queue.clone());
    vec![Command::Browse {
        vhost: queue.vhost,
        queue: queue.name,
        limit: state.browse_limit,
        read_again,
    }]
}

/// A queue's name for the notice line, sanitised and bounded; with every vhost listed, with its
/// vhost ("billing/orders.dlq").
pub fn shown(state: &State, queue: &QueueRef) -> String {
    let name = crate::domain::archive::shown_name(&queue.name);
    let place = state.place_of(&queue.context, &queue.vhost);
    if !place.is_empty() {
        format!(
            "{}/{}",
            sanitize::one_line(&place, 60),
            sanitize::one_line(name, 80)
        )
    } else if state.every_vhost() {
        format!(
            "{}/{}",
            sanitize::one_line(&queue.vhost, 30),
            sanitize::one_line(name, 80)
        )
    } else {
        sanitize::one_line(name, 80)
    }
}

/// Moves the cursor of the focused pane; in the detail pane, scrolls.
fn move_cursor(state: &mut State, delta: isize) {
    let step = |cur: usize, len: usize| -> usize {
        if len == 0 {
            return 0;
        }
        if delta == isize::MIN {
            0
        } else if delta == isize::MAX {
            len - 1
        } else {
            cur.saturating_add_signed(delta).min(len - 1)
        }
    };
    match state.focus {
        Focus::Queues => state.queue_cursor = step(state.queue_cursor, state.queue_rows().len()),
        Focus::Messages => {
            let len = state.list_len();
            let before = (state.msg_cursor, state.group_cursor);
            match state.list_mode {
                ListMode::Messages => state.msg_cursor = step(state.msg_cursor, len),
                ListMode::Groups => state.group_cursor = step(state.group_cursor, len),
            }
            if before != (state.msg_cursor, state.group_cursor) {
                state.detail_scroll = 0;
            }
        }
        Focus::Detail => {
            // The lines the pane draws, rendered once for this message (not again per key).
            state.refresh_detail();
            let lines = state.detail.as_ref().map_or(0, |d| d.lines.len());
            let cur = usize::from(state.detail_scroll);
            state.detail_scroll = u16::try_from(step(cur, lines)).unwrap_or(u16::MAX);
        }
    }
}

fn open(state: &mut State, pending: Option<QueueRef>) -> Vec<Command> {
    match state.focus {
        Focus::Queues => {
            let Some(name) = state.queue_at_cursor() else {
                return Vec::new();
            };
            if let Some(dlq) = state.dlq_of(&name)
                && dlq.limit_applies(crate::domain::features::BrokerVersion::parse(
                    &state.overview.broker_version,
                ))
                && pending.as_ref() != Some(&name)
            {
                let limit = dlq.delivery_limit.unwrap_or(0);
                state.notice = Some(format!(
                    "{} is a quorum queue with a delivery limit of {limit}: browsing may count a delivery \
                     against each message, and past the limit the broker drops it. Enter again to browse.",
                    shown(state, &name)
                ));
                state.pending_browse = Some(name);
                return Vec::new();
            }
            state.notice = None;
            state.focus = Focus::Messages;
            state.list_mode = ListMode::Messages;
            browse(state, name, false)
        }
        Focus::Messages => {
            match state.list_mode {
                ListMode::Messages => {
                    state.focus = Focus::Detail;
                    state.detail_scroll = 0;
                }
                // A group opens as the message list narrowed to that group.
                ListMode::Groups => {
                    if let Some(g) = state.current_group() {
                        let first = g.rows.first().copied();
                        state.list_mode = ListMode::Messages;
                        if let Some(b) = &state.browse
                            && let Some(first) = first
                        {
                            state.msg_cursor =
                                b.visible.iter().position(|&i| i == first).unwrap_or(0);
                        }
                    }
                }
            }
            Vec::new()
        }
        Focus::Detail => Vec::new(),
    }
}

fn toggle_select(state: &mut State) {
    let Some(key) = state.current_row().map(|r| r.key.clone()) else {
        return;
    };
    if !state.selected.remove(&key) {
        state.selected.insert(key);
    }
    state.anchor = Some(state.msg_cursor);
    // Like a file manager: space moves on, so a run of spaces picks a run of messages.
    move_cursor(state, 1);
}

/// Selects from the anchor (last toggle) to the cursor, both included.
fn select_range(state: &mut State) {
    let anchor = state.anchor.unwrap_or(state.msg_cursor);
    let (lo, hi) = if anchor <= state.msg_cursor {
        (anchor, state.msg_cursor)
    } else {
        (state.msg_cursor, anchor)
    };
    let keys: Vec<String> = state
        .visible_rows()
        .iter()
        .skip(lo)
        .take(hi - lo + 1)
        .map(|r| r.key.clone())
        .collect();
    state.selected.extend(keys);
    state.anchor = Some(state.msg_cursor);
}

/// `r`: what to replay depends on where the operator is. Opens the modal and asks the worker for
/// the plan; nothing is published until the modal is accepted.
/// `P` on a quorum DLQ whose reads cost deliveries: says what it will set, then `P` again sets it.
fn protect(state: &mut State) -> Vec<Command> {
    let pending = state.pending_protect.take();
    if state.read_only {
        state.error = Some(state.read_only_reason.clone());
        return Vec::new();
    }
    let Some(name) = state.queue_at_cursor() else {
        return Vec::new();
    };
    let Some(dlq) = state.dlq_of(&name).filter(|d| {
        d.limit_applies(crate::domain::features::BrokerVersion::parse(
            &state.overview.broker_version,
        ))
    }) else {
        state.notice = Some(format!(
            "{} has no delivery limit that reads count against: reading it costs nothing",
            shown(state, &name)
        ));
        return Vec::new();
    };
    if pending.as_ref() == Some(&name) {
        state.notice = Some(format!("protecting {}…", shown(state, &name)));
        return vec![Command::Protect {
            vhost: name.vhost,
            queue: name.name,
        }];
    }
    state.notice = Some(format!(
        "Protect {}: set policy warren-protect-{} (delivery-limit -1, keeping every key of the policy in force; limit now {}). Press P again to set it.",
        shown(state, &name),
        sanitize::one_line(&name.name, 80),
        dlq.delivery_limit.unwrap_or(0)
    ));
    state.pending_protect = Some(name);
    Vec::new()
}

/// What a run out of the DLQ would take: the open queue, the selection (a group under the
/// cursor, the picked messages, or the message under the cursor), in words, and how many
/// messages it holds as read. `None` (with the banner saying why) when there is nothing.
fn pick(
    state: &mut State,
    verb: &str,
    from_archive: bool,
) -> Option<(QueueRef, Selection, String, u64)> {
    if state.read_only {
        state.error = Some(state.read_only_reason.clone());
        return None;
    }
    // The plan would be for the place the screen is about to leave.
    if let Some(sw) = &state.switching {
        state.notice = Some(format!("switching to {}…: {verb} once it is done", sw.to));
        return None;
    }
    let Some(b) = &state.browse else {
        state.notice = Some("open a dead-letter queue first (Enter on the queue list)".into());
        return None;
    };
    let queue = b.id();
    // The archive is a stream: nothing is consumed from it, so nothing but a restore (which
    // publishes copies) may be run from it.
    if !from_archive && state.is_archive(&queue) {
        state.notice = Some(format!(
            "{} is the archive: it is read, not worked off; r restores from it (back into the DLQ each came from, or to where it failed)",
            shown(state, &queue)
        ));
        return None;
    }
    if state.list_mode == ListMode::Groups && state.focus != Focus::Queues {
        let g = state.current_group()?;
        let what = format!("group “{}”", sanitize::one_line(&g.summary, 60));
        let count = g.rows.len() as u64;
        let group = Selection::Group(GroupChoice {
            by: state.group_by,
            name: g.key.clone(),
            waits: state.wait_queues(),
        });
        Some(match &state.filter {
            Some(f) => (
                queue,
                Selection::AllOf(vec![group, Selection::Filter(f.clone())]),
                format!("{what}, filtered"),
                count,
            ),
            None => (queue, group, what, count),
        })
    } else if !state.selected.is_empty() {
        // Counted as the run counts them: every message with a picked key.
        let n = state.selected_messages();
        Some((
            queue,
            Selection::Keys(state.selected.clone()),
            format!("{n} selected message{}", if n == 1 { "" } else { "s" }),
            n as u64,
        ))
    } else if let Some(row) = state.current_row() {
        let all = state.messages_with_key(&row.key);
        let what = match all.saturating_sub(1) {
            0 => "the message under the cursor".to_string(),
            n => format!("the message under the cursor and {n} more with its id"),
        };
        Some((
            queue,
            Selection::Keys(HashSet::from([row.key.clone()])),
            what,
            all as u64,
        ))
    } else {
        state.notice = Some(format!("nothing to {verb}: the list is empty"));
        None
    }
}

fn start_replay(state: &mut State) -> Vec<Command> {
    // In the archive, `r` restores: that is what replay means there.
    if state.archive_open() {
        return start_restore(state);
    }
    let Some((queue, selection, what, _)) = pick(state, "replay", false) else {
        return Vec::new();
    };
    state.overlay = Overlay::Replay(Box::new(ReplayModal {
        vhost: queue.vhost.clone(),
        queue: queue.name.clone(),
        selection: selection.clone(),
        what,
        preview: None,
        rate: state.replay_rate,
        rate_text: state.replay_rate.to_string(),
        keep_attempts: false,
        dry_run: false,
        typed: String::new(),
        field: ModalField::Count,
    }));
    vec![Command::PreviewReplay {
        vhost: queue.vhost,
        queue: queue.name,
        selection,
        keep_attempts: false,
    }]
}

/// `A` or `X`: the archive or discard modal on what `pick` finds.
fn start_archive(state: &mut State, kind: ArchiveKind) -> Vec<Command> {
    let verb = match kind {
        ArchiveKind::Archive => "archive",
        ArchiveKind::Discard => "discard",
    };
    if let Some((queue, selection, what, count)) = pick(state, verb, false) {
        state.overlay = Overlay::Archive(Box::new(ArchiveModal {
            kind,
            vhost: queue.vhost,
            queue: queue.name,
            selection,
            what,
            count,
            reason: TextArea::default(),
            typed: String::new(),
        }));
    }
    Vec::new()
}

/// Keys in the archive or discard modal: Esc closes it, Enter runs it (once nothing blocks it);
/// a discard takes typed digits for its count, an archive takes its reason.
fn on_archive_key(state: &mut State, key: KeyEvent) -> Vec<Command> {
    let read_only = state.read_only;
    let Overlay::Archive(modal) = &mut state.overlay else {
        return Vec::new();
    };
    match key.code {
        KeyCode::Esc => state.overlay = Overlay::None,
        KeyCode::Enter => {
            // Read-only cannot open the modal; checked again so nothing leaves the queue.
            if read_only {
                state.overlay = Overlay::None;
                state.error = Some(state.read_only_reason.clone());
                return Vec::new();
            }
            if modal.blocked().is_some() {
                return Vec::new();
            }
            let request = ReplayRequest {
                vhost: modal.vhost.clone(),
                queue: modal.queue.clone(),
                selection: modal.selection.clone(),
                expected: modal.count,
                rate: 0,
                keep_attempts: false,
                dry_run: false,
                job: modal.job(),
            };
            return run_job(state, request);
        }
        KeyCode::Char(c)
            if modal.kind == ArchiveKind::Discard
                && c.is_ascii_digit()
                && !key.modifiers.contains(KeyModifiers::CONTROL)
                && modal.typed.len() < 12 =>
        {
            modal.typed.push(c);
        }
        KeyCode::Backspace if modal.kind == ArchiveKind::Discard => {
            modal.typed.pop();
        }
        KeyCode::Char('u') if key.modifiers.contains(KeyModifiers::CONTROL) => {
            modal.reason = TextArea::default();
        }
        // One line, at most a reason's length.
        _ if modal.kind == ArchiveKind::Archive
            && (modal.reason.lines().join(" ").chars().count() < MAX_REASON_CHARS
                || !matches!(key.code, KeyCode::Char(_))) =>
        {
            modal.reason.input(key);
        }
        _ => {}
    }
    Vec::new()
}

/// An accepted archive, discard or restore: the progress window, and the run asked of the
/// worker (unthrottled; the run never moves more than `request.expected`).
fn run_job(state: &mut State, request: ReplayRequest) -> Vec<Command> {
    state.overlay = Overlay::Progress(Box::new(ReplayRun {
        job: request.job.clone(),
        vhost: request.vhost.clone(),
        queue: request.queue.clone(),
        dry_run: false,
        rate: 0,
        progress: super::event::ReplayProgress {
            total: request.expected,
            ..Default::default()
        },
        cancelling: false,
        outcome: None,
    }));
    vec![Command::Replay(request)]
}

/// `r` in the archive: the restore modal on what `pick` finds, and the worker asked for the
/// plan (back into the DLQs, what was restored before left out).
fn start_restore(state: &mut State) -> Vec<Command> {
    let Some((queue, selection, what, _)) = pick(state, "restore", true) else {
        return Vec::new();
    };
    let how = super::event::RestoreHow::default();
    state.overlay = Overlay::Restore(Box::new(RestoreModal {
        vhost: queue.vhost.clone(),
        queue: queue.name.clone(),
        selection: selection.clone(),
        what,
        how,
        preview: None,
        typed: String::new(),
    }));
    vec![Command::PreviewRestore {
        vhost: queue.vhost,
        queue: queue.name,
        selection,
        how,
    }]
}

/// Keys in the restore modal: the toggles ask for the plan again (Enter waits for it), digits
/// type the count a large restore needs, Enter runs it once nothing blocks it.
fn on_restore_key(state: &mut State, key: KeyEvent) -> Vec<Command> {
    let read_only = state.read_only;
    let Overlay::Restore(modal) = &mut state.overlay else {
        return Vec::new();
    };
    match key.code {
        KeyCode::Char(c)
            if c.is_ascii_digit()
                && !key.modifiers.contains(KeyModifiers::CONTROL)
                && modal.typed.len() < 12 =>
        {
            modal.typed.push(c);
            return Vec::new();
        }
        KeyCode::Backspace => {
            modal.typed.pop();
            return Vec::new();
        }
        _ => {}
    }
    let toggled = match keys::lookup(Scope::Restore, &key) {
        Some(Action::Cancel) => {
            state.overlay = Overlay::None;
            return Vec::new();
        }
        Some(Action::ToggleOrigin) => {
            modal.how.replay = !modal.how.replay;
            true
        }
        Some(Action::ToggleAgain) => {
            modal.how.again = !modal.how.again;
            true
        }
        Some(Action::Accept) => {
            // Read-only cannot open the modal; checked again so nothing is published.
            if read_only {
                state.overlay = Overlay::None;
                state.error = Some(state.read_only_reason.clone());
                return Vec::new();
            }
            if modal.blocked().is_some() {
                return Vec::new();
            }
            let request = ReplayRequest {
                vhost: modal.vhost.clone(),
                queue: modal.queue.clone(),
                selection: modal.selection.clone(),
                expected: modal.count().unwrap_or(0),
                rate: 0,
                keep_attempts: false,
                dry_run: false,
                job: modal.job(),
            };
            return run_job(state, request);
        }
        _ => false,
    };
    if !toggled {
        return Vec::new();
    }
    // Another count, other targets: the plan again, and the typed count no longer holds.
    modal.preview = None;
    modal.typed.clear();
    vec![Command::PreviewRestore {
        vhost: modal.vhost.clone(),
        queue: modal.queue.clone(),
        selection: modal.selection.clone(),
        how: modal.how,
    }]
}

fn on_modal_key(state: &mut State, key: KeyEvent) -> Vec<Command> {
    let read_only = state.read_only;
    let Overlay::Replay(modal) = &mut state.overlay else {
        return Vec::new();
    };
    // Digits and Backspace edit the focused field; everything else goes through the table.
    match key.code {
        KeyCode::Char(c)
            if c.is_ascii_digit() && !key.modifiers.contains(KeyModifiers::CONTROL) =>
        {
            match modal.field {
                ModalField::Count => {
                    if modal.typed.len() < 12 {
                        modal.typed.push(c);
                    }
                }
                ModalField::Rate => {
                    if modal.rate_text.len() < 5 {
                        modal.rate_text.push(c);
                    }
                    modal.rate = modal.rate_text.parse().unwrap_or(0);
                }
            }
            return Vec::new();
        }
        KeyCode::Backspace => {
            match modal.field {
                ModalField::Count => {
                    modal.typed.pop();
                }
                ModalField::Rate => {
                    modal.rate_text.pop();
                    modal.rate = modal.rate_text.parse().unwrap_or(0);
                }
            }
            return Vec::new();
        }
        _ => {}
    }
    match keys::lookup(Scope::Modal, &key) {
        Some(Action::Cancel) => state.overlay = Overlay::None,
        Some(Action::ToggleKeep) => {
            // The header changes differ: ask for the plan again; Enter waits for it.
            modal.keep_attempts = !modal.keep_attempts;
            modal.preview = None;
            return vec![Command::PreviewReplay {
                vhost: modal.vhost.clone(),
                queue: modal.queue.clone(),
                selection: modal.selection.clone(),
                keep_attempts: modal.keep_attempts,
            }];
        }
        Some(Action::ToggleDryRun) => modal.dry_run = !modal.dry_run,
        Some(Action::RateUp) => {
            modal.rate = RATE_STEPS
                .iter()
                .copied()
                .find(|&r| r > modal.rate)
                .unwrap_or(modal.rate);
            modal.rate_text = modal.rate.to_string();
        }
        Some(Action::RateDown) => {
            modal.rate = RATE_STEPS
                .iter()
                .rev()
                .copied()
                .find(|&r| r < modal.rate)
                .unwrap_or(modal.rate.min(1));
            modal.rate_text = modal.rate.to_string();
        }
        Some(Action::SwitchField) => {
            modal.field = match modal.field {
                ModalField::Count => ModalField::Rate,
                ModalField::Rate => ModalField::Count,
            };
            if modal.field == ModalField::Rate {
                // Typing replaces the rate rather than appending to it.
                modal.rate_text.clear();
            } else if modal.rate_text.is_empty() {
                modal.rate_text = modal.rate.to_string();
            }
        }
        // Enter after typing a rate sets it and leaves the field; it never starts the run.
        Some(Action::Accept) if modal.field == ModalField::Rate => {
            modal.field = ModalField::Count;
            if modal.rate_text.is_empty() {
                modal.rate_text = modal.rate.to_string();
            }
        }
        Some(Action::Accept) => {
            // Read-only cannot open the modal; checked again so no path publishes.
            if read_only {
                state.overlay = Overlay::None;
                state.error = Some(state.read_only_reason.clone());
                return Vec::new();
            }
            if modal.blocked().is_some() {
                return Vec::new();
            }
            let expected = modal.count().unwrap_or(0);
            let request = ReplayRequest {
                vhost: modal.vhost.clone(),
                queue: modal.queue.clone(),
                selection: modal.selection.clone(),
                expected,
                rate: modal.rate,
                keep_attempts: modal.keep_attempts,
                dry_run: modal.dry_run,
                job: Default::default(),
            };
            state.overlay = Overlay::Progress(Box::new(ReplayRun {
                job: request.job.clone(),
                vhost: request.vhost.clone(),
                queue: request.queue.clone(),
                dry_run: request.dry_run,
                rate: request.rate,
                progress: super::event::ReplayProgress {
                    total: expected,
                    ..Default::default()
                },
                cancelling: false,
                outcome: None,
            }));
            return vec![Command::Replay(request)];
        }
        _ => {}
    }
    Vec::new()
}

fn on_progress_key(state: &mut State, key: KeyEvent) -> Vec<Command> {
    let Overlay::Progress(run) = &mut state.overlay else {
        return Vec::new();
    };
    match keys::lookup(Scope::Progress, &key) {
        // A second Esc while settling stops at once (the engine's forcing cancel):
        // unacknowledged deliveries go back to the DLQ, possible duplicates are counted.
        Some(Action::Cancel) if run.outcome.is_none() => {
            run.cancelling = true;
            vec![Command::CancelReplay]
        }
        Some(Action::Cancel | Action::Accept) if run.outcome.is_some() => {
            let queue = QueueRef::new(&run.vhost, &run.queue);
            let dry_run = run.dry_run;
            state.overlay = Overlay::None;
            if dry_run {
                return Vec::new();
            }
            // What moved is gone from the queue: the worker drops it from what it read (a quorum
            // queue is not read again for this; others are re-read, which is free).
            state.selected.clear();
            let mut cmds = vec![Command::RefreshDepths];
            cmds.extend(browse(state, queue, false));
            cmds
        }
        _ => Vec::new(),
    }
}

fn open_filter(state: &mut State) {
    let mut input = TextArea::new(vec![state.filter_text.clone()]);
    input.move_cursor(ratatui_textarea::CursorMove::End);
    let before = state.filter.clone().map(|f| (state.filter_text.clone(), f));
    state.filter_input = Some(FilterInput { input, before });
}

/// Keys in the filter line: the list narrows as the query parses; Enter keeps, Esc restores.
fn on_filter_key(state: &mut State, key: KeyEvent) {
    let Some(fi) = &mut state.filter_input else {
        return;
    };
    match key.code {
        KeyCode::Enter => {
            state.filter_input = None;
            state.filter_error = None;
            if state.filter_pending {
                state.refresh_view();
            }
        }
        KeyCode::Esc => {
            let before = fi.before.take();
            state.filter_input = None;
            state.filter_error = None;
            match before {
                Some((text, f)) => {
                    state.filter_text = text;
                    state.filter = Some(f);
                }
                None => {
                    state.filter_text.clear();
                    state.filter = None;
                }
            }
            state.refresh_view();
        }
        // Ctrl-U clears the line, as in a shell (tui-textarea's default would undo).
        KeyCode::Char('u') if key.modifiers.contains(KeyModifiers::CONTROL) => {
            fi.input = TextArea::default();
            apply_filter_text(state, String::new());
        }
        _ => {
            // One line only: Enter is handled above, so the text area never gets a newline.
            fi.input.input(key);
            let text = fi.input.lines().join(" ");
            apply_filter_text(state, text);
        }
    }
}

/// `n` on a group: the note input, holding the group's note when it has one (the worker
/// refuses a note on a snapshot, which has no broker to keep it for).
fn open_note(state: &mut State) {
    let Some(g) = state.current_group() else {
        state.notice = Some("no group here to write a note on".into());
        return;
    };
    let Some((vhost, queue)) = state
        .browse
        .as_ref()
        .map(|b| (b.vhost.clone(), b.queue.clone()))
    else {
        return;
    };
    let text = state
        .note_for(g)
        .map(|n| n.text.clone())
        .unwrap_or_default();
    let (key, summary) = (g.key.clone(), g.summary.clone());
    let mut input = TextArea::new(vec![text]);
    input.move_cursor(ratatui_textarea::CursorMove::End);
    state.note_input = Some(NoteInput {
        input,
        vhost,
        queue,
        by: state.group_by,
        key,
        summary,
    });
}

/// Keys in the note input: Enter keeps the note (an empty one removes it), Esc drops the edit.
fn on_note_key(state: &mut State, key: KeyEvent) -> Vec<Command> {
    let Some(ni) = &mut state.note_input else {
        return Vec::new();
    };
    match key.code {
        KeyCode::Esc => {
            state.note_input = None;
            Vec::new()
        }
        KeyCode::Enter => {
            let text = grouping::note_text(&ni.input.lines().join(" "));
            let Some(ni) = state.note_input.take() else {
                return Vec::new();
            };
            vec![Command::SetGroupNote {
                vhost: ni.vhost,
                note: GroupNote {
                    queue: ni.queue,
                    by: ni.by,
                    key: ni.key,
                    text,
                    author: String::new(),
                    at: state.now,
                },
            }]
        }
        KeyCode::Char('u') if key.modifiers.contains(KeyModifiers::CONTROL) => {
            ni.input = TextArea::default();
            Vec::new()
        }
        _ => {
            // One line, at most a note's length.
            if ni.input.lines().join(" ").chars().count() < grouping::MAX_NOTE_CHARS
                || !matches!(key.code, KeyCode::Char(_))
            {
                ni.input.input(key);
            }
            Vec::new()
        }
    }
}

/// Parses `text`; a query that does not parse yet (mid-typing) keeps the last good filter and
/// says why.
pub fn apply_filter_text(state: &mut State, text: String) {
    if text.trim().is_empty() {
        state.filter = None;
        state.filter_error = None;
    } else {
        match Filter::parse(&text) {
            Ok(f) => {
                state.filter = Some(f);
                state.filter_error = None;
            }
            Err(e) => state.filter_error = Some(e.to_string()),
        }
    }
    state.filter_text = text;
    let rows = state.browse.as_ref().map_or(0, |b| b.rows.len());
    if rows > FILTER_DEBOUNCE_ROWS {
        // Filtering 100,000 messages takes tens of milliseconds: echo the keystroke now and
        // narrow the list when typing pauses (`Event::FilterSettle`).
        state.filter_pending = true;
        state.dirty = true;
    } else {
        state.refresh_view();
    }
}

/// Above this many browsed messages, the filter narrows the list when typing pauses rather than
/// on every keystroke.
pub const FILTER_DEBOUNCE_ROWS: usize = 10_000;
/// How long typing must pause before a large list is narrowed.
pub const FILTER_SETTLE: std::time::Duration = std::time::Duration::from_millis(150);

fn on_command_key(state: &mut State, key: KeyEvent) -> Vec<Command> {
    let Some(input) = &mut state.command_input else {
        return Vec::new();
    };
    match key.code {
        KeyCode::Esc => {
            state.command_input = None;
            Vec::new()
        }
        KeyCode::Enter => {
            let line = input.lines().join(" ");
            state.command_input = None;
            run_command_line(state, &line)
        }
        _ => {
            input.input(key);
            Vec::new()
        }
    }
}

/// `:` commands.
pub fn run_command_line(state: &mut State, line: &str) -> Vec<Command> {
    let mut words = line.split_whitespace();
    let verb = words.next().unwrap_or("");
    let arg: Vec<&str> = words.collect();
    let arg = arg.join(" ");
    match (verb, arg.is_empty()) {
        ("", _) => Vec::new(),
        ("q" | "q!" | "quit" | "qa", _) => force_quit(state),
        ("ctx" | "context", false) => {
            let to = if arg == crate::broker::config::EVERY_CONTEXT {
                "every context".to_string()
            } else {
                format!("context {}", sanitize::one_line(&arg, 60))
            };
            switch(state, arg, None, true, to)
        }
        ("vhost" | "vh", false) => {
            if state.every_context() {
                state.error = Some(
                    "every context at once lists each context's own vhost: open a context (:ctx NAME, or Enter on a queue) to choose another; `warren --context '*' --vhost '*'` lists every vhost of each".into(),
                );
                return Vec::new();
            }
            let to = if arg == crate::broker::config::EVERY_VHOST {
                "every vhost".to_string()
            } else {
                format!("vhost {}", sanitize::one_line(&arg, 60))
            };
            switch(state, arg, None, false, to)
        }
        ("limit", false) => {
            match arg.parse::<usize>() {
                Ok(n) if n > 0 => {
                    state.browse_limit = n;
                    state.notice = Some(format!("browsing reads up to {n} messages"));
                    // The open queue is read again with the new limit (after the usual
                    // confirmation where reading again costs deliveries).
                    read_open_queue_again(state)
                }
                _ => {
                    state.error = Some(format!(
                        "limit needs a positive number, not “{}”",
                        sanitize::one_line(&arg, 20)
                    ));
                    Vec::new()
                }
            }
        }
        ("help" | "h", _) => {
            state.overlay = Overlay::Help;
            Vec::new()
        }
        ("ctx" | "context" | "vhost" | "vh" | "limit", true) => {
            state.error = Some(format!(":{verb} needs an argument, e.g. :{verb} NAME"));
            Vec::new()
        }
        _ => {
            state.error = Some(format!(
                "unknown command :{} — try :ctx NAME, :vhost NAME, :limit N, :help, :q",
                sanitize::one_line(verb, 30)
            ));
            Vec::new()
        }
    }
}

/// `:ctx`, `:vhost`, Enter in every context, `*`: nothing changes on screen until the worker
/// reached the new place and listed it. `name` is the context (with `vhost`, that vhost of it)
/// when `context`, else the vhost.
fn switch(
    state: &mut State,
    name: String,
    vhost: Option<String>,
    context: bool,
    to: String,
) -> Vec<Command> {
    if state.replay_running() {
        state.error =
            Some("a replay is running: wait for it or cancel it (Esc) before switching".into());
        return Vec::new();
    }
    let generation = state.last_generation.max(state.generation) + 1;
    state.last_generation = generation;
    state.switching = Some(Switching { generation, to });
    // A queue to open belongs to the switch that asked for it.
    state.open_after_switch = None;
    state.error = None;
    state.dirty = true;
    if context {
        vec![Command::SwitchContext {
            name,
            vhost,
            generation,
        }]
    } else {
        vec![Command::SwitchVhost { name, generation }]
    }
}

/// Where the screen is, in words: "context prod-eu, vhost /orders".
fn place(state: &State) -> String {
    let o = &state.overview;
    if o.context.is_empty() {
        return "the current one".into();
    }
    if state.every_context() {
        return "every context".into();
    }
    format!(
        "context {}, {}",
        sanitize::one_line(&o.context, 40),
        scope_text(state)
    )
}

/// The vhost shown, in words: "vhost /orders", or "every vhost".
pub fn scope_text(state: &State) -> String {
    if state.every_vhost() {
        "every vhost".into()
    } else {
        format!("vhost {}", sanitize::one_line(&state.overview.vhost, 40))
    }
}

/// A switch succeeded: everything shown belongs to the old place, and so does every answer
/// still on its way (tagged with an older generation, dropped from now on).
fn enter_new_place(state: &mut State, generation: u64) {
    state.generation = generation;
    state.content_serial += 1;
    state.connection = ConnectionState::Connecting;
    state.discovery = Default::default();
    state.histories.clear();
    state.heads.clear();
    state.figures.clear();
    state.queue_order.clear();
    state.queues_loaded = false;
    state.browse = None;
    state.loading = None;
    state.selected.clear();
    state.anchor = None;
    state.queue_cursor = 0;
    state.msg_cursor = 0;
    state.group_cursor = 0;
    state.group_notes.clear();
    state.note_input = None;
    state.focus = Focus::Queues;
    state.error = None;
    state.notice = None;
    state.pending_browse = None;
    state.pending_reread = None;
    state.pending_protect = None;
    // A modal planned on the old place would replay there.
    if matches!(state.overlay, Overlay::Replay(_)) {
        state.overlay = Overlay::None;
    }
}
