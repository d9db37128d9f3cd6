//! Tests of `tui_update`, part 4 of 4 in the order they were written (the helpers are in `mod.rs`).

use super::*;

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
