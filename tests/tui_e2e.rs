//! End to end: the real `warren` binary in tmux against the real broker. Find the DLQ, open it,
//! select two messages with the keyboard, replay them, and check on the broker that exactly those
//! two moved back to the queue they failed in and the other three stayed.

mod common;

use std::path::PathBuf;
use std::process::Command;
use std::time::{Duration, Instant};

use common::amqp::{amqp_depth, confirm_channel, connect, dead_letter_by_reject, declare, peek};
use common::{TestBroker, TestVhost, unique};
use lapin::types::FieldTable;
use warren::domain::features::QueueType;

struct Tmux {
    session: String,
}

impl Tmux {
    fn start(cmd: &str) -> Tmux {
        let session = unique("warren-e2e");
        let ok = Command::new("tmux")
            .args([
                "new-session",
                "-d",
                "-s",
                &session,
                "-x",
                "120",
                "-y",
                "36",
                cmd,
            ])
            .status()
            .expect("tmux must be installed (scripts/test installs it)");
        assert!(ok.success(), "tmux new-session failed");
        Tmux { session }
    }

    fn screen(&self) -> String {
        let out = Command::new("tmux")
            .args(["capture-pane", "-p", "-t", &self.session])
            .output()
            .expect("capture-pane");
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    fn keys(&self, keys: &[&str]) {
        for k in keys {
            let ok = Command::new("tmux")
                .args(["send-keys", "-t", &self.session, k])
                .status()
                .expect("send-keys");
            assert!(ok.success());
            std::thread::sleep(Duration::from_millis(150));
        }
    }

    /// Waits until the screen shows `text`; panics with the screen when it does not.
    fn wait_for(&self, text: &str, within: Duration) -> String {
        let start = Instant::now();
        loop {
            let s = self.screen();
            if s.contains(text) {
                return s;
            }
            if start.elapsed() > within {
                panic!("waited {within:?} for {text:?}; the screen shows:\n{s}");
            }
            std::thread::sleep(Duration::from_millis(200));
        }
    }
}

impl Drop for Tmux {
    fn drop(&mut self) {
        let _ = Command::new("tmux")
            .args(["kill-session", "-t", &self.session])
            .status();
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn select_two_messages_and_replay_them_with_the_keyboard() {
    let broker = TestBroker::default_broker();
    let vhost = TestVhost::new(&broker, "e2e").await;
    let conn = connect(&vhost).await;
    let ch = confirm_channel(&conn).await;
    declare(&ch, "e2e.dlq", QueueType::Classic, FieldTable::default()).await;
    dead_letter_by_reject(&conn, "e2e.work", "e2e.dlq", 5).await;

    let dir: PathBuf = std::env::temp_dir().join(unique("warren-e2e"));
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
    let t = Tmux::start(&cmd);

    t.wait_for("e2e.dlq", Duration::from_secs(20));
    t.keys(&["Enter"]);
    t.wait_for("Rejected", Duration::from_secs(20));
    // Space selects and moves down: select #1, skip #2, select #3.
    t.keys(&["Space", "j", "Space"]);
    t.wait_for("[2 selected]", Duration::from_secs(5));
    t.keys(&["r"]);
    let modal = t.wait_for("Reaches", Duration::from_secs(20));
    assert!(modal.contains("Replay 2 messages from e2e.dlq"), "{modal}");
    assert!(modal.contains("e2e.work only"), "{modal}");
    t.keys(&["Enter"]);
    let done = t.wait_for("done", Duration::from_secs(30));
    assert!(done.contains("moved 2"), "{done}");
    t.keys(&["Escape", "q"]);

    // The broker is the judge: two back in the work queue, three still dead.
    assert_eq!(amqp_depth(&conn, "e2e.work").await, 2);
    assert_eq!(amqp_depth(&conn, "e2e.dlq").await, 3);
    let back = peek(&conn, "e2e.work", 10).await;
    let ids: Vec<_> = back
        .iter()
        .map(|m| m.properties.message_id.clone().unwrap_or_default())
        .collect();
    assert_eq!(ids, vec!["m-0", "m-2"]);
    for m in &back {
        assert!(m.headers.get("x-death").is_none(), "death headers stripped");
        assert_eq!(m.headers.get_str("warren-replayed-from"), Some("e2e.dlq"));
        assert_eq!(m.headers.get_i64("warren-replay-count"), Some(1));
    }
    let left = peek(&conn, "e2e.dlq", 10).await;
    let ids: Vec<_> = left
        .iter()
        .map(|m| m.properties.message_id.clone().unwrap_or_default())
        .collect();
    assert_eq!(ids, vec!["m-1", "m-3", "m-4"], "the rest stay, in order");

    let _ = std::fs::remove_dir_all(&dir);
    vhost.cleanup().await;
}

/// The replay modal's dry run says what `warren replay --dry-run` says and moves nothing; `:ctx`
/// to a context that does not exist changes nothing but a message; a read-only context is
/// read-only and the writable one is not afterwards.
#[tokio::test(flavor = "multi_thread")]
async fn a_dry_run_and_context_switches_tell_the_truth() {
    let broker = TestBroker::default_broker();
    let alpha = TestVhost::new(&broker, "e2e-alpha").await;
    let beta = TestVhost::new(&broker, "e2e-beta").await;
    let conn = connect(&alpha).await;
    let ch = confirm_channel(&conn).await;
    declare(&ch, "e2e.dlq", QueueType::Classic, FieldTable::default()).await;
    dead_letter_by_reject(&conn, "e2e.work", "e2e.dlq", 3).await;
    let conn_b = connect(&beta).await;
    let ch_b = confirm_channel(&conn_b).await;
    declare(&ch_b, "beta.dlq", QueueType::Classic, FieldTable::default()).await;
    dead_letter_by_reject(&conn_b, "beta.work", "beta.dlq", 1).await;

    let dir: PathBuf = std::env::temp_dir().join(unique("warren-e2e-switch"));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let context = |name: &str, v: &TestVhost, read_only: bool| {
        format!(
            "[contexts.{name}]\namqp_urls = [\"{}\"]\nmanagement_urls = [\"{}\"]\nvhost = \"{}\"\nread_only = {read_only}\n\n",
            broker.amqp_url(&v.name),
            broker.mgmt_url_with_creds(),
            v.name
        )
    };
    let cfg = dir.join("config.toml");
    std::fs::write(
        &cfg,
        context("alpha", &alpha, false) + &context("beta", &beta, true),
    )
    .expect("config");
    let cmd = format!(
        "WARREN_STORE={store} WARREN_LOG_DIR={dir} {bin} --config '{cfg}' --context alpha; sleep 30",
        store = dir.join("warren.db").display(),
        dir = dir.display(),
        bin = env!("CARGO_BIN_EXE_warren"),
        cfg = cfg.display(),
    );
    let t = Tmux::start(&cmd);

    // The dry run.
    t.wait_for("e2e.dlq", Duration::from_secs(20));
    t.keys(&["Enter"]);
    t.wait_for("Rejected", Duration::from_secs(20));
    t.keys(&["a"]);
    t.wait_for("[3 selected]", Duration::from_secs(5));
    t.keys(&["r"]);
    t.wait_for("Reaches", Duration::from_secs(20));
    t.keys(&["d"]);
    let modal = t.wait_for("Enter  dry run", Duration::from_secs(5));
    assert!(
        modal.contains("Enter dry run"),
        "the footer agrees: {modal}"
    );
    t.keys(&["Enter"]);
    let done = t.wait_for(
        "Would replay 3 message(s) from e2e.dlq",
        Duration::from_secs(30),
    );
    assert!(done.contains("→ e2e.work"), "per target: {done}");
    assert!(!done.contains("would move"), "{done}");
    assert_eq!(amqp_depth(&conn, "e2e.dlq").await, 3, "nothing moved");
    assert_eq!(amqp_depth(&conn, "e2e.work").await, 0);
    t.keys(&["Escape"]);

    // A context that does not exist: the screen stays where it was.
    t.keys(&[":", "ctx nope", "Enter"]);
    let s = t.wait_for("could not switch to context nope", Duration::from_secs(20));
    assert!(
        s.contains("e2e.dlq") && s.contains("alpha") && s.contains("connected"),
        "{s}"
    );
    assert!(!s.contains("READ-ONLY"), "{s}");

    // The read-only context: its own queues, read-only.
    t.keys(&["Escape", ":", "ctx beta", "Enter"]);
    let s = t.wait_for("beta.dlq", Duration::from_secs(20));
    assert!(!s.contains("e2e.dlq"), "nothing of alpha is left: {s}");
    assert!(s.contains("READ-ONLY"), "{s}");

    // Back to alpha: writable again.
    t.keys(&[":", "ctx alpha", "Enter"]);
    let s = t.wait_for("e2e.dlq", Duration::from_secs(20));
    assert!(!s.contains("READ-ONLY") && !s.contains("beta.dlq"), "{s}");
    t.keys(&["q"]);

    let _ = std::fs::remove_dir_all(&dir);
    drop((conn, conn_b));
    alpha.cleanup().await;
    beta.cleanup().await;
}
