//! Every screen of the TUI drawn with ratatui's TestBackend at 80×24 and 200×50 and compared with
//! insta snapshots. "now" is part of the state, so ages are deterministic. Snapshots do not see
//! colour: the styles that carry meaning are asserted on buffer cells.

use crate::tui_fixtures;

use ratatui::buffer::Buffer;
use ratatui::crossterm::event::KeyCode;
use ratatui::style::{Color, Modifier};
use tui_fixtures::*;
use warren::tui::event::{ConnectionState, Event, ReplayPreview, ReplayProgress, Report};
use warren::tui::{State, Theme, update};

/// The screen's text as one line: a wrapped sentence reads whole again.
fn flat(screen: &str) -> String {
    screen.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// Snapshots `state` at both sizes.
fn snap(name: &str, state: &State) {
    for (w, h) in [(80, 24), (200, 50)] {
        let buf = render(state, w, h);
        insta::assert_snapshot!(format!("{name}_{w}x{h}"), text(&buf));
    }
}

fn preview(count: u64, reaches: &[&str]) -> Report {
    Report::ReplayPreview(ReplayPreview {
        vhost: VHOST.into(),
        queue: "orders.dlq".into(),
        count,
        keep_attempts: false,
        strip_failure_stamp: false,
        failure_stamp_strippable: false,
        targets: vec!["orders.process (default exchange, routing key orders.process)".into()],
        reaches: reaches.iter().map(|s| s.to_string()).collect(),
        removes: [
            "x-death",
            "x-first-death-exchange",
            "x-first-death-queue",
            "x-first-death-reason",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect(),
        adds: [
            "warren-replayed-from",
            "warren-replayed-at",
            "warren-replay-count",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect(),
        replayed_before: 1,
        warnings: vec![],
        typed_count: warren::ops::Questions::before(warren::domain::run::RunKind::Replay, count)
            .typed_count,
        ticket: Default::default(),
        create_audit: None,
    })
}

/// Positions of `needle` in the buffer (top-left cell of each match).
fn find(buf: &Buffer, needle: &str) -> Vec<(u16, u16)> {
    let mut hits = Vec::new();
    let chars: Vec<String> = needle.chars().map(|c| c.to_string()).collect();
    for y in 0..buf.area.height {
        for x in 0..buf.area.width {
            if (0..chars.len()).all(|i| {
                let xi = x as usize + i;
                xi < buf.area.width as usize && buf[(xi as u16, y)].symbol() == chars[i]
            }) {
                hits.push((x, y));
            }
        }
    }
    hits
}

#[test]
fn queue_list() {
    let st = loaded(false, Theme::color());
    snap("queue_list", &st);
}

/// Every vhost at once (`:vhost *`): each queue after its vhost, the two `orders.dlq` of
/// `/orders` and `billing` two rows, and the scope in the header.
#[test]
fn queue_list_every_vhost() {
    let st = loaded_every_vhost(Theme::color());
    snap("queue_list_every_vhost", &st);
    let screen = text(&render(&st, 200, 50));
    assert!(screen.contains("billing/orders.dlq") && screen.contains("/orders/orders.dlq"));
    assert!(
        screen
            .lines()
            .next()
            .is_some_and(|l| l.contains("every vhost"))
    );
}

/// Every context at once: each row after its context's label or name (and its vhost where not
/// the context's own), the scope and the unreached context in the header, Enter's word in the footer.
#[test]
fn queue_list_every_context() {
    let st = loaded_every_context(Theme::color());
    snap("queue_list_every_context", &st);
    let screen = text(&render(&st, 200, 50));
    // staging has a label (STG): its rows show it.
    assert!(screen.contains("STG/orders.dlq") && screen.contains("prod-eu/orders.dlq"));
    assert!(screen.contains("STG/billing/invoices.dlq"));
    let header = screen.lines().next().unwrap_or_default();
    assert!(
        header.contains("every context (2)") && header.contains("gone:"),
        "{header}"
    );
    assert!(screen.contains("open in its context"));
}

/// A queue holding stuck dead letters (at-least-once, no route): after the DLQs, kind `stuck`
/// (after its name where there is no kind column), the count held where the depth goes, and
/// under the list why they do not move; Enter's words say what to do.
#[test]
fn queue_list_with_a_stuck_queue() {
    let mut st = loaded_with_stuck(Theme::color());
    update(&mut st, ch('G'));
    snap("queue_list_stuck", &st);
    let small = text(&render(&st, 80, 24));
    assert!(
        small.contains(" stuck ") && small.contains("3 held"),
        "{small}"
    );
    assert!(
        small.contains("│3 stuck here, in no DLQ")
            && small.contains("│'payments.dlx' has no binding"),
        "{small}"
    );
    assert!(small.contains("nothing to browse"), "{small}");
    assert!(small.contains("Enter why stuck"), "{small}");
    let wide = text(&render(&st, 200, 50));
    assert!(
        wide.lines()
            .any(|l| l.contains("payments.work") && l.contains("stuck") && l.contains("quorum")),
        "{wide}"
    );
    assert!(
        flat(&wide).contains("dead-letter exchange 'payments.dlx' has no binding to any queue"),
        "{wide}"
    );
    // Enter: the banner says what it is and what to do.
    update(&mut st, key(KeyCode::Enter));
    let wide = flat(&text(&render(&st, 200, 50)));
    assert!(
        wide.contains("To free them, bind a dead-letter queue to 'payments.dlx'"),
        "{wide}"
    );
}

#[test]
fn queue_list_with_ordinary_queues() {
    let mut st = loaded(false, Theme::color());
    update(&mut st, ch('o'));
    update(&mut st, ch('G'));
    snap("queue_list_all", &st);
}

#[test]
fn broker_timeline() {
    let mut st = browsed(false, "orders.dlq", orders_messages());
    update(&mut st, key(KeyCode::Enter));
    snap("broker_timeline", &st);
}

#[test]
fn masstransit_message() {
    let mut st = browsed(false, "shipping-label_error", vec![masstransit()]);
    update(&mut st, ch('e'));
    snap("masstransit", &st);
}

#[test]
fn spring_message() {
    let mut st = browsed(false, "inventory.reserve.dlq", vec![spring()]);
    update(&mut st, key(KeyCode::Enter));
    update(&mut st, ch('e'));
    snap("spring", &st);
}

#[test]
fn nservicebus_message() {
    let st = browsed(false, "error", vec![nservicebus()]);
    snap("nservicebus", &st);
}

#[test]
fn groups() {
    let mut st = browsed(false, "orders.dlq", orders_messages());
    update(&mut st, ch('f'));
    snap("groups", &st);
}

#[test]
fn groups_by_reason_with_a_note() {
    let mut st = browsed(false, "orders.dlq", orders_messages());
    update(&mut st, ch('f'));
    for _ in 0..4 {
        update(&mut st, ch('b'));
    }
    let key = st
        .msgs
        .current_group()
        .map(|g| g.key.clone())
        .unwrap_or_default();
    update(
        &mut st,
        Report::GroupNotes {
            vhost: VHOST.into(),
            queue: "orders.dlq".into(),
            notes: vec![warren::domain::grouping::GroupNote {
                queue: "orders.dlq".into(),
                by: warren::domain::grouping::GroupBy::Reason,
                key,
                text: "carrier outage, replay after 10:00".into(),
                author: "alice".into(),
                at: now(),
            }],
            whole: false,
            ticket: Default::default(),
        },
    );
    // The note next to its group, and whole above the group's example.
    snap("groups_by_reason_note", &st);
    // n: the input, holding the note to change.
    update(&mut st, ch('n'));
    snap("note_input", &st);
}

#[test]
fn filter_input() {
    let mut st = browsed(false, "orders.dlq", orders_messages());
    update(&mut st, ch('/'));
    for c in "reason:expired -reason:rejected".chars() {
        update(&mut st, ch(c));
    }
    snap("filter", &st);
}

#[test]
fn selection_count() {
    let mut st = browsed(false, "orders.dlq", orders_messages());
    update(&mut st, ch(' '));
    update(&mut st, ch(' '));
    snap("selection", &st);
}

#[test]
fn replay_modal() {
    let mut st = browsed(false, "orders.dlq", orders_messages());
    update(&mut st, ch(' '));
    update(&mut st, ch(' '));
    update(&mut st, ch('r'));
    update(&mut st, preview(2, &["orders.process"]));
    snap("modal", &st);

    // The modal's border and title use the danger role (red in colour).
    let buf = render(&st, 80, 24);
    let corner = find(&buf, "╔");
    assert_eq!(corner.len(), 1, "one double-bordered modal");
    let (x, y) = corner[0];
    assert_eq!(buf[(x, y)].fg, Color::Red);
    let title = find(&buf, "Replay 2 messages");
    assert_eq!(title.len(), 1);
    assert_eq!(buf[title[0]].fg, Color::Red);
}

/// The modal asks, before the work starts, whether to create the missing shared audit record;
/// a canary of 10 is shown on (above the threshold, here 1).
#[test]
fn replay_modal_asks_for_the_shared_record_and_shows_the_canary() {
    let mut st = browsed(false, "orders.dlq", orders_messages());
    st.settings.canary_above = 1;
    update(&mut st, ch(' '));
    update(&mut st, ch(' '));
    update(&mut st, ch('r'));
    let mut p = preview(2, &["orders.process"]);
    if let Report::ReplayPreview(pp) = &mut p {
        pp.create_audit = Some("Warren will create the stream 'warren.audit'".into());
    }
    update(&mut st, p);
    snap("modal_record", &st);
}

#[test]
fn replay_modal_waiting_for_the_plan() {
    let mut st = browsed(false, "orders.dlq", orders_messages());
    update(&mut st, ch('r'));
    snap("modal_waiting", &st);
}

#[test]
fn replay_modal_fan_out_and_typed_count() {
    let mut st = browsed(false, "orders.dlq", orders_messages());
    update(&mut st, ch('f'));
    update(&mut st, ch('r'));
    update(
        &mut st,
        preview(412, &["orders.process", "orders.audit", "orders.analytics"]),
    );
    for c in "41".chars() {
        update(&mut st, ch(c));
    }
    snap("modal_typed", &st);
    let buf = render(&st, 200, 50);
    let fan = find(&buf, "3 queues:");
    assert_eq!(fan.len(), 1);
    assert_eq!(buf[fan[0]].fg, Color::Red, "a fan-out is shown as danger");
    assert!(!find(&buf, "Type 412 to confirm").is_empty());
}

#[test]
fn progress() {
    let mut st = browsed(false, "orders.dlq", orders_messages());
    update(&mut st, ch('r'));
    update(&mut st, preview(412, &["orders.process"]));
    // The backlog cap: Tab past the rate to its field, type it, Enter leaves the field.
    update(&mut st, key(KeyCode::Tab));
    update(&mut st, key(KeyCode::Tab));
    for c in "20".chars() {
        update(&mut st, ch(c));
    }
    assert!(
        update(&mut st, key(KeyCode::Enter)).is_empty(),
        "sets the cap, starts nothing"
    );
    for c in "412".chars() {
        update(&mut st, ch(c));
    }
    snap("modal_backlog", &st);
    let cmds = update(&mut st, key(KeyCode::Enter));
    assert!(
        matches!(cmds.as_slice(), [warren::worker::protocol::Command::Replay(r)] if r.max_backlog == Some(20)),
        "{cmds:?}"
    );
    update(
        &mut st,
        Report::ReplayProgress(ReplayProgress {
            total: 412,
            moved: 120,
            returned: 2,
            failed: 1,
            rate: 50.0,
            blocked: None,
            canary: None,
            backlog: None,
        }),
    );
    snap("progress", &st);
    // A canary waits: nothing else moves, and the window says why.
    update(
        &mut st,
        Report::ReplayProgress(ReplayProgress {
            total: 412,
            moved: 10,
            rate: 50.0,
            canary: Some(warren::domain::canary::CanaryWait {
                moved: 10,
                came_back: 0,
                exact: true,
                taken: true,
                waited: std::time::Duration::from_secs(4),
                wait: std::time::Duration::from_secs(30),
            }),
            ..Default::default()
        }),
    );
    snap("progress_canary", &st);
    // The broker blocks publishing (a memory alarm): the modal says so as it happens.
    let at = |blocked: Option<&str>| {
        Report::ReplayProgress(ReplayProgress {
            total: 412,
            moved: 120,
            returned: 2,
            failed: 1,
            rate: 50.0,
            blocked: blocked.map(str::to_string),
            canary: None,
            backlog: None,
        })
    };
    update(&mut st, at(Some("low on memory")));
    snap("progress_blocked", &st);
    // Paced by the target's consumer (the modal's backlog cap): the modal says why it waits.
    let Report::ReplayProgress(mut paced) = at(None) else {
        unreachable!()
    };
    paced.backlog = Some(warren::domain::engine::BacklogWait {
        queue: "orders.process".into(),
        ready: 340,
        max: 20,
    });
    update(&mut st, Report::ReplayProgress(paced));
    snap("progress_backlog", &st);
    assert!(
        !find(
            &render(&st, 200, 50),
            "waiting: orders.process holds 340 ready, max 20"
        )
        .is_empty()
    );
    update(&mut st, at(None));
    update(&mut st, key(KeyCode::Esc));
    snap("progress_stopping", &st);
}

#[test]
fn read_only() {
    let st = browsed(true, "orders.dlq", orders_messages());
    snap("read_only", &st);
    let buf = render(&st, 80, 24);
    let badge = find(&buf, "READ-ONLY");
    assert_eq!(badge.len(), 1, "one badge");
    assert_eq!(badge[0].1, 0, "in the status bar");
    assert_eq!(buf[badge[0]].bg, Color::Yellow);
    assert!(buf[badge[0]].modifier.contains(Modifier::BOLD));
    assert!(
        !find(&buf, "(disabled: read-only)").is_empty(),
        "the footer says why replay is off"
    );
}

#[test]
fn read_only_without_colour() {
    let mut st = browsed(true, "orders.dlq", orders_messages());
    st.settings.theme = Theme::monochrome();
    let buf = render(&st, 80, 24);
    let badge = find(&buf, "READ-ONLY");
    assert!(
        buf[badge[0]].modifier.contains(Modifier::REVERSED),
        "the badge shows without colour"
    );
}

#[test]
fn error_banner() {
    let mut st = browsed(false, "orders.dlq", orders_messages());
    update(
        &mut st,
        Report::Error(
            "browsing orders.dlq failed: connection reset by peer; retrying in 5s".into(),
        ),
    );
    update(
        &mut st,
        Report::Connection(ConnectionState::Disconnected(
            "connection reset by peer".into(),
        )),
    );
    snap("error_banner", &st);
    let buf = render(&st, 80, 24);
    let hit = find(&buf, "✕ browsing");
    assert_eq!(buf[hit[0]].fg, Color::Red);
}

#[test]
fn help_screen() {
    let mut st = loaded(false, Theme::color());
    update(&mut st, ch('?'));
    snap("help", &st);
}

#[test]
fn hostile_strings_are_shown_as_escapes() {
    let mut st = browsed(false, "orders.dlq", vec![hostile()]);
    update(&mut st, key(KeyCode::Enter));
    snap("hostile", &st);
    for (w, h) in [(80, 24), (200, 50)] {
        let buf = render(&st, w, h);
        for y in 0..buf.area.height {
            for x in 0..buf.area.width {
                let sym = buf[(x, y)].symbol();
                assert!(
                    !sym.chars().any(warren::domain::sanitize::is_unsafe),
                    "unsafe character {sym:?} reached cell ({x},{y})"
                );
            }
        }
    }
    let all = text(&render(&st, 200, 50));
    assert!(all.contains("\\e[31m"), "ESC shown as \\e");
    assert!(all.contains("\\u{202e}"), "bidi override shown escaped");
    assert!(all.contains("\\x07"), "BEL shown escaped");
    assert!(
        all.contains("\\u{9b}") || all.contains("\\x9b"),
        "C1 CSI shown escaped"
    );
}

#[test]
fn no_color_selection_is_reversed_and_nothing_is_coloured() {
    let mut st = browsed(false, "orders.dlq", orders_messages());
    st.settings.theme = Theme::monochrome();
    let buf = render(&st, 80, 24);
    for y in 0..buf.area.height {
        for x in 0..buf.area.width {
            let c = &buf[(x, y)];
            assert!(
                matches!(c.fg, Color::Reset) && matches!(c.bg, Color::Reset),
                "colour at ({x},{y}): {c:?}"
            );
        }
    }
    // The message under the cursor is the first data row of the message pane.
    let verdict = find(&buf, "Rejected");
    assert!(!verdict.is_empty());
    let (x, y) = verdict[0];
    assert!(
        buf[(x, y)].modifier.contains(Modifier::REVERSED),
        "cursor row reversed without colour"
    );
}

#[test]
fn pager_on_a_gzipped_body_with_a_search() {
    let mut st = browsed(false, "shipping-label_error", vec![gzipped_order()]);
    update(&mut st, key(KeyCode::Enter));
    // The detail pane says what was decoded.
    let heading: Vec<String> = st
        .detail_lines()
        .unwrap()
        .iter()
        .map(|l| l.to_string())
        .filter(|l| l.starts_with("─ body"))
        .collect();
    assert_eq!(heading.len(), 1, "{heading:?}");
    assert!(
        heading[0].contains(", gzip → JSON, ") && heading[0].ends_with(" KiB decoded) ─"),
        "{heading:?}"
    );
    update(&mut st, ch('v'));
    update(&mut st, ch('/'));
    for c in "SKU-01".chars() {
        update(&mut st, ch(c));
    }
    update(&mut st, key(KeyCode::Enter));
    update(&mut st, ch('n'));
    snap("pager", &st);
    // The current match is reversed, the others marked; the text is not.
    let buf = render(&st, 80, 24);
    let hits = find(&buf, "SKU-01");
    assert!(hits.len() >= 2, "{hits:?}");
    let reversed: Vec<bool> = hits
        .iter()
        .map(|&(x, y)| buf[(x, y)].modifier.contains(Modifier::REVERSED))
        .collect();
    assert_eq!(reversed.iter().filter(|r| **r).count(), 1, "{reversed:?}");
    assert_eq!(
        reversed.iter().position(|r| *r),
        Some(1),
        "match 2 is current"
    );
    let (x, y) = hits[0];
    assert_eq!(buf[(x, y)].fg, Color::Yellow);
    assert_eq!(buf[(x.saturating_sub(2), y)].fg, Color::Reset);
}

#[test]
fn pager_typing_a_search() {
    let mut st = browsed(false, "shipping-label_error", vec![masstransit()]);
    update(&mut st, ch('T'));
    update(&mut st, ch('/'));
    for c in "Consume".chars() {
        update(&mut st, ch(c));
    }
    snap("pager_search_input", &st);
}

#[test]
fn command_log() {
    use warren::tui::{Operation, OperationKind};
    let mut st = browsed(false, "orders.dlq", orders_messages());
    let at = |ago: i64| jiff::Timestamp::from_second(now().as_second() - ago).unwrap();
    for (ago, kind, text) in [
        (
            300,
            OperationKind::Connect,
            "context 'prod-eu': RabbitMQ 4.0.5 at https://rabbit-1.prod-eu.example.com:15671/, vhost '/orders' as ops (management API, then AMQP)",
        ),
        (
            299,
            OperationKind::List,
            "listed vhost '/orders': 10 queues (8 dead-letter queues, 1 retry loops), with bindings and policies",
        ),
        (
            240,
            OperationKind::Read,
            "browsed invoices.dlq: 20 of 20 messages, all left in place; RabbitMQ 4.0.5 counts every return: this read cost each of 20 message(s) 1 delivery of the limit of 20",
        ),
        (
            120,
            OperationKind::Policy,
            "set policy warren-protect-invoices.dlq in vhost '/orders' (lifts the delivery limit of invoices.dlq, keeping the keys of the policy in force)",
        ),
        (
            70,
            OperationKind::Read,
            "planned a replay from orders.dlq: read 6 messages, all left in place; cost no deliveries; 6 selected",
        ),
        (
            60,
            OperationKind::Replay,
            "from orders.dlq: 6 published, confirmed and acked off orders.dlq; 0 returned unroutable and 0 failed, left in orders.dlq",
        ),
    ] {
        update(
            &mut st,
            Report::Operation(Operation {
                at: at(ago),
                kind,
                text: text.into(),
            }),
        );
    }
    update(&mut st, ch('@'));
    snap("command_log", &st);
}

#[test]
fn a_coloured_context_is_a_badge_in_the_header_bar() {
    let mut st = browsed(false, "orders.dlq", orders_messages());
    st.overview.color = Some(warren::config::ContextColor::Red);
    st.overview.label = Some("PROD".into());
    snap("context_colour", &st);
    let buf = render(&st, 80, 24);
    let badge = find(&buf, "PROD");
    assert_eq!(badge.len(), 1, "one badge");
    assert_eq!(badge[0].1, 0, "in the header bar");
    assert_eq!(buf[badge[0]].bg, Color::Red);
    assert!(
        !find(&buf, "prod-eu").is_empty(),
        "the context's name follows its label"
    );

    // Without a label the context's own name is the badge; without colour it is reversed.
    st.overview.label = None;
    st.settings.theme = Theme::monochrome();
    let buf = render(&st, 80, 24);
    let badge = find(&buf, "prod-eu");
    assert_eq!(badge.len(), 1, "the name once, as the badge");
    assert!(buf[badge[0]].modifier.contains(Modifier::REVERSED));
    assert_eq!(buf[badge[0]].bg, Color::Reset);
}

#[test]
fn the_quorum_prompt_is_wrapped_so_its_end_is_on_screen() {
    let mut st = loaded(false, Theme::color());
    st.queues.cursor = st
        .queue_rows()
        .iter()
        .position(|r| r.name() == "invoices.dlq")
        .unwrap();
    update(&mut st, key(KeyCode::Enter));
    snap("quorum_prompt", &st);
    let screen = flat(&text(&render(&st, 80, 24)));
    assert!(screen.contains("Enter again to browse."), "{screen}");
}

#[test]
fn a_long_error_is_cut_with_a_hint_and_w_shows_all_of_it() {
    let mut st = browsed(false, "orders.dlq", orders_messages());
    let cause = "the management API at https://rabbit-1.prod-eu.example.com:15671 answered 503 \
                 Service Unavailable for GET /api/queues/orders/orders.dlq; the node may be \
                 starting or overloaded; Warren retries in 5 s, or press Ctrl-R to retry now, \
                 and check the node's log for memory or disk alarms if this goes on. \
                 END-OF-MESSAGE";
    update(&mut st, Report::Error(cause.into()));
    let cut = text(&render(&st, 80, 24));
    assert!(cut.contains("w: whole text"), "{cut}");
    assert!(!cut.contains("END-OF-MESSAGE"), "{cut}");
    update(&mut st, ch('w'));
    snap("error_whole", &st);
    let whole = text(&render(&st, 80, 24));
    assert!(whole.contains("END-OF-MESSAGE"), "{whole}");
    assert!(!whole.contains("w: whole text"), "{whole}");
}

#[test]
fn help_scrolled_to_the_end_shows_the_last_binding_and_says_how() {
    let mut st = loaded(false, Theme::color());
    update(&mut st, ch('?'));
    let top = text(&render(&st, 80, 24));
    assert!(top.contains("j/k PgUp/PgDn g/G scroll"), "{top}");
    assert!(!top.contains("close when finished"), "{top}");
    update(
        &mut st,
        Event::Resize {
            width: 80,
            height: 24,
        },
    );
    update(&mut st, ch('G'));
    snap("help_end", &st);
    let end = text(&render(&st, 80, 24));
    assert!(
        end.contains("close when finished"),
        "the last binding: {end}"
    );
}

#[test]
fn the_modal_wraps_long_lists_and_warnings_under_their_field() {
    let mut st = browsed(false, "orders.dlq", orders_messages());
    update(&mut st, ch('r'));
    update(
        &mut st,
        Report::ReplayPreview(ReplayPreview {
            vhost: VHOST.into(),
            queue: "orders.dlq".into(),
            count: 3,
            targets: vec!["orders.process (default exchange, routing key orders.process)".into()],
            reaches: vec!["orders.process".into()],
            removes: ["x-death", "x-first-death-exchange", "x-first-death-queue"]
                .iter()
                .chain(&["x-first-death-reason", "x-last-death-exchange"])
                .map(|s| s.to_string())
                .collect(),
            adds: vec!["warren-replay-count".into()],
            warnings: vec![
                "exchange orders may deliver it to more than one queue; check which queues \
                 its bindings reach, or replay to one queue with --to END-OF-WARNING"
                    .into(),
            ],
            ..Default::default()
        }),
    );
    snap("modal_wrapped", &st);
    let screen = text(&render(&st, 80, 24));
    assert!(screen.contains("x-last-death-exchange"), "{screen}");
    assert!(screen.contains("END-OF-WARNING"), "{screen}");
    assert!(screen.contains("Esc  cancel"), "{screen}");
}

#[test]
fn queue_names_from_the_demo_stay_apart_at_80_and_whole_at_200() {
    let mut st = State::new(now(), false, Theme::color());
    let mut d = discovery();
    // The demo's longest names (`warren demo`, assets/demo).
    let mut group = d.dead_letter_queues[4].clone();
    group.name = "inventory.reserve.group.dlq".into();
    let mut telemetry = d.dead_letter_queues[0].clone();
    telemetry.name = "telemetry.dlq".into();
    d.dead_letter_queues.push(group);
    d.dead_letter_queues.push(telemetry);
    update(
        &mut st,
        Report::QueuesLoaded {
            overview: overview(),
            discovery: d,
            ticket: Default::default(),
        },
    );
    snap("queue_list_demo_names", &st);
    let narrow = text(&render(&st, 80, 24));
    let row = |screen: &str, depth: &str, kind: &str| -> String {
        screen
            .lines()
            .find(|l| l.contains(kind) && l.contains(depth))
            .map(|l| l.split_whitespace().nth(1).unwrap_or("").to_string())
            .unwrap_or_default()
    };
    // At 80 columns the kind column gives way to growth: the names' ends still tell them apart.
    let error = row(&narrow, " 7", "_error");
    let skipped = row(&narrow, " 1", "kipped");
    assert!(
        error.ends_with("error") && skipped.ends_with("skipped"),
        "{narrow}"
    );
    assert_ne!(error, skipped);
    let wide = text(&render(&st, 200, 50));
    for name in [
        "shipping-label_error",
        "shipping-label_skipped",
        "inventory.reserve.group.dlq",
        "notifications.dlq",
    ] {
        assert!(wide.contains(name), "{name} whole at 200 columns: {wide}");
    }
}

#[test]
fn a_replay_that_failed_shows_its_whole_cause() {
    let mut st = browsed(false, "orders.dlq", orders_messages());
    update(&mut st, ch('r'));
    update(&mut st, preview(2, &["orders.process"]));
    update(&mut st, key(KeyCode::Enter));
    let progress = ReplayProgress {
        total: 2,
        moved: 1,
        returned: 0,
        failed: 0,
        rate: 1.0,
        blocked: None,
        canary: None,
        backlog: None,
    };
    update(
        &mut st,
        Report::ReplayFinished(warren::tui::event::ReplayOutcome {
            progress,
            dry_run: false,
            cancelled: false,
            error: Some(
                "the connection to rabbit-2.prod-eu.example.com:5671 closed while 1 publish \
                 was unconfirmed: it went back to the DLQ when the broker noticed; replay \
                 again to move it (END-OF-CAUSE)"
                    .into(),
            ),
            ..Default::default()
        }),
    );
    snap("progress_failed", &st);
    let screen = text(&render(&st, 80, 24));
    assert!(screen.contains("(END-OF-CAUSE)"), "{screen}");
}

#[test]
fn why_a_filter_does_not_parse_is_shown_whole_while_typing() {
    let mut st = browsed(false, "orders.dlq", orders_messages());
    update(&mut st, ch('/'));
    for c in "exceptoin:Timeout".chars() {
        update(&mut st, ch(c));
    }
    let why = st
        .filtering
        .error
        .clone()
        .expect("a misspelt field does not parse");
    snap("filter_error", &st);
    let screen = flat(&text(&render(&st, 80, 24)));
    assert!(screen.contains(&flat(&why)), "{why} in {screen}");
    update(&mut st, key(KeyCode::Esc));
    assert!(
        !text(&render(&st, 80, 24)).contains("unknown key"),
        "gone with the input"
    );
}

/// The dry run answers with what `warren replay --dry-run` prints, per target, from the same
/// `Preview::describe` (not a gauge stuck at "would move 0").
#[test]
fn dry_run_result() {
    use warren::broker::session::{Preview, ReplaySpec, TargetPreview};
    use warren::tui::event::ReplayOutcome;
    let mut st = browsed(false, "orders.dlq", orders_messages());
    update(&mut st, ch('r'));
    update(&mut st, preview(412, &["orders.process"]));
    update(&mut st, ch('d'));
    update(&mut st, key(KeyCode::Enter));
    snap("dry_run_working", &st);
    let mut p = Preview {
        queue: "orders.dlq".into(),
        selected: 412,
        matched: 412,
        examined: 412,
        depth: Some(412),
        ..Default::default()
    };
    for (label, queue, n) in [
        ("orders.process", "orders.process", 410),
        ("orders.audit", "orders.audit", 2),
    ] {
        p.targets.insert(
            label.into(),
            TargetPreview {
                exchange: String::new(),
                routing_key: queue.into(),
                count: n,
                reaches: vec![queue.into()],
                exact: true,
                ..Default::default()
            },
        );
    }
    p.removed.insert("x-death".into());
    p.added.insert("warren-replayed-from".into());
    let spec = ReplaySpec::all_of("orders.dlq", 500);
    let summary = p.describe(&spec, true);
    assert!(summary[0].starts_with("Would replay 412 message(s) from orders.dlq"));
    update(
        &mut st,
        Report::ReplayFinished(ReplayOutcome {
            progress: ReplayProgress {
                total: 412,
                ..Default::default()
            },
            dry_run: true,
            summary,
            ..Default::default()
        }),
    );
    snap("dry_run_result", &st);
    let buf = render(&st, 80, 24);
    assert!(find(&buf, "would move").is_empty(), "no progress counters");
    assert!(find(&buf, "remaining").is_empty());
    assert_eq!(find(&buf, "Would replay 412 message(s)").len(), 1);
    assert_eq!(find(&buf, "→ orders.audit").len(), 1, "per target");
}

/// The queue list by urgency: a DLQ fed at a steady rate over the last minutes (samples from
/// refreshes and from the store) sorts first with its growth, its age and last arrival, and the
/// depth sparkline of the one under the cursor; `3` sorts by growth, `2` by depth, `2` again
/// reverses it.
#[test]
fn queue_list_by_urgency() {
    use warren::domain::urgency::Sample;
    let mut st = loaded(false, Theme::color());
    // The store remembers the last ten minutes of payments.dlq and orders.dlq.
    let at = |ago: i64| jiff::Timestamp::from_second(now().as_second() - ago).unwrap();
    let flat = |depth: u64| -> Vec<Sample> {
        (0..30)
            .map(|i| Sample {
                at: at(600 - i * 20),
                depth,
            })
            .collect()
    };
    let stored = std::collections::HashMap::from([
        (tui_fixtures::at("payments.dlq"), flat(0)),
        (tui_fixtures::at("orders.dlq"), flat(412)),
    ]);
    update(
        &mut st,
        Report::DepthHistory {
            samples: stored,
            heads: Default::default(),
            ticket: Default::default(),
        },
    );
    // Then payments.dlq grows by 6 every 20 s for two minutes: 41 dead letters since the
    // empty sample 5 minutes before the last, 7.7 a minute.
    for step in 1..=6_i64 {
        update(
            &mut st,
            Event::Tick(jiff::Timestamp::from_second(now().as_second() + step * 20).unwrap()),
        );
        let depths = st
            .queues
            .discovery
            .dead_letter_queues
            .iter()
            .map(|d| {
                let depth = if d.name == "payments.dlq" {
                    Some(5 + 6 * step as u64)
                } else {
                    d.depth
                };
                (d.id(), depth)
            })
            .collect();
        update(
            &mut st,
            Report::DepthsRefreshed {
                depths,
                ticket: Default::default(),
            },
        );
    }
    assert_eq!(st.queue_name_at_cursor().as_deref(), Some("orders.dlq"));
    update(&mut st, ch('g'));
    snap("queue_list_urgency", &st);
    let wide = text(&render(&st, 200, 50));
    let top = wide.lines().nth(3).unwrap_or_default();
    assert!(
        top.contains("payments.dlq") && top.contains("+7.7/m"),
        "{wide}"
    );
    update(&mut st, ch('2'));
    assert_eq!(st.queue_name_at_cursor().as_deref(), Some("payments.dlq"));
    update(&mut st, ch('g'));
    snap("queue_list_by_depth", &st);
    update(&mut st, ch('2'));
    let narrow = text(&render(&st, 80, 24));
    assert!(
        text(&render(&st, 200, 50)).contains("Dead-letter queues (8) by depth ▲"),
        "the order in words where it fits"
    );
    assert!(narrow.contains("Depth▲"), "{narrow}");
}

#[test]
fn archive_modal_with_a_reason() {
    let mut st = browsed(false, "orders.dlq", orders_messages());
    update(&mut st, ch('f'));
    update(&mut st, ch('A'));
    for c in "customer gone (INC-42)".chars() {
        update(&mut st, ch(c));
    }
    snap("archive_modal", &st);
    let buf = render(&st, 80, 24);
    let title = find(&buf, "Archive 5 messages");
    assert_eq!(title.len(), 1);
    assert_eq!(buf[title[0]].fg, Color::Red);
    let screen = flat(&text(&render(&st, 200, 50)));
    assert!(screen.contains("customer gone (INC-42)"), "{screen}");
    assert!(screen.contains("warren-archive-reason"), "{screen}");
}

/// The archive stream is missing: the modal asks first, once per context, and says so.
#[test]
fn archive_modal_asks_about_the_missing_stream_first() {
    let mut st = browsed(false, "orders.dlq", orders_messages());
    st.overview.archive_question = Some(
        "the archive stream 'warren.archive' does not exist yet in vhost '/orders': Warren would create it (durable, x-queue-type = stream, x-max-age = 30D) for the whole rota".into(),
    );
    update(&mut st, ch('f'));
    update(&mut st, ch('A'));
    snap("archive_modal_question", &st);
    let screen = flat(&text(&render(&st, 200, 50)));
    assert!(screen.contains("s: create it"), "{screen}");
    update(&mut st, ch('s'));
    let screen = flat(&text(&render(&st, 200, 50)));
    assert!(screen.contains("created now (you said s)"), "{screen}");
}

#[test]
fn restore_modal_back_into_the_dlq_and_to_origin() {
    use warren::tui::event::{RestoreHow, RestorePreview};
    let mut st = in_the_archive(false);
    update(&mut st, ch('f'));
    update(&mut st, ch('r'));
    let plan = |how: RestoreHow, count: u64, targets: &[&str], adds: &[&str], warnings: &[&str]| {
        Report::RestorePreview(RestorePreview {
            vhost: VHOST.into(),
            queue: "warren.archive".into(),
            how,
            count,
            targets: targets.iter().map(|s| s.to_string()).collect(),
            restored_before: 2,
            removes: warren::domain::archive::HEADERS
                .iter()
                .chain(if how.replay {
                    &["x-death"][..]
                } else {
                    &[][..]
                })
                .map(|s| s.to_string())
                .collect(),
            adds: adds.iter().map(|s| s.to_string()).collect(),
            refusals: Vec::new(),
            warnings: warnings.iter().map(|s| s.to_string()).collect(),
            typed_count: warren::ops::Questions::before(
                warren::domain::run::RunKind::Restore,
                count,
            )
            .typed_count,
            ticket: Default::default(),
        })
    };
    update(
        &mut st,
        plan(RestoreHow::default(), 3, &["orders.dlq × 3"], &[], &[]),
    );
    snap("restore_modal", &st);
    let buf = render(&st, 80, 24);
    let title = find(&buf, "Restore 3 messages");
    assert_eq!(title.len(), 1);
    assert_eq!(buf[title[0]].fg, Color::Red);
    let screen = flat(&text(&render(&st, 200, 50)));
    assert!(
        screen.contains("back into the dead-letter queue"),
        "{screen}"
    );
    assert!(screen.contains("orders.dlq × 3"), "{screen}");
    assert!(screen.contains("2 restored before, left out"), "{screen}");
    // To the origin, again: the replay's plan.
    update(&mut st, ch('o'));
    update(&mut st, ch('a'));
    update(
        &mut st,
        plan(
            RestoreHow {
                replay: true,
                again: true,
            },
            5,
            &["queue 'orders.process' × 5"],
            &["warren-replayed-from", "warren-replay-count"],
            &["1 × stays in the archive: no origin to replay to"],
        ),
    );
    snap("restore_modal_to_origin", &st);
    let screen = flat(&text(&render(&st, 200, 50)));
    assert!(screen.contains("replayed to where each failed"), "{screen}");
    assert!(
        screen.contains("2 restored before, restored again"),
        "{screen}"
    );
    assert!(screen.contains("stays in the archive"), "{screen}");
}

#[test]
fn discard_modal_with_a_typed_count() {
    let messages: Vec<_> = (0..120).map(broker_ladder).collect();
    let mut st = browsed(false, "orders.dlq", messages);
    update(&mut st, ch('a'));
    update(&mut st, ch('X'));
    for c in "12".chars() {
        update(&mut st, ch(c));
    }
    snap("discard_modal", &st);
    let screen = flat(&text(&render(&st, 200, 50)));
    assert!(screen.contains("Type 120 to confirm"), "{screen}");
    assert!(
        screen.contains("snapshot") || screen.contains("Snapshot"),
        "{screen}"
    );
    assert!(screen.contains("deleted for good"), "{screen}");
}

/// The first screen answers without a key press: the queue under the cursor read once the
/// cursor rests, shown as its failure groups with counts, and the detail pane on the first.
#[test]
fn the_first_screen_names_why_the_queue_under_the_cursor_died() {
    let mut st = loaded(false, Theme::color());
    let q = st.queue_at_cursor().expect("a queue");
    let cmds = update(&mut st, warren::tui::event::Event::GlanceSettle);
    assert_eq!(cmds.len(), 1, "{cmds:?}");
    update(&mut st, messages_loaded(&q.name, orders_messages()));
    snap("first_screen", &st);
    let narrow = flat(&text(&render(&st, 80, 24)));
    assert!(narrow.contains("Rejected"), "{narrow}");
}

/// `/` on the queue list: the list narrowed as typed, the title saying how many of how many.
#[test]
fn queue_list_filtered() {
    let mut st = loaded(false, Theme::color());
    update(
        &mut st,
        Event::Key(ratatui::crossterm::event::KeyEvent::from(KeyCode::Char(
            '/',
        ))),
    );
    for c in "ship".chars() {
        update(&mut st, ch(c));
    }
    snap("queue_list_filtered", &st);
    let screen = text(&render(&st, 200, 50));
    assert!(screen.contains("2 shown, /ship"), "{screen}");
    assert!(!screen.contains("orders.dlq"), "{screen}");
}

/// `:ctx` with no name: the config's contexts, a label beside its context, the open one
/// marked, every context at once last.
#[test]
fn context_picker() {
    let mut st = loaded(false, Theme::color());
    st.settings.contexts = ["lab-4.3", "prod-eu", "staging"]
        .iter()
        .map(|n| warren::tui::picker::ContextChoice {
            name: n.to_string(),
            label: (*n == "staging").then(|| "STG".to_string()),
        })
        .collect();
    warren::tui::update::run_command_line(&mut st, "ctx");
    snap("context_picker", &st);
    let screen = text(&render(&st, 80, 24));
    assert!(screen.contains("prod-eu  (open now)"), "{screen}");
    assert!(screen.contains("staging  [STG]"), "{screen}");
}
