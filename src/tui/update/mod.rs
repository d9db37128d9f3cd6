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
    NoteInput, Overlay, Question, RATE_STEPS, ReplayModal, ReplayRun, RestoreModal, Row,
    STALE_AFTER_SECS, State, Switching,
};
use super::{pager, save};
use crate::domain::brief::Interner;
use crate::domain::discovery::QueueRef;
use crate::domain::filter::Filter;
use crate::domain::grouping::{self, GroupNote};
use crate::domain::sanitize;
use crate::domain::selection::{GroupChoice, Selection};
use crate::worker::protocol::{Command, ReplayRequest};

mod banner;
mod command;
mod copy;
mod edit;
mod glance;
mod inputs;
mod modals;
mod reports;

pub use banner::{ERROR_SECS, NOTICE_SECS};
use command::*;
pub use command::{run_command_line, scope_text};
use edit::*;
pub use glance::GLANCE_SETTLE;
use inputs::*;
pub use inputs::{FILTER_DEBOUNCE_ROWS, FILTER_SETTLE, apply_filter_text};
pub use modals::outcome_line;
use modals::*;
use reports::*;

/// Rows a page key moves.
const PAGE: usize = 10;

pub fn update(state: &mut State, event: impl Into<Event>) -> Vec<Command> {
    let commands = on_event(state, event.into());
    banner::observe(state);
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
            state.help.scroll = state.help.scroll.min(help::max_scroll(
                state.screen,
                custom::help_lines(state),
                &state.help.query,
            ));
            state.dirty = true;
            Vec::new()
        }
        Event::Tick(now) => on_tick(state, now),
        Event::FilterSettle => {
            if state.filtering.pending {
                state.refresh_view();
                state.dirty = true;
            }
            Vec::new()
        }
        Event::Idle => {
            state.idle_step();
            Vec::new()
        }
        Event::Worker(report) => on_report(state, *report),
        Event::GlanceSettle => glance::settle(state),
        Event::Edited(result) => {
            edited(state, result);
            Vec::new()
        }
    }
}

/// The clock: redraw only when something shown changes (ages are shown to the minute, and the
/// stale marker), and ask for fresh depths.
fn on_tick(state: &mut State, now: jiff::Timestamp) -> Vec<Command> {
    let stale_before = depths_stale(state);
    let minute_before = state.now.as_second().div_euclid(60);
    state.now = now;
    banner::expire(state);
    if now.as_second().div_euclid(60) != minute_before || depths_stale(state) != stale_before {
        state.dirty = true;
    }
    if state.queues.loaded && state.connection == ConnectionState::Connected {
        vec![Command::RefreshDepths]
    } else {
        Vec::new()
    }
}

fn scope(state: &State) -> Scope {
    match state.focus {
        Focus::Queues => Scope::Queues,
        Focus::Messages if state.msgs.list_mode == ListMode::Groups => Scope::Groups,
        Focus::Messages => Scope::Messages,
        Focus::Detail => Scope::Detail,
    }
}

fn on_key(state: &mut State, key: KeyEvent) -> Vec<Command> {
    let is_ctrl_c = key.code == KeyCode::Char('c') && key.modifiers.contains(KeyModifiers::CONTROL);
    if is_ctrl_c {
        return force_quit(state);
    }
    // Warren's editor takes every key (Ctrl-S saves the edit there).
    if matches!(state.overlay, Overlay::Edit(_)) {
        return on_edit_key(state, key);
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
        Overlay::Edit(_) => return on_edit_key(state, key),
        Overlay::Contexts(_) => return on_picker_key(state, key),
        Overlay::Question(_) => return on_question_key(state, key),
        Overlay::None => {}
    }
    if state.inputs.command.is_some() {
        return on_command_key(state, key);
    }
    if state.inputs.filter.is_some() {
        on_filter_key(state, key);
        return Vec::new();
    }
    if state.inputs.queue_filter.is_some() {
        return on_queue_filter_key(state, key);
    }
    if state.inputs.note.is_some() {
        return on_note_key(state, key);
    }
    let action = keys::lookup(scope(state), &key);
    // A pending quorum browse is confirmed only by the same Enter, anything else drops it.
    let pending = state.pending.browse.take();
    let reread = state.pending.reread.take();
    let protecting = state.pending.protect.take();
    // Reading the whole of a prompt does not answer it.
    if action == Some(Action::WholeText) {
        state.banner.whole = !state.banner.whole;
        state.pending.browse = pending;
        state.pending.reread = reread;
        state.pending.protect = protecting;
        return Vec::new();
    }
    if action == Some(Action::Protect) {
        state.pending.protect = protecting;
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
                .msgs
                .browse
                .as_ref()
                .is_none_or(|b| b.is(&queue.vhost, &queue.name)),
            _ => false,
        };
        if on_it {
            state.banner.notice = None;
            state.focus = Focus::Messages;
            state.msgs.list_mode = ListMode::Messages;
            // Ctrl-R again reads it again from the start; Enter again opens it.
            return browse(state, queue, true, action == Action::Reload);
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
    let Some(cmd) = custom::find(&state.settings.custom_commands, key).cloned() else {
        return;
    };
    if let Some(why) = custom::refusal(state, &cmd) {
        state.banner.error = Some(why);
        return;
    }
    let Some(row) = state.current_opened() else {
        state.banner.notice = Some(format!(
            "{} ({}) runs on a message: open a queue and move to one",
            cmd.key, cmd.name
        ));
        return;
    };
    state.handover.custom = Some(custom::Run {
        name: cmd.name,
        command: cmd.run,
        env: custom::environment(state, &row),
    });
}

/// Inside the help overlay: search it (`/`, as k9s and lazygit), scroll it (the keys of the
/// detail pane), or close it. Esc first drops a search, then closes.
fn on_help_key(state: &mut State, key: KeyEvent) {
    if state.help.typing {
        match key.code {
            KeyCode::Enter => state.help.typing = false,
            KeyCode::Esc => {
                state.help.typing = false;
                state.help.query.clear();
            }
            KeyCode::Backspace => {
                state.help.query.pop();
            }
            KeyCode::Char('u') if key.modifiers.contains(KeyModifiers::CONTROL) => {
                state.help.query.clear();
            }
            KeyCode::Char(c)
                if !key.modifiers.contains(KeyModifiers::CONTROL)
                    && state.help.query.chars().count() < 40 =>
            {
                state.help.query.push(c);
            }
            _ => {}
        }
        state.help.scroll = 0;
        return;
    }
    let last = help::max_scroll(state.screen, custom::help_lines(state), &state.help.query);
    let page = PAGE as u16;
    let s = state.help.scroll;
    state.help.scroll = match key.code {
        KeyCode::Char('/') => {
            state.help.typing = true;
            state.help.query.clear();
            0
        }
        KeyCode::Esc if !state.help.query.is_empty() => {
            state.help.query.clear();
            0
        }
        KeyCode::Esc | KeyCode::Char('?') | KeyCode::Char('q') | KeyCode::Enter => {
            state.overlay = Overlay::None;
            state.help.query.clear();
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
    if refused_here(state, action) {
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
        Action::ReplaysView => return open_replays(state),
        // Handled in `on_key`, which keeps a pending prompt for it.
        Action::WholeText => {}
        Action::CommandLine => state.inputs.command = Some(TextArea::default()),
        Action::Filter => open_filter(state),
        Action::QueueFilter => open_queue_filter(state),
        Action::NextPane => next_pane(state),
        Action::PrevPane => prev_pane(state),
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
        Action::Back => back(state),
        Action::Reload => return reload(state),
        Action::Sort(by) => sort_queues(state, by),
        Action::OrderMessages(by) => order_messages(state, by),
        Action::ToggleOrdinary => toggle_ordinary(state),
        Action::ToggleGroups => toggle_groups(state),
        Action::CycleGrouping => cycle_grouping(state),
        Action::GroupNote => open_note(state),
        Action::ToggleSelect => toggle_select(state),
        Action::SelectRange => select_range(state),
        Action::SelectAll => select_all(state),
        Action::InvertSelection => invert_selection(state),
        Action::ToggleTrace => state.msgs.trace_open = !state.msgs.trace_open,
        Action::PageBody => pager::open_body(state),
        Action::PageTrace => pager::open_trace(state),
        Action::CopyId => copy::id(state),
        Action::CopyBody => copy::body(state),
        Action::SaveScreen => save::screen(state),
        Action::SaveSnapshot => save::snapshot(state),
        Action::Replay => return start_replay(state),
        Action::Edit => return open_editor(state),
        Action::Archive => return start_archive(state, ArchiveKind::Archive),
        Action::Discard => return start_archive(state, ArchiveKind::Discard),
        Action::Protect => return protect(state),
        // Modal, progress and pager actions never reach here (their scopes are not pane scopes).
        Action::Accept
        | Action::Cancel
        | Action::ToggleKeep
        | Action::ToggleFailureStamp
        | Action::ToggleDryRun
        | Action::CycleCanary
        | Action::SharedRecord
        | Action::LocalRecord
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

/// Whether `action` is not done here, with why on the banner: work from every context at once,
/// or opening or protecting a queue that holds stuck dead letters.
fn refused_here(state: &mut State, action: Action) -> bool {
    if state.every_context()
        && let Some(what) = not_in_every_context(action)
    {
        state.banner.error = Some(format!("{what}: {EVERY_CONTEXT_LOOKS}"));
        return true;
    }
    // A queue holding stuck dead letters is no DLQ: nothing can be read from it, so what the
    // queue list would do to a DLQ (open it, protect it) says what it is and what to do.
    if matches!(action, Action::Open | Action::Protect)
        && let Some(words) = state.stuck_words()
    {
        state.banner.error = None;
        state.banner.notice = Some(words);
        return true;
    }
    false
}

/// The Replays view, its runs asked for afresh.
fn open_replays(state: &mut State) -> Vec<Command> {
    state.overlay = Overlay::Replays(0);
    state.replay_runs = None;
    vec![Command::LoadReplays]
}

/// Tab: the queues, the messages (once a queue is open), the detail, round again.
fn next_pane(state: &mut State) {
    state.focus = match state.focus {
        Focus::Queues if state.msgs.browse.is_some() => Focus::Messages,
        Focus::Queues => Focus::Queues,
        Focus::Messages => Focus::Detail,
        Focus::Detail => Focus::Queues,
    }
}

/// Shift-Tab: `next_pane` the other way round.
fn prev_pane(state: &mut State) {
    state.focus = match state.focus {
        Focus::Queues if state.msgs.browse.is_some() => Focus::Detail,
        Focus::Queues => Focus::Queues,
        Focus::Messages => Focus::Queues,
        Focus::Detail => Focus::Messages,
    }
}

/// Esc: one pane back (on the list, its filter first), and any banner with it.
fn back(state: &mut State) {
    // Esc does one job, going back; a banner it finds goes with it (banners also go
    // by themselves: `banner::expire`), so it never costs a second Esc.
    state.banner.whole = false;
    state.banner.error = None;
    state.banner.notice = None;
    // On the list, Esc first drops its filter (as k9s does).
    if state.focus == Focus::Queues && !state.queues.filter.is_empty() {
        state.set_queue_filter(String::new());
        return;
    }
    state.focus = match state.focus {
        Focus::Detail => Focus::Messages,
        _ => Focus::Queues,
    };
}

/// The list again, and the open queue's messages if one is open.
fn reload(state: &mut State) -> Vec<Command> {
    // The list is refreshed either way.
    let mut cmds = vec![Command::LoadQueues];
    cmds.extend(read_open_queue_again(state));
    cmds
}

/// Sorts the list by `by`, or the other way round when it already is; the cursor stays on its
/// queue.
fn sort_queues(state: &mut State, by: crate::domain::urgency::SortBy) {
    let keep = state.queue_at_cursor();
    if state.queues.sort == by {
        state.queues.sort_reverse = !state.queues.sort_reverse;
    } else {
        state.queues.sort = by;
        state.queues.sort_reverse = false;
    }
    state.refresh_urgency(keep);
}

/// Lists ordinary queues too, or only the dead-letter ones.
fn toggle_ordinary(state: &mut State) {
    state.queues.show_ordinary = !state.queues.show_ordinary;
    state.queues.cursor = state
        .queues
        .cursor
        .min(state.queue_rows().len().saturating_sub(1));
}

/// The messages pane shows messages, or their groups.
fn toggle_groups(state: &mut State) {
    state.msgs.list_mode = match state.msgs.list_mode {
        ListMode::Messages => ListMode::Groups,
        ListMode::Groups => ListMode::Messages,
    };
    state.msgs.detail_scroll = 0;
    if state.focus == Focus::Detail {
        state.focus = Focus::Messages;
    }
}

/// Groups by the next grouping.
fn cycle_grouping(state: &mut State) {
    state.msgs.group_by = state.msgs.group_by.next();
    state.msgs.group_cursor = 0;
    // The pane title says which.
    state.refresh_view();
}

/// Selects every row shown.
fn select_all(state: &mut State) {
    let keys: Vec<String> = state
        .msgs
        .visible_rows()
        .iter()
        .map(|r| r.key.to_string())
        .collect();
    state.msgs.selected.extend(keys);
}

/// Selects the rows shown that were not, and unselects those that were.
fn invert_selection(state: &mut State) {
    let keys: Vec<String> = state
        .msgs
        .visible_rows()
        .iter()
        .map(|r| r.key.to_string())
        .collect();
    for k in keys {
        if !state.msgs.selected.remove(&k) {
            state.msgs.selected.insert(k);
        }
    }
}

/// Why work is not done from every context at once: each context has its own rights.
pub const EVERY_CONTEXT_LOOKS: &str = "every context at once is for looking, and each context keeps its own rights: Enter opens the queue in its own context (read-only there only if that context is), * comes back here";

/// What `action` would do that every context at once does not, in words; `None` for what it
/// does (look, sort, move, open, switch).
fn not_in_every_context(action: Action) -> Option<&'static str> {
    Some(match action {
        Action::Replay => "replay",
        Action::Edit => "edit",
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
        state.pending.open_after_switch = Some(QueueRef::new(&vhost, &name));
    }
    cmds
}

/// After a switch from every context: `queue` opened, as Enter opens it (asking first where a
/// read costs deliveries), when the new place lists it.
fn open_listed(state: &mut State, queue: &QueueRef) -> Vec<Command> {
    let Some(at) = state.queue_rows().iter().position(|r| r.is(queue)) else {
        state.banner.notice = Some(format!(
            "{} is not listed here any more",
            shown(state, queue)
        ));
        return Vec::new();
    };
    state.queues.cursor = at;
    state.focus = Focus::Queues;
    open(state, None)
}

/// Reads the open queue again, up to `browse_limit` (Ctrl-R, `:limit`). Reading a quorum queue
/// with a limit again spends deliveries: that says so and waits for Ctrl-R again.
fn read_open_queue_again(state: &mut State) -> Vec<Command> {
    let Some(b) = &state.msgs.browse else {
        return Vec::new();
    };
    let queue = b.id();
    if let Some(dlq) = state.dlq_of(&queue)
        && dlq.limit_applies(crate::domain::features::BrokerVersion::parse(
            &state.overview.broker_version,
        ))
    {
        state.banner.notice = Some(format!(
            "Reading {} again costs each message a delivery of its limit of {} (dropped past it). Press Ctrl-R again to read it; anything else keeps what is on screen.",
            shown(state, &queue),
            dlq.delivery_limit.unwrap_or(0)
        ));
        state.pending.reread = Some(queue);
        return Vec::new();
    }
    browse(state, queue, false, true)
}

/// Reads `queue` (of its vhost) up to `browse_limit`; `read_again`: the operator accepted what
/// reading it again costs; `restart`: asked to read it again from the start (Ctrl-R, `:limit`),
/// which replaces a read of it under way (otherwise that read answers: see `worker::plan`).
fn browse(state: &mut State, queue: QueueRef, read_again: bool, restart: bool) -> Vec<Command> {
    state.msgs.loading = Some(queue.clone());
    vec![Command::Browse {
        vhost: queue.vhost,
        queue: queue.name,
        limit: state.settings.browse_limit,
        read_again,
        restart,
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
        Focus::Queues => {
            state.queues.cursor = step(state.queues.cursor, state.queue_rows().len());
            glance::cursor_moved(state);
        }
        Focus::Messages => {
            let len = state.msgs.list_len();
            let before = (state.msgs.cursor, state.msgs.group_cursor);
            match state.msgs.list_mode {
                ListMode::Messages => state.msgs.cursor = step(state.msgs.cursor, len),
                ListMode::Groups => state.msgs.group_cursor = step(state.msgs.group_cursor, len),
            }
            if before != (state.msgs.cursor, state.msgs.group_cursor) {
                state.msgs.detail_scroll = 0;
            }
        }
        Focus::Detail => {
            // The lines the pane draws, rendered once for this message (not again per key).
            state.refresh_detail();
            let lines = state.msgs.detail.as_ref().map_or(0, |d| d.lines.len());
            let cur = usize::from(state.msgs.detail_scroll);
            state.msgs.detail_scroll = u16::try_from(step(cur, lines)).unwrap_or(u16::MAX);
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
                state.banner.notice = Some(format!(
                    "{} is a quorum queue with a delivery limit of {limit}: browsing may count a delivery \
                     against each message, and past the limit the broker drops it. Enter again to browse.",
                    shown(state, &name)
                ));
                state.pending.browse = Some(name);
                return Vec::new();
            }
            state.banner.notice = None;
            state.focus = Focus::Messages;
            state.msgs.list_mode = ListMode::Messages;
            browse(state, name, false, false)
        }
        Focus::Messages => {
            match state.msgs.list_mode {
                ListMode::Messages => {
                    state.focus = Focus::Detail;
                    state.msgs.detail_scroll = 0;
                }
                // A group opens as the message list narrowed to that group.
                ListMode::Groups => {
                    if let Some(g) = state.msgs.current_group() {
                        let first = g.rows.first().copied();
                        state.msgs.list_mode = ListMode::Messages;
                        if let Some(b) = &state.msgs.browse
                            && let Some(first) = first
                        {
                            state.msgs.cursor =
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
    let Some(key) = state.msgs.current_row().map(|r| r.key.to_string()) else {
        return;
    };
    if !state.msgs.selected.remove(&key) {
        state.msgs.selected.insert(key);
    }
    state.msgs.anchor = Some(state.msgs.cursor);
    // Like a file manager: space moves on in the list, so a run of spaces picks a run of
    // messages; in the detail pane it stays on the message being read.
    if state.focus != Focus::Detail {
        move_cursor(state, 1);
    }
}

/// Selects from the anchor (last toggle) to the cursor, both included.
fn select_range(state: &mut State) {
    let anchor = state.msgs.anchor.unwrap_or(state.msgs.cursor);
    let (lo, hi) = if anchor <= state.msgs.cursor {
        (anchor, state.msgs.cursor)
    } else {
        (state.msgs.cursor, anchor)
    };
    let keys: Vec<String> = state
        .msgs
        .visible_rows()
        .iter()
        .skip(lo)
        .take(hi - lo + 1)
        .map(|r| r.key.to_string())
        .collect();
    state.msgs.selected.extend(keys);
    state.msgs.anchor = Some(state.msgs.cursor);
}

/// `P` on a quorum DLQ whose reads cost deliveries: says what it will set, then `P` again sets it.
fn protect(state: &mut State) -> Vec<Command> {
    let pending = state.pending.protect.take();
    if state.read_only {
        state.banner.error = Some(state.read_only_reason.clone());
        return Vec::new();
    }
    let Some(name) = state.queue_at_cursor() else {
        return Vec::new();
    };
    let version = crate::domain::features::BrokerVersion::parse(&state.overview.broker_version);
    let Some(dlq) = state.dlq_of(&name).filter(|d| d.limit_applies(version)) else {
        state.banner.notice = Some(format!(
            "{} has no delivery limit that reads count against: reading it costs nothing",
            shown(state, &name)
        ));
        return Vec::new();
    };
    // Decided before it is offered: where no policy can lift the limit (3.x, or an argument on
    // 4.x), say so and the way out now, not after the operator accepted a policy.
    if let Some(why) = version.and_then(|v| {
        crate::domain::protect::refusal(v, &dlq.name, dlq.delivery_limit, dlq.delivery_limit_arg)
    }) {
        state.banner.error = Some(sanitize::one_line(&why, 1000));
        return Vec::new();
    }
    if pending.as_ref() == Some(&name) {
        state.banner.notice = Some(format!("protecting {}…", shown(state, &name)));
        return vec![Command::Protect {
            vhost: name.vhost,
            queue: name.name,
        }];
    }
    state.banner.notice = Some(format!(
        "Protect {}: set policy warren-protect-{} (delivery-limit -1, keeping every key of the policy in force; limit now {}). Press P again to set it.",
        shown(state, &name),
        sanitize::one_line(&name.name, 80),
        dlq.delivery_limit.unwrap_or(0)
    ));
    state.pending.protect = Some(name);
    Vec::new()
}

/// Orders the message list by `by` (the same order again: reversed), the cursor staying on
/// the message it was on.
fn order_messages(state: &mut State, by: crate::tui::state::MsgOrder) {
    if state.msgs.order == by {
        state.msgs.order_reverse = !state.msgs.order_reverse;
    } else {
        state.msgs.order = by;
        state.msgs.order_reverse = false;
    }
    let (order, reverse) = (state.msgs.order, state.msgs.order_reverse);
    let cursor = state.msgs.cursor;
    if let Some(b) = &mut state.msgs.browse {
        let on = b.visible.get(cursor).copied();
        // The same rows in another order: the filter and the groups stand.
        b.arrange(order, reverse);
        if let Some(on) = on {
            state.msgs.cursor = b.visible.iter().position(|&i| i == on).unwrap_or(0);
        }
    }
}
