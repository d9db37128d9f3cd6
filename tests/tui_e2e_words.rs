//! End to end in tmux, issue 41 on the demo snapshot: a filter stays with the queue it was typed
//! on (the next queue opens whole, the first one's filter comes back with it); "dead since" keeps
//! its bound at 80 columns; `/` searches the help at 60×15.

use crate::common;
use crate::tmux_util;

use std::path::{Path, PathBuf};
use std::time::Duration;

use common::unique;
use tmux_util::Tmux;

/// Warren on every demo snapshot, in a terminal of `width`×`height`.
fn demo(width: u16, height: u16) -> Tmux {
    let dir: PathBuf = std::env::temp_dir().join(unique("warren-e2e-words"));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let demo = Path::new(env!("CARGO_MANIFEST_DIR")).join("assets/demo");
    let cmd = format!(
        "WARREN_LOG_DIR={dir} {bin} open {demo}/*.jsonl; sleep 30",
        dir = dir.display(),
        bin = env!("CARGO_BIN_EXE_warren"),
        demo = demo.display(),
    );
    let t = Tmux::open(&cmd, None, width, height);
    t.wait_for("Dead-letter queues (10)", Duration::from_secs(20));
    t
}

#[test]
fn a_filter_stays_with_its_queue_and_dead_since_keeps_its_bound() {
    let t = demo(80, 24);
    t.keys(&["Enter"]);
    t.wait_for("telemetry.dlq — 7 messages", Duration::from_secs(10));
    t.keys(&["/", "zzzz", "Enter"]);
    t.wait_for(
        "no message matches this queue's filter",
        Duration::from_secs(5),
    );
    // One Esc back to the list, the next queue: all of its messages, no filter.
    t.keys(&["Escape", "j", "Enter"]);
    let s = t.wait_for("6 of 6", Duration::from_secs(10));
    assert!(s.contains("shipping-label_error — 6 messages"), "{s}");
    assert!(!s.contains("filter: zzzz"), "{s}");
    // Its messages' "dead since" keeps its bound at 80 columns.
    assert!(s.contains("≤6d"), "{s}");
    // Back to the first: its filter is back.
    t.keys(&["Escape", "k", "Enter"]);
    let s = t.wait_for("filter: zzzz", Duration::from_secs(10));
    assert!(s.contains("0 of 7"), "{s}");
}

#[test]
fn help_is_searched_with_slash_on_a_small_terminal() {
    let t = demo(60, 15);
    t.keys(&["?"]);
    t.wait_for("Keys (/ to search", Duration::from_secs(5));
    t.keys(&["/", "select"]);
    let s = t.wait_for("select all in view", Duration::from_secs(5));
    assert!(s.contains("Keys matching “select”"), "{s}");
    assert!(!s.contains("line down"), "{s}");
    // Esc drops the search, Esc again closes the help.
    t.keys(&["Escape"]);
    t.wait_for("Keys (/ to search", Duration::from_secs(5));
    t.keys(&["Escape"]);
    t.wait_until("the help closed", Duration::from_secs(5), |s| {
        !s.contains("Keys (") && s.contains("Dead-letter")
    });
}

/// On a live broker at 80×24: archive 2 selected, and the line left is the archive's own —
/// "archived 2 to warren.archive" — in the progress window and then on the notice line, the
/// notes from along the way in the command log; the broker holds exactly the 3 others.
#[tokio::test(flavor = "multi_thread")]
async fn an_archive_leaves_its_own_line_on_a_live_broker() {
    use common::amqp::{amqp_depth, confirm_channel, connect, dead_letter_by_reject, declare};
    use common::{TestBroker, TestVhost};

    let broker = TestBroker::default_broker();
    let vhost = TestVhost::new(&broker, "e2e-words").await;
    let conn = connect(&vhost).await;
    let ch = confirm_channel(&conn).await;
    declare(
        &ch,
        "words.dlq",
        warren::domain::features::QueueType::Classic,
        lapin::types::FieldTable::default(),
    )
    .await;
    dead_letter_by_reject(&conn, "words.work", "words.dlq", 5).await;

    let dir: PathBuf = std::env::temp_dir().join(unique("warren-e2e-words-live"));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let cmd = format!(
        "WARREN_STORE={store} WARREN_LOG_DIR={dir} {bin} --amqp-url 'amqp://guest:guest@127.0.0.1:{port}' --management-url '{mgmt}' --vhost '{vhost}'; sleep 30",
        store = dir.join("warren.db").display(),
        dir = dir.display(),
        bin = env!("CARGO_BIN_EXE_warren"),
        port = broker.amqp_port,
        mgmt = broker.mgmt_url_with_creds(),
        vhost = vhost.name,
    );
    let t = Tmux::open(&cmd, None, 80, 24);
    t.wait_for("words.dlq", Duration::from_secs(20));
    t.keys(&["Enter"]);
    t.wait_for("Rejected", Duration::from_secs(20));
    t.keys(&["Space", "Space"]);
    t.wait_for("[2 selected]", Duration::from_secs(5));
    t.keys(&["A"]);
    let modal = t.wait_for("Archive 2 messages", Duration::from_secs(10));
    if modal.contains("s: create it") {
        t.keys(&["s"]);
    }
    t.keys(&["INC-41", "Enter"]);
    let done = t.wait_for("archived 2 to warren.archive", Duration::from_secs(30));
    assert!(done.contains("no rate limit"), "{done}");
    assert!(!done.contains("limit 0"), "{done}");
    t.keys(&["Escape"]);
    let after = t.wait_until("the progress window closed", Duration::from_secs(10), |s| {
        !s.contains("Enter/Esc") && s.contains("archived 2 to warren.archive")
    });
    assert!(!after.contains("canary"), "{after}");
    // The notes from along the way (the stream created, the record) are in the command log.
    assert!(after.contains("notes in @"), "{after}");
    t.keys(&["@"]);
    t.wait_for("note:", Duration::from_secs(5));
    t.keys(&["Escape"]);
    t.keys(&["q"]);

    assert_eq!(amqp_depth(&conn, "words.dlq").await, 3);
    let _ = std::fs::remove_dir_all(&dir);
    vhost.cleanup().await;
}
