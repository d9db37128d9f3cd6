//! Edit, then replay, in the real TUI in tmux against real brokers (3.10 and 4.3): `E` on a
//! message opens Warren's editor, the field is changed with the keyboard ("x" to 5), Ctrl-S
//! shows the replay modal with the change, Enter replays the edited copy; then `E` and Ctrl-E
//! hand the next message to `$EDITOR` (a script) and back. The broker is the judge: the edited
//! copies in the work queue, the rest still dead, both originals in the archive.

use crate::common;
use crate::replay_util;
use crate::tmux_util;

use std::time::Duration;

use common::amqp::{self as h, peek};
use common::{TestBroker, TestVhost};
use replay_util::Home;
use serde_json::{Value, json};
use tmux_util::Tmux;

fn bodies(messages: &[warren::domain::message::DeadLetter]) -> Vec<Value> {
    messages
        .iter()
        .map(|m| serde_json::from_slice(&m.body).unwrap_or(Value::Null))
        .collect()
}

async fn edit_in_the_tui(broker: &TestBroker) {
    let label = broker.label.clone();
    let vhost = TestVhost::new(broker, "tui-edit").await;
    let home = Home::new("tui-edit");
    let conn = h::connect(&vhost).await;
    h::dead_json_orders(&conn, 3).await;
    let config = format!(
        "[contexts.c]\nmanagement_urls = [\"{}\"]\namqp_urls = [\"amqp://{}:{}\"]\nvhost = \"{}\"\nusername = \"guest\"\npassword_env = \"WARREN_TEST_EDIT_PASSWORD\"\narchive_create = true\n",
        broker.mgmt_base(),
        broker.host,
        broker.amqp_port,
        vhost.name
    );
    let cfg = home.dir.join("config.toml");
    std::fs::write(&cfg, config).expect("config");
    let script = home.dir.join("editor.sh");
    std::fs::write(
        &script,
        "#!/bin/sh\nsed -i 's/\"order\": \"x\"/\"order\": 7/' \"$1\"\n",
    )
    .expect("editor script");
    std::process::Command::new("chmod")
        .args(["755"])
        .arg(&script)
        .status()
        .expect("chmod");
    let cmd = format!(
        "WARREN_TEST_EDIT_PASSWORD=guest EDITOR={editor} WARREN_STORE={store} WARREN_LOG_DIR={dir} {bin} --config {cfg} --context c; sleep 30",
        editor = script.display(),
        store = home.store().display(),
        dir = home.dir.join("logs").display(),
        bin = replay_util::bin().display(),
        cfg = cfg.display(),
    );
    let t = Tmux::open(&cmd, None, 120, 40);
    t.wait_for("orders.dlq", Duration::from_secs(20));
    t.keys(&["Enter"]);
    t.wait_for("Rejected", Duration::from_secs(20));

    // o-2 in Warren's editor: the last line is `}`, the one above it the field.
    t.keys(&["j", "E"]);
    t.wait_for("Ctrl-S replay it", Duration::from_secs(5));
    let mut down = vec!["Down"; 40];
    down.extend(["Up", "End", "BSpace", "BSpace", "BSpace", "5"]);
    t.keys(&down);
    let checked = t.wait_for("✓ reads", Duration::from_secs(5));
    assert!(
        checked.contains(r#"body.order: "x" → 5"#),
        "{label}: {checked}"
    );
    t.keys(&["C-s"]);
    let modal = t.wait_for("Reaches", Duration::from_secs(20));
    assert!(
        modal.contains("Edited") && modal.contains("edited"),
        "{label}: {modal}"
    );
    assert!(modal.contains(r#"+ "order": 5"#), "{label}: {modal}");
    t.keys(&["Enter"]);
    let done = t.wait_for("done", Duration::from_secs(30));
    assert!(done.contains("moved 1"), "{label}: {done}");
    t.keys(&["Escape"]);

    // o-3 handed to $EDITOR (the script sets 7) and back.
    t.wait_for("orders.dlq — 2 messages", Duration::from_secs(20));
    t.keys(&["g", "j", "E"]);
    t.wait_for("Ctrl-S replay it", Duration::from_secs(5));
    t.keys(&["C-e"]);
    let back = t.wait_for("✓ reads", Duration::from_secs(10));
    assert!(back.contains(r#"body.order: "x" → 7"#), "{label}: {back}");
    t.keys(&["C-s"]);
    t.wait_for("Reaches", Duration::from_secs(20));
    t.keys(&["Enter"]);
    let done = t.wait_for("done", Duration::from_secs(30));
    assert!(done.contains("moved 1"), "{label}: {done}");
    t.keys(&["Escape", "q"]);

    let replayed = peek(&conn, "orders", 10).await;
    assert_eq!(
        bodies(&replayed),
        [
            json!({"id": "o-2", "order": 5}),
            json!({"id": "o-3", "order": 7})
        ],
        "{label}"
    );
    let left = peek(&conn, "orders.dlq", 10).await;
    assert_eq!(
        bodies(&left),
        [json!({"id": "o-1", "order": "x"})],
        "{label}"
    );
    let list = replay_util::warren(&vhost, &home, &["archive", "list", "--json"]).await;
    let rows = list.json();
    assert_eq!(
        rows.len(),
        2,
        "{label}: the two originals are archived: {list}"
    );
    println!(
        "{label}: o-2 (5, Warren's editor) and o-3 (7, $EDITOR) replayed, both originals archived"
    );
    let _ = conn.close(200, "done".into()).await;
    vhost.cleanup().await;
}

// The brokers at once: each waits on its own tmux session, blocking a thread of its own.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn edit_in_warrens_editor_and_in_editor_then_replay() {
    let brokers = TestBroker::all()
        .into_iter()
        .filter(|b| b.label != "4.0")
        .collect();
    TestBroker::each_of(
        brokers,
        |broker| async move { edit_in_the_tui(&broker).await },
    )
    .await;
}
