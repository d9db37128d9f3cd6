//! Tests of `tui_update`, part 2 of 4 in the order they were written (the helpers are in `mod.rs`).

use super::*;

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
