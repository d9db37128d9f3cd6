//! The command log (`@`): the UI keeps the worker's operation reports, the last 500 with their
//! times, and lists them newest first in an overlay that scrolls and closes like the others.

use crate::tui_fixtures;

use jiff::Timestamp;
use ratatui::Terminal;
use ratatui::backend::TestBackend;
use ratatui::crossterm::event::KeyCode;
use tui_fixtures::*;
use warren::tui::oplog::CAP;
use warren::tui::state::Overlay;
use warren::tui::{Operation, OperationKind, Report, State, Theme, update, view};

fn op(secs_ago: i64, kind: OperationKind, text: &str) -> Report {
    Report::Operation(Operation {
        at: Timestamp::from_second(now().as_second() - secs_ago).unwrap(),
        kind,
        text: text.into(),
    })
}

fn screen(st: &State, w: u16, h: u16) -> Vec<String> {
    let mut term = Terminal::new(TestBackend::new(w, h)).unwrap();
    term.draw(|f| view(st, f)).unwrap();
    let buf = term.backend().buffer().clone();
    (0..h)
        .map(|y| {
            (0..w)
                .map(|x| buf[(x, y)].symbol().to_string())
                .collect::<String>()
                .trim_end()
                .to_string()
        })
        .collect()
}

fn session() -> State {
    let mut st = loaded(false, Theme::color());
    for e in [
        op(
            300,
            OperationKind::Connect,
            "context 'prod-eu': RabbitMQ 4.0.5 at https://rabbit-1:15671/, vhost '/orders' as ops",
        ),
        op(
            299,
            OperationKind::List,
            "listed vhost '/orders': 10 queues (8 dead-letter queues, 1 retry loops), with bindings and policies",
        ),
        op(
            240,
            OperationKind::Read,
            "browsed invoices.dlq: 20 of 20 messages, all left in place; RabbitMQ 4.0.5 counts every return: this read cost each of 20 message(s) 1 delivery of the limit of 20",
        ),
        op(
            120,
            OperationKind::Policy,
            "set policy warren-protect-invoices.dlq in vhost '/orders'",
        ),
        op(
            60,
            OperationKind::Replay,
            "from orders.dlq: 6 published, confirmed and acked off orders.dlq; 0 returned unroutable and 0 failed, left in orders.dlq",
        ),
    ] {
        update(&mut st, e);
    }
    st
}

#[test]
fn at_opens_the_log_newest_first_and_esc_closes_it() {
    let mut st = session();
    assert!(
        matches!(st.overlay, Overlay::None),
        "reports do not open it"
    );
    update(&mut st, ch('@'));
    assert!(matches!(st.overlay, Overlay::Log(0)));
    let lines = screen(&st, 80, 24);
    let at = |needle: &str| {
        lines
            .iter()
            .position(|l| l.contains(needle))
            .unwrap_or_else(|| panic!("{needle} not on screen:\n{}", lines.join("\n")))
    };
    // Newest first, each with its time (UTC) and kind.
    assert!(at("replay") < at("policy"));
    assert!(at("policy") < at("browsed invoices.dlq"));
    assert!(at("browsed invoices.dlq") < at("listed vhost"));
    assert!(at("listed vhost") < at("context 'prod-eu'"));
    let t = Timestamp::from_second(now().as_second() - 60).unwrap();
    assert!(lines[at("replay")].contains(&t.strftime("%H:%M:%S").to_string()));
    // The cost is not cut at 80 columns: it wraps.
    let text = lines.join(" ");
    assert!(text.contains("this read cost each of 20"), "{text}");
    assert!(
        text.contains("message(s) 1 delivery of the limit of 20"),
        "{text}"
    );
    assert!(
        text.contains("Command log: 5 broker operation(s)"),
        "{text}"
    );
    // Footer says how to leave.
    assert!(lines[23].contains("close"), "{}", lines[23]);

    for close in [key(KeyCode::Esc), ch('@'), ch('q')] {
        update(&mut st, ch('@'));
        let cmds = update(&mut st, close);
        assert!(
            cmds.is_empty(),
            "q closes the log, it does not quit: {cmds:?}"
        );
        assert!(matches!(st.overlay, Overlay::None));
        assert!(!st.quit);
    }
}

#[test]
fn the_log_scrolls_within_its_entries_and_keeps_its_place() {
    let mut st = session();
    update(&mut st, ch('@'));
    update(&mut st, ch('j'));
    update(&mut st, ch('j'));
    assert!(matches!(st.overlay, Overlay::Log(2)));
    // A new operation lands on top; what is in view stays in view.
    update(
        &mut st,
        op(
            0,
            OperationKind::Read,
            "browsed orders.dlq: 6 of 6 messages",
        ),
    );
    assert!(matches!(st.overlay, Overlay::Log(3)));
    // Scrolled by entries: six of them, the last one at 5.
    update(&mut st, ch('G'));
    assert!(matches!(st.overlay, Overlay::Log(5)), "{:?}", st.overlay);
    let text = screen(&st, 80, 24).join("\n");
    assert!(
        text.contains("context 'prod-eu'"),
        "the oldest is in view: {text}"
    );
    assert!(!text.contains("listed vhost"), "{text}");
    update(&mut st, ch('j'));
    assert!(
        matches!(st.overlay, Overlay::Log(5)),
        "clamped at the last entry"
    );
    update(&mut st, ch('g'));
    assert!(matches!(st.overlay, Overlay::Log(0)));
    update(&mut st, ch('k'));
    assert!(matches!(st.overlay, Overlay::Log(0)));
    // At the top, a new entry simply shows first.
    update(
        &mut st,
        op(0, OperationKind::List, "listed vhost '/orders'"),
    );
    assert!(matches!(st.overlay, Overlay::Log(0)));
}

#[test]
fn the_last_500_are_kept_and_the_rest_counted() {
    let mut st = loaded(false, Theme::color());
    for i in 0..(CAP + 20) {
        update(
            &mut st,
            op(0, OperationKind::Read, &format!("read number {i}")),
        );
    }
    assert_eq!(st.oplog.len(), CAP);
    assert_eq!(st.oplog.dropped(), 20);
    let newest: Vec<&str> = st.oplog.newest_first().map(|o| o.text.as_str()).collect();
    assert_eq!(newest[0], format!("read number {}", CAP + 19));
    assert_eq!(newest[CAP - 1], "read number 20");
    update(&mut st, ch('@'));
    let text = screen(&st, 200, 50).join("\n");
    assert!(
        text.contains("Command log: 520 broker operation(s)"),
        "{text}"
    );
    update(&mut st, ch('G'));
    let text = screen(&st, 200, 50).join("\n");
    assert!(
        text.contains("… and 20 older operation(s), not kept (the last 500 are)"),
        "{text}"
    );
}

#[test]
fn broker_text_in_the_log_is_sanitised_and_an_empty_log_says_so() {
    let mut st = loaded(false, Theme::color());
    update(&mut st, ch('@'));
    let text = screen(&st, 80, 24).join("\n");
    assert!(
        text.contains("No broker operation yet this session."),
        "{text}"
    );
    update(&mut st, key(KeyCode::Esc));
    update(
        &mut st,
        op(
            0,
            OperationKind::Read,
            "browsed evil\u{1b}[2J\u{202e}.dlq: 1 of 1",
        ),
    );
    update(&mut st, ch('@'));
    let text = screen(&st, 80, 24).join("\n");
    assert!(
        !text.contains('\u{1b}') && !text.contains('\u{202e}'),
        "{text}"
    );
    assert!(text.contains("browsed evil"), "{text}");
}

#[test]
fn help_lists_the_log_key() {
    let mut st = loaded(false, Theme::color());
    update(&mut st, ch('?'));
    let text = screen(&st, 200, 50).join("\n");
    assert!(text.contains("command log (broker operations)"), "{text}");
    assert!(text.contains("Command log"), "{text}");
}
