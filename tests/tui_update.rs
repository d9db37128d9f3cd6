//! The TUI's update logic, without a terminal: navigation, selection, filtering, the replay
//! modal's safety rules and read-only mode.

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

#[test]
fn queue_list_navigation_clamps_and_jumps() {
    let mut st = loaded(false, Theme::color());
    assert_eq!(st.queues.cursor, 0);
    update(&mut st, ch('k'));
    assert_eq!(st.queues.cursor, 0, "k at the top stays");
    update(&mut st, ch('j'));
    update(&mut st, key(KeyCode::Down));
    assert_eq!(st.queues.cursor, 2);
    update(&mut st, ch('G'));
    assert_eq!(st.queues.cursor, 7, "G goes to the last dead-letter queue");
    update(&mut st, ch('j'));
    assert_eq!(st.queues.cursor, 7);
    update(&mut st, ch('g'));
    assert_eq!(st.queues.cursor, 0);
    // Ordinary queues appear only behind the toggle.
    assert_eq!(st.queue_rows().len(), 8);
    update(&mut st, ch('o'));
    assert_eq!(st.queue_rows().len(), 10);
    update(&mut st, ch('G'));
    assert_eq!(
        st.queue_name_at_cursor().as_deref(),
        Some("orders.retry.wait")
    );
    update(&mut st, ch('o'));
    assert_eq!(st.queues.cursor, 7, "cursor clamped when the list shrinks");
}

/// A queue holding stuck dead letters (at-least-once, no route) is listed after the DLQs and
/// not again among the ordinary queues; Enter on it reads nothing and says what it is and what
/// to do, and nothing that works on a DLQ (replay, edit, archive, discard, protect) is offered
/// from it, even with another queue open.
#[test]
fn enter_on_a_stuck_queue_says_why_and_does_not_browse() {
    let mut st = loaded_with_stuck(Theme::color());
    assert_eq!(st.queue_rows().len(), 9, "8 DLQs and the stuck queue");
    update(&mut st, ch('G'));
    assert_eq!(st.queue_name_at_cursor().as_deref(), Some("payments.work"));
    assert!(st.stuck_at_cursor().is_some());
    // The cursor resting there reads nothing either.
    assert!(update(&mut st, Event::GlanceSettle).is_empty());
    let cmds = update(&mut st, key(KeyCode::Enter));
    assert!(cmds.is_empty(), "{cmds:?}");
    assert!(st.msgs.loading.is_none() && st.msgs.browse.is_none());
    assert_eq!(st.focus, Focus::Queues);
    let notice = st.banner.notice.clone().unwrap_or_default();
    for words in [
        "payments.work: 3 dead letters stuck inside it (at-least-once), in no DLQ",
        "nothing here can be browsed or moved",
        "dead-letter exchange 'payments.dlx' has no binding to any queue",
        "To free them, bind a dead-letter queue to 'payments.dlx'",
    ] {
        assert!(notice.contains(words), "{words:?} in {notice}");
    }
    assert!(st.banner.error.is_none());

    // With a DLQ open, the queue list offers nothing that works on a DLQ from the stuck row:
    // the run keys are the message panes' (not the list's), and P says what Enter says.
    let mut st = loaded_with_stuck(Theme::color());
    update(&mut st, key(KeyCode::Enter));
    update(&mut st, messages_loaded("orders.dlq", orders_messages()));
    assert!(st.msgs.browse.is_some());
    update(&mut st, key(KeyCode::Esc));
    assert_eq!(st.focus, Focus::Queues);
    st.queues.cursor = st
        .queue_rows()
        .iter()
        .position(|r| r.name() == "payments.work")
        .expect("the stuck row");
    for c in ['r', 'E', 'A', 'X', 'P', 'l'] {
        st.banner.notice = None;
        let cmds = update(&mut st, ch(c));
        assert!(cmds.is_empty(), "{c}: {cmds:?}");
        assert!(matches!(st.overlay, Overlay::None), "{c}: {:?}", st.overlay);
        assert_eq!(st.focus, Focus::Queues, "{c}");
        if matches!(c, 'P' | 'l') {
            assert!(
                st.banner
                    .notice
                    .as_deref()
                    .is_some_and(|n| n.contains("stuck inside it")),
                "{c}: {:?}",
                st.banner.notice
            );
        }
    }
    assert!(
        st.msgs
            .browse
            .as_ref()
            .is_some_and(|b| b.queue == "orders.dlq"),
        "the open queue stays as it was"
    );
    // Ordinary queues behind `o`: the stuck one is not listed twice.
    update(&mut st, ch('o'));
    let names: Vec<String> = st
        .queue_rows()
        .iter()
        .map(|r| r.name().to_string())
        .collect();
    assert_eq!(
        names.iter().filter(|n| *n == "payments.work").count(),
        1,
        "{names:?}"
    );
    assert_eq!(names.len(), 11, "{names:?}");
}

#[test]
fn enter_browses_and_tab_moves_between_panes() {
    let mut st = loaded(false, Theme::color());
    update(&mut st, key(KeyCode::Tab));
    assert_eq!(
        st.focus,
        Focus::Queues,
        "no message pane to go to before a browse"
    );
    let cmds = update(&mut st, key(KeyCode::Enter));
    assert!(
        matches!(cmds.as_slice(), [Command::Browse { queue, limit: 500, read_again: false, .. }] if queue == "orders.dlq"),
        "{cmds:?}"
    );
    assert_eq!(st.focus, Focus::Messages);
    assert_eq!(
        st.msgs.loading.as_ref().map(|q| q.name.as_str()),
        Some("orders.dlq")
    );
    update(
        &mut st,
        Report::MessagesLoaded {
            vhost: VHOST.into(),
            queue: "orders.dlq".into(),
            messages: packed(orders_messages()),
            first_seen: vec![],
            replays: vec![],
            authors: Default::default(),
            stop: "end".into(),
            ticket: Ticket::default(),
        },
    );
    assert!(st.msgs.loading.is_none());
    assert_eq!(st.msgs.visible_rows().len(), 6);
    update(&mut st, key(KeyCode::Enter));
    assert_eq!(st.focus, Focus::Detail);
    update(&mut st, key(KeyCode::Esc));
    assert_eq!(st.focus, Focus::Messages);
    update(&mut st, key(KeyCode::Tab));
    update(&mut st, key(KeyCode::Tab));
    assert_eq!(st.focus, Focus::Queues);
    update(&mut st, key(KeyCode::BackTab));
    assert_eq!(st.focus, Focus::Detail);
}

#[test]
fn detail_scroll_is_clamped_to_the_content() {
    let mut st = browsed(false, "orders.dlq", orders_messages());
    update(&mut st, key(KeyCode::Enter));
    update(&mut st, ch('G'));
    let bottom = st.msgs.detail_scroll;
    assert!(
        bottom > 5,
        "the ladder's detail has more than a few lines: {bottom}"
    );
    update(&mut st, ch('j'));
    assert_eq!(st.msgs.detail_scroll, bottom);
    update(&mut st, ch('k'));
    assert_eq!(st.msgs.detail_scroll, bottom - 1);
    update(&mut st, ch('g'));
    assert_eq!(st.msgs.detail_scroll, 0);
}

#[test]
fn quorum_queue_with_a_delivery_limit_needs_a_second_enter() {
    let mut st = loaded(false, Theme::color());
    st.queues.cursor = st
        .queue_rows()
        .iter()
        .position(|r| r.name() == "invoices.dlq")
        .unwrap();
    let cmds = update(&mut st, key(KeyCode::Enter));
    assert!(cmds.is_empty(), "first Enter only warns: {cmds:?}");
    assert!(
        st.banner
            .notice
            .as_deref()
            .unwrap_or("")
            .contains("delivery limit of 20")
    );
    // Anything else drops the pending browse.
    update(&mut st, ch('j'));
    update(&mut st, ch('k'));
    assert!(update(&mut st, key(KeyCode::Enter)).is_empty());
    let cmds = update(&mut st, key(KeyCode::Enter));
    assert!(
        matches!(cmds.as_slice(), [Command::Browse { queue, .. }] if queue == "invoices.dlq"),
        "{cmds:?}"
    );
}

#[test]
fn selection_keys_toggle_range_all_and_invert() {
    let mut st = browsed(false, "orders.dlq", orders_messages());
    update(&mut st, ch(' '));
    assert_eq!(st.msgs.selected.len(), 1);
    assert_eq!(st.msgs.cursor, 1, "space moves on");
    update(&mut st, ch('j'));
    update(&mut st, ch('j'));
    update(&mut st, ch('V'));
    assert_eq!(
        st.msgs.selected.len(),
        4,
        "range from the toggled row to the cursor"
    );
    update(&mut st, ch('*'));
    assert_eq!(st.msgs.selected.len(), 2);
    update(&mut st, ch('a'));
    assert_eq!(st.msgs.selected.len(), 6);
    update(&mut st, ch('*'));
    assert!(st.msgs.selected.is_empty());
    // Toggling the same row twice unselects it.
    update(&mut st, ch('g'));
    update(&mut st, ch(' '));
    update(&mut st, ch('k'));
    update(&mut st, ch(' '));
    assert!(st.msgs.selected.is_empty());
}

#[test]
fn filter_narrows_as_you_type_and_esc_restores() {
    let mut st = browsed(false, "orders.dlq", orders_messages());
    update(&mut st, ch('/'));
    assert!(st.inputs.filter.is_some());
    type_text(&mut st, "reason:expired");
    // Every ladder message also expired in the wait queue; only the plain expiry lacks a rejection.
    assert_eq!(st.msgs.visible_rows().len(), 6);
    type_text(&mut st, " -reason:rejected");
    assert_eq!(st.msgs.visible_rows().len(), 1);
    assert_eq!(
        st.msgs.visible_rows()[0]
            .letter
            .unpack()
            .properties
            .message_id
            .as_deref(),
        Some("order-exp-5")
    );
    update(&mut st, key(KeyCode::Enter));
    assert!(st.inputs.filter.is_none());
    assert_eq!(st.msgs.visible_rows().len(), 1, "Enter keeps the filter");

    // A query that does not parse (yet) keeps the last good filter and says why.
    update(&mut st, ch('/'));
    type_text(&mut st, " age:>");
    assert!(st.filtering.error.is_some());
    assert_eq!(st.msgs.visible_rows().len(), 1);
    update(&mut st, key(KeyCode::Esc));
    assert_eq!(
        st.filtering.text, "reason:expired -reason:rejected",
        "Esc restores the filter from before"
    );
    assert_eq!(st.msgs.visible_rows().len(), 1);

    // Clearing the text shows everything again.
    update(&mut st, ch('/'));
    for _ in 0..st.filtering.text.chars().count() {
        update(&mut st, key(KeyCode::Backspace));
    }
    assert_eq!(st.msgs.visible_rows().len(), 6);
}

#[test]
fn ctrl_u_clears_the_filter_line() {
    let mut st = browsed(false, "orders.dlq", orders_messages());
    update(&mut st, ch('/'));
    type_text(&mut st, "reason:expired -reason:rejected");
    assert_eq!(st.msgs.visible_rows().len(), 1);
    update(
        &mut st,
        Event::Key(KeyEvent::new(KeyCode::Char('u'), KeyModifiers::CONTROL)),
    );
    assert_eq!(st.filtering.text, "", "Ctrl-U clears, it does not undo");
    assert!(st.filtering.filter.is_none());
    assert_eq!(st.msgs.visible_rows().len(), 6);
    let line = st.inputs.filter.as_ref().map(|f| f.input.lines().join(""));
    assert_eq!(line.as_deref(), Some(""), "the input line is empty too");
    // Typing goes on from the empty line.
    type_text(&mut st, "reason:expired");
    assert_eq!(st.filtering.text, "reason:expired");
}

#[test]
fn filter_keys_do_not_trigger_pane_actions() {
    let mut st = browsed(false, "orders.dlq", orders_messages());
    update(&mut st, ch('/'));
    let cmds = type_text(&mut st, "qr ");
    assert!(cmds.is_empty(), "q and r are text in the filter: {cmds:?}");
    assert!(!st.quit);
    assert!(matches!(st.overlay, Overlay::None));
}

#[test]
fn groups_by_fingerprint_and_replay_a_group() {
    let mut st = browsed(false, "orders.dlq", orders_messages());
    update(&mut st, ch('f'));
    assert_eq!(st.msgs.list_mode, ListMode::Groups);
    let groups = &st.msgs.browse.as_ref().unwrap().groups;
    assert_eq!(groups.len(), 2);
    assert_eq!(groups[0].rows.len(), 5, "the ladder group first (biggest)");
    let key = groups[0].key.clone();
    let cmds = update(&mut st, ch('r'));
    match cmds.as_slice() {
        [
            Command::PreviewReplay {
                queue,
                selection: Selection::Group(g),
                ..
            },
        ] => {
            assert_eq!(queue, "orders.dlq");
            assert_eq!(g.name, key);
            assert_eq!(g.by, GroupBy::Fingerprint);
        }
        other => panic!("expected a group preview, got {other:?}"),
    }
    assert!(matches!(st.overlay, Overlay::Replay(_)));
}

#[test]
fn enter_on_a_group_shows_its_messages() {
    let mut st = browsed(false, "orders.dlq", orders_messages());
    update(&mut st, ch('f'));
    update(&mut st, ch('j'));
    update(&mut st, key(KeyCode::Enter));
    assert_eq!(st.msgs.list_mode, ListMode::Messages);
    assert_eq!(
        st.msgs
            .current_row()
            .unwrap()
            .letter
            .unpack()
            .properties
            .message_id
            .as_deref(),
        Some("order-exp-5")
    );
}

#[test]
fn read_only_blocks_replay_and_says_why() {
    let mut st = browsed(true, "orders.dlq", orders_messages());
    update(&mut st, ch('a'));
    let cmds = update(&mut st, ch('r'));
    assert!(cmds.is_empty());
    assert!(matches!(st.overlay, Overlay::None), "the modal cannot open");
    assert!(
        st.banner
            .error
            .as_deref()
            .unwrap_or("")
            .contains("read-only")
    );
}

/// Every key in every pane and mode, many times over: read-only never yields a replay.
#[test]
fn read_only_never_emits_a_replay_command() {
    let mut st = browsed(true, "orders.dlq", orders_messages());
    let mut events: Vec<Event> = (' '..='~').map(ch).collect();
    for code in [
        KeyCode::Enter,
        KeyCode::Esc,
        KeyCode::Tab,
        KeyCode::BackTab,
        KeyCode::Backspace,
        KeyCode::Up,
        KeyCode::Down,
    ] {
        events.push(key(code));
    }
    events.push(preview("orders.dlq", 3).into());
    for round in 0..20 {
        for i in 0..events.len() {
            // Vary the order between rounds; skip quitting so the sweep goes on.
            let ev = &events[(i * (round + 1) + round) % events.len()];
            if matches!(ev, Event::Key(k) if k.code == KeyCode::Char('q')) {
                continue;
            }
            for cmd in update(&mut st, ev.clone()) {
                assert!(
                    !matches!(cmd, Command::Replay(_) | Command::PreviewReplay { .. }),
                    "read-only emitted {cmd:?}"
                );
            }
            assert!(!matches!(
                st.overlay,
                Overlay::Replay(_) | Overlay::Progress(_)
            ));
            st.quit = false;
            // A `:ctx …` typed mid-sweep empties the screen: browse again so replay keys matter
            // (answers of the new session's generation).
            if st.msgs.browse.is_none() {
                let ticket = Ticket {
                    generation: st.generation,
                    request: 0,
                };
                update(
                    &mut st,
                    Report::QueuesLoaded {
                        overview: overview(),
                        discovery: discovery(),
                        ticket,
                    },
                );
                update(
                    &mut st,
                    Report::MessagesLoaded {
                        vhost: VHOST.into(),
                        queue: "orders.dlq".into(),
                        messages: packed(orders_messages()),
                        first_seen: vec![],
                        replays: vec![],
                        authors: Default::default(),
                        stop: "end".into(),
                        ticket,
                    },
                );
                assert!(st.msgs.browse.is_some(), "the new session's page is shown");
                st.focus = Focus::Messages;
            }
        }
    }
}

#[test]
fn read_only_belongs_to_the_place_shown_with_its_own_reason() {
    let mut st = warren::tui::State::new(now(), false, Theme::color());
    let mut ov = overview();
    ov.read_only = true;
    ov.read_only_reason =
        "replay is disabled: context 'prod-eu' is configured read_only = true".into();
    update(
        &mut st,
        Report::QueuesLoaded {
            overview: ov,
            discovery: discovery(),
            ticket: Ticket::default(),
        },
    );
    assert!(st.read_only);
    assert!(st.read_only_reason.contains("context 'prod-eu'"));
    // `:ctx staging`, a writable context: read-only does not stick.
    run_command_line(&mut st, "ctx staging");
    assert!(st.read_only, "still on prod-eu until the switch succeeded");
    let mut staging = overview();
    staging.context = "staging".into();
    update(
        &mut st,
        Report::QueuesLoaded {
            overview: staging,
            discovery: discovery(),
            ticket: ticket(1, 0),
        },
    );
    assert!(!st.read_only && st.read_only_reason.is_empty());
    // No write permission in a vhost: read-only there, and the reason says so.
    run_command_line(&mut st, "vhost /audit");
    let mut audit = overview();
    audit.read_only = true;
    audit.read_only_reason =
        "replay is disabled: user 'ops' has no write permission in vhost '/audit'".into();
    update(
        &mut st,
        Report::QueuesLoaded {
            overview: audit,
            discovery: discovery(),
            ticket: ticket(2, 0),
        },
    );
    st.focus = Focus::Messages;
    update(&mut st, page("orders.dlq", orders_messages(), ticket(2, 1)));
    update(&mut st, ch('r'));
    assert!(
        st.banner
            .error
            .as_deref()
            .unwrap_or("")
            .contains("no write permission"),
        "{:?}",
        st.banner.error
    );

    // --read-only holds wherever Warren goes.
    let mut st = warren::tui::State::new(now(), true, Theme::color());
    update(
        &mut st,
        Report::QueuesLoaded {
            overview: overview(),
            discovery: discovery(),
            ticket: Ticket::default(),
        },
    );
    assert!(st.read_only && st.read_only_reason.contains("--read-only"));
}

#[test]
fn modal_accept_needs_the_plan_then_emits_one_replay() {
    let mut st = browsed(false, "orders.dlq", orders_messages());
    update(&mut st, ch(' '));
    update(&mut st, ch(' '));
    let cmds = update(&mut st, ch('r'));
    assert!(
        matches!(&cmds[..], [Command::PreviewReplay { selection: Selection::Keys(k), .. }] if k.len() == 2),
        "{cmds:?}"
    );
    assert!(
        update(&mut st, key(KeyCode::Enter)).is_empty(),
        "no plan yet: Enter does nothing"
    );
    update(&mut st, preview("orders.dlq", 2));
    update(&mut st, ch('+'));
    update(&mut st, ch('t'));
    // Keeping attempts changes the plan: the worker answers with the plan for that setting.
    let mut kept = preview("orders.dlq", 2);
    if let Report::ReplayPreview(p) = &mut kept {
        p.keep_attempts = true;
    }
    update(&mut st, kept);
    let cmds = update(&mut st, key(KeyCode::Enter));
    match cmds.as_slice() {
        [Command::Replay(r)] => {
            assert_eq!(r.queue, "orders.dlq");
            assert_eq!(r.expected, 2);
            assert_eq!(r.rate, 100, "+ raised the rate one step from 50");
            assert!(r.keep_attempts);
            assert!(!r.dry_run);
            assert!(matches!(&r.selection, Selection::Keys(k) if k.len() == 2));
        }
        other => panic!("expected one replay, got {other:?}"),
    }
    assert!(matches!(st.overlay, Overlay::Progress(_)));
}

#[test]
fn esc_in_the_modal_sends_nothing() {
    let mut st = browsed(false, "orders.dlq", orders_messages());
    update(&mut st, ch('r'));
    update(&mut st, preview("orders.dlq", 1));
    assert!(update(&mut st, key(KeyCode::Esc)).is_empty());
    assert!(matches!(st.overlay, Overlay::None));
}

#[test]
fn above_100_messages_the_count_must_be_typed() {
    let mut st = browsed(false, "orders.dlq", orders_messages());
    update(&mut st, ch('f'));
    update(&mut st, ch('r'));
    update(&mut st, preview("orders.dlq", 412));
    assert!(update(&mut st, key(KeyCode::Enter)).is_empty());
    type_text(&mut st, "41");
    assert!(
        update(&mut st, key(KeyCode::Enter)).is_empty(),
        "41 is not 412"
    );
    type_text(&mut st, "3");
    assert!(
        update(&mut st, key(KeyCode::Enter)).is_empty(),
        "413 is not 412"
    );
    update(&mut st, key(KeyCode::Backspace));
    type_text(&mut st, "2");
    let cmds = update(&mut st, key(KeyCode::Enter));
    assert!(
        matches!(cmds.as_slice(), [Command::Replay(r)] if r.expected == 412),
        "{cmds:?}"
    );
}

#[test]
fn dry_run_needs_no_typed_count_and_rate_can_be_typed() {
    let mut st = browsed(false, "orders.dlq", orders_messages());
    update(&mut st, ch('r'));
    update(&mut st, preview("orders.dlq", 500));
    update(&mut st, ch('d'));
    update(&mut st, key(KeyCode::Tab));
    type_text(&mut st, "0");
    assert!(
        update(&mut st, key(KeyCode::Enter)).is_empty(),
        "Enter in the rate field only leaves it"
    );
    assert!(
        update(&mut st, key(KeyCode::Enter)).is_empty(),
        "a rate of 0 cannot be accepted"
    );
    update(&mut st, key(KeyCode::Tab));
    type_text(&mut st, "250");
    assert!(update(&mut st, key(KeyCode::Enter)).is_empty());
    let cmds = update(&mut st, key(KeyCode::Enter));
    assert!(
        matches!(cmds.as_slice(), [Command::Replay(r)] if r.dry_run && r.rate == 250),
        "{cmds:?}"
    );
}

#[test]
fn esc_during_progress_cancels_once_and_finishing_rereads_the_queue() {
    let mut st = browsed(false, "orders.dlq", orders_messages());
    update(&mut st, ch('r'));
    update(&mut st, preview("orders.dlq", 1));
    update(&mut st, key(KeyCode::Enter));
    update(
        &mut st,
        Report::ReplayProgress(ReplayProgress {
            total: 1,
            moved: 0,
            rate: 10.0,
            ..Default::default()
        }),
    );
    assert!(st.replay_running());
    assert!(
        update(&mut st, ch('q')).is_empty(),
        "q does not leave a running replay"
    );
    assert!(!st.quit);
    let cmds = update(&mut st, key(KeyCode::Esc));
    assert!(
        matches!(cmds.as_slice(), [Command::CancelReplay]),
        "{cmds:?}"
    );
    // A second Esc while settling forces the stop (the engine's second cancel ends the run at
    // once: unacknowledged deliveries go back, possible duplicates are counted).
    assert!(
        matches!(
            update(&mut st, key(KeyCode::Esc)).as_slice(),
            [Command::CancelReplay]
        ),
        "a second Esc forces the stop"
    );
    update(
        &mut st,
        Report::ReplayFinished(ReplayOutcome {
            progress: ReplayProgress {
                total: 1,
                moved: 0,
                ..Default::default()
            },
            cancelled: true,
            ..Default::default()
        }),
    );
    assert!(!st.replay_running());
    let cmds = update(&mut st, key(KeyCode::Esc));
    assert!(
        matches!(cmds.as_slice(), [Command::RefreshDepths, Command::Browse { queue, .. }] if queue == "orders.dlq"),
        "{cmds:?}"
    );
    assert!(matches!(st.overlay, Overlay::None));
}

#[test]
fn ctrl_c_during_a_replay_cancels_then_quits() {
    let mut st = browsed(false, "orders.dlq", orders_messages());
    update(&mut st, ch('r'));
    update(&mut st, preview("orders.dlq", 1));
    update(&mut st, key(KeyCode::Enter));
    let cmds = update(&mut st, ctrl('c'));
    assert!(
        matches!(cmds.as_slice(), [Command::CancelReplay, Command::Quit]),
        "{cmds:?}"
    );
    assert!(st.quit);
}

#[test]
fn ticks_redraw_only_when_the_minute_changes_and_refresh_depths() {
    let mut st = loaded(false, Theme::color());
    st.take_dirty();
    let cmds = update(
        &mut st,
        Event::Tick(jiff::Timestamp::from_second(NOW + 5).unwrap()),
    );
    assert!(matches!(cmds.as_slice(), [Command::RefreshDepths]));
    assert!(!st.take_dirty(), "same minute: nothing to redraw");
    update(
        &mut st,
        Report::DepthsRefreshed {
            depths: vec![(at("orders.dlq"), Some(412))],
            ticket: Ticket::default(),
        },
    );
    assert!(!st.take_dirty(), "same depth: nothing to redraw");
    update(
        &mut st,
        Report::DepthsRefreshed {
            depths: vec![(at("orders.dlq"), Some(413))],
            ticket: Ticket::default(),
        },
    );
    assert!(st.take_dirty());
    assert_eq!(st.dlq("orders.dlq").unwrap().depth, Some(413));
    update(
        &mut st,
        Event::Tick(jiff::Timestamp::from_second(NOW + 60).unwrap()),
    );
    assert!(st.take_dirty(), "ages are shown to the minute");
}

#[test]
fn command_line() {
    let mut st = browsed(false, "orders.dlq", orders_messages());
    update(&mut st, ch(':'));
    type_text(&mut st, "ctx staging");
    let cmds = update(&mut st, key(KeyCode::Enter));
    assert!(
        matches!(cmds.as_slice(), [Command::SwitchContext { name, vhost: None, generation: 1 }] if name == "staging"),
        "{cmds:?}"
    );
    assert!(
        st.msgs.browse.is_some() && st.queues.loaded,
        "nothing changes until the worker reached the new place"
    );
    assert_eq!(st.switching.as_ref().map(|s| s.generation), Some(1));

    update(&mut st, ch(':'));
    type_text(&mut st, "vhost /billing");
    let cmds = update(&mut st, key(KeyCode::Enter));
    assert!(
        matches!(cmds.as_slice(), [Command::SwitchVhost { name, generation: 2 }] if name == "/billing"),
        "{cmds:?}"
    );

    update(&mut st, ch(':'));
    type_text(&mut st, "frobnicate");
    assert!(update(&mut st, key(KeyCode::Enter)).is_empty());
    assert!(
        st.banner
            .error
            .as_deref()
            .unwrap_or("")
            .contains("unknown command")
    );

    update(&mut st, ch(':'));
    type_text(&mut st, "q");
    let cmds = update(&mut st, key(KeyCode::Enter));
    assert!(matches!(cmds.as_slice(), [Command::Quit]));
    assert!(st.quit);
}

#[test]
fn help_opens_and_closes() {
    let mut st = loaded(false, Theme::color());
    update(&mut st, ch('?'));
    assert!(matches!(st.overlay, Overlay::Help));
    assert!(update(&mut st, ch('r')).is_empty());
    update(&mut st, key(KeyCode::Esc));
    assert!(matches!(st.overlay, Overlay::None));
}

/// The help screen and the handler share the table: every key listed reaches its action.
#[test]
fn every_documented_key_reaches_its_action() {
    for b in BINDINGS {
        for k in b.keys {
            let ev = match *k {
                Key::Char(c) => KeyEvent::new(
                    ratatui::crossterm::event::KeyCode::Char(c),
                    KeyModifiers::NONE,
                ),
                Key::Code(code) => KeyEvent::new(code, KeyModifiers::NONE),
                Key::Ctrl(c) => KeyEvent::new(
                    ratatui::crossterm::event::KeyCode::Char(c),
                    KeyModifiers::CONTROL,
                ),
            };
            let reached = b
                .scopes
                .iter()
                .any(|s| keys::lookup(*s, &ev) == Some(b.action));
            assert!(
                reached,
                "{} ({:?}) is shadowed by another binding",
                b.label, b.action
            );
        }
    }
}

#[test]
fn a_large_list_narrows_when_typing_pauses_not_on_every_keystroke() {
    let big = warren::tui::update::FILTER_DEBOUNCE_ROWS as u64 + 1;
    let messages: Vec<_> = (0..big)
        .map(|n| {
            if n == 7 {
                broker_expired(n)
            } else {
                broker_ladder(n)
            }
        })
        .collect();
    let mut st = browsed(false, "orders.dlq", messages);
    update(&mut st, ch('/'));
    type_text(&mut st, "reason:expired -reason:rejected");
    assert!(st.filtering.pending, "the keystrokes only echo");
    assert_eq!(st.msgs.visible_rows().len() as u64, big, "not narrowed yet");
    assert!(st.take_dirty(), "the typed text is drawn at once");
    update(&mut st, Event::FilterSettle);
    assert!(!st.filtering.pending);
    // The loop's idle moments make the view, a slice at a time.
    while st.has_idle_work() {
        update(&mut st, Event::Idle);
    }
    assert_eq!(
        st.msgs.visible_rows().len(),
        1,
        "narrowed once typing paused"
    );
    // Enter applies a pending filter without waiting for the pause.
    update(&mut st, ch(' '));
    assert!(st.filtering.pending);
    update(&mut st, key(KeyCode::Enter));
    assert!(!st.filtering.pending);
    while st.has_idle_work() {
        update(&mut st, Event::Idle);
    }
    assert_eq!(st.msgs.visible_rows().len(), 1);
}

#[test]
fn keep_attempts_asks_for_the_plan_again_and_ignores_the_stale_one() {
    let mut st = browsed(false, "orders.dlq", orders_messages());
    update(&mut st, ch('r'));
    update(&mut st, preview("orders.dlq", 3));
    let cmds = update(&mut st, ch('t'));
    assert!(
        matches!(
            &cmds[..],
            [Command::PreviewReplay {
                keep_attempts: true,
                ..
            }]
        ),
        "{cmds:?}"
    );
    // The plan for the old setting arrives late: not shown, and Enter waits.
    update(&mut st, preview("orders.dlq", 3));
    assert!(update(&mut st, key(KeyCode::Enter)).is_empty());
    let mut kept = preview("orders.dlq", 3);
    if let Report::ReplayPreview(p) = &mut kept {
        p.keep_attempts = true;
        p.removes.clear();
    }
    update(&mut st, kept);
    let cmds = update(&mut st, key(KeyCode::Enter));
    assert!(
        matches!(&cmds[..], [Command::Replay(r)] if r.keep_attempts),
        "{cmds:?}"
    );
}

#[test]
fn f_strips_symfonys_failure_stamp_only_where_the_plan_offers_it() {
    let mut st = browsed(false, "orders.dlq", orders_messages());
    update(&mut st, ch('r'));
    update(&mut st, preview("orders.dlq", 3));
    // No Symfony message with the stamp as a header: F does nothing.
    assert!(update(&mut st, ch('F')).is_empty());
    let offered = |strip: bool| {
        let mut p = preview("orders.dlq", 3);
        if let Report::ReplayPreview(p) = &mut p {
            p.failure_stamp_strippable = true;
            p.strip_failure_stamp = strip;
        }
        p
    };
    update(&mut st, offered(false));
    let cmds = update(&mut st, ch('F'));
    assert!(
        matches!(
            &cmds[..],
            [Command::PreviewReplay {
                strip_failure_stamp: true,
                keep_attempts: false,
                ..
            }]
        ),
        "{cmds:?}"
    );
    // The plan for the old setting is stale; the one for the new setting is taken.
    update(&mut st, offered(false));
    assert!(update(&mut st, key(KeyCode::Enter)).is_empty());
    update(&mut st, offered(true));
    let cmds = update(&mut st, key(KeyCode::Enter));
    assert!(
        matches!(&cmds[..], [Command::Replay(r)] if r.strip_failure_stamp && !r.keep_attempts),
        "{cmds:?}"
    );
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

#[test]
fn ctrl_r_on_a_quorum_queue_says_what_it_costs_and_reads_only_on_the_second_press() {
    let mut st = browsing_invoices();
    let cmds = update(&mut st, ctrl('r'));
    assert!(
        matches!(cmds.as_slice(), [Command::LoadQueues]),
        "the list refreshes, the queue is not read: {cmds:?}"
    );
    let notice = st.banner.notice.clone().unwrap_or_default();
    assert!(
        notice.contains("costs each message a delivery") && notice.contains("Ctrl-R again"),
        "{notice}"
    );
    // Anything else keeps what is on screen.
    update(&mut st, ch('j'));
    assert!(matches!(
        update(&mut st, ctrl('r')).as_slice(),
        [Command::LoadQueues]
    ));
    let cmds = update(&mut st, ctrl('r'));
    assert!(
        matches!(cmds.as_slice(), [Command::Browse { queue, read_again: true, .. }] if queue == "invoices.dlq"),
        "{cmds:?}"
    );
}

#[test]
fn a_read_the_ledger_prices_is_confirmed_with_the_same_key() {
    let mut st = loaded(false, Theme::color());
    st.queues.cursor = st
        .queue_rows()
        .iter()
        .position(|r| r.name() == "invoices.dlq")
        .unwrap();
    update(&mut st, key(KeyCode::Enter));
    update(&mut st, key(KeyCode::Enter));
    // The worker's ledger says Warren read it before, in another session.
    update(
        &mut st,
        Report::ReadCost {
            vhost: VHOST.into(),
            queue: "invoices.dlq".into(),
            text: "Warren has read 'invoices.dlq' 3 times before".into(),
            ticket: Ticket::default(),
        },
    );
    assert!(st.msgs.loading.is_none());
    assert!(
        st.banner
            .notice
            .as_deref()
            .unwrap_or("")
            .contains("3 times before")
    );
    st.focus = Focus::Queues;
    let cmds = update(&mut st, key(KeyCode::Enter));
    assert!(
        matches!(
            cmds.as_slice(),
            [Command::Browse {
                read_again: true,
                ..
            }]
        ),
        "{cmds:?}"
    );
}

#[test]
fn protect_asks_then_sets_and_is_refused_read_only() {
    let mut st = loaded(false, Theme::color());
    st.queues.cursor = invoices_row(&st);
    assert!(update(&mut st, ch('P')).is_empty());
    assert!(
        st.banner
            .notice
            .as_deref()
            .unwrap_or("")
            .contains("Press P again")
    );
    let cmds = update(&mut st, ch('P'));
    assert!(
        matches!(cmds.as_slice(), [Command::Protect { queue: q, .. }] if q == "invoices.dlq"),
        "{cmds:?}"
    );
    // A queue without a limit has nothing to protect.
    st.queues.cursor = 0;
    assert!(update(&mut st, ch('P')).is_empty());
    assert!(update(&mut st, ch('P')).is_empty());
    let mut ro = loaded(true, Theme::color());
    ro.queues.cursor = st.queues.cursor;
    assert!(update(&mut ro, ch('P')).is_empty());
    assert!(ro.banner.error.is_some(), "read-only refuses with a reason");
}

/// Where invoices.dlq (the fixtures' quorum DLQ with a limit) is in the queue list.
fn invoices_row(st: &warren::tui::State) -> usize {
    st.queue_rows()
        .iter()
        .position(|r| r.name() == "invoices.dlq")
        .expect("invoices.dlq is listed")
}

/// On 4.x a policy cannot lift an `x-delivery-limit` argument: `P` says so at once, instead of
/// offering a policy that the worker refuses once accepted.
#[test]
fn protect_refuses_first_where_no_policy_can_lift_the_limit() {
    let mut st = loaded(false, Theme::color());
    assert!(
        st.overview.broker_version.starts_with("4.0"),
        "{}",
        st.overview.broker_version
    );
    for d in &mut st.queues.discovery.dead_letter_queues {
        if d.name == "invoices.dlq" {
            d.delivery_limit_arg = Some(20);
        }
    }
    st.queues.cursor = invoices_row(&st);
    assert!(update(&mut st, ch('P')).is_empty());
    let error = st.banner.error.clone().unwrap_or_default();
    assert!(error.contains("x-delivery-limit = 20"), "{error}");
    assert!(
        st.banner.notice.is_none(),
        "nothing offered: {:?}",
        st.banner.notice
    );
    // A second P is a first one again: still refused, nothing set.
    assert!(update(&mut st, ch('P')).is_empty());
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

#[test]
fn answers_of_the_old_place_are_shown_until_the_switch_succeeds_and_ignored_after() {
    let mut st = browsed(false, "orders.dlq", orders_messages());
    // A reload of the queue and its list, asked under the first session, still on their way.
    update(&mut st, ctrl('r'));
    let cmds = run_command_line(&mut st, "vhost /billing");
    assert!(
        matches!(
            cmds.as_slice(),
            [Command::SwitchVhost { generation: 1, .. }]
        ),
        "{cmds:?}"
    );
    // While the worker tries /billing, the old place is what the screen shows: its answers count.
    let old = ticket(0, 7);
    update(
        &mut st,
        page("orders.dlq", vec![masstransit(), broker_ladder(1)], old),
    );
    assert_eq!(
        st.msgs.visible_rows().len(),
        2,
        "the old place's answer is shown"
    );

    // The new place listed its queues: everything on screen is its own from here.
    let new = ticket(1, 9);
    update(
        &mut st,
        Report::QueuesLoaded {
            overview: overview(),
            discovery: discovery(),
            ticket: new,
        },
    );
    assert!(st.queues.loaded && st.msgs.browse.is_none() && st.switching.is_none());
    assert_eq!(st.generation, 1);
    st.take_dirty();
    // Answers of the old place landing late are dropped.
    let late = ticket(0, 8);
    update(&mut st, page("orders.dlq", orders_messages(), late));
    assert!(
        st.msgs.browse.is_none(),
        "the late page of the old vhost is not shown"
    );
    update(
        &mut st,
        Report::DepthsRefreshed {
            depths: vec![(at("orders.dlq"), Some(1))],
            ticket: late,
        },
    );
    update(
        &mut st,
        Report::ReadCost {
            vhost: VHOST.into(),
            queue: "invoices.dlq".into(),
            text: "costs".into(),
            ticket: late,
        },
    );
    assert!(st.pending.reread.is_none());
    update(
        &mut st,
        Report::Error(Failure::in_generation("browsing orders.dlq failed", 0)),
    );
    assert!(st.banner.error.is_none(), "nor an error of the old session");
    assert!(!st.take_dirty(), "nothing to redraw");

    // The new session's answers are shown.
    update(
        &mut st,
        page("orders.dlq", orders_messages(), ticket(1, 10)),
    );
    assert_eq!(st.msgs.visible_rows().len(), 6);
    update(
        &mut st,
        Report::Error(Failure::in_generation("browsing failed", 1)),
    );
    assert!(st.banner.error.is_some());
    // An error tied to no session is always shown.
    st.banner.error = None;
    update(&mut st, Report::Error("the worker stopped".into()));
    assert!(st.banner.error.is_some());
}

#[test]
fn an_older_browse_landing_after_a_newer_one_is_ignored() {
    let mut st = loaded(false, Theme::color());
    update(&mut st, key(KeyCode::Enter));
    // Two reads of orders.dlq asked (Enter, Ctrl-R); the later one lands first.
    update(&mut st, page("orders.dlq", orders_messages(), ticket(0, 5)));
    assert_eq!(st.msgs.visible_rows().len(), 6);
    update(&mut st, ch(' '));
    st.take_dirty();
    update(
        &mut st,
        page("orders.dlq", orders_messages()[..1].to_vec(), ticket(0, 3)),
    );
    assert_eq!(st.msgs.visible_rows().len(), 6, "the newer page stays");
    assert_eq!(
        st.msgs.browse.as_ref().map(|b| b.ticket),
        Some(ticket(0, 5))
    );
    assert_eq!(st.msgs.selected.len(), 1, "and what was picked on it");
    assert!(!st.take_dirty());
    // Nor does an older page of another queue replace it.
    update(
        &mut st,
        page("invoices.dlq", orders_messages(), ticket(0, 4)),
    );
    assert_eq!(
        st.msgs.browse.as_ref().map(|b| b.queue.as_str()),
        Some("orders.dlq")
    );
    // A newer page does.
    update(
        &mut st,
        page("orders.dlq", orders_messages()[..2].to_vec(), ticket(0, 6)),
    );
    assert_eq!(st.msgs.visible_rows().len(), 2);
}

#[test]
fn the_detail_is_rendered_once_per_message_not_per_key_or_frame() {
    let mut st = browsed(false, "orders.dlq", vec![masstransit(), broker_ladder(1)]);
    let rendered = |st: &warren::tui::State| {
        st.msgs
            .detail
            .as_ref()
            .map(|d| d.lines.as_ptr())
            .expect("update renders the detail of the message under the cursor")
    };
    let first = rendered(&st);
    // Scrolling, ticks within the day, and frames reuse it: the body is not parsed again.
    update(&mut st, key(KeyCode::Enter));
    assert_eq!(st.focus, Focus::Detail);
    for _ in 0..3 {
        update(&mut st, ch('j'));
    }
    assert_eq!(st.msgs.detail_scroll, 3);
    update(
        &mut st,
        Event::Tick(jiff::Timestamp::from_second(NOW + 60).unwrap()),
    );
    let mut term = Terminal::new(TestBackend::new(160, 48)).unwrap();
    term.draw(|f| warren::tui::view(&st, f)).unwrap();
    assert!(
        matches!(st.detail_lines(), Some(std::borrow::Cow::Borrowed(_))),
        "the view draws the cached lines"
    );
    assert_eq!(rendered(&st), first);
    // Unfolding the stack trace changes the lines: rendered again, then reused.
    update(&mut st, ch('e'));
    let unfolded = rendered(&st);
    assert_ne!(unfolded, first);
    update(&mut st, ch('k'));
    assert_eq!(rendered(&st), unfolded);
    let row = st.current_opened().unwrap();
    assert_eq!(
        st.msgs.detail.as_ref().unwrap().lines,
        detail::lines(&st, &row),
        "the cache is what rendering now would give"
    );
    // Another message: rendered again.
    update(&mut st, key(KeyCode::Esc));
    update(&mut st, ch('j'));
    assert_eq!(st.msgs.cursor, 1);
    assert_ne!(rendered(&st), unfolded);
    // A page read again replaces the rows: the detail follows it.
    let before = rendered(&st);
    update(
        &mut st,
        page(
            "orders.dlq",
            vec![masstransit(), broker_ladder(1)],
            ticket(0, 1),
        ),
    );
    assert_ne!(rendered(&st), before);
}

#[test]
fn the_replay_modal_starts_at_the_configured_rate() {
    let mut st = browsed(false, "orders.dlq", orders_messages());
    // `replay.rate = 200` in the configuration file.
    st.settings.replay_rate = 200;
    update(&mut st, ch(' '));
    update(&mut st, ch('r'));
    update(&mut st, preview("orders.dlq", 1));
    update(&mut st, ch('+'));
    let cmds = update(&mut st, key(KeyCode::Enter));
    match cmds.as_slice() {
        [Command::Replay(r)] => assert_eq!(r.rate, 500, "one step up from the configured 200"),
        other => panic!("{other:?}"),
    }
}

fn pager(st: &warren::tui::State) -> &warren::tui::pager::Pager {
    match &st.overlay {
        Overlay::Pager(p) => p,
        other => panic!("no pager open: {other:?}"),
    }
}

#[test]
fn v_pages_the_decoded_body_by_line_and_page() {
    let mut st = browsed(false, "shipping-label_error", vec![gzipped_order()]);
    update(&mut st, ch('v'));
    let p = pager(&st);
    assert!(
        p.title.contains("gzip → JSON") && p.title.contains("decoded"),
        "{}",
        p.title
    );
    assert!(
        p.title
            .contains("0b5e0000-5d4c-0015-3c1a-08dd00000001 in shipping-label_error")
    );
    // Pretty-printed: one line per key, four per order line.
    assert!(p.lines.iter().any(|l| l.trim() == r#""sku": "SKU-039","#));
    assert_eq!(p.height, 21, "80×24 less the title, status and footer rows");
    let rows = p.row_count();
    assert!(rows > 150, "{rows}");
    update(&mut st, ch('j'));
    update(&mut st, key(KeyCode::Down));
    assert_eq!(pager(&st).top, 2);
    update(&mut st, ch('k'));
    assert_eq!(pager(&st).top, 1);
    update(&mut st, key(KeyCode::PageDown));
    assert_eq!(pager(&st).top, 22);
    update(&mut st, ch(' '));
    assert_eq!(pager(&st).top, 43, "space pages down as in less");
    update(&mut st, ch('b'));
    assert_eq!(pager(&st).top, 22);
    update(&mut st, ch('G'));
    assert_eq!(pager(&st).top, rows - 21, "the last page fills the screen");
    update(&mut st, ch('j'));
    assert_eq!(pager(&st).top, rows - 21, "no scrolling past the end");
    update(&mut st, ch('g'));
    assert_eq!(pager(&st).top, 0);
    // q goes back to where the operator was; nothing else changed.
    update(&mut st, ch('q'));
    assert!(matches!(st.overlay, Overlay::None));
    assert!(!st.quit, "q in the pager closes the pager, not Warren");
    assert_eq!(st.focus, Focus::Messages);
    update(&mut st, ch('v'));
    update(&mut st, key(KeyCode::Esc));
    assert!(matches!(st.overlay, Overlay::None));
}

#[test]
fn pager_search_counts_matches_and_n_and_shift_n_walk_them() {
    let mut st = browsed(false, "shipping-label_error", vec![gzipped_order()]);
    update(&mut st, ch('v'));
    update(&mut st, ch('/'));
    assert_eq!(pager(&st).input.as_deref(), Some(""));
    // While typing, keys are text: `q` and `G` do not close or jump.
    type_text(&mut st, "SKU-01q");
    update(&mut st, key(KeyCode::Backspace));
    assert_eq!(pager(&st).input.as_deref(), Some("SKU-01"));
    update(&mut st, key(KeyCode::Enter));
    let p = pager(&st);
    assert_eq!(p.input, None);
    assert_eq!(
        p.matches.len(),
        10,
        "SKU-010 … SKU-019; a capital matches case"
    );
    assert_eq!(p.match_text().as_deref(), Some("match 1 of 10"));
    let row_of_current = |st: &warren::tui::State| {
        let p = pager(st);
        let m = p.matches[p.current.unwrap()];
        p.lines[m.line][m.start..m.end].to_string()
    };
    assert_eq!(row_of_current(&st), "SKU-01");
    // The first match is on screen: it is far below the first page.
    let first = pager(&st).matches[0];
    assert!(first.line > 21);
    assert!(pager(&st).top > 0 && pager(&st).top <= first.line);
    update(&mut st, ch('n'));
    update(&mut st, ch('n'));
    assert_eq!(pager(&st).match_text().as_deref(), Some("match 3 of 10"));
    update(&mut st, ch('N'));
    assert_eq!(pager(&st).match_text().as_deref(), Some("match 2 of 10"));
    update(&mut st, ch('N'));
    update(&mut st, ch('N'));
    let p = pager(&st);
    assert_eq!(p.match_text().as_deref(), Some("match 10 of 10"), "wraps");
    assert!(p.message.as_deref().unwrap().contains("past the start"));
    let m = p.matches[9];
    assert!(
        (p.top..p.top + 21).contains(&m.line),
        "the last match is on screen"
    );
    // Lower case matches any case: "sku" is in every key and every value.
    update(&mut st, ch('/'));
    type_text(&mut st, "sku");
    update(&mut st, key(KeyCode::Enter));
    assert_eq!(pager(&st).matches.len(), 80);
    // A search with no match says so and keeps the place.
    let top = pager(&st).top;
    update(&mut st, ch('/'));
    type_text(&mut st, "nowhere");
    update(&mut st, key(KeyCode::Enter));
    let p = pager(&st);
    assert!(p.matches.is_empty());
    assert_eq!(p.top, top);
    assert!(
        p.message
            .as_deref()
            .unwrap()
            .contains("no match for “nowhere”")
    );
    // Esc while typing leaves the input, not the pager.
    update(&mut st, ch('/'));
    update(&mut st, key(KeyCode::Esc));
    assert!(matches!(st.overlay, Overlay::Pager(_)));
    assert_eq!(pager(&st).input, None);
}

#[test]
fn shift_t_pages_the_stack_trace_and_says_when_there_is_none() {
    let mut st = browsed(false, "shipping-label_error", vec![masstransit()]);
    update(&mut st, ch('T'));
    let p = pager(&st);
    assert!(
        p.title
            .starts_with("Stack trace (System.InvalidOperationException) of"),
        "{}",
        p.title
    );
    assert!(p.title.ends_with(" in shipping-label_error"), "{}", p.title);
    assert_eq!(p.lines.len(), 3);
    assert!(p.lines[0].contains("CreateLabelConsumer.cs:line 42"));
    update(&mut st, ch('q'));

    let mut st = browsed(false, "orders.dlq", orders_messages());
    update(&mut st, ch('T'));
    assert!(matches!(st.overlay, Overlay::None));
    assert!(
        st.banner
            .notice
            .as_deref()
            .unwrap()
            .contains("no stack trace")
    );
}

#[test]
fn the_pager_relays_out_on_resize_and_its_text_is_sanitised() {
    let mut hostile_msg = hostile();
    hostile_msg.body = b"\x1b]0;owned\x07 line one\n\x1b[2J line two".to_vec();
    hostile_msg.body_size = hostile_msg.body.len() as u64;
    let queue = hostile_msg.queue.clone();
    let mut st = browsed(false, &queue, vec![hostile_msg]);
    update(&mut st, ch('v'));
    let p = pager(&st);
    assert!(
        p.lines.iter().all(|l| !l.chars().any(|c| c.is_control())),
        "{:?}",
        p.lines
    );
    assert!(
        p.lines.iter().any(|l| l.contains("\\e[2J line two")),
        "{:?}",
        p.lines
    );
    update(
        &mut st,
        Event::Resize {
            width: 200,
            height: 50,
        },
    );
    let p = pager(&st);
    assert_eq!((p.width, p.height), (200, 47));
}

#[test]
fn saving_is_left_for_the_loop_and_works_read_only() {
    use warren::tui::save::Save;
    let mut st = browsed(true, "orders.dlq", orders_messages());
    assert!(
        update(&mut st, ctrl('s')).is_empty(),
        "nothing for the worker"
    );
    match st.handover.save.take() {
        Some(Save::Screen { path }) => {
            assert_eq!(
                path.to_str().unwrap(),
                format!("warren-screen-{}.txt", now().strftime("%Y%m%d-%H%M%S"))
            );
        }
        other => panic!("{other:?}"),
    }
    // Nothing on screen changed for it (the loop reports back with a notice).
    assert!(st.banner.notice.is_none() && st.banner.error.is_none());

    // S: the selected messages in queue order, else the one under the cursor.
    update(&mut st, ch('j'));
    update(&mut st, ch(' '));
    update(&mut st, ch('k'));
    update(&mut st, ch('k'));
    update(&mut st, ch(' '));
    assert!(update(&mut st, ch('S')).is_empty());
    match st.handover.save.take() {
        Some(Save::Snapshot {
            path,
            header,
            messages,
        }) => {
            let name = path.to_str().unwrap();
            assert!(
                name.starts_with("warren-orders.dlq-") && name.ends_with(".jsonl"),
                "{name}"
            );
            assert_eq!(header.queue, "orders.dlq");
            assert_eq!(header.vhost, overview().vhost);
            let positions: Vec<u64> = messages.iter().map(|m| m.position).collect();
            assert_eq!(positions, vec![0, 1]);
        }
        other => panic!("{other:?}"),
    }
    st.msgs.selected.clear();
    update(&mut st, ch('G'));
    update(&mut st, ch('S'));
    let save = st.handover.save.take();
    assert!(
        matches!(&save, Some(Save::Snapshot { messages, .. }) if messages.len() == 1 && messages[0].position == 5),
        "{save:?}"
    );
    // In the group list: the group under the cursor (the five ladders), whatever is selected.
    update(&mut st, ch(' '));
    update(&mut st, ch('f'));
    update(&mut st, ch('S'));
    let save = st.handover.save.take();
    assert!(
        matches!(&save, Some(Save::Snapshot { messages, .. }) if messages.len() == 5),
        "{save:?}"
    );
    update(&mut st, ch('f'));
    // Ctrl-S inside the pager too.
    update(&mut st, ch('v'));
    update(&mut st, ctrl('s'));
    assert!(matches!(st.handover.save, Some(Save::Screen { .. })));
    assert!(
        matches!(st.overlay, Overlay::Pager(_)),
        "saving does not close the pager"
    );
}

#[test]
fn the_saved_snapshot_reads_back_as_warren_open_reads_it() {
    use warren::tui::save::Save;
    let mut messages = orders_messages();
    messages.push(gzipped_order());
    for (i, m) in messages.iter_mut().enumerate() {
        m.queue = "orders.dlq".into();
        m.position = i as u64;
    }
    let mut st = browsed(false, "orders.dlq", messages.clone());
    update(&mut st, ch('a'));
    update(&mut st, ch('S'));
    let Some(Save::Snapshot {
        path,
        header,
        messages: saved,
    }) = st.handover.save.take()
    else {
        panic!("a snapshot save");
    };
    let dir = std::env::temp_dir().join(format!("warren-save-test-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let save = Save::Snapshot {
        path: dir.join(path.file_name().unwrap()),
        header: header.clone(),
        messages: saved.clone(),
    };
    let report = warren::tui::save::perform(&save, "");
    let Report::Notice(text) = report else {
        panic!("{report:?}")
    };
    let name = path.to_str().unwrap();
    assert_eq!(
        text,
        format!(
            "saved {name} (7 messages from orders.dlq) in {} — open it with: warren open FILE",
            dir.display()
        )
    );
    let file = dir.join(path.file_name().unwrap());
    let (head, read) = warren::cli::commands::read_snapshot(&file).expect("warren open reads it");
    assert_eq!(head.queue, "orders.dlq");
    assert_eq!(read, messages, "every property, header and body byte");
    let _ = std::fs::remove_dir_all(&dir);

    // A directory that cannot be written says so, in the operator's words.
    let bad = Save::Screen {
        path: "/proc/warren-cannot-write-here.txt".into(),
    };
    let report = warren::tui::save::perform(&bad, "screen");
    assert!(
        matches!(&report, Report::Error(f) if f.text.contains("could not save the screen") && f.text.contains("directory you can write to")),
        "{report:?}"
    );
}

#[test]
fn help_scrolls_with_the_detail_keys_and_closes_at_the_top_again() {
    let mut st = loaded(false, Theme::color());
    update(&mut st, ch('?'));
    assert!(matches!(st.overlay, Overlay::Help));
    update(&mut st, ch('j'));
    update(&mut st, key(KeyCode::Down));
    assert_eq!(st.help.scroll, 2);
    update(&mut st, ch('k'));
    assert_eq!(st.help.scroll, 1);
    update(&mut st, key(KeyCode::PageDown));
    assert_eq!(st.help.scroll, 11);
    update(&mut st, key(KeyCode::PageUp));
    update(&mut st, key(KeyCode::PageUp));
    assert_eq!(st.help.scroll, 0, "never above the top");
    // The state starts at 80×24 until the terminal reports its size: the last page is full,
    // so G, then k moves at once.
    let lines: usize = keys::help_sections().iter().map(|(_, b)| b.len() + 1).sum();
    update(&mut st, ch('G'));
    update(&mut st, ch('j'));
    assert_eq!(
        st.help.scroll,
        warren::tui::help::max_scroll((80, 24), 0, ""),
        "never past the last page"
    );
    update(&mut st, ch('g'));
    assert_eq!(st.help.scroll, 0);
    update(
        &mut st,
        Event::Resize {
            width: 80,
            height: 24,
        },
    );
    update(&mut st, ch('G'));
    let last_page = warren::tui::help::max_scroll((80, 24), 0, "");
    assert_eq!(st.help.scroll, last_page);
    assert!(usize::from(last_page) < lines - 1);
    update(&mut st, ch('k'));
    assert_eq!(st.help.scroll, last_page - 1);
    update(
        &mut st,
        Event::Resize {
            width: 200,
            height: 80,
        },
    );
    assert_eq!(
        st.help.scroll, 0,
        "a screen it fits on shows it from the top"
    );
    assert!(
        matches!(st.overlay, Overlay::Help),
        "scrolling keeps it open"
    );
    update(&mut st, key(KeyCode::Esc));
    assert!(matches!(st.overlay, Overlay::None));
    update(&mut st, ch('?'));
    assert_eq!(st.help.scroll, 0, "opens at the top");
}

#[test]
fn w_shows_the_whole_banner_and_does_not_answer_a_prompt() {
    let mut st = loaded(false, Theme::color());
    st.queues.cursor = st
        .queue_rows()
        .iter()
        .position(|r| r.name() == "invoices.dlq")
        .unwrap();
    assert!(
        update(&mut st, key(KeyCode::Enter)).is_empty(),
        "asks first"
    );
    assert!(st.pending.browse.is_some());
    update(&mut st, ch('w'));
    assert!(st.banner.whole);
    assert!(
        st.pending.browse.is_some(),
        "reading the prompt keeps it pending"
    );
    let cmds = update(&mut st, key(KeyCode::Enter));
    assert!(
        matches!(cmds.as_slice(), [Command::Browse { queue, .. }] if queue == "invoices.dlq"),
        "Enter after w still browses: {cmds:?}"
    );
    update(&mut st, Report::Error(Failure::from("boom".to_string())));
    update(&mut st, key(KeyCode::Esc));
    assert!(
        st.banner.error.is_none() && !st.banner.whole,
        "Esc dismisses and folds it"
    );
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

#[test]
fn the_modal_and_the_footer_say_the_same_for_enter_and_enter_in_the_rate_field_leaves_it() {
    let mut st = browsed(false, "orders.dlq", orders_messages());
    update(&mut st, ch('r'));
    update(&mut st, preview("orders.dlq", 3));
    assert_eq!(enter_hints(&st), (true, true, "replay".into()));
    update(&mut st, ch('d'));
    assert_eq!(enter_hints(&st), (true, true, "dry run".into()));
    update(&mut st, key(KeyCode::Tab));
    assert_eq!(enter_hints(&st), (true, true, "set rate".into()));
    type_text(&mut st, "20");
    assert!(
        update(&mut st, key(KeyCode::Enter)).is_empty(),
        "Enter after a typed rate starts nothing"
    );
    let Overlay::Replay(m) = &st.overlay else {
        panic!("still in the modal")
    };
    assert_eq!((m.field, m.rate), (ModalField::Count, 20));
    assert_eq!(enter_hints(&st), (true, true, "dry run".into()));
    // Leaving the field with nothing typed keeps the rate it had.
    update(&mut st, key(KeyCode::Tab));
    update(&mut st, key(KeyCode::Enter));
    let Overlay::Replay(m) = &st.overlay else {
        panic!("still in the modal")
    };
    assert_eq!(
        (m.field, m.rate, m.rate_text.as_str()),
        (ModalField::Count, 20, "20")
    );
    let cmds = update(&mut st, key(KeyCode::Enter));
    assert!(
        matches!(cmds.as_slice(), [Command::Replay(r)] if r.dry_run && r.rate == 20 && r.max_backlog.is_none()),
        "{cmds:?}"
    );
}

#[test]
fn k_is_not_keep_attempts_in_the_modal_t_is() {
    let mut st = browsed(false, "orders.dlq", orders_messages());
    update(&mut st, ch('r'));
    update(&mut st, preview("orders.dlq", 3));
    assert!(update(&mut st, ch('k')).is_empty(), "k asks for nothing");
    let Overlay::Replay(m) = &st.overlay else {
        panic!("still in the modal")
    };
    assert!(!m.keep_attempts);
    let cmds = update(&mut st, ch('t'));
    assert!(
        matches!(
            &cmds[..],
            [Command::PreviewReplay {
                keep_attempts: true,
                ..
            }]
        ),
        "{cmds:?}"
    );
    // `k` means up wherever it is bound at all.
    for b in BINDINGS.iter().filter(|b| b.keys.contains(&Key::Char('k'))) {
        assert_eq!(b.action, keys::Action::Up, "{}", b.help);
    }
}

#[test]
fn a_finished_dry_run_closes_without_reading_the_queue_again() {
    let mut st = browsed(false, "orders.dlq", orders_messages());
    update(&mut st, ch('r'));
    update(&mut st, preview("orders.dlq", 3));
    update(&mut st, ch('d'));
    let cmds = update(&mut st, key(KeyCode::Enter));
    assert!(matches!(&cmds[..], [Command::Replay(r)] if r.dry_run));
    update(
        &mut st,
        Report::ReplayFinished(ReplayOutcome {
            dry_run: true,
            summary: vec!["Would replay 3 message(s) from orders.dlq".into()],
            ..Default::default()
        }),
    );
    let Overlay::Progress(run) = &st.overlay else {
        panic!("the result stays up until closed")
    };
    assert_eq!(
        run.outcome.as_ref().map(|o| o.summary.len()),
        Some(1),
        "the CLI's words are kept for the view"
    );
    assert!(update(&mut st, key(KeyCode::Enter)).is_empty());
    assert!(matches!(st.overlay, Overlay::None));
}

/// The status bar's text.
fn header(st: &warren::tui::State) -> String {
    let mut term = Terminal::new(TestBackend::new(160, 10)).unwrap();
    term.draw(|f| warren::tui::view(st, f)).unwrap();
    let buf = term.backend().buffer().clone();
    (0..buf.area.width).map(|x| buf[(x, 0)].symbol()).collect()
}

#[test]
fn a_failed_switch_changes_nothing_but_a_message() {
    let mut st = browsed(false, "orders.dlq", orders_messages());
    update(&mut st, ch(' '));
    let selected = st.msgs.selected.clone();
    let cmds = run_command_line(&mut st, "vhost nope");
    let [Command::SwitchVhost { generation, .. }] = cmds[..] else {
        panic!("{cmds:?}")
    };
    // Until the worker answers: the old place, and a note that a switch is under way.
    let h = header(&st);
    assert!(h.contains("connected") && h.contains("ops@/orders"), "{h}");
    assert!(h.contains("switching to vhost nope…"), "{h}");
    assert!(
        update(&mut st, ch('r')).is_empty(),
        "no replay planned on a place being left"
    );
    assert!(
        st.banner
            .notice
            .as_deref()
            .unwrap_or("")
            .contains("switching")
    );
    update(
        &mut st,
        Report::SwitchFailed {
            generation,
            text: "no AMQP for vhost 'nope': access refused".into(),
        },
    );
    let e = st.banner.error.clone().unwrap_or_default();
    assert!(
        e.contains("could not switch to vhost nope")
            && e.contains("access refused")
            && e.contains("still on context prod-eu, vhost /orders"),
        "{e}"
    );
    assert!(st.switching.is_none());
    assert_eq!(st.generation, 0, "the old session goes on");
    assert!(st.queues.loaded && st.msgs.browse.as_ref().is_some_and(|b| b.rows.len() == 6));
    assert_eq!(st.msgs.selected, selected, "the selection is kept");
    let h = header(&st);
    assert!(h.contains("● connected") && h.contains("ops@/orders") && !h.contains("switching"));
    // And the old session's answers still count.
    update(
        &mut st,
        Report::DepthsRefreshed {
            depths: vec![(at("orders.dlq"), Some(411))],
            ticket: ticket(0, 20),
        },
    );
    assert_eq!(st.dlq("orders.dlq").and_then(|d| d.depth), Some(411));
    // The next switch uses a generation of its own, not the failed one's.
    let cmds = run_command_line(&mut st, "ctx staging");
    assert!(
        matches!(&cmds[..], [Command::SwitchContext { generation: g, .. }] if *g > generation),
        "{cmds:?}"
    );
    // A late listing tagged with the failed switch's generation is not taken for it.
    update(
        &mut st,
        Report::QueuesLoaded {
            overview: overview(),
            discovery: Default::default(),
            ticket: ticket(generation, 0),
        },
    );
    assert!(st.msgs.browse.is_some() && st.generation == 0);
}

#[test]
fn a_refused_switch_in_snapshot_mode_keeps_the_list() {
    let mut st = browsed(true, "orders.dlq", orders_messages());
    let cmds = run_command_line(&mut st, "ctx prod");
    let [Command::SwitchContext { generation, .. }] = cmds[..] else {
        panic!("{cmds:?}")
    };
    update(
        &mut st,
        Report::SwitchFailed {
            generation,
            text: "a snapshot has no other contexts or vhosts".into(),
        },
    );
    assert!(
        st.banner
            .error
            .as_deref()
            .unwrap_or("")
            .contains("snapshot")
    );
    assert!(
        st.queues.loaded && st.msgs.browse.is_some(),
        "nothing wiped"
    );
}

#[test]
fn of_two_switches_only_the_later_one_counts() {
    let mut st = browsed(false, "orders.dlq", orders_messages());
    let first = run_command_line(&mut st, "vhost /a");
    let second = run_command_line(&mut st, "vhost /b");
    let (
        [Command::SwitchVhost { generation: g1, .. }],
        [Command::SwitchVhost { generation: g2, .. }],
    ) = (&first[..], &second[..])
    else {
        panic!("{first:?} {second:?}")
    };
    update(
        &mut st,
        Report::SwitchFailed {
            generation: *g1,
            text: "replaced".into(),
        },
    );
    assert!(st.banner.error.is_none(), "the replaced switch is not news");
    assert!(st.switching.is_some());
    let mut b = overview();
    b.vhost = "/b".into();
    update(
        &mut st,
        Report::QueuesLoaded {
            overview: b,
            discovery: discovery(),
            ticket: ticket(*g2, 0),
        },
    );
    assert_eq!(st.generation, *g2);
    assert!(header(&st).contains("ops@/b"));
    assert_eq!(st.banner.notice.as_deref(), Some("switched to vhost /b"));
}

#[test]
fn a_switch_is_refused_while_a_replay_runs() {
    let mut st = browsed(false, "orders.dlq", orders_messages());
    update(&mut st, ch('r'));
    update(&mut st, preview("orders.dlq", 1));
    update(&mut st, key(KeyCode::Enter));
    assert!(st.replay_running());
    assert!(run_command_line(&mut st, "ctx staging").is_empty());
    assert!(
        st.banner
            .error
            .as_deref()
            .unwrap_or("")
            .contains("replay is running")
    );
    assert!(st.switching.is_none());
}

#[test]
fn limit_reads_the_open_queue_again_with_the_new_limit() {
    // No queue open: the limit is set for the next browse, nothing is read.
    let mut st = loaded(false, Theme::color());
    assert!(run_command_line(&mut st, "limit 5000").is_empty());
    assert_eq!(st.settings.browse_limit, 5000);

    // A classic queue is read again at once, with the new limit.
    let mut st = browsed(false, "orders.dlq", orders_messages());
    let cmds = run_command_line(&mut st, "limit 5000");
    assert!(
        matches!(&cmds[..], [Command::Browse { queue, limit: 5000, read_again: false, .. }] if queue == "orders.dlq"),
        "{cmds:?}"
    );
    assert_eq!(
        st.msgs.loading.as_ref().map(|q| q.name.as_str()),
        Some("orders.dlq")
    );

    // A quorum queue whose reads cost deliveries: the cost first, then Ctrl-R reads it.
    let mut st = browsing_invoices();
    assert!(run_command_line(&mut st, "limit 5000").is_empty());
    assert!(
        st.banner
            .notice
            .as_deref()
            .unwrap_or("")
            .contains("costs each message a delivery"),
        "{:?}",
        st.banner.notice
    );
    let cmds = update(&mut st, ctrl('r'));
    assert!(
        cmds.iter().any(|c| matches!(c, Command::Browse { queue, limit: 5000, read_again: true, .. } if queue == "invoices.dlq")),
        "{cmds:?}"
    );

    // Not a number: nothing changes.
    let mut st = browsed(false, "orders.dlq", orders_messages());
    assert!(run_command_line(&mut st, "limit lots").is_empty());
    assert_eq!(st.settings.browse_limit, 500);
    assert!(st.banner.error.is_some());
}

#[test]
fn the_progress_window_counts_the_selection_not_the_queue() {
    let mut st = browsed(false, "orders.dlq", orders_messages());
    // One of the six in view, selected.
    update(&mut st, ch('/'));
    type_text(&mut st, "reason:expired -reason:rejected");
    update(&mut st, key(KeyCode::Enter));
    let in_view = st.msgs.visible_rows().len();
    assert!(in_view > 0 && in_view < 6, "{in_view}");
    update(&mut st, ch('a'));
    update(&mut st, ch('r'));
    update(&mut st, preview("orders.dlq", in_view as u64));
    update(&mut st, key(KeyCode::Enter));
    let Overlay::Progress(run) = &st.overlay else {
        panic!("the run started")
    };
    assert_eq!(run.progress.total, in_view as u64);
    assert_eq!(run.progress.remaining(), in_view as u64);
    let mut term = Terminal::new(TestBackend::new(120, 40)).unwrap();
    term.draw(|f| warren::tui::view(&st, f)).unwrap();
    let buf = term.backend().buffer().clone();
    let screen: String = (0..buf.area.height)
        .flat_map(|y| (0..buf.area.width).map(move |x| (x, y)))
        .map(|p| buf[p].symbol().to_string())
        .collect();
    assert!(
        screen.contains(&format!("remaining {in_view}")),
        "of the selection, not the queue's 6"
    );
}

#[test]
fn a_browse_cut_at_the_limit_says_so_on_screen() {
    let mut st = loaded(false, Theme::color());
    update(&mut st, key(KeyCode::Enter));
    update(
        &mut st,
        Report::MessagesLoaded {
            vhost: VHOST.into(),
            queue: "orders.dlq".into(),
            messages: packed(orders_messages()),
            first_seen: vec![],
            replays: vec![],
            authors: Default::default(),
            stop: "first 6 of 412 — :limit N reads more".into(),
            ticket: Ticket::default(),
        },
    );
    let mut term = Terminal::new(TestBackend::new(120, 30)).unwrap();
    term.draw(|f| warren::tui::view(&st, f)).unwrap();
    let buf = term.backend().buffer().clone();
    let screen: String = (0..buf.area.height)
        .flat_map(|y| (0..buf.area.width).map(move |x| (x, y)))
        .map(|p| buf[p].symbol().to_string())
        .collect();
    assert!(
        screen.contains("first 6 of 412 — :limit N reads more"),
        "the whole note is shown"
    );
}

/// Two messages with one message id share a key, and a replay of that key takes both: the
/// selection count says so, so the modal and the progress count the same messages.
#[test]
fn messages_sharing_an_id_count_as_the_replay_counts_them() {
    let mut st = browsed(
        false,
        "orders.dlq",
        vec![broker_ladder(1), broker_ladder(1), broker_ladder(2)],
    );
    update(&mut st, ch(' '));
    assert_eq!(st.msgs.selected.len(), 1, "one key");
    assert_eq!(st.msgs.selected_messages(), 2, "two messages");
    let mut term = Terminal::new(TestBackend::new(120, 30)).unwrap();
    term.draw(|f| warren::tui::view(&st, f)).unwrap();
    let buf = term.backend().buffer().clone();
    let screen: String = (0..buf.area.height)
        .flat_map(|y| (0..buf.area.width).map(move |x| (x, y)))
        .map(|p| buf[p].symbol().to_string())
        .collect();
    assert!(screen.contains("[2 selected]"), "{screen}");
    update(&mut st, ch('r'));
    let Overlay::Replay(m) = &st.overlay else {
        panic!("the modal opens")
    };
    assert_eq!(m.what, "2 selected messages");

    // Nothing picked: the message under the cursor brings its twin.
    let mut st = browsed(
        false,
        "orders.dlq",
        vec![broker_ladder(1), broker_ladder(1), broker_ladder(2)],
    );
    update(&mut st, ch('r'));
    let Overlay::Replay(m) = &st.overlay else {
        panic!("the modal opens")
    };
    assert_eq!(
        m.what,
        "the message under the cursor and 1 more with its id"
    );
}

#[test]
fn a_row_the_audit_says_was_replayed_says_it_failed_again() {
    // Two messages, neither carrying Warren's headers (a framework's own retry dropped them);
    // the audit knows the first was replayed twice.
    let mut st = loaded(false, Theme::color());
    update(&mut st, key(KeyCode::Enter));
    update(
        &mut st,
        Report::MessagesLoaded {
            vhost: VHOST.into(),
            queue: "orders.dlq".into(),
            messages: packed(orders_messages().into_iter().take(2).collect()),
            first_seen: vec![],
            replays: vec![2],
            authors: Default::default(),
            stop: "end".into(),
            ticket: Ticket::default(),
        },
    );
    let rows: Vec<_> = st
        .msgs
        .visible_rows()
        .iter()
        .map(|r| r.open(&st.settings.conventions).exp)
        .collect();
    assert_eq!(rows[0].replay_count, 2);
    assert!(
        rows[0].verdict.ends_with("failed again after 2 replays"),
        "{}",
        rows[0].verdict
    );
    assert_eq!(rows[1].replay_count, 0, "shorter than the page: none known");
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

#[test]
fn b_cycles_the_grouping_and_r_replays_the_group_under_it() {
    let mut st = browsed(false, "orders.dlq", orders_messages());
    update(&mut st, ch('f'));
    assert_eq!(st.msgs.group_by, GroupBy::Fingerprint);
    let fingerprints = group_shape(&st).len();
    assert_eq!(fingerprints, 2);
    update(&mut st, ch('b'));
    assert_eq!(st.msgs.group_by, GroupBy::Exception);
    assert_eq!(
        group_shape(&st),
        vec![(
            "no exception type recorded (RabbitMQ dead-lettering)".to_string(),
            6
        )]
    );
    update(&mut st, ch('b'));
    assert_eq!(st.msgs.group_by, GroupBy::Type);
    update(&mut st, ch('b'));
    assert_eq!(st.msgs.group_by, GroupBy::Origin);
    assert_eq!(
        group_shape(&st),
        vec![
            ("orders.process".to_string(), 5),
            ("orders.retry.wait".to_string(), 1)
        ]
    );
    update(&mut st, ch('b'));
    assert_eq!(st.msgs.group_by, GroupBy::Reason);
    assert_eq!(
        group_shape(&st),
        vec![("rejected".to_string(), 5), ("expired".to_string(), 1)]
    );
    // The cursor on the second group; r plans a replay of that group, by reason.
    update(&mut st, ch('j'));
    let key = st
        .msgs
        .current_group()
        .map(|g| g.key.clone())
        .unwrap_or_default();
    let cmds = update(&mut st, ch('r'));
    match cmds.as_slice() {
        [
            Command::PreviewReplay {
                selection: Selection::Group(g),
                ..
            },
        ] => {
            assert_eq!((g.by, g.name.as_str()), (GroupBy::Reason, key.as_str()));
        }
        other => panic!("expected a group preview, got {other:?}"),
    }
    update(&mut st, key_esc());
    // Past the wait queue every message rests in orders.process: one endpoint.
    update(&mut st, ch('b'));
    assert_eq!(st.msgs.group_by, GroupBy::Endpoint);
    assert_eq!(group_shape(&st), vec![("orders.process".to_string(), 6)]);
    update(&mut st, ch('b'));
    assert_eq!(st.msgs.group_by, GroupBy::Fingerprint);
    assert_eq!(group_shape(&st).len(), fingerprints);
    // The help lists both keys.
    let help: Vec<&str> = BINDINGS.iter().map(|b| b.label).collect();
    assert!(help.contains(&"b") && help.contains(&"n"));
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

#[test]
fn n_writes_a_note_on_the_group_and_it_shows_until_the_group_is_gone() {
    let mut st = browsed(false, "orders.dlq", orders_messages());
    update(&mut st, ch('f'));
    update(&mut st, ch('b'));
    update(&mut st, ch('b'));
    update(&mut st, ch('b'));
    update(&mut st, ch('b'));
    assert_eq!(st.msgs.group_by, GroupBy::Reason);
    assert!(update(&mut st, ch('n')).is_empty());
    assert!(st.inputs.note.is_some());
    // Keys are text in the input: q does not quit, r does not replay.
    let cmds = type_text(&mut st, "carrier outage, replay after 10:00 q r");
    assert!(cmds.is_empty(), "{cmds:?}");
    assert!(!st.quit);
    let gkey = st
        .msgs
        .current_group()
        .map(|g| g.key.clone())
        .unwrap_or_default();
    let cmds = update(&mut st, key(KeyCode::Enter));
    let note = match cmds.as_slice() {
        [Command::SetGroupNote { note: n, .. }] => n.clone(),
        other => panic!("expected the note to be kept, got {other:?}"),
    };
    assert_eq!(note.text, "carrier outage, replay after 10:00 q r");
    assert_eq!(
        (note.by, note.key.as_str(), note.queue.as_str()),
        (GroupBy::Reason, gkey.as_str(), "orders.dlq")
    );
    assert!(st.inputs.note.is_none());
    // The worker's answer: the queue's notes as the store keeps them.
    update(&mut st, notes(vec![note.clone()], false));
    let g = st.msgs.current_group().cloned().expect("a group");
    assert_eq!(
        st.msgs.note_for(&g).map(|n| n.text.as_str()),
        Some(note.text.as_str())
    );
    // Another grouping does not show it.
    update(&mut st, ch('b'));
    let g = st.msgs.current_group().cloned().expect("a group");
    assert!(st.msgs.note_for(&g).is_none());
    // n again on a noted group starts from its text; Esc leaves it as it was.
    for _ in 0..5 {
        update(&mut st, ch('b'));
    }
    assert_eq!(st.msgs.group_by, GroupBy::Reason);
    update(&mut st, ch('n'));
    assert_eq!(
        st.inputs.note.as_ref().map(|n| n.input.lines().join("")),
        Some(note.text.clone())
    );
    assert!(update(&mut st, key_esc()).is_empty());
    assert!(st.inputs.note.is_none());

    // A browse that read the whole queue: a note whose group has no message left is forgotten
    // (here and in the store); the live one stays. A partial read forgets nothing.
    let stale = GroupNote {
        key: "00000000deadbeef".into(),
        text: "old".into(),
        ..note.clone()
    };
    assert!(update(&mut st, notes(vec![note.clone(), stale.clone()], false)).is_empty());
    assert_eq!(st.msgs.group_notes.len(), 2);
    let cmds = update(&mut st, notes(vec![note.clone(), stale.clone()], true));
    match cmds.as_slice() {
        [Command::ForgetGroupNotes { queue, notes, .. }] => {
            assert_eq!(queue, "orders.dlq");
            assert_eq!(notes, &vec![stale.clone()]);
        }
        other => panic!("expected the stale note to be forgotten, got {other:?}"),
    }
    assert_eq!(st.msgs.group_notes, vec![note]);
}

/// A depth refresh that changes the order keeps the cursor on the queue it was on, and a
/// refresh whose depths are unchanged changes nothing (nothing to redraw).
#[test]
fn a_reordering_refresh_keeps_the_cursor_on_its_queue() {
    let mut st = loaded(false, Theme::color());
    let names = |st: &warren::tui::State| -> Vec<String> {
        st.queue_rows()
            .iter()
            .map(|r| r.name().to_string())
            .collect()
    };
    // Urgency with nothing growing: deepest first.
    assert_eq!(names(&st)[0], "orders.dlq");
    update(&mut st, key(KeyCode::Char('j')));
    let on = st.queue_name_at_cursor().unwrap();
    let depths = |st: &warren::tui::State,
                  grow: &str,
                  by: u64|
     -> Vec<(warren::domain::discovery::QueueRef, Option<u64>)> {
        st.queues
            .discovery
            .dead_letter_queues
            .iter()
            .map(|d| {
                let extra = if d.name == grow { by } else { 0 };
                (d.id(), d.depth.map(|n| n + extra))
            })
            .collect()
    };
    // Thirty seconds later the last queue of the list has grown: it goes to the top.
    let last = names(&st).last().unwrap().clone();
    update(
        &mut st,
        Event::Tick(jiff::Timestamp::from_second(now().as_second() + 30).unwrap()),
    );
    let d = depths(&st, &last, 10);
    update(
        &mut st,
        Report::DepthsRefreshed {
            depths: d,
            ticket: Ticket::default(),
        },
    );
    assert_eq!(names(&st)[0], last, "the growing queue sorts first");
    assert_eq!(
        st.queue_name_at_cursor().unwrap(),
        on,
        "the cursor stayed on its queue"
    );
    let figures = st.queues.figures_of(&at(&last)).copied().unwrap();
    assert_eq!(figures.growth_per_min, Some(20.0));
    // The same depths again: nothing changed, nothing to draw.
    st.take_dirty();
    let d = depths(&st, &last, 0);
    update(
        &mut st,
        Report::DepthsRefreshed {
            depths: d,
            ticket: Ticket::default(),
        },
    );
    assert!(!st.take_dirty());
    // By name, and reversed with the same key.
    update(&mut st, key(KeyCode::Char('6')));
    let sorted = names(&st);
    let mut expected = sorted.clone();
    expected.sort();
    assert_eq!(sorted, expected);
    update(&mut st, key(KeyCode::Char('6')));
    expected.reverse();
    assert_eq!(names(&st), expected);
    assert_eq!(st.queue_name_at_cursor().unwrap(), on);
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

#[test]
fn r_opens_the_replays_view_with_what_came_back_and_esc_closes_it() {
    use warren::domain::comeback::CameBack;
    use warren::worker::protocol::RunSummary;
    let mut st = loaded(false, Theme::color());
    let cmds = update(&mut st, ch('R'));
    assert!(
        matches!(cmds.as_slice(), [Command::LoadReplays]),
        "{cmds:?}"
    );
    assert!(matches!(st.overlay, Overlay::Replays(0)));
    assert!(text_of(&warren::tui::replays::lines(&st, 0)).contains("Reading the audit"));
    let run = |id: &str, back: Option<CameBack>| RunSummary {
        run_id: Some(id.into()),
        operation: warren::domain::run::RunKind::Replay,
        started_at: st.now,
        os_user: "alice".into(),
        broker_user: "guest".into(),
        vhost: "/".into(),
        from_queue: "orders.dlq".into(),
        outcome: "completed".into(),
        moved: Some(7),
        came_back: back,
        canary: None,
        local: false,
        broker: true,
        unvouched: false,
    };
    let runs = vec![
        run(
            "r-new",
            Some(CameBack {
                came_back: 3,
                top_failure: Some("Rejected by orders.process".into()),
                top_failure_count: 2,
            }),
        ),
        run("r-old", None),
        // Only on the broker, not signed by the user it names: never shown as a plain run.
        RunSummary {
            unvouched: true,
            from_queue: "payments".into(),
            ..run("r-forged", None)
        },
        // An archive is said to be one, and a canary that stopped its replay is shown.
        RunSummary {
            operation: warren::domain::run::RunKind::Archive,
            from_queue: "refunds.dlq".into(),
            ..run("r-archive", None)
        },
        RunSummary {
            from_queue: "jobs.dlq".into(),
            canary: Some(warren::domain::canary::CanaryRecord {
                dlq: "jobs.dlq".into(),
                size: 10,
                moved: 10,
                came_back: 10,
                exact: true,
                top_failure: Some(("CardDeclined".into(), 10)),
                waited_ms: 900,
                decision: warren::domain::canary::CanaryDecision::CameBack,
                left_untouched: 190,
            }),
            ..run("r-canary", None)
        },
    ];
    update(
        &mut st,
        Report::ReplaysLoaded {
            runs,
            unreached: vec!["could not look in 'x.dlq' for what came back: gone".into()],
            ticket: Ticket::default(),
        },
    );
    let text = text_of(&warren::tui::replays::lines(&st, 0));
    assert!(text.contains("alice@guest"), "{text}");
    assert!(text.contains("moved 7  completed  [broker]"), "{text}");
    assert!(text.contains("archive / refunds.dlq"), "{text}");
    assert!(text.contains("replay  / orders.dlq"), "{text}");
    assert!(
        text.contains("canary: 10 of 10 came back within 1 s, 10 × CardDeclined"),
        "{text}"
    );
    assert!(
        text.contains("came back 3, most: Rejected by orders.process ×2  run r-new"),
        "{text}"
    );
    assert!(text.contains("not looked at"), "{text}");
    assert!(text.contains("could not look in 'x.dlq'"), "{text}");
    let forged = text
        .lines()
        .find(|l| l.contains("payments"))
        .unwrap_or_else(|| panic!("{text}"));
    assert!(forged.contains("[broker, UNVOUCHED"), "{text}");
    assert_eq!(text.matches("UNVOUCHED").count(), 1, "{text}");
    // Scrolled by runs, never past the last.
    update(&mut st, ch('G'));
    assert!(matches!(st.overlay, Overlay::Replays(4)));
    update(&mut st, ch('j'));
    assert!(matches!(st.overlay, Overlay::Replays(4)));
    update(&mut st, key(KeyCode::Esc));
    assert!(matches!(st.overlay, Overlay::None));
}

#[test]
fn a_message_that_came_back_names_its_run_and_who_ran_it() {
    use warren::domain::value::HeaderValue;
    let mut m = orders_messages().remove(0);
    m.headers.insert(
        "warren-replay-id",
        HeaderValue::string("20261201T100000Z-00ff"),
    );
    m.headers.insert(
        "warren-replayed-at",
        HeaderValue::string("2020-01-01T00:00:00Z"),
    );
    m.headers.insert("warren-replay-count", HeaderValue::I64(3));
    let mut st = loaded(false, Theme::color());
    update(&mut st, key(KeyCode::Enter));
    update(
        &mut st,
        Report::MessagesLoaded {
            vhost: VHOST.into(),
            queue: "orders.dlq".into(),
            messages: vec![m.into()],
            first_seen: vec![],
            replays: vec![],
            authors: [("20261201T100000Z-00ff".to_string(), "alice".to_string())].into(),
            stop: "end".into(),
            ticket: Ticket::default(),
        },
    );
    let row = st.current_opened().expect("the message under the cursor");
    let text = text_of(&detail::lines(&st, &row));
    let line = text.lines().nth(1).unwrap_or_default();
    assert!(line.starts_with("failed again "), "{text}");
    assert!(
        line.ends_with("after replay 20261201T100000Z-00ff by alice (3rd replay)"),
        "{text}"
    );
}

#[test]
fn a_archives_a_group_with_its_reason_and_shows_the_progress() {
    let mut st = browsed(false, "orders.dlq", orders_messages());
    update(&mut st, ch('f'));
    let key_of_group = st.msgs.browse.as_ref().unwrap().groups[0].key.clone();
    assert!(
        update(&mut st, ch('A')).is_empty(),
        "the modal asks nothing of the worker"
    );
    match &st.overlay {
        Overlay::Archive(m) => {
            assert_eq!(m.kind, ArchiveKind::Archive);
            assert_eq!(m.count, 5, "the group's five messages");
            assert_eq!(m.queue, "orders.dlq");
        }
        other => panic!("expected the archive modal, got {other:?}"),
    }
    // Letters go to the reason, not to the panes' keys ('r' would open a replay, 'q' quit).
    assert!(type_text(&mut st, "customer gone, rq").is_empty());
    update(&mut st, key(KeyCode::Backspace));
    update(&mut st, key(KeyCode::Backspace));
    let cmds = update(&mut st, key(KeyCode::Enter));
    match cmds.as_slice() {
        [Command::Replay(r)] => {
            assert_eq!(r.queue, "orders.dlq");
            assert_eq!(r.expected, 5);
            assert_eq!(
                r.job,
                JobKind::Archive {
                    reason: "customer gone,".into(),
                    place: Default::default(),
                }
            );
            assert!(matches!(&r.selection, Selection::Group(g) if g.name == key_of_group));
        }
        other => panic!("expected one archive run, got {other:?}"),
    }
    progress_then_cancel(&mut st, |j| matches!(j, JobKind::Archive { .. }), 5);
}

#[test]
fn x_discards_the_selected_messages_and_esc_sends_nothing() {
    let mut st = browsed(false, "orders.dlq", orders_messages());
    update(&mut st, ch(' '));
    update(&mut st, ch(' '));
    update(&mut st, ch('X'));
    // Deleting for good needs the count typed, whatever it is (`domain::confirm`, the rule
    // `warren discard` asks by too).
    assert!(
        matches!(&st.overlay, Overlay::Archive(m) if m.kind == ArchiveKind::Discard && m.count == 2 && m.needs_typed_count())
    );
    assert!(update(&mut st, key(KeyCode::Esc)).is_empty());
    assert!(matches!(st.overlay, Overlay::None));
    update(&mut st, ch('X'));
    assert!(
        update(&mut st, key(KeyCode::Enter)).is_empty(),
        "Enter waits for the count"
    );
    type_text(&mut st, "2");
    let cmds = update(&mut st, key(KeyCode::Enter));
    assert!(
        matches!(cmds.as_slice(), [Command::Replay(r)] if r.job == JobKind::Discard && r.expected == 2 && r.typed && matches!(&r.selection, Selection::Keys(k) if k.len() == 2)),
        "{cmds:?}"
    );
}

#[test]
fn a_discard_above_100_needs_the_count_typed_an_archive_takes_digits_as_reason() {
    let messages: Vec<_> = (0..120).map(broker_ladder).collect();
    let mut st = browsed(false, "orders.dlq", messages);
    update(&mut st, ch('a'));
    update(&mut st, ch('X'));
    assert!(matches!(&st.overlay, Overlay::Archive(m) if m.count == 120 && m.needs_typed_count()));
    let cmds = confirm_by_typing(&mut st, 120);
    assert!(
        matches!(cmds.as_slice(), [Command::Replay(r)] if r.job == JobKind::Discard && r.expected == 120),
        "{cmds:?}"
    );
    // An archive can be restored: no typed count; digits are part of its reason.
    let messages: Vec<_> = (0..120).map(broker_ladder).collect();
    let mut st = browsed(false, "orders.dlq", messages);
    update(&mut st, ch('a'));
    update(&mut st, ch('A'));
    type_text(&mut st, "INC-42");
    let cmds = update(&mut st, key(KeyCode::Enter));
    assert!(
        matches!(cmds.as_slice(), [Command::Replay(r)] if r.job == JobKind::Archive { reason: "INC-42".into(), place: Default::default() } && r.expected == 120),
        "{cmds:?}"
    );
}

#[test]
fn read_only_refuses_archive_and_discard_and_says_why() {
    let mut st = browsed(true, "orders.dlq", orders_messages());
    update(&mut st, ch('a'));
    for k in ['A', 'X'] {
        st.banner.error = None;
        assert!(update(&mut st, ch(k)).is_empty());
        assert!(
            matches!(st.overlay, Overlay::None),
            "{k}: the modal cannot open"
        );
        assert!(
            st.banner
                .error
                .as_deref()
                .unwrap_or("")
                .contains("read-only"),
            "{k}"
        );
    }
}

#[test]
fn the_archive_is_listed_with_the_dlqs_read_like_one_and_archive_or_discard_refuse_there() {
    use warren::domain::discovery::{DlqKind, QueueType};
    let d = discovery();
    let dlqs = d.dead_letter_queues.len();
    // A classic queue of the same name is not the archive.
    let mut classic = d.clone();
    classic
        .other_queues
        .push(warren::domain::discovery::QueueSummary {
            vhost: VHOST.into(),
            name: "warren.archive".into(),
            queue_type: QueueType::Classic,
            depth: Some(3),
            consumers: Some(0),
            dead_letter_exchange: None,
        });
    classic.mark_archive("warren.archive");
    assert_eq!(classic.dead_letter_queues.len(), dlqs);
    let d = with_archive(d);
    assert_eq!(d.dead_letter_queues.len(), dlqs + 1);
    assert_eq!(
        d.dlq("warren.archive").map(|q| q.kind),
        Some(DlqKind::Archive)
    );
    assert!(d.other_queues.iter().all(|q| q.name != "warren.archive"));
    // Opening it browses it (`in_the_archive` checks the Enter asks for a browse of it).
    let mut st = in_the_archive(false);
    assert_eq!(
        st.msgs.browse.as_ref().map(|b| b.queue.as_str()),
        Some("warren.archive")
    );
    for k in ['A', 'X'] {
        st.banner.notice = None;
        assert!(update(&mut st, ch(k)).is_empty(), "{k}");
        assert!(matches!(st.overlay, Overlay::None), "{k}");
        let notice = st.banner.notice.as_deref().unwrap_or("");
        assert!(notice.contains("is the archive"), "{k}: {notice}");
        assert!(notice.contains("r restores"), "{k}: {notice}");
    }
}

#[test]
fn the_local_archive_file_is_listed_as_the_archive_and_r_restores_from_it() {
    use warren::domain::archive::LOCAL_QUEUE;
    let mut d = discovery();
    d.add_local_archive(VHOST, 7);
    let mut st = warren::tui::State::new(now(), false, Theme::color());
    update(
        &mut st,
        Report::QueuesLoaded {
            overview: overview(),
            discovery: d,
            ticket: Default::default(),
        },
    );
    st.queues.cursor = st
        .queue_rows()
        .iter()
        .position(|r| r.name() == LOCAL_QUEUE)
        .expect("the local archive is in the queue list");
    let cmds = update(&mut st, key(KeyCode::Enter));
    assert!(
        matches!(cmds.as_slice(), [Command::Browse { queue, .. }] if queue == LOCAL_QUEUE),
        "opening it reads it: {cmds:?}"
    );
    update(
        &mut st,
        Report::MessagesLoaded {
            vhost: VHOST.into(),
            queue: LOCAL_QUEUE.into(),
            messages: packed(orders_messages()),
            first_seen: vec![],
            replays: vec![],
            authors: Default::default(),
            stop: "3 of 3 messages from the local archive".into(),
            ticket: Default::default(),
        },
    );
    assert!(st.archive_open());
    // Nothing is worked off it; it is named as a person reads it, not by its internal name.
    assert!(update(&mut st, ch('A')).is_empty());
    let notice = st.banner.notice.clone().unwrap_or_default();
    assert!(
        notice.starts_with("archive (local file) is the archive"),
        "{notice}"
    );
    let cmds = update(&mut st, ch('r'));
    assert!(
        matches!(cmds.as_slice(), [Command::PreviewRestore { queue, .. }] if queue == LOCAL_QUEUE),
        "r asks for the restore plan of the local archive: {cmds:?}"
    );
    assert!(matches!(st.overlay, Overlay::Restore(_)));
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
        ..Default::default()
    })
}

#[test]
fn r_in_the_archive_opens_the_restore_modal_and_asks_for_its_plan() {
    let mut st = in_the_archive(false);
    update(&mut st, ch(' '));
    update(&mut st, ch(' '));
    let cmds = update(&mut st, ch('r'));
    let how = match cmds.as_slice() {
        [
            Command::PreviewRestore {
                queue,
                selection: Selection::Keys(k),
                how,
                ..
            },
        ] if queue == "warren.archive" && k.len() == 2 => *how,
        other => panic!("expected the restore plan asked for, got {other:?}"),
    };
    assert_eq!(how, RestoreHow::default(), "back into the DLQs, again off");
    let Overlay::Restore(m) = &st.overlay else {
        panic!("expected the restore modal, got {:?}", st.overlay);
    };
    assert_eq!(
        m.blocked().as_deref(),
        Some("waiting for the restore plan…")
    );
    assert!(
        update(&mut st, key(KeyCode::Enter)).is_empty(),
        "Enter waits for the plan"
    );
    // A plan for other toggles is stale; the one for these arrives.
    update(
        &mut st,
        restore_preview(
            RestoreHow {
                replay: true,
                again: false,
            },
            9,
            0,
        ),
    );
    assert!(matches!(&st.overlay, Overlay::Restore(m) if m.preview.is_none()));
    update(&mut st, restore_preview(how, 2, 1));
    assert!(
        matches!(&st.overlay, Overlay::Restore(m) if m.count() == Some(2) && m.blocked().is_none())
    );
    let cmds = update(&mut st, key(KeyCode::Enter));
    match cmds.as_slice() {
        [Command::Replay(r)] => {
            assert_eq!(r.queue, "warren.archive");
            assert_eq!(r.expected, 2);
            assert_eq!(r.job, JobKind::Restore(how));
            assert!(matches!(&r.selection, Selection::Keys(k) if k.len() == 2));
        }
        other => panic!("expected one restore run, got {other:?}"),
    }
    // Its cancel is the replay's (the worker stops it between batches).
    progress_then_cancel(&mut st, |j| *j == JobKind::Restore(how), 2);
}

#[test]
fn the_restore_toggles_ask_for_the_plan_again_and_esc_sends_nothing() {
    let mut st = in_the_archive(false);
    update(&mut st, ch('f'));
    let cmds = update(&mut st, ch('r'));
    assert!(
        matches!(
            cmds.as_slice(),
            [Command::PreviewRestore {
                selection: Selection::Group(_),
                ..
            }]
        ),
        "a group in the archive: {cmds:?}"
    );
    update(&mut st, restore_preview(RestoreHow::default(), 5, 0));
    let cmds = update(&mut st, ch('o'));
    assert!(
        matches!(
            cmds.as_slice(),
            [Command::PreviewRestore {
                how: RestoreHow {
                    replay: true,
                    again: false
                },
                ..
            }]
        ),
        "{cmds:?}"
    );
    assert!(
        matches!(&st.overlay, Overlay::Restore(m) if m.preview.is_none() && m.how.replay),
        "the old plan is dropped"
    );
    let cmds = update(&mut st, ch('a'));
    assert!(
        matches!(
            cmds.as_slice(),
            [Command::PreviewRestore {
                how: RestoreHow {
                    replay: true,
                    again: true
                },
                ..
            }]
        ),
        "{cmds:?}"
    );
    let cmds = update(&mut st, ch('o'));
    assert!(
        matches!(
            cmds.as_slice(),
            [Command::PreviewRestore {
                how: RestoreHow {
                    replay: false,
                    again: true
                },
                ..
            }]
        ),
        "{cmds:?}"
    );
    // Keys of the panes do nothing here ('q' does not quit, 'j' does not move).
    assert!(update(&mut st, ch('q')).is_empty());
    assert!(update(&mut st, ch('j')).is_empty());
    assert!(matches!(st.overlay, Overlay::Restore(_)));
    assert!(update(&mut st, key(KeyCode::Esc)).is_empty());
    assert!(matches!(st.overlay, Overlay::None));
}

#[test]
fn a_restore_refused_or_empty_does_not_run_and_a_large_one_needs_the_count_typed() {
    let mut st = in_the_archive(false);
    update(&mut st, ch('r'));
    // Every matching one was restored before: the plan says so, Enter does nothing.
    update(
        &mut st,
        Report::RestorePreview(RestorePreview {
            vhost: VHOST.into(),
            queue: "warren.archive".into(),
            count: 0,
            restored_before: 1,
            refusals: vec![
                "every matching message was restored before (1); --again restores them again"
                    .into(),
            ],
            ..Default::default()
        }),
    );
    let Overlay::Restore(m) = &st.overlay else {
        panic!("{:?}", st.overlay)
    };
    assert!(m.blocked().unwrap_or_default().contains("restored before"));
    assert!(update(&mut st, key(KeyCode::Enter)).is_empty());
    // Again: the plan for it holds 150, which must be typed.
    update(&mut st, ch('a'));
    update(
        &mut st,
        restore_preview(
            RestoreHow {
                replay: false,
                again: true,
            },
            150,
            1,
        ),
    );
    let cmds = confirm_by_typing(&mut st, 150);
    assert!(
        matches!(cmds.as_slice(), [Command::Replay(r)] if r.job == JobKind::Restore(RestoreHow { replay: false, again: true }) && r.expected == 150),
        "{cmds:?}"
    );
}

#[test]
fn read_only_refuses_a_restore_and_says_why() {
    let mut st = in_the_archive(true);
    st.banner.error = None;
    assert!(update(&mut st, ch('r')).is_empty());
    assert!(matches!(st.overlay, Overlay::None), "the modal cannot open");
    assert!(
        st.banner
            .error
            .as_deref()
            .unwrap_or("")
            .contains("read-only"),
        "{:?}",
        st.banner.error
    );
}

/// The row of the queue `name` in `vhost` (every vhost listed).
fn row_of(st: &warren::tui::State, vhost: &str, name: &str) -> usize {
    st.queue_rows()
        .iter()
        .position(|r| r.vhost() == vhost && r.name() == name)
        .unwrap_or_else(|| panic!("{vhost}/{name} listed"))
}

#[test]
fn vhost_star_switches_to_every_vhost_and_vhost_name_back_to_one() {
    let mut st = loaded(false, Theme::color());
    let cmds = run_command_line(&mut st, "vhost *");
    assert!(
        matches!(cmds.as_slice(), [Command::SwitchVhost { name, generation: 1 }] if name == "*"),
        "{cmds:?}"
    );
    assert_eq!(
        st.switching.as_ref().map(|s| s.to.as_str()),
        Some("every vhost")
    );
    update(
        &mut st,
        Report::QueuesLoaded {
            overview: every_vhost_overview(),
            discovery: every_vhost_discovery(),
            ticket: ticket(1, 3),
        },
    );
    assert!(st.every_vhost() && st.switching.is_none());
    assert_eq!(st.banner.notice.as_deref(), Some("switched to every vhost"));
    let h = header(&st);
    assert!(h.contains("ops · every vhost"), "{h}");
    assert_eq!(st.queue_rows().len(), 10, "both vhosts' queues");
    // Back to one vhost: its name, like any switch.
    let cmds = run_command_line(&mut st, "vhost /orders");
    assert!(
        matches!(cmds.as_slice(), [Command::SwitchVhost { name, generation: 2 }] if name == "/orders"),
        "{cmds:?}"
    );
    update(
        &mut st,
        Report::QueuesLoaded {
            overview: overview(),
            discovery: discovery(),
            ticket: ticket(2, 4),
        },
    );
    assert!(!st.every_vhost());
    assert_eq!(st.queue_rows().len(), 8);
    assert!(header(&st).contains("ops@/orders"));
    // Every context at once is a switch like the others (see the tests of `:ctx *` below).
    let cmds = run_command_line(&mut st, "ctx *");
    assert!(
        matches!(cmds.as_slice(), [Command::SwitchContext { name, vhost: None, generation: 3 }] if name == "*"),
        "{cmds:?}"
    );
}

#[test]
fn two_queues_of_one_name_in_two_vhosts_stay_two() {
    let mut st = loaded_every_vhost(Theme::color());
    let here = row_of(&st, VHOST, "orders.dlq");
    let there = row_of(&st, "billing", "orders.dlq");
    assert_ne!(here, there);
    // Urgency with nothing growing: deepest first, so billing's (900) before /orders' (412).
    assert!(there < here, "{there} {here}");
    // Enter on billing's: the read names billing.
    st.queues.cursor = there;
    let cmds = update(&mut st, key(KeyCode::Enter));
    assert!(
        matches!(cmds.as_slice(), [Command::Browse { vhost, queue, .. }] if vhost == "billing" && queue == "orders.dlq"),
        "{cmds:?}"
    );
    assert_eq!(
        st.msgs.loading,
        Some(warren::domain::discovery::QueueRef::new(
            "billing",
            "orders.dlq"
        ))
    );
    // A page of /orders' queue of that name (an earlier read's) is not billing's: billing's
    // read is still awaited.
    update(
        &mut st,
        Report::MessagesLoaded {
            vhost: VHOST.into(),
            queue: "orders.dlq".into(),
            messages: packed(vec![masstransit()]),
            first_seen: vec![],
            replays: vec![],
            authors: Default::default(),
            stop: "all 1 messages".into(),
            ticket: ticket(0, 1),
        },
    );
    assert!(
        st.msgs.loading.is_some(),
        "billing's read is still under way"
    );
    update(
        &mut st,
        Report::MessagesLoaded {
            vhost: "billing".into(),
            queue: "orders.dlq".into(),
            messages: packed(orders_messages()),
            first_seen: vec![],
            replays: vec![],
            authors: Default::default(),
            stop: "all 3 messages".into(),
            ticket: ticket(0, 2),
        },
    );
    assert!(st.msgs.loading.is_none());
    let b = st.msgs.browse.as_ref().expect("a page");
    assert_eq!(
        (b.vhost.as_str(), b.queue.as_str()),
        ("billing", "orders.dlq")
    );
    // What each read found dates its own queue: two reads, two heads.
    assert!(
        st.queues
            .heads
            .contains_key(&warren::domain::discovery::QueueRef::new(
                "billing",
                "orders.dlq"
            ))
    );
    assert!(st.queues.heads.contains_key(&at("orders.dlq")));
    assert_eq!(st.queues.heads.len(), 2);
    // The notes of /orders' queue of that name are not billing's.
    update(&mut st, ch('f'));
    update(&mut st, notes(vec![], false));
    let note = GroupNote {
        queue: "orders.dlq".into(),
        by: st.msgs.group_by,
        key: st
            .msgs
            .current_group()
            .map(|g| g.key.clone())
            .unwrap_or_default(),
        text: "another vhost's".into(),
        author: "x".into(),
        at: now(),
    };
    update(&mut st, notes(vec![note], false));
    let g = st.msgs.current_group().cloned().expect("a group");
    assert!(
        st.msgs.note_for(&g).is_none(),
        "/orders' note is not on billing's queue"
    );
    // A replay from here plans and runs in billing.
    update(&mut st, key_esc());
    st.focus = Focus::Messages;
    st.msgs.list_mode = ListMode::Messages;
    let cmds = update(&mut st, ch('r'));
    assert!(
        matches!(cmds.as_slice(), [Command::PreviewReplay { vhost, queue, .. }] if vhost == "billing" && queue == "orders.dlq"),
        "{cmds:?}"
    );
    let mut plan = preview("orders.dlq", 1);
    if let Report::ReplayPreview(p) = &mut plan {
        p.vhost = "billing".into();
    }
    update(&mut st, plan);
    let cmds = update(&mut st, key(KeyCode::Enter));
    assert!(
        matches!(cmds.as_slice(), [Command::Replay(r)] if r.vhost == "billing" && r.queue == "orders.dlq"),
        "{cmds:?}"
    );
}

#[test]
fn a_refresh_of_every_vhost_keeps_each_queue_its_own_depth_and_history() {
    let mut st = loaded_every_vhost(Theme::color());
    let there = row_of(&st, "billing", "orders.dlq");
    st.queues.cursor = there;
    // Thirty seconds later /orders' orders.dlq has grown by 10, billing's has not.
    update(
        &mut st,
        Event::Tick(jiff::Timestamp::from_second(now().as_second() + 30).unwrap()),
    );
    let depths: Vec<_> = st
        .queues
        .discovery
        .dead_letter_queues
        .iter()
        .map(|d| {
            let grown = d.vhost == VHOST && d.name == "orders.dlq";
            (d.id(), d.depth.map(|n| if grown { n + 10 } else { n }))
        })
        .collect();
    update(
        &mut st,
        Report::DepthsRefreshed {
            depths,
            ticket: Ticket::default(),
        },
    );
    let depth_of = |st: &warren::tui::State, v: &str| {
        st.dlq_of(&warren::domain::discovery::QueueRef::new(v, "orders.dlq"))
            .and_then(|d| d.depth)
    };
    assert_eq!(depth_of(&st, VHOST), Some(422));
    assert_eq!(depth_of(&st, "billing"), Some(900));
    // Urgency across vhosts: the growing one first, whatever its vhost.
    assert_eq!(row_of(&st, VHOST, "orders.dlq"), 0);
    let grown = st.queues.figures_of(&at("orders.dlq")).copied().unwrap();
    assert_eq!(grown.growth_per_min, Some(20.0));
    let still = st
        .queues
        .figures_of(&warren::domain::discovery::QueueRef::new(
            "billing",
            "orders.dlq",
        ))
        .copied()
        .unwrap();
    assert_eq!(still.growth_per_min, Some(0.0));
    // The cursor stayed on billing's queue, which moved down a row.
    assert_eq!(
        st.queue_at_cursor(),
        Some(warren::domain::discovery::QueueRef::new(
            "billing",
            "orders.dlq"
        ))
    );
    // Each its own samples.
    assert_eq!(
        st.queues
            .histories
            .get(&at("orders.dlq"))
            .map(|h| h.depths()),
        Some(vec![412, 422])
    );
    // By name: the two of one name side by side, each still itself.
    update(&mut st, key(KeyCode::Char('6')));
    let a = row_of(&st, VHOST, "orders.dlq");
    let b = row_of(&st, "billing", "orders.dlq");
    assert_eq!(a.abs_diff(b), 1, "{a} {b}");
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

#[test]
fn ctx_star_lists_every_context_in_one_list_by_urgency_and_says_what_is_unreached() {
    let st = every_context();
    // The scope in the header: two contexts listed, the read-only one counted, and the one
    // that could not be reached, with why.
    let h = header(&st);
    assert!(h.contains("every context (2)"), "{h}");
    assert!(h.contains("1 read-only"), "{h}");
    assert!(h.contains(&format!("gone: {GONE_WHY}")), "{h}");
    // One list: prod-eu's eight DLQs and staging's two. Two queues of one vhost and name in two
    // contexts stay two.
    assert_eq!(st.queue_rows().len(), 10);
    let prod = row_in(&st, "prod-eu", VHOST, "orders.dlq");
    let staging = row_in(&st, "staging", VHOST, "orders.dlq");
    assert_ne!(prod, staging);
    // By urgency across contexts: nothing grows yet, so the deepest first (staging's 900).
    assert_eq!(staging, 0);
    // Each row says its context (by its label, STG for staging), and its vhost where that is
    // not the context's own.
    let text = screen(&st, 160, 30).join("\n");
    assert!(text.contains("STG/orders.dlq"), "{text}");
    assert!(text.contains("prod-eu/orders.dlq"), "{text}");
    assert!(text.contains("STG/billing/invoices.dlq"), "{text}");
    assert!(!text.contains("STG//orders"), "{text}");
    // Enter's word says where it goes.
    assert!(text.contains("open in its context"), "{text}");
    // The sort keys work here as anywhere: by name, then back.
    let mut st = st;
    update(&mut st, ch('2'));
    assert_ne!(st.queues.sort, warren::domain::urgency::SortBy::Urgency);
    update(&mut st, ch('1'));
    assert_eq!(row_in(&st, "staging", VHOST, "orders.dlq"), 0);
}

#[test]
fn every_context_refuses_work_and_says_each_context_keeps_its_rights() {
    let mut st = every_context();
    // On the queue list: protect, the Replays view, ordinary queues.
    for c in ['P', 'R', 'o'] {
        st.banner.error = None;
        let cmds = update(&mut st, ch(c));
        assert!(cmds.is_empty(), "{c}: {cmds:?}");
        let e = st.banner.error.clone().unwrap_or_default();
        assert!(
            e.contains("every context at once is for looking") && e.contains("own rights"),
            "{c}: {e}"
        );
    }
    assert!(!st.queues.show_ordinary);
    // The keys of a message pane are refused the same way, whatever reached them.
    st.focus = Focus::Messages;
    for c in ['r', 'A', 'X', 'S'] {
        st.banner.error = None;
        let cmds = update(&mut st, ch(c));
        assert!(cmds.is_empty(), "{c}: {cmds:?}");
        assert!(
            st.banner
                .error
                .as_deref()
                .is_some_and(|e| e.contains("is for looking")),
            "{c}: {:?}",
            st.banner.error
        );
        assert!(matches!(st.overlay, Overlay::None), "{c}");
    }
    st.focus = Focus::Queues;
    // Another vhost is chosen in a context, not across them.
    let cmds = run_command_line(&mut st, "vhost billing");
    assert!(cmds.is_empty() && st.switching.is_none(), "{cmds:?}");
    assert!(
        st.banner
            .error
            .as_deref()
            .is_some_and(|e| e.contains("open a context"))
    );
    // Looking still works: moving and sorting ask nothing of the worker.
    assert!(update(&mut st, ch('j')).is_empty());
    assert_eq!(st.queues.cursor, 1);
}

#[test]
fn enter_in_every_context_switches_to_the_queue_s_context_and_vhost_and_opens_it_there() {
    let mut st = every_context();
    st.queues.cursor = row_in(&st, "staging", "billing", "invoices.dlq");
    let cmds = update(&mut st, key(KeyCode::Enter));
    // No read here: a switch to the queue's context and vhost.
    assert!(
        matches!(cmds.as_slice(), [Command::SwitchContext { name, vhost: Some(v), generation: 2 }] if name == "staging" && v == "billing"),
        "{cmds:?}"
    );
    assert!(st.msgs.loading.is_none());
    assert!(
        st.switching
            .as_ref()
            .is_some_and(|s| s.to.contains("staging") && s.to.contains("invoices.dlq"))
    );
    // The context lists itself (its own rights: writable here): the queue is opened.
    let mut billing = every_vhost_discovery();
    billing.dead_letter_queues.retain(|d| d.vhost == "billing");
    let cmds = update(
        &mut st,
        Report::QueuesLoaded {
            overview: warren::tui::event::Overview {
                context: "staging".into(),
                vhost: "billing".into(),
                ..overview()
            },
            discovery: billing,
            ticket: ticket(2, 1),
        },
    );
    assert!(
        matches!(cmds.as_slice(), [Command::Browse { vhost, queue, .. }] if vhost == "billing" && queue == "invoices.dlq"),
        "{cmds:?}"
    );
    assert!(!st.every_context() && !st.read_only);
    assert_eq!(st.focus, Focus::Messages);
    assert!(st.from_every_context);
    // The way back is in the footer, and `*` takes it.
    st.focus = Focus::Queues;
    let text = screen(&st, 160, 30).join("\n");
    assert!(text.contains("* every context"), "{text}");
    let cmds = update(&mut st, ch('*'));
    assert!(
        matches!(cmds.as_slice(), [Command::SwitchContext { name, vhost: None, generation: 3 }] if name == "*"),
        "{cmds:?}"
    );
    update(
        &mut st,
        Report::QueuesLoaded {
            overview: every_context_overview(),
            discovery: every_context_discovery(),
            ticket: ticket(3, 1),
        },
    );
    assert!(st.every_context() && !st.from_every_context);
}

#[test]
fn a_queue_opened_from_every_context_keeps_that_context_s_read_only() {
    let mut st = every_context();
    st.queues.cursor = row_in(&st, "staging", VHOST, "orders.dlq");
    let cmds = update(&mut st, key(KeyCode::Enter));
    let [Command::SwitchContext { generation, .. }] = cmds[..] else {
        panic!("{cmds:?}")
    };
    let cmds = update(
        &mut st,
        Report::QueuesLoaded {
            overview: warren::tui::event::Overview {
                context: "staging".into(),
                read_only: true,
                read_only_reason: "replay is disabled: context 'staging' is read_only".into(),
                ..overview()
            },
            discovery: discovery(),
            ticket: ticket(generation, 1),
        },
    );
    assert!(matches!(cmds.as_slice(), [Command::Browse { queue, .. }] if queue == "orders.dlq"));
    assert!(st.read_only);
    assert!(st.read_only_reason.contains("staging"));
}

#[test]
fn a_failed_switch_from_every_context_opens_nothing_later() {
    let mut st = every_context();
    st.queues.cursor = row_in(&st, "prod-eu", VHOST, "orders.dlq");
    let cmds = update(&mut st, key(KeyCode::Enter));
    let [Command::SwitchContext { generation, .. }] = cmds[..] else {
        panic!("{cmds:?}")
    };
    update(
        &mut st,
        Report::SwitchFailed {
            generation,
            text: "connection refused".into(),
        },
    );
    assert!(st.every_context(), "still every context");
    assert!(
        st.banner
            .error
            .as_deref()
            .is_some_and(|e| e.contains("still on every context"))
    );
    assert!(st.pending.open_after_switch.is_none());
    // A switch typed later lands without opening the queue of the one that failed.
    let cmds = run_command_line(&mut st, "ctx prod-eu");
    let [Command::SwitchContext { generation, .. }] = cmds[..] else {
        panic!("{cmds:?}")
    };
    let cmds = update(
        &mut st,
        Report::QueuesLoaded {
            overview: overview(),
            discovery: discovery(),
            ticket: ticket(generation, 1),
        },
    );
    assert!(cmds.is_empty(), "{cmds:?}");
    assert!(!st.from_every_context);
}

#[test]
fn a_refresh_of_every_context_keeps_two_queues_of_one_vhost_and_name_apart() {
    let mut st = every_context();
    update(
        &mut st,
        Event::Tick(jiff::Timestamp::from_second(now().as_second() + 30).unwrap()),
    );
    // prod-eu's orders.dlq grew by 10 in 30 s; staging's, of the same vhost and name, did not.
    let depths: Vec<_> = st
        .queues
        .discovery
        .dead_letter_queues
        .iter()
        .map(|d| {
            let grown = d.context == "prod-eu" && d.name == "orders.dlq";
            (d.id(), d.depth.map(|n| if grown { n + 10 } else { n }))
        })
        .collect();
    update(
        &mut st,
        Report::DepthsRefreshed {
            depths,
            ticket: ticket(1, 9),
        },
    );
    let q = |c: &str| warren::domain::discovery::QueueRef::in_context(c, VHOST, "orders.dlq");
    assert_eq!(st.dlq_of(&q("prod-eu")).and_then(|d| d.depth), Some(422));
    assert_eq!(st.dlq_of(&q("staging")).and_then(|d| d.depth), Some(900));
    assert_eq!(
        st.queues
            .figures_of(&q("prod-eu"))
            .and_then(|f| f.growth_per_min),
        Some(20.0)
    );
    assert_eq!(
        st.queues
            .figures_of(&q("staging"))
            .and_then(|f| f.growth_per_min),
        Some(0.0)
    );
    // Growing first, whichever context.
    assert_eq!(row_in(&st, "prod-eu", VHOST, "orders.dlq"), 0);
}

/// The replay modal's canary: off for a small plan, on (the configured size) above the
/// configured count, `c` steps through the sizes and then off, and what Enter sends says so;
/// a dry run sends none.
#[test]
fn the_replay_modal_starts_a_canary_above_its_threshold_and_c_changes_it() {
    let accept = |st: &mut warren::tui::State| match update(st, key(KeyCode::Enter)).as_slice() {
        [Command::Replay(r)] => r.canary.clone(),
        other => panic!("{other:?}"),
    };
    let mut st = browsed(false, "orders.dlq", orders_messages());
    st.settings.canary_above = 1;
    st.settings.canary_size = 25;
    update(&mut st, ch(' '));
    update(&mut st, ch('r'));
    update(&mut st, preview("orders.dlq", 1));
    assert_eq!(accept(&mut st), None, "1 is not above 1");

    let mut st = browsed(false, "orders.dlq", orders_messages());
    st.settings.canary_above = 1;
    st.settings.canary_size = 25;
    update(&mut st, ch(' '));
    update(&mut st, ch(' '));
    update(&mut st, ch('r'));
    update(&mut st, preview("orders.dlq", 100));
    update(&mut st, ch('c'));
    // A plan that comes again (attempts kept) does not undo the operator's choice.
    update(&mut st, preview("orders.dlq", 100));
    let c = accept(&mut st).expect("a canary");
    assert_eq!((c.size, c.tolerance), (50, 0), "25 stepped to 50");
    assert_eq!(c.wait, st.settings.canary_wait);

    // No more selected than the canary takes: the modal said "no canary" up front, and none
    // is asked of the replay (which would only say afterwards that it was not needed).
    let mut st = browsed(false, "orders.dlq", orders_messages());
    st.settings.canary_above = 1;
    st.settings.canary_size = 25;
    update(&mut st, ch(' '));
    update(&mut st, ch(' '));
    update(&mut st, ch('r'));
    update(&mut st, preview("orders.dlq", 2));
    assert_eq!(accept(&mut st), None, "2 selected, a canary of 25");

    let mut st = browsed(false, "orders.dlq", orders_messages());
    st.settings.canary_above = 1;
    update(&mut st, ch(' '));
    update(&mut st, ch(' '));
    update(&mut st, ch('r'));
    update(&mut st, preview("orders.dlq", 2));
    update(&mut st, ch('d'));
    assert_eq!(accept(&mut st), None, "a dry run has no canary");
}

/// A mistyped filter key is said, not silently matched against nothing: Enter keeps the line
/// open with the known keys on the banner, as the command line names them (issue 26).
#[test]
fn a_mistyped_filter_key_is_named_and_enter_does_not_keep_it() {
    let mut st = browsed(false, "orders.dlq", orders_messages());
    update(&mut st, ch('/'));
    type_text(&mut st, "exeption:Carrier");
    let why = st
        .filtering
        .error
        .clone()
        .expect("the query does not parse");
    assert!(
        why.contains("unknown key `exeption:`; known keys are"),
        "{why}"
    );
    assert!(why.contains("exception"), "{why}");
    update(&mut st, key(KeyCode::Enter));
    assert!(st.inputs.filter.is_some(), "the line stays open");
    assert!(st.filtering.error.is_some(), "and says why");
    update(&mut st, key(KeyCode::Esc));
    assert!(st.inputs.filter.is_none());
    assert_eq!(
        st.filtering.text, "",
        "Esc restores the filter from before: none"
    );
    assert_eq!(st.msgs.visible_rows().len(), 6);
}

/// Snapshot files are not a connection: the header says so (issue 26).
#[test]
fn a_snapshot_is_not_connected() {
    let mut st = warren::tui::State::new(now(), true, warren::tui::Theme::default());
    update(
        &mut st,
        Report::QueuesLoaded {
            overview: warren::tui::event::Overview {
                snapshot: true,
                ..overview()
            },
            discovery: discovery(),
            ticket: Default::default(),
        },
    );
    let h = header(&st);
    assert!(h.contains("snapshot, no broker"), "{h}");
    assert!(!h.contains("connected"), "{h}");
}

/// The shared audit record, asked once per context in the replay modal before the work starts
/// (the TUI cannot stop mid-run to ask): `s` says yes and the run carries it; Enter alone keeps
/// the run on this machine's record, and that answer stands for the context (issue 26).
#[test]
fn the_missing_audit_stream_is_asked_once_per_context_in_the_modal() {
    let with_question = |st: &mut warren::tui::State| {
        let mut p = preview("orders.dlq", 1);
        if let Report::ReplayPreview(pp) = &mut p {
            pp.create_audit = Some("Warren will create the stream 'warren.audit'".into());
        }
        update(st, p);
    };
    let replay_once = |st: &mut warren::tui::State, answer: Option<char>| {
        st.overlay = Overlay::None;
        st.focus = Focus::Messages;
        update(st, ch('r'));
        with_question(st);
        if let Some(c) = answer {
            update(st, ch(c));
        }
        match update(st, key(KeyCode::Enter)).as_slice() {
            [Command::Replay(r)] => r.create_audit,
            other => panic!("{other:?}"),
        }
    };
    let mut st = browsed(false, "orders.dlq", orders_messages());
    update(&mut st, ch(' '));
    assert_eq!(replay_once(&mut st, Some('s')), Some(true), "s: create it");
    assert_eq!(replay_once(&mut st, None), Some(true), "the answer stands");

    let mut st = browsed(false, "orders.dlq", orders_messages());
    update(&mut st, ch(' '));
    assert_eq!(
        replay_once(&mut st, None),
        Some(false),
        "Enter: this machine only"
    );
    assert_eq!(replay_once(&mut st, None), Some(false), "not asked again");
    assert_eq!(
        replay_once(&mut st, Some('s')),
        Some(false),
        "nor changed by a stray s"
    );
}

/// `E` on a message: Warren's editor, the document read again after every key; Ctrl-S plans
/// the replay of the edited copy, and the run carries the edited document to the worker.
#[test]
fn warrens_editor_checks_as_typed_and_ctrl_s_plans_the_edited_copy() {
    use warren::tui::edit::Check;
    let mut st = browsed(false, "orders.dlq", vec![broker_ladder(0)]);
    assert!(update(&mut st, ch('E')).is_empty());
    let check = |st: &warren::tui::State| match &st.overlay {
        Overlay::Edit(m) => m.check.clone(),
        other => panic!("not the editor: {other:?}"),
    };
    assert_eq!(check(&st), Check::Unchanged);
    assert!(
        update(&mut st, ctrl('s')).is_empty(),
        "nothing changed: nothing planned"
    );
    // The last line is `}`; above it `"qty": 1`.
    for _ in 0..60 {
        update(&mut st, key(KeyCode::Down));
    }
    update(&mut st, key(KeyCode::Up));
    update(&mut st, key(KeyCode::End));
    update(&mut st, key(KeyCode::Backspace));
    update(&mut st, ch(','));
    assert!(matches!(check(&st), Check::Problem(p) if p.contains("not JSON")));
    assert!(
        update(&mut st, ctrl('s')).is_empty(),
        "a document that does not read"
    );
    assert!(
        st.banner
            .error
            .as_deref()
            .unwrap_or("")
            .contains("not JSON")
    );
    update(&mut st, key(KeyCode::Backspace));
    update(&mut st, ch('5'));
    assert_eq!(check(&st), Check::Changes(vec!["body.qty: 1 → 5".into()]));
    let cmds = update(&mut st, ctrl('s'));
    let [
        Command::PreviewReplay {
            selection: Selection::Keys(keys),
            edited: Some(text),
            ..
        },
    ] = &cmds[..]
    else {
        panic!("{cmds:?}");
    };
    assert_eq!(keys.iter().collect::<Vec<_>>(), ["id:order-1000"]);
    assert!(text.contains(r#""qty": 5"#), "{text}");
    let Overlay::Replay(modal) = &st.overlay else {
        panic!("the replay modal opens on the edited copy");
    };
    let copy = modal.edited.clone().expect("the edited copy");
    assert_eq!(
        copy.diff,
        [('-', r#"  "qty": 1"#.into()), ('+', r#"  "qty": 5"#.into())]
    );
    update(&mut st, preview("orders.dlq", 1));
    let cmds = update(&mut st, key(KeyCode::Enter));
    assert!(
        matches!(&cmds[..], [Command::Replay(r)] if r.edited.as_deref() == Some(text.as_str())),
        "{cmds:?}"
    );
}

/// Read-only opens no editor; Esc closes it with nothing sent; Ctrl-E hands the document to
/// `$EDITOR` and what comes back is read like typing.
#[test]
fn the_editor_is_refused_read_only_closes_on_esc_and_hands_over_to_editor() {
    use warren::tui::edit::Check;
    let mut st = browsed(true, "orders.dlq", vec![broker_ladder(0)]);
    assert!(update(&mut st, ch('E')).is_empty());
    assert!(matches!(st.overlay, Overlay::None));
    assert!(
        st.banner
            .error
            .as_deref()
            .unwrap_or("")
            .contains("read-only")
    );

    let mut st = browsed(false, "orders.dlq", vec![broker_ladder(0)]);
    update(&mut st, ch('E'));
    assert!(update(&mut st, key(KeyCode::Esc)).is_empty());
    assert!(matches!(st.overlay, Overlay::None));
    assert!(
        st.banner
            .notice
            .as_deref()
            .unwrap_or("")
            .contains("nothing moved")
    );

    update(&mut st, ch('E'));
    update(&mut st, ctrl('e'));
    let doc = st.handover.editor.take().expect("the document for $EDITOR");
    let saved = doc.replace(r#""sku": "A-0""#, r#""sku": "B-1""#);
    update(&mut st, Event::Edited(Ok(Some(saved))));
    let Overlay::Edit(m) = &st.overlay else {
        panic!("still in the editor");
    };
    assert_eq!(
        m.check,
        Check::Changes(vec![r#"body.sku: "A-0" → "B-1""#.into()])
    );
    update(&mut st, Event::Edited(Err("set $VISUAL or $EDITOR".into())));
    assert!(st.banner.error.as_deref().unwrap_or("").contains("$EDITOR"));
}

/// The first screen answers: once the cursor rests on a queue (and when the list first
/// arrives), the queue under it is read and shown as its groups, focus staying on the list;
/// never a read that spends quorum deliveries, never twice for what is shown.
#[test]
fn the_queue_under_the_resting_cursor_is_read_and_shown_as_its_groups() {
    use warren::domain::features::BrokerVersion;
    let mut st = loaded(false, Theme::color());
    assert!(
        st.queues.glance_pending,
        "the list arriving asks for a look"
    );
    let first = st.queue_at_cursor().expect("a queue under the cursor");
    let cmds = update(&mut st, Event::GlanceSettle);
    assert!(
        matches!(&cmds[..], [Command::Browse { queue, read_again: false, .. }] if *queue == first.name),
        "{cmds:?}"
    );
    assert!(!st.queues.glance_pending);
    assert_eq!(
        (st.focus, st.msgs.list_mode),
        (Focus::Queues, ListMode::Groups)
    );
    update(&mut st, messages_loaded(&first.name, orders_messages()));
    assert_eq!(
        (st.focus, st.msgs.list_mode),
        (Focus::Queues, ListMode::Groups)
    );
    assert!(
        update(&mut st, Event::GlanceSettle).is_empty(),
        "shown already"
    );
    // Every other queue: read once the cursor rests on it, unless a read spends deliveries.
    let version = BrokerVersion::parse(&st.overview.broker_version);
    let mut quorum_skipped = 0;
    for _ in 1..st.queue_rows().len() {
        update(&mut st, key(KeyCode::Down));
        assert!(st.queues.glance_pending);
        let q = st.queue_at_cursor().unwrap();
        let cmds = update(&mut st, Event::GlanceSettle);
        let spends = st.dlq_of(&q).is_some_and(|d| d.limit_applies(version));
        if spends {
            quorum_skipped += 1;
            assert!(
                cmds.is_empty(),
                "{}: a quorum read needs Enter twice",
                q.name
            );
        }
    }
    assert!(
        quorum_skipped > 0,
        "the fixtures hold a quorum queue with a limit"
    );
    // Enter on it opens the message list as before.
    st.queues.glance_pending = false;
    update(&mut st, key(KeyCode::Up));
    update(&mut st, Event::GlanceSettle);
    let cmds = update(&mut st, key(KeyCode::Enter));
    assert!(
        matches!(&cmds[..], [Command::Browse { .. }] | []),
        "{cmds:?}"
    );
}

/// A missing archive stream is asked about in the archive modal before anything else, once per
/// context: `s` creates it, `l` keeps the archive locally; the answer goes with the run and is
/// not asked again in that context.
#[test]
fn the_archive_modal_asks_once_per_context_about_a_missing_stream() {
    use warren::worker::protocol::ArchivePlace;
    let mut st = browsed(false, "orders.dlq", orders_messages());
    st.overview.archive_question =
        Some("the archive stream 'warren.archive' does not exist".into());
    update(&mut st, ch('A'));
    let Overlay::Archive(m) = &st.overlay else {
        panic!("the archive modal");
    };
    assert!(m.question.is_some());
    // Nothing else is taken until it is answered.
    update(&mut st, ch('x'));
    assert!(update(&mut st, key(KeyCode::Enter)).is_empty());
    update(&mut st, ch('l'));
    type_text(&mut st, "gone");
    let cmds = update(&mut st, key(KeyCode::Enter));
    let local = JobKind::Archive {
        reason: "gone".into(),
        place: ArchivePlace::Local,
    };
    assert!(
        matches!(&cmds[..], [Command::Replay(r)] if r.job == local),
        "{cmds:?}"
    );
    st.overlay = Overlay::None;
    update(&mut st, ch('A'));
    let Overlay::Archive(m) = &st.overlay else {
        panic!("the archive modal");
    };
    assert!(m.question.is_none(), "asked once per context");
    assert_eq!(m.place, ArchivePlace::Local);
}

#[test]
fn the_message_list_sorts_by_age_tries_and_reason_and_the_same_key_again_reverses() {
    // In queue order: the expiry (one death, the latest), then two ladders (three rejections,
    // earlier); the second ladder tried once more.
    let mut ladder = broker_ladder(2);
    ladder.headers.insert(
        "x-death",
        warren::domain::value::HeaderValue::Array(vec![warren::domain::value::HeaderValue::Table(
            [
                ("count", warren::domain::value::HeaderValue::I64(4)),
                ("reason", s("rejected")),
                ("queue", s("orders.process")),
                (
                    "time",
                    warren::domain::value::HeaderValue::Timestamp(1_759_042_000),
                ),
            ]
            .into_iter()
            .map(|(k, v)| (k.to_string(), v))
            .collect(),
        )]),
    );
    let messages = vec![broker_expired(0), broker_ladder(1), ladder];
    let mut st = browsed(false, "orders.dlq", messages);
    assert_eq!(st.focus, Focus::Messages);
    let ids = |st: &warren::tui::State| -> Vec<String> {
        st.msgs
            .visible_rows()
            .iter()
            .map(|r| r.shown_id().unwrap_or_default().to_string())
            .collect()
    };
    let queue_order = ["order-exp-0", "order-1001", "order-1002"];
    assert_eq!(ids(&st), queue_order);
    let title = |st: &warren::tui::State| {
        let mut term = Terminal::new(TestBackend::new(160, 30)).unwrap();
        term.draw(|f| warren::tui::view(st, f)).unwrap();
        let buf = term.backend().buffer().clone();
        (0..buf.area.height)
            .map(|y| {
                (0..buf.area.width)
                    .map(|x| buf[(x, y)].symbol().to_string())
                    .collect::<String>()
            })
            .collect::<Vec<_>>()
            .join("\n")
    };

    // Oldest first (by the time each is dated by: `domain::arrival`), ties in queue order.
    let mut by_age: Vec<(Option<jiff::Timestamp>, String)> = st
        .msgs
        .visible_rows()
        .iter()
        .map(|r| (r.dead_since(), r.shown_id().unwrap_or_default().to_string()))
        .collect();
    by_age.sort_by_key(|(t, _)| *t);
    let oldest_first: Vec<String> = by_age.into_iter().map(|(_, id)| id).collect();
    assert_ne!(
        oldest_first, queue_order,
        "the fixture tells the orders apart"
    );
    update(&mut st, ch('2'));
    assert_eq!(ids(&st), oldest_first);
    assert!(title(&st).contains("oldest first"), "{}", title(&st));
    update(&mut st, ch('2'));
    let mut reversed = oldest_first.clone();
    reversed.reverse();
    assert_eq!(ids(&st), reversed);
    assert!(title(&st).contains("oldest first, reversed"));
    // Most tries first, ties in queue order.
    update(&mut st, ch('3'));
    let tries: Vec<i64> = st
        .msgs
        .visible_rows()
        .iter()
        .map(|r| r.attempts())
        .collect();
    assert_eq!(tries, [4, 3, 1]);
    // By reason, A to Z.
    update(&mut st, ch('4'));
    let reasons: Vec<String> = st
        .msgs
        .visible_rows()
        .iter()
        .map(|r| detail::headline(r))
        .collect();
    let mut sorted = reasons.clone();
    sorted.sort();
    assert_eq!(reasons, sorted);
    // Back to the queue's order; the cursor stays on the message it was on.
    update(&mut st, ch('3'));
    st.msgs.cursor = 0;
    let on = ids(&st)[0].clone();
    update(&mut st, ch('1'));
    assert_eq!(ids(&st), queue_order);
    assert_eq!(ids(&st)[st.msgs.cursor], on);
    assert!(!title(&st).contains("oldest first") && !title(&st).contains("most tries"));
    // A filter keeps the order.
    update(&mut st, ch('3'));
    update(&mut st, ch('/'));
    type_text(&mut st, "reason:rejected");
    update(&mut st, key(KeyCode::Enter));
    assert_eq!(ids(&st), ["order-1002", "order-1001"]);
}
