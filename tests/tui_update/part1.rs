//! Tests of `tui_update`, part 1 of 4 in the order they were written (the helpers are in `mod.rs`).

use super::*;

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

/// The modal asks what the plan says the home asks (`ops::Questions`), whatever the count: it
/// never decides by a rule of its own.
#[test]
fn the_modal_asks_for_the_typed_count_exactly_when_the_plan_does() {
    for (count, typed) in [(3, true), (412, false)] {
        let mut st = browsed(false, "orders.dlq", orders_messages());
        update(&mut st, ch('f'));
        update(&mut st, ch('r'));
        let Report::ReplayPreview(mut p) = preview("orders.dlq", count) else {
            unreachable!()
        };
        p.typed_count = typed;
        update(&mut st, Report::ReplayPreview(p));
        let cmds = update(&mut st, key(KeyCode::Enter));
        assert_eq!(cmds.is_empty(), typed, "{count}: {cmds:?}");
        if typed {
            type_text(&mut st, &count.to_string());
            let cmds = update(&mut st, key(KeyCode::Enter));
            assert!(
                matches!(cmds.as_slice(), [Command::Replay(r)] if r.expected == count && r.typed),
                "{cmds:?}"
            );
        }
    }
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
