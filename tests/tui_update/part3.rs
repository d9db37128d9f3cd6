//! Tests of `tui_update`, part 3 of 4 in the order they were written (the helpers are in `mod.rs`).

use super::*;

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
        outcome: warren::domain::outcome::RunOutcome::Completed,
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
    // While it waits, it says how far the plan's read of the archive is (not another toggle's).
    let reading = |how: RestoreHow, read: u64| Report::RestoreReading {
        vhost: VHOST.into(),
        queue: "warren.archive".into(),
        how,
        read,
        ticket: Default::default(),
    };
    update(&mut st, reading(how, 1_000));
    let other = RestoreHow {
        replay: true,
        again: false,
    };
    update(&mut st, reading(other, 7_000));
    let Overlay::Restore(m) = &st.overlay else {
        panic!("expected the restore modal, got {:?}", st.overlay);
    };
    assert_eq!(
        m.blocked().as_deref(),
        Some("waiting for the restore plan… 1000 archived messages read")
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
    // A read's count after its plan came changes nothing.
    update(&mut st, reading(how, 9_000));
    assert!(
        matches!(&st.overlay, Overlay::Restore(m) if m.count() == Some(2) && m.blocked().is_none() && m.read == Some(1_000))
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
