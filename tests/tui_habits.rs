//! The habits operators bring from k9s and lazygit, without a terminal: `/` narrows the queue
//! list, `:ctx` with no name opens a picker and Tab completes names, `y`/`Y` copy through the
//! terminal (the OSC 52 write itself is tested in tmux: `tui_e2e_habits`).

use crate::tui_fixtures;

use ratatui::crossterm::event::KeyCode;
use tui_fixtures::*;
use warren::domain::message::DeadLetter;
use warren::tui::picker::ContextChoice;
use warren::tui::state::{Focus, Overlay};
use warren::tui::{Command, State, Theme, update};

fn type_text(st: &mut State, text: &str) -> Vec<Command> {
    text.chars().flat_map(|c| update(st, ch(c))).collect()
}

fn names(st: &State) -> Vec<String> {
    st.queue_rows()
        .iter()
        .map(|r| r.name().to_string())
        .collect()
}

fn with_contexts(mut st: State) -> State {
    st.settings.contexts = ["lab-4.3", "prod-eu", "prod-us", "staging"]
        .iter()
        .map(|n| ContextChoice {
            name: n.to_string(),
            label: (*n == "staging").then(|| "STG".to_string()),
        })
        .collect();
    st
}

#[test]
fn slash_on_the_queue_list_narrows_it_by_name_and_esc_gives_it_back() {
    let mut st = loaded(false, Theme::color());
    let all = names(&st);
    assert!(all.len() > 3, "{all:?}");
    update(&mut st, ch('/'));
    assert!(
        st.inputs.queue_filter.is_some(),
        "the list's own filter line"
    );
    assert!(st.inputs.filter.is_none(), "not the messages' filter");
    type_text(&mut st, "INV");
    let shown = names(&st);
    assert!(!shown.is_empty() && shown.len() < all.len(), "{shown:?}");
    assert!(shown.iter().all(|n| n.contains("inv")), "{shown:?}");
    // Every word must match.
    type_text(&mut st, " dlq");
    assert!(
        names(&st)
            .iter()
            .all(|n| n.contains("inv") && n.contains("dlq"))
    );
    // Enter keeps it; the cursor is on a listed queue.
    update(&mut st, key(KeyCode::Enter));
    assert!(st.inputs.queue_filter.is_none());
    assert_eq!(st.queues.filter, "INV dlq");
    assert!(st.queues.cursor < names(&st).len());
    // `/` again holds the filter in force; Esc there restores it as it was.
    update(&mut st, ch('/'));
    type_text(&mut st, "zzz");
    assert!(names(&st).is_empty(), "nothing holds zzz");
    update(&mut st, key(KeyCode::Esc));
    assert_eq!(st.queues.filter, "INV dlq");
    // Esc on the list drops the filter, the cursor staying on its queue.
    let on = st.queue_at_cursor();
    update(&mut st, key(KeyCode::Esc));
    assert!(st.queues.filter.is_empty());
    assert_eq!(names(&st), all);
    assert_eq!(st.queue_at_cursor(), on);
    assert_eq!(st.focus, Focus::Queues);
}

#[test]
fn ctx_with_no_name_opens_a_picker_that_narrows_and_switches() {
    let mut st = with_contexts(loaded(false, Theme::color()));
    assert!(run(&mut st, "ctx").is_empty());
    assert!(matches!(st.overlay, Overlay::Contexts(_)));
    // By its label too.
    type_text(&mut st, "prod");
    update(&mut st, key(KeyCode::Down));
    let cmds = update(&mut st, key(KeyCode::Enter));
    assert!(
        matches!(cmds.as_slice(), [Command::SwitchContext { name, vhost: None, .. }] if name == "prod-us"),
        "{cmds:?}"
    );
    assert!(matches!(st.overlay, Overlay::None));
    // Esc closes it and nothing is asked of the worker.
    let mut st = with_contexts(loaded(false, Theme::color()));
    run(&mut st, "ctx");
    type_text(&mut st, "stg");
    assert!(update(&mut st, key(KeyCode::Esc)).is_empty());
    assert!(matches!(st.overlay, Overlay::None));
    // Without a config's contexts, :ctx still asks for a name.
    let mut bare = loaded(false, Theme::color());
    assert!(run(&mut bare, "ctx").is_empty());
    assert!(
        bare.banner
            .error
            .as_deref()
            .is_some_and(|e| e.contains(":ctx needs an argument"))
    );
}

fn run(st: &mut State, line: &str) -> Vec<Command> {
    update(st, ch(':'));
    type_text(st, line);
    update(st, key(KeyCode::Enter))
}

#[test]
fn tab_completes_a_context_name_on_the_command_line() {
    let mut st = with_contexts(loaded(false, Theme::color()));
    update(&mut st, ch(':'));
    type_text(&mut st, "ctx pr");
    update(&mut st, key(KeyCode::Tab));
    // Two fit: as far as is certain, and both named.
    assert!(
        st.banner
            .notice
            .as_deref()
            .is_some_and(|n| n.contains("prod-eu") && n.contains("prod-us"))
    );
    type_text(&mut st, "u");
    update(&mut st, key(KeyCode::Tab));
    let cmds = update(&mut st, key(KeyCode::Enter));
    assert!(
        matches!(cmds.as_slice(), [Command::SwitchContext { name, .. }] if name == "prod-us"),
        "{cmds:?}"
    );
}

fn first_message(mut m: DeadLetter, body: &[u8]) -> State {
    m.body = body.to_vec();
    m.body_size = body.len() as u64;
    let mut st = browsed(false, "orders.dlq", vec![m]);
    st.focus = Focus::Messages;
    st
}

#[test]
fn y_copies_the_id_and_y_the_body_but_not_binary_or_terminal_controls() {
    let mut st = first_message(masstransit(), b"{\"order\":\"1000\x1b[2J\"}\n");
    let id = st
        .msgs
        .current_row()
        .and_then(|r| r.shown_id().map(str::to_string))
        .expect("an id");
    update(&mut st, ch('y'));
    assert_eq!(st.handover.clipboard.as_deref(), Some(id.as_str()));
    assert!(
        st.banner
            .notice
            .as_deref()
            .is_some_and(|n| n.contains("OSC 52"))
    );
    st.handover.clipboard = None;
    update(&mut st, ch('Y'));
    // The escape goes; the newline stays.
    assert_eq!(
        st.handover.clipboard.as_deref(),
        Some("{\"order\":\"1000[2J\"}\n")
    );
    // A binary body is not copied, and says what to do instead.
    let mut st = first_message(masstransit(), &[0xff, 0x00, 0xfe, 0x01]);
    update(&mut st, ch('Y'));
    assert_eq!(st.handover.clipboard, None);
    assert!(
        st.banner
            .notice
            .as_deref()
            .is_some_and(|n| n.contains("binary"))
    );
}

/// `S` on a message its page's spill file cannot give back (here: appended, never flushed)
/// saves nothing, rather than a snapshot holding a stand-in for it.
#[test]
fn a_snapshot_is_not_saved_from_a_message_that_cannot_be_read_back() {
    use warren::domain::brief::{Brief, Interner};
    use warren::domain::packed::Packed;
    use warren::local::spill::{Letter, SpillWriter};
    let mut st = first_message(masstransit(), b"{}");
    let dir = std::env::temp_dir().join(crate::common::unique("warren-unreadable"));
    // SAFETY: this test's own variable, set before it spills.
    unsafe { std::env::set_var(warren::local::spill::CACHE_ENV, &dir) };
    let mut w = SpillWriter::create().expect("a spill file");
    let msg = masstransit();
    let exp = warren::domain::explain::explain(&msg);
    let brief = Brief::new(&msg, &exp, &mut Interner::default());
    let spilled = w.append(&Packed::pack(msg)).expect("appended, not flushed");
    if let Some(b) = st.msgs.browse.as_mut()
        && let Some(row) = b.rows.first_mut()
    {
        row.letter = Letter::Spilled(spilled);
        row.brief = brief;
    }
    update(&mut st, ch('S'));
    assert!(st.handover.save.is_none(), "nothing to write");
    assert!(
        st.banner
            .error
            .as_deref()
            .is_some_and(|e| e.starts_with("nothing saved")),
        "{:?}",
        st.banner.error
    );
    drop(w);
    let _ = std::fs::remove_dir_all(&dir);
}
