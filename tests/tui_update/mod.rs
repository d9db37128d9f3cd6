//! The TUI's update logic, without a terminal: navigation, selection, filtering, the replay
//! modal's safety rules and read-only mode.

mod part1;
mod part2;
mod part3;
mod part4;

use crate::tui_fixtures;

use ratatui::Terminal;

use ratatui::backend::TestBackend;

use ratatui::crossterm::event::{KeyCode, KeyEvent, KeyModifiers};

use tui_fixtures::*;

use warren::domain::grouping::{GroupBy, GroupNote};

use warren::domain::selection::Selection;

use warren::tui::detail;

use warren::tui::event::{
    Event, Failure, JobKind, ReplayOutcome, ReplayPreview, ReplayProgress, Report, RestoreHow,
    RestorePreview, Ticket,
};

use warren::tui::keys::{self, BINDINGS, Key};

use warren::tui::state::{ArchiveKind, Focus, ListMode, ModalField, Overlay};

use warren::tui::update::run_command_line;

use warren::tui::{Command, Theme, update};

fn preview(queue: &str, count: u64) -> Report {
    Report::ReplayPreview(ReplayPreview {
        vhost: VHOST.into(),
        queue: queue.into(),
        count,
        targets: vec!["orders.process (default exchange, routing key orders.process)".into()],
        reaches: vec!["orders.process".into()],
        removes: vec!["x-death".into()],
        adds: vec!["warren-replay-count".into()],
        typed_count: warren::ops::Questions::before(warren::domain::run::RunKind::Replay, count)
            .typed_count,
        ..Default::default()
    })
}

/// The progress window of a run that `job` describes, for `total` messages; Esc there asks the
/// worker once to stop it (the replay's cancel).
fn progress_then_cancel(st: &mut warren::tui::State, job: impl Fn(&JobKind) -> bool, total: u64) {
    match &st.overlay {
        Overlay::Progress(run) => {
            assert!(job(&run.job), "{:?}", run.job);
            assert_eq!(run.progress.total, total);
        }
        other => panic!("expected the progress window, got {other:?}"),
    }
    let cmds = update(st, key(KeyCode::Esc));
    assert!(
        matches!(cmds.as_slice(), [Command::CancelReplay]),
        "{cmds:?}"
    );
}

/// A modal whose Enter needs `count` typed: Enter does nothing with nothing typed, nor with all
/// but its last digit; the commands of Enter once it is all typed.
fn confirm_by_typing(st: &mut warren::tui::State, count: u64) -> Vec<Command> {
    let digits = count.to_string();
    let (most, last) = digits.split_at(digits.len() - 1);
    assert!(update(st, key(KeyCode::Enter)).is_empty(), "nothing typed");
    type_text(st, most);
    assert!(
        update(st, key(KeyCode::Enter)).is_empty(),
        "{most} is not {count}"
    );
    type_text(st, last);
    update(st, key(KeyCode::Enter))
}

fn type_text(st: &mut warren::tui::State, text: &str) -> Vec<Command> {
    text.chars().flat_map(|c| update(st, ch(c))).collect()
}

/// Opens invoices.dlq (a quorum queue with a limit of 20) and lets the worker answer.
fn browsing_invoices() -> warren::tui::State {
    let mut st = loaded(false, Theme::color());
    st.queues.cursor = st
        .queue_rows()
        .iter()
        .position(|r| r.name() == "invoices.dlq")
        .unwrap();
    update(&mut st, key(KeyCode::Enter));
    let cmds = update(&mut st, key(KeyCode::Enter));
    assert!(
        matches!(
            cmds.as_slice(),
            [Command::Browse {
                read_again: false,
                ..
            }]
        ),
        "{cmds:?}"
    );
    update(
        &mut st,
        Report::MessagesLoaded {
            vhost: VHOST.into(),
            queue: "invoices.dlq".into(),
            messages: packed(orders_messages()),
            first_seen: vec![],
            replays: vec![],
            authors: Default::default(),
            stop: "end".into(),
            ticket: Ticket::default(),
        },
    );
    st
}

/// Where invoices.dlq (the fixtures' quorum DLQ with a limit) is in the queue list.
fn invoices_row(st: &warren::tui::State) -> usize {
    st.queue_rows()
        .iter()
        .position(|r| r.name() == "invoices.dlq")
        .expect("invoices.dlq is listed")
}

fn page(queue: &str, messages: Vec<warren::domain::message::DeadLetter>, ticket: Ticket) -> Report {
    let messages = packed(messages);
    Report::MessagesLoaded {
        vhost: VHOST.into(),
        queue: queue.into(),
        messages,
        first_seen: vec![],
        replays: vec![],
        authors: Default::default(),
        stop: "end".into(),
        ticket,
    }
}

fn ticket(generation: u64, request: u64) -> Ticket {
    Ticket {
        generation,
        request,
    }
}

fn pager(st: &warren::tui::State) -> &warren::tui::pager::Pager {
    match &st.overlay {
        Overlay::Pager(p) => p,
        other => panic!("no pager open: {other:?}"),
    }
}

/// What the screen shows for Enter in the replay modal: the modal's line and the footer.
fn enter_hints(st: &warren::tui::State) -> (bool, bool, String) {
    let mut term = Terminal::new(TestBackend::new(120, 40)).unwrap();
    term.draw(|f| warren::tui::view(st, f)).unwrap();
    let buf = term.backend().buffer().clone();
    let rows: Vec<String> = (0..buf.area.height)
        .map(|y| {
            (0..buf.area.width)
                .map(|x| buf[(x, y)].symbol().to_string())
                .collect()
        })
        .collect();
    let Overlay::Replay(m) = &st.overlay else {
        panic!("the modal is open")
    };
    let word = m.enter_does().to_string();
    let footer = rows.last().unwrap().contains(&format!("Enter {word} "));
    let modal = rows[..rows.len() - 1]
        .iter()
        .any(|r| r.contains(&format!("Enter  {word}")));
    (footer, modal, word)
}

/// The status bar's text.
fn header(st: &warren::tui::State) -> String {
    let mut term = Terminal::new(TestBackend::new(160, 10)).unwrap();
    term.draw(|f| warren::tui::view(st, f)).unwrap();
    let buf = term.backend().buffer().clone();
    (0..buf.area.width).map(|x| buf[(x, 0)].symbol()).collect()
}

/// The groups in view as (summary, count).
fn group_shape(st: &warren::tui::State) -> Vec<(String, usize)> {
    st.msgs
        .browse
        .as_ref()
        .map(|b| {
            b.groups
                .iter()
                .map(|g| (g.summary.clone(), g.rows.len()))
                .collect()
        })
        .unwrap_or_default()
}

fn key_esc() -> Event {
    key(KeyCode::Esc)
}

fn notes(notes: Vec<GroupNote>, whole: bool) -> Report {
    Report::GroupNotes {
        vhost: VHOST.into(),
        queue: "orders.dlq".into(),
        notes,
        whole,
        ticket: Ticket::default(),
    }
}

fn text_of(lines: &[ratatui::text::Line]) -> String {
    lines
        .iter()
        .map(|l| {
            l.spans
                .iter()
                .map(|s| s.content.as_ref())
                .collect::<String>()
        })
        .collect::<Vec<_>>()
        .join("\n")
}

fn restore_preview(how: RestoreHow, count: u64, before: u64) -> Report {
    Report::RestorePreview(RestorePreview {
        vhost: VHOST.into(),
        queue: "warren.archive".into(),
        how,
        count,
        targets: vec!["orders.dlq × 3".into()],
        restored_before: before,
        removes: vec!["warren-archived-from".into()],
        typed_count: warren::ops::Questions::before(warren::domain::run::RunKind::Restore, count)
            .typed_count,
        ..Default::default()
    })
}

/// The row of the queue `name` in `vhost` (every vhost listed).
fn row_of(st: &warren::tui::State, vhost: &str, name: &str) -> usize {
    st.queue_rows()
        .iter()
        .position(|r| r.vhost() == vhost && r.name() == name)
        .unwrap_or_else(|| panic!("{vhost}/{name} listed"))
}

/// A state switched to every context at once (`:ctx *`) from the fixtures' place.
fn every_context() -> warren::tui::State {
    let mut st = loaded(false, Theme::color());
    let cmds = run_command_line(&mut st, "ctx *");
    assert!(
        matches!(cmds.as_slice(), [Command::SwitchContext { name, vhost: None, generation: 1 }] if name == "*"),
        "{cmds:?}"
    );
    assert_eq!(
        st.switching.as_ref().map(|s| s.to.as_str()),
        Some("every context")
    );
    let cmds = update(
        &mut st,
        Report::QueuesLoaded {
            overview: every_context_overview(),
            discovery: every_context_discovery(),
            ticket: ticket(1, 5),
        },
    );
    assert!(cmds.is_empty(), "{cmds:?}");
    assert!(st.every_context() && st.switching.is_none());
    st
}

/// The row of `name` in `vhost` of `context` (every context listed).
fn row_in(st: &warren::tui::State, context: &str, vhost: &str, name: &str) -> usize {
    let id = warren::domain::discovery::QueueRef::in_context(context, vhost, name);
    st.queue_rows()
        .iter()
        .position(|r| r.is(&id))
        .unwrap_or_else(|| panic!("{context}/{vhost}/{name} listed"))
}

/// The whole screen's text, one string a line.
fn screen(st: &warren::tui::State, width: u16, height: u16) -> Vec<String> {
    let mut term = Terminal::new(TestBackend::new(width, height)).unwrap();
    term.draw(|f| warren::tui::view(st, f)).unwrap();
    let buf = term.backend().buffer().clone();
    (0..buf.area.height)
        .map(|y| (0..buf.area.width).map(|x| buf[(x, y)].symbol()).collect())
        .collect()
}
