//! The run modals: replay, archive and restore, their keys, and the progress of a run.

use super::*;
use crate::domain::canary::CanaryRule;
use crate::worker::protocol::ArchivePlace;

/// The open queue a run out of it (`verb`) would work on; `None` (with the banner saying why)
/// in read-only mode, mid-switch, with no queue open, or on the archive (but for a restore).
pub(super) fn open_queue(state: &mut State, verb: &str, from_archive: bool) -> Option<QueueRef> {
    if state.read_only {
        state.banner.error = Some(state.read_only_reason.clone());
        return None;
    }
    // The plan would be for the place the screen is about to leave.
    if let Some(sw) = &state.switching {
        state.banner.notice = Some(format!("switching to {}…: {verb} once it is done", sw.to));
        return None;
    }
    let Some(b) = &state.msgs.browse else {
        state.banner.notice =
            Some("open a dead-letter queue first (Enter on the queue list)".into());
        return None;
    };
    let queue = b.id();
    // The archive is a stream: nothing is consumed from it, so nothing but a restore (which
    // publishes copies) may be run from it.
    if !from_archive && state.is_archive(&queue) {
        state.banner.notice = Some(format!(
            "{} is the archive: it is read, not worked off; r restores from it (back into the DLQ each came from, or to where it failed)",
            shown(state, &queue)
        ));
        return None;
    }
    Some(queue)
}

/// What a run out of the DLQ would take: the open queue, the selection (a group under the
/// cursor, the picked messages, or the message under the cursor), in words, and how many
/// messages it holds as read. `None` (with the banner saying why) when there is nothing.
pub(super) fn pick(
    state: &mut State,
    verb: &str,
    from_archive: bool,
) -> Option<(QueueRef, Selection, String, u64)> {
    let queue = open_queue(state, verb, from_archive)?;
    if state.msgs.list_mode == ListMode::Groups && state.focus != Focus::Queues {
        // The group as shown, made by the grouping and filter of the view on screen (a new
        // one may be in the making: see `Browse::grouped_by`).
        let b = state.msgs.browse.as_ref()?;
        let g = state.msgs.current_group()?;
        let what = format!("group “{}”", sanitize::one_line(&g.summary, 60));
        let count = g.rows.len() as u64;
        let group = Selection::Group(GroupChoice {
            by: b.grouped_by,
            name: g.key.clone(),
            waits: state.wait_queues(),
        });
        Some(match &b.filtered_by {
            Some(f) => (
                queue,
                Selection::AllOf(vec![group, Selection::Filter(f.clone())]),
                format!("{what}, filtered"),
                count,
            ),
            None => (queue, group, what, count),
        })
    } else if !state.msgs.selected.is_empty() {
        // Counted as the run counts them: every message with a picked key.
        let n = state.msgs.selected_messages();
        Some((
            queue,
            Selection::Keys(state.msgs.selected.clone()),
            format!("{n} selected message{}", if n == 1 { "" } else { "s" }),
            n as u64,
        ))
    } else if let Some(row) = state.msgs.current_row() {
        let all = state.msgs.messages_with_key(&row.key);
        let what = match all.saturating_sub(1) {
            0 => "the message under the cursor".to_string(),
            n => format!("the message under the cursor and {n} more with its id"),
        };
        Some((
            queue,
            Selection::Keys(HashSet::from([row.key.to_string()])),
            what,
            all as u64,
        ))
    } else {
        state.banner.notice = Some(format!("nothing to {verb}: the list is empty"));
        None
    }
}

pub(super) fn start_replay(state: &mut State) -> Vec<Command> {
    // In the archive, `r` restores: that is what replay means there.
    if state.archive_open() {
        return start_restore(state);
    }
    let Some((queue, selection, what, _)) = pick(state, "replay", false) else {
        return Vec::new();
    };
    state.overlay = Overlay::Replay(Box::new(ReplayModal::new(
        (queue.vhost.clone(), queue.name.clone()),
        selection.clone(),
        what,
        state.settings.replay_rate,
    )));
    vec![Command::PreviewReplay {
        vhost: queue.vhost,
        queue: queue.name,
        selection,
        keep_attempts: false,
        edited: None,
        strip_failure_stamp: false,
    }]
}

/// `A` or `X`: the archive or discard modal on what `pick` finds.
pub(super) fn start_archive(state: &mut State, kind: ArchiveKind) -> Vec<Command> {
    let verb = kind.run().as_str();
    if let Some((queue, selection, what, count)) = pick(state, verb, false) {
        let answered = state.answers.archive.get(&state.overview.context).copied();
        let question = match (kind, answered) {
            (ArchiveKind::Archive, None) => state.overview.archive_question.clone(),
            _ => None,
        };
        state.overlay = Overlay::Archive(Box::new(ArchiveModal {
            kind,
            vhost: queue.vhost,
            queue: queue.name,
            selection,
            what,
            count,
            reason: TextArea::default(),
            typed: String::new(),
            asks: crate::ops::Questions::before(kind.run(), count),
            question,
            place: answered.unwrap_or_default(),
        }));
    }
    Vec::new()
}

/// Keys in the archive or discard modal: Esc closes it, Enter runs it (once nothing blocks it);
/// a discard takes typed digits for its count, an archive takes its reason.
pub(super) fn on_archive_key(state: &mut State, key: KeyEvent) -> Vec<Command> {
    let read_only = state.read_only;
    let Overlay::Archive(modal) = &mut state.overlay else {
        return Vec::new();
    };
    // The missing archive stream is asked about before anything else, once per context.
    if modal.question.is_some() && key.code != KeyCode::Esc {
        let place = match key.code {
            KeyCode::Char('s') => ArchivePlace::Create,
            KeyCode::Char('l') => ArchivePlace::Local,
            _ => return Vec::new(),
        };
        modal.question = None;
        modal.place = place;
        let context = state.overview.context.clone();
        state.answers.archive.insert(context, place);
        return Vec::new();
    }
    match key.code {
        KeyCode::Esc => state.overlay = Overlay::None,
        KeyCode::Enter => {
            // Read-only cannot open the modal; checked again so nothing leaves the queue.
            if read_only {
                state.overlay = Overlay::None;
                state.banner.error = Some(state.read_only_reason.clone());
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
                typed: modal.needs_typed_count(),
                job: modal.job(),
                ..Default::default()
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
pub(super) fn run_job(state: &mut State, request: ReplayRequest) -> Vec<Command> {
    state.overlay = Overlay::Progress(Box::new(ReplayRun {
        job: request.job.clone(),
        vhost: request.vhost.clone(),
        queue: request.queue.clone(),
        dry_run: false,
        rate: 0,
        progress: crate::tui::event::ReplayProgress {
            total: request.expected,
            ..Default::default()
        },
        cancelling: false,
        outcome: None,
        notes: 0,
    }));
    vec![Command::Replay(request)]
}

/// `r` in the archive: the restore modal on what `pick` finds, and the worker asked for the
/// plan (back into the DLQs, what was restored before left out).
pub(super) fn start_restore(state: &mut State) -> Vec<Command> {
    let Some((queue, selection, what, _)) = pick(state, "restore", true) else {
        return Vec::new();
    };
    let how = crate::tui::event::RestoreHow::default();
    state.overlay = Overlay::Restore(Box::new(RestoreModal {
        vhost: queue.vhost.clone(),
        queue: queue.name.clone(),
        selection: selection.clone(),
        what,
        how,
        preview: None,
        read: None,
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
pub(super) fn on_restore_key(state: &mut State, key: KeyEvent) -> Vec<Command> {
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
                state.banner.error = Some(state.read_only_reason.clone());
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
                typed: modal.needs_typed_count(),
                job: modal.job(),
                ..Default::default()
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
    modal.read = None;
    modal.typed.clear();
    vec![Command::PreviewRestore {
        vhost: modal.vhost.clone(),
        queue: modal.queue.clone(),
        selection: modal.selection.clone(),
        how: modal.how,
    }]
}

pub(super) fn on_modal_key(state: &mut State, key: KeyEvent) -> Vec<Command> {
    let context = state.overview.context.clone();
    let Overlay::Replay(modal) = &mut state.overlay else {
        return Vec::new();
    };
    // Digits and Backspace edit the focused field; everything else goes through the table.
    if edit_field(modal, key) {
        return Vec::new();
    }
    match keys::lookup(Scope::Modal, &key) {
        Some(Action::Cancel) => state.overlay = Overlay::None,
        Some(Action::ToggleKeep) => {
            // The header changes differ: ask for the plan again; Enter waits for it.
            modal.keep_attempts = !modal.keep_attempts;
            return plan_again(modal);
        }
        Some(Action::ToggleFailureStamp)
            if modal
                .preview
                .as_ref()
                .is_some_and(|p| p.failure_stamp_strippable) =>
        {
            modal.strip_failure_stamp = !modal.strip_failure_stamp;
            return plan_again(modal);
        }
        Some(Action::ToggleDryRun) => modal.dry_run = !modal.dry_run,
        Some(Action::CycleCanary) => {
            modal.canary = next_canary(modal.canary);
            modal.canary_touched = true;
        }
        Some(a @ (Action::SharedRecord | Action::LocalRecord))
            if modal.audit_question().is_some() =>
        {
            let yes = a == Action::SharedRecord;
            modal.create_audit = Some(yes);
            state.answers.audit.insert(context, yes);
        }
        Some(Action::RateUp) => rate_up(modal),
        Some(Action::RateDown) => rate_down(modal),
        Some(Action::SwitchField) => {
            modal.field = match modal.field {
                ModalField::Count => ModalField::Rate,
                ModalField::Rate => ModalField::Backlog,
                ModalField::Backlog => ModalField::Count,
            };
            typed_fields(modal);
        }
        // Enter after typing a rate or a cap sets it and leaves the field; it never starts
        // the run.
        Some(Action::Accept) if modal.field != ModalField::Count => {
            modal.field = ModalField::Count;
            typed_fields(modal);
        }
        Some(Action::Accept) => return accept_replay(state),
        _ => {}
    }
    Vec::new()
}

/// A digit typed into the focused field, or Backspace there; whether the key was one.
fn edit_field(modal: &mut ReplayModal, key: KeyEvent) -> bool {
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
                ModalField::Backlog => {
                    if modal.backlog_text.len() < 7 {
                        modal.backlog_text.push(c);
                    }
                    modal.max_backlog = modal.backlog_text.parse().unwrap_or(0);
                }
            }
            true
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
                ModalField::Backlog => {
                    modal.backlog_text.pop();
                    modal.max_backlog = modal.backlog_text.parse().unwrap_or(0);
                }
            }
            true
        }
        _ => false,
    }
}

/// The next rate step up.
fn rate_up(modal: &mut ReplayModal) {
    modal.rate = RATE_STEPS
        .iter()
        .copied()
        .find(|&r| r > modal.rate)
        .unwrap_or(modal.rate);
    modal.rate_text = modal.rate.to_string();
}

/// The next rate step down.
fn rate_down(modal: &mut ReplayModal) {
    modal.rate = RATE_STEPS
        .iter()
        .rev()
        .copied()
        .find(|&r| r < modal.rate)
        .unwrap_or(modal.rate.min(1));
    modal.rate_text = modal.rate.to_string();
}

/// Enter on the count: the run starts, its progress shown in the modal's place (unless
/// read-only, or the modal says what blocks it).
fn accept_replay(state: &mut State) -> Vec<Command> {
    let canary_wait = state.settings.canary_wait;
    let context = state.overview.context.clone();
    let Overlay::Replay(modal) = &mut state.overlay else {
        return Vec::new();
    };
    // Read-only cannot open the modal; checked again so no path publishes.
    if state.read_only {
        state.overlay = Overlay::None;
        state.banner.error = Some(state.read_only_reason.clone());
        return Vec::new();
    }
    if modal.blocked().is_some() {
        return Vec::new();
    }
    // Enter without an answer keeps the run on this machine's record: that is the
    // answer, remembered for the context, and not asked or said again.
    if modal.audit_question().is_some() && !modal.dry_run {
        modal.create_audit = Some(false);
        state.answers.audit.insert(context, false);
    }
    let request = replay_request(modal, canary_wait);
    let expected = request.expected;
    state.overlay = Overlay::Progress(Box::new(ReplayRun {
        job: request.job.clone(),
        vhost: request.vhost.clone(),
        queue: request.queue.clone(),
        dry_run: request.dry_run,
        rate: request.rate,
        progress: crate::tui::event::ReplayProgress {
            total: expected,
            ..Default::default()
        },
        cancelling: false,
        outcome: None,
        notes: 0,
    }));
    vec![Command::Replay(request)]
}

/// The typed fields as the focus leaves them: typing into the focused one replaces its value
/// rather than appending to it; one left with nothing typed keeps the value it had.
fn typed_fields(modal: &mut ReplayModal) {
    if modal.field == ModalField::Rate {
        modal.rate_text.clear();
    } else if modal.rate_text.is_empty() {
        modal.rate_text = modal.rate.to_string();
    }
    if modal.field == ModalField::Backlog {
        modal.backlog_text.clear();
    } else if modal.backlog_text.is_empty() {
        modal.backlog_text = modal.max_backlog.to_string();
    }
}

/// Keys on a question: Enter or `y` sends its command with the answer, Esc or `n` drops it.
pub(super) fn on_question_key(state: &mut State, key: KeyEvent) -> Vec<Command> {
    let Overlay::Question(q) = &state.overlay else {
        return Vec::new();
    };
    match key.code {
        KeyCode::Enter | KeyCode::Char('y') => {
            let yes = q.yes.clone();
            state.overlay = Overlay::None;
            vec![yes]
        }
        KeyCode::Esc | KeyCode::Char('n') => {
            state.overlay = Overlay::None;
            state.banner.notice = Some("nothing created, nothing changed".into());
            Vec::new()
        }
        _ => Vec::new(),
    }
}

pub(super) fn on_progress_key(state: &mut State, key: KeyEvent) -> Vec<Command> {
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
            let left = outcome_line(run);
            state.overlay = Overlay::None;
            if dry_run {
                return Vec::new();
            }
            // The line the run leaves: what happened, in its own verb (the rest is in `@`).
            state.banner.error = None;
            state.banner.notice = Some(left);
            // What moved is gone from the queue: the worker drops it from what it read (a quorum
            // queue is not read again for this; others are re-read, which is free).
            state.msgs.selected.clear();
            let mut cmds = vec![Command::RefreshDepths];
            cmds.extend(browse(state, queue, false, false));
            cmds
        }
        _ => Vec::new(),
    }
}

/// The canary sizes `c` steps through, then off.
fn next_canary(now: Option<u64>) -> Option<u64> {
    use crate::domain::canary::SIZES;
    match now {
        None => Some(SIZES[0]),
        Some(n) => SIZES.iter().copied().find(|&s| s > n),
    }
}

/// The plan for the modal's header settings changed: asked again; Enter waits for it.
fn plan_again(modal: &mut ReplayModal) -> Vec<Command> {
    modal.preview = None;
    vec![Command::PreviewReplay {
        vhost: modal.vhost.clone(),
        queue: modal.queue.clone(),
        selection: modal.selection.clone(),
        keep_attempts: modal.keep_attempts,
        strip_failure_stamp: modal.strip_failure_stamp,
        edited: modal.edited.as_ref().map(|e| e.text.clone()),
    }]
}

/// What Enter in the replay modal asks the worker to run.
fn replay_request(modal: &ReplayModal, canary_wait: std::time::Duration) -> ReplayRequest {
    ReplayRequest {
        vhost: modal.vhost.clone(),
        queue: modal.queue.clone(),
        selection: modal.selection.clone(),
        expected: modal.count().unwrap_or(0),
        typed: modal.needs_typed_count(),
        rate: modal.rate,
        keep_attempts: modal.keep_attempts,
        strip_failure_stamp: modal.strip_failure_stamp,
        dry_run: modal.dry_run,
        job: Default::default(),
        // A dry run publishes nothing: there is nothing for a canary to try; nor is there
        // where no more is selected than the canary takes (the modal said so).
        canary: modal
            .canary
            .filter(|&n| {
                !modal.dry_run && crate::domain::canary::applies(n, modal.count().unwrap_or(0))
            })
            .map(|size| CanaryRule {
                size,
                wait: canary_wait,
                tolerance: 0,
            }),
        max_backlog: (modal.max_backlog > 0).then_some(modal.max_backlog),
        create_audit: modal.create_audit,
        edited: modal.edited.as_ref().map(|e| e.text.clone()),
    }
}

/// The line a finished run leaves on the notice line: its headline (`Summary::headline`, in
/// the operation's own verb), then where the notes from along the way went.
pub fn outcome_line(run: &ReplayRun) -> String {
    let Some(o) = &run.outcome else {
        return String::new();
    };
    let head = match (&o.error, o.headline.is_empty()) {
        (Some(e), false) if !o.headline.contains(e.as_str()) => {
            sanitize::one_line(&format!("{}; {e}", o.headline), 600)
        }
        (_, false) => sanitize::one_line(&o.headline, 600),
        (Some(e), true) => sanitize::one_line(e, 600),
        (None, true) => "finished".into(),
    };
    match run.notes {
        0 => head,
        1 => format!("{head} · 1 note in @"),
        n => format!("{head} · {n} notes in @"),
    }
}
