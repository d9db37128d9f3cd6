//! Issue 41, "the words after each action, and the frictions of a first night": what a tired
//! operator reads after an action, the canary said up front, a filter that stays with its queue,
//! Esc that goes back in one press, banners that go by themselves, selection keys in the detail
//! pane, one notation for "dead since", the modal's keys on a short screen and a searchable help.
//! Screens at 80×24, 200×50 and 60×15.

use crate::tui_fixtures;

use ratatui::crossterm::event::KeyCode;
use tui_fixtures::*;
use warren::tui::event::{Event, JobKind, ReplayOutcome, ReplayPreview, ReplayProgress, Report};
use warren::tui::state::{Focus, Overlay};
use warren::tui::{Command, State, update};

const SIZES: [(u16, u16); 3] = [(80, 24), (200, 50), (60, 15)];

/// The screen's text as one line: a wrapped sentence reads whole again.
fn flat(screen: &str) -> String {
    screen
        .replace(['│', '║', '┃'], " ")
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
}

/// Snapshots `state` at the three sizes; returns each screen's text.
fn snap(name: &str, state: &State) -> Vec<String> {
    SIZES
        .iter()
        .map(|&(w, h)| {
            let screen = text(&render(state, w, h));
            insta::assert_snapshot!(format!("{name}_{w}x{h}"), screen);
            screen
        })
        .collect()
}

fn preview(count: u64) -> Report {
    Report::ReplayPreview(ReplayPreview {
        vhost: VHOST.into(),
        queue: "orders.dlq".into(),
        count,
        targets: vec!["orders.process (default exchange, routing key orders.process)".into()],
        reaches: vec!["orders.process".into()],
        removes: vec!["x-death".into(), "x-first-death-exchange".into()],
        adds: vec!["warren-replayed-from".into(), "warren-replay-count".into()],
        typed_count: warren::ops::Questions::before(warren::domain::run::RunKind::Replay, count)
            .typed_count,
        ..Default::default()
    })
}

fn tick(st: &mut State, secs: i64) {
    let at = jiff::Timestamp::from_second(st.now.as_second() + secs).unwrap();
    update(st, Event::Tick(at));
}

/// With 2 selected and a canary of 5 asked for, the modal says before the run that there is
/// none, by the replay's own rule; the replay is asked for none.
#[test]
fn the_canary_is_said_up_front_not_after() {
    let mut st = browsed(false, "orders.dlq", orders_messages());
    update(&mut st, ch(' '));
    update(&mut st, ch(' '));
    update(&mut st, ch('r'));
    update(&mut st, preview(2));
    update(&mut st, ch('c'));
    let screens = snap("canary_up_front", &st);
    for s in &screens {
        assert!(
            flat(s).contains("no canary: only 2 selected (canary above 5)"),
            "{s}"
        );
    }
    match update(&mut st, key(KeyCode::Enter)).as_slice() {
        [Command::Replay(r)] => assert_eq!(r.canary, None),
        other => panic!("{other:?}"),
    }
}

/// At 60×15 the replay modal's fields give way, never its keys nor why Enter waits.
#[test]
fn at_60x15_the_modal_keeps_its_keys_and_its_refusal() {
    let mut st = browsed(false, "orders.dlq", orders_messages());
    update(&mut st, ch('r'));
    update(&mut st, preview(412));
    let screens = snap("modal_refusal", &st);
    for s in &screens {
        let f = flat(s);
        assert!(f.contains("Esc cancel"), "{s}");
        assert!(f.contains("type 412 to confirm"), "{s}");
    }
}

/// `/` in help narrows it to the bindings that match, in one column; Esc drops the search,
/// a second Esc closes the help.
#[test]
fn help_is_searched_with_slash() {
    let mut st = browsed(false, "orders.dlq", orders_messages());
    update(&mut st, ch('?'));
    update(&mut st, ch('/'));
    for c in "select".chars() {
        update(&mut st, ch(c));
    }
    let screens = snap("help_search", &st);
    for s in &screens[..2] {
        let f = flat(s);
        assert!(f.contains("select all in view"), "{s}");
        assert!(!f.contains("line down"), "{s}");
    }
    update(&mut st, key(KeyCode::Enter));
    assert!(matches!(st.overlay, Overlay::Help));
    assert_eq!(st.help.query, "select", "Enter keeps the search");
    update(&mut st, key(KeyCode::Esc));
    assert!(st.help.query.is_empty() && matches!(st.overlay, Overlay::Help));
    update(&mut st, key(KeyCode::Esc));
    assert!(matches!(st.overlay, Overlay::None));
}

/// "Dead since" in one notation, its bound kept at every width, and a queue's row says what
/// its oldest message says.
#[test]
fn dead_since_is_one_notation_at_every_width() {
    let st = browsed(false, "orders.dlq", orders_messages());
    let screens = snap("dead_since", &st);
    // The messages were first seen an hour ago: at least an hour, at every width.
    for s in &screens {
        assert!(s.contains("≥1h"), "{s}");
        assert!(!s.contains("≥<"), "{s}");
        assert!(!s.contains("1h 00m"), "{s}");
    }
    // The queue's row (200 columns show its age) says the same as its oldest message.
    let row = screens[1]
        .lines()
        .find(|l| l.contains("▶ orders.dlq"))
        .unwrap_or_default();
    assert!(row.contains("≥1h"), "{row}");
}

/// An archive ends with its own line — "archived 5 to warren.archive" — on the progress window
/// and then on the notice line; what the worker said along the way is in the command log.
#[test]
fn an_archive_leaves_its_outcome_not_a_note() {
    let mut st = browsed(false, "orders.dlq", orders_messages());
    update(&mut st, ch('f'));
    update(&mut st, ch('A'));
    let cmds = update(&mut st, key(KeyCode::Enter));
    assert!(
        matches!(cmds.as_slice(), [Command::Replay(r)] if matches!(r.job, JobKind::Archive { .. })),
        "{cmds:?}"
    );
    update(
        &mut st,
        Report::Notice("created a stream 'warren.archive' in vhost '/orders'".into()),
    );
    update(
        &mut st,
        Report::ReplayProgress(ReplayProgress {
            total: 5,
            moved: 3,
            rate: 407.0,
            ..Default::default()
        }),
    );
    let running = flat(&text(&render(&st, 80, 24)));
    assert!(running.contains("407 msg/s (no rate limit)"), "{running}");
    assert!(!running.contains("limit 0"), "{running}");
    update(
        &mut st,
        Report::ReplayFinished(ReplayOutcome {
            progress: ReplayProgress {
                total: 5,
                moved: 5,
                ..Default::default()
            },
            headline: "archived 5 to warren.archive".into(),
            words: vec!["archived 5 to warren.archive".into()],
            ..Default::default()
        }),
    );
    let screens = snap("archive_done", &st);
    for s in &screens {
        assert!(flat(s).contains("archived 5 to warren.archive"), "{s}");
    }
    update(&mut st, key(KeyCode::Enter));
    assert_eq!(
        st.banner.notice.as_deref(),
        Some("archived 5 to warren.archive · 1 note in @")
    );
    assert!(
        st.oplog
            .newest_first()
            .any(|o| o.text.contains("created a stream")),
        "the note is in the command log"
    );
}

/// A filter belongs to the queue it was typed on: another queue opens unfiltered, and the
/// first one's filter comes back with it.
#[test]
fn a_filter_stays_with_its_queue() {
    let mut st = browsed(false, "orders.dlq", orders_messages());
    update(&mut st, ch('/'));
    for c in "no-such-order".chars() {
        update(&mut st, ch(c));
    }
    update(&mut st, key(KeyCode::Enter));
    assert_eq!(
        st.msgs.visible_rows().len(),
        0,
        "the filter narrows orders.dlq"
    );
    // Another queue.
    update(&mut st, key(KeyCode::Esc));
    assert_eq!(st.focus, Focus::Queues);
    st.queues.cursor = st
        .queue_rows()
        .iter()
        .position(|r| r.name() == "payments.dlq")
        .unwrap();
    update(&mut st, key(KeyCode::Enter));
    update(
        &mut st,
        messages_loaded("payments.dlq", vec![broker_expired(1)]),
    );
    assert!(
        st.filtering.filter.is_none(),
        "payments.dlq opens unfiltered"
    );
    assert!(st.filtering.text.is_empty());
    assert_eq!(st.msgs.visible_rows().len(), 1);
    // Back: orders.dlq's filter is back.
    update(&mut st, key(KeyCode::Esc));
    st.queues.cursor = st
        .queue_rows()
        .iter()
        .position(|r| r.name() == "orders.dlq")
        .unwrap();
    update(&mut st, key(KeyCode::Enter));
    update(&mut st, messages_loaded("orders.dlq", orders_messages()));
    assert_eq!(st.filtering.text, "no-such-order");
    assert_eq!(st.msgs.visible_rows().len(), 0);
}

/// Esc goes back in one press even with a banner up (the banner goes with it).
#[test]
fn one_esc_goes_back_even_with_a_banner() {
    let mut st = browsed(false, "orders.dlq", orders_messages());
    update(&mut st, key(KeyCode::Enter));
    assert_eq!(st.focus, Focus::Detail);
    st.banner.notice = Some("something happened".into());
    update(&mut st, key(KeyCode::Esc));
    assert_eq!(st.focus, Focus::Messages, "one Esc, back to the list");
    assert!(st.banner.notice.is_none());
}

/// Banners go by themselves, on the tick's clock: a notice after 10 s, an error after 30 s; a
/// question that waits for its answer stays.
#[test]
fn banners_go_by_themselves() {
    let mut st = browsed(false, "orders.dlq", orders_messages());
    update(&mut st, Report::Notice("switched to context prod".into()));
    tick(&mut st, 5);
    assert!(st.banner.notice.is_some(), "5 s: still there");
    tick(&mut st, 6);
    assert!(st.banner.notice.is_none(), "gone after 10 s");

    update(
        &mut st,
        Report::Error(warren::tui::event::Failure::in_generation(
            "the broker said no",
            0,
        )),
    );
    tick(&mut st, 11);
    assert!(st.banner.error.is_some(), "an error stays longer");
    tick(&mut st, 20);
    assert!(st.banner.error.is_none(), "gone after 30 s");

    // A question waiting for its answer is not taken away.
    st.banner.notice = Some("Enter again to browse".into());
    st.pending.browse = Some(at("orders.dlq"));
    update(&mut st, Event::Idle);
    tick(&mut st, 60);
    assert!(st.banner.notice.is_some());
}

/// The selection keys work where the messages are shown, the detail pane too: `a` there
/// selects all, and `r` replays them, not only the one under the cursor.
#[test]
fn selection_keys_work_in_the_detail_pane() {
    let mut st = browsed(false, "orders.dlq", orders_messages());
    update(&mut st, key(KeyCode::Enter));
    assert_eq!(st.focus, Focus::Detail);
    update(&mut st, ch('a'));
    let all = st.msgs.visible_rows().len();
    assert_eq!(st.msgs.selected_messages(), all);
    update(&mut st, ch('r'));
    match &st.overlay {
        Overlay::Replay(m) => assert!(m.what.contains(&all.to_string()), "{}", m.what),
        other => panic!("{other:?}"),
    }
    update(&mut st, key(KeyCode::Esc));
    // Space in the detail pane toggles the message being read and stays on it.
    let cursor = st.msgs.cursor;
    update(&mut st, ch(' '));
    assert_eq!(st.msgs.cursor, cursor);
    assert_eq!(st.msgs.selected_messages(), all - 1);
}
