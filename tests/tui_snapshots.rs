//! Every screen of the TUI drawn with ratatui's TestBackend at 80×24 and 160×48 and compared with
//! insta snapshots. "now" is part of the state, so ages are deterministic. Snapshots do not see
//! colour: the styles that carry meaning are asserted on buffer cells.

mod tui_fixtures;

use ratatui::Terminal;
use ratatui::backend::TestBackend;
use ratatui::buffer::Buffer;
use ratatui::crossterm::event::KeyCode;
use ratatui::style::{Color, Modifier};
use tui_fixtures::*;
use warren::tui::event::{ConnectionState, ReplayPreview, ReplayProgress, Report};
use warren::tui::{State, Theme, update, view};

fn render(state: &State, w: u16, h: u16) -> Buffer {
    let mut terminal = Terminal::new(TestBackend::new(w, h)).unwrap();
    terminal.draw(|f| view(state, f)).unwrap();
    terminal.backend().buffer().clone()
}

fn text(buf: &Buffer) -> String {
    let area = buf.area;
    let mut out = String::new();
    for y in 0..area.height {
        let mut line = String::new();
        for x in 0..area.width {
            line.push_str(buf[(x, y)].symbol());
        }
        out.push_str(line.trim_end());
        out.push('\n');
    }
    out
}

/// Snapshots `state` at both sizes.
fn snap(name: &str, state: &State) {
    for (w, h) in [(80, 24), (160, 48)] {
        let buf = render(state, w, h);
        insta::assert_snapshot!(format!("{name}_{w}x{h}"), text(&buf));
    }
}

fn preview(count: u64, reaches: &[&str]) -> Report {
    Report::ReplayPreview(ReplayPreview {
        queue: "orders.dlq".into(),
        count,
        keep_attempts: false,
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
        ticket: Default::default(),
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
    let buf = render(&st, 160, 48);
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
    for c in "412".chars() {
        update(&mut st, ch(c));
    }
    update(&mut st, key(KeyCode::Enter));
    update(
        &mut st,
        Report::ReplayProgress(ReplayProgress {
            total: 412,
            moved: 120,
            returned: 2,
            failed: 1,
            rate: 50.0,
            blocked: None,
        }),
    );
    snap("progress", &st);
    // The broker blocks publishing (a memory alarm): the modal says so as it happens.
    let at = |blocked: Option<&str>| {
        Report::ReplayProgress(ReplayProgress {
            total: 412,
            moved: 120,
            returned: 2,
            failed: 1,
            rate: 50.0,
            blocked: blocked.map(str::to_string),
        })
    };
    update(&mut st, at(Some("low on memory")));
    snap("progress_blocked", &st);
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
    st.theme = Theme::monochrome();
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
    for (w, h) in [(80, 24), (160, 48)] {
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
    let all = text(&render(&st, 160, 48));
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
    st.theme = Theme::monochrome();
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

/// The dry run answers with what `warren replay --dry-run` prints, per target, from the same
/// `Preview::describe` (not a gauge stuck at "would move 0").
#[test]
fn dry_run_result() {
    use warren::broker::session::{Preview, ReadConsent, ReplaySpec, TargetPreview};
    use warren::domain::selection::Selection;
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
    let spec = ReplaySpec {
        queue: "orders.dlq".into(),
        selection: Selection::All,
        limit: None,
        rate: None,
        to: None,
        allow_fan_out: false,
        keep_attempts: false,
        window: 500,
        consent: ReadConsent::Reuse,
    };
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
