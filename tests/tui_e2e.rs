//! End to end: the real `warren` binary in tmux against the real broker. Find the DLQ, open it,
//! select two messages with the keyboard, replay them, and check on the broker that exactly those
//! two moved back to the queue they failed in and the other three stayed.

use crate::common;
use crate::tmux_util;
use crate::tui_fixtures;

use std::path::PathBuf;
use std::time::Duration;

use common::amqp::{amqp_depth, confirm_channel, connect, dead_letter_by_reject, declare, peek};
use common::{TestBroker, TestVhost, unique};
use lapin::types::FieldTable;
use tmux_util::Tmux;
use warren::domain::features::QueueType;

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
    let t = Tmux::open(&cmd, None, 120, 36);

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

/// The files in `dir` whose names start with `prefix`.
fn files_starting(dir: &std::path::Path, prefix: &str) -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = std::fs::read_dir(dir)
        .expect("read dir")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with(prefix))
        })
        .collect();
    out.sort();
    out
}

/// At 80×24 on a snapshot (read-only, no broker): the pager on a gzip body with a search,
/// the screen saved as text from inside it, the message saved as a snapshot that reads back
/// the same, and the stack trace in the pager.
#[test]
fn pager_search_and_saves_at_80x24() {
    let dir: PathBuf = std::env::temp_dir().join(unique("warren-e2e-pager"));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let message = tui_fixtures::gzipped_order();
    let header = warren::domain::snapshot::SnapshotHeader {
        queue: message.queue.clone(),
        vhost: "/".into(),
        exported_at: "2025-09-28T12:00:00Z".into(),
        source: "RabbitMQ 4.0.5".into(),
    };
    let input = dir.join("input.jsonl");
    std::fs::write(
        &input,
        warren::domain::snapshot::write(&header, std::slice::from_ref(&message)),
    )
    .expect("write the snapshot");
    let cmd = format!(
        "WARREN_STORE={store} WARREN_LOG_DIR={dir} {bin} open {input}; sleep 30",
        store = dir.join("warren.db").display(),
        dir = dir.display(),
        bin = env!("CARGO_BIN_EXE_warren"),
        input = input.display(),
    );
    let t = Tmux::open(&cmd, Some(&dir), 80, 24);

    t.wait_for("Dead-letter queues (1)", Duration::from_secs(20));
    t.keys(&["Enter"]);
    t.wait_for("Carrier DHL", Duration::from_secs(10));
    t.keys(&["v"]);
    let body = t.wait_for("gzip → JSON", Duration::from_secs(5));
    assert!(body.contains(r#""orderId": 1000"#), "{body}");
    t.keys(&["/", "SKU-01", "Enter"]);
    let found = t.wait_for("match 1 of 10", Duration::from_secs(5));
    assert!(found.contains(r#""sku": "SKU-010""#), "{found}");
    t.keys(&["n"]);
    t.wait_for("match 2 of 10", Duration::from_secs(5));

    // Ctrl-S from inside the pager: the screen as it is, as plain text.
    t.keys(&["C-s"]);
    t.wait_for("saved warren-screen-", Duration::from_secs(5));
    let screens = files_starting(&dir, "warren-screen-");
    assert_eq!(screens.len(), 1, "{screens:?}");
    let dump = std::fs::read_to_string(&screens[0]).expect("the screen file");
    assert_eq!(dump.lines().count(), 24, "{dump}");
    assert!(dump.contains("match 2 of 10"), "{dump}");
    assert!(dump.contains("Body (186 B, gzip → JSON"), "{dump}");
    assert!(!dump.contains('\x1b'), "no escape codes: {dump:?}");

    // S on the message list: a snapshot that `warren open` reads back to the same message.
    t.keys(&["q"]);
    t.wait_for("[0 selected]", Duration::from_secs(5));
    t.keys(&["S"]);
    t.wait_for("saved warren-shipping-label_error-", Duration::from_secs(5));
    let saved = files_starting(&dir, "warren-shipping-label_error-");
    assert_eq!(saved.len(), 1, "{saved:?}");
    let (head, messages) =
        warren::cli::commands::read_snapshot(&saved[0]).expect("warren open reads it");
    assert_eq!(head.queue, "shipping-label_error");
    assert_eq!(messages, vec![message]);

    // T: the stack trace in the pager; q back, q quits.
    t.keys(&["T"]);
    let trace = t.wait_for(
        "Stack trace (System.InvalidOperationException)",
        Duration::from_secs(5),
    );
    assert!(
        trace.contains("LabelConsumer.cs:line 42"),
        "wrapped at 80: {trace}"
    );
    t.keys(&["q"]);
    t.wait_for("[0 selected]", Duration::from_secs(5));
    t.keys(&["q"]);
    let _ = std::fs::remove_dir_all(&dir);
}

/// The replay modal's dry run says what `warren replay --dry-run` says and moves nothing; `:ctx`
/// to a context that does not exist changes nothing but a message; a read-only context is
/// read-only and the writable one is not afterwards.
#[tokio::test(flavor = "multi_thread")]
async fn a_dry_run_and_context_switches_tell_the_truth() {
    let TwoContexts {
        alpha,
        beta,
        conn,
        conn_b,
        dir,
        cmd,
    } = two_contexts("e2e", "e2e", "").await;
    let t = Tmux::open(&cmd, None, 120, 36);

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

/// `:ctx *` in the real terminal: both contexts' DLQs in one list after their context, the
/// unreachable one in the header with why; a replay key is refused with why; Enter opens the
/// read-only context's queue there (read-only, its message read), and `*` comes back.
#[tokio::test(flavor = "multi_thread")]
async fn every_context_at_once_looks_and_enter_opens_in_context() {
    let TwoContexts {
        alpha,
        beta,
        conn,
        conn_b,
        dir,
        cmd,
    } = two_contexts(
        "e2e-all",
        "alpha",
        "[contexts.gone]\nmanagement_urls = [\"http://guest:guest@127.0.0.1:9\"]\namqp_urls = [\"amqp://guest:guest@127.0.0.1:9/%2f\"]\n",
    )
    .await;
    let t = Tmux::open(&cmd, None, 140, 36);
    t.wait_for("alpha.dlq", Duration::from_secs(20));

    t.keys(&[":", "ctx *", "Enter"]);
    let s = t.wait_for("every context (2)", Duration::from_secs(30));
    let s = if s.contains("beta/beta.dlq") {
        s
    } else {
        t.wait_for("beta/beta.dlq", Duration::from_secs(10))
    };
    assert!(s.contains("alpha/alpha.dlq"), "{s}");
    assert!(s.contains("✕ gone:"), "the unreachable one, with why: {s}");
    assert!(s.contains("open in its context"), "{s}");
    // Protect is refused here, with why.
    t.keys(&["P"]);
    let s = t.wait_for("is for looking", Duration::from_secs(5));
    assert!(s.contains("protect"), "{s}");
    t.keys(&["Escape"]);

    // Enter on beta's queue: beta, read-only, its message read.
    let at = s
        .lines()
        .filter(|l| l.contains("/alpha.dlq") || l.contains("/beta.dlq"))
        .position(|l| l.contains("beta/beta.dlq"))
        .expect("beta's row");
    t.keys(&["g"]);
    for _ in 0..at {
        t.keys(&["j"]);
    }
    t.keys(&["Enter"]);
    let s = t.wait_for("Rejected", Duration::from_secs(30));
    assert!(s.contains("READ-ONLY") && s.contains("beta"), "{s}");
    assert!(!s.contains("every context ("), "{s}");
    t.keys(&["Escape", "Escape"]);
    let s = t.wait_for("* every context", Duration::from_secs(5));
    assert!(!s.contains("alpha.dlq"), "nothing of alpha is left: {s}");

    // And back.
    t.keys(&["*"]);
    let s = t.wait_for("every context (2)", Duration::from_secs(30));
    assert!(
        s.contains("alpha/alpha.dlq") || s.contains("beta/beta.dlq"),
        "{s}"
    );
    t.keys(&["q"]);

    let _ = std::fs::remove_dir_all(&dir);
    drop((conn, conn_b));
    alpha.cleanup().await;
    beta.cleanup().await;
}

/// Two contexts of one broker in a config file: `alpha` (writable; `{queue}.dlq` holding 3
/// dead letters from `{queue}.work`) and `beta` (read-only; `beta.dlq` holding 1), each in a
/// vhost of its own, then `more` (more contexts); the command that runs Warren on alpha.
struct TwoContexts {
    alpha: TestVhost,
    beta: TestVhost,
    conn: lapin::Connection,
    conn_b: lapin::Connection,
    dir: PathBuf,
    cmd: String,
}

async fn two_contexts(prefix: &str, queue: &str, more: &str) -> TwoContexts {
    let broker = TestBroker::default_broker();
    let alpha = TestVhost::new(&broker, &format!("{prefix}-alpha")).await;
    let beta = TestVhost::new(&broker, &format!("{prefix}-beta")).await;
    let conn = connect(&alpha).await;
    let ch = confirm_channel(&conn).await;
    let (dlq, work) = (format!("{queue}.dlq"), format!("{queue}.work"));
    declare(&ch, &dlq, QueueType::Classic, FieldTable::default()).await;
    dead_letter_by_reject(&conn, &work, &dlq, 3).await;
    let conn_b = connect(&beta).await;
    let ch_b = confirm_channel(&conn_b).await;
    declare(&ch_b, "beta.dlq", QueueType::Classic, FieldTable::default()).await;
    dead_letter_by_reject(&conn_b, "beta.work", "beta.dlq", 1).await;

    let dir: PathBuf = std::env::temp_dir().join(unique(&format!("warren-{prefix}")));
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
        context("alpha", &alpha, false) + &context("beta", &beta, true) + more,
    )
    .expect("config");
    let cmd = format!(
        "WARREN_STORE={store} WARREN_LOG_DIR={dir} {bin} --config '{cfg}' --context alpha; sleep 30",
        store = dir.join("warren.db").display(),
        dir = dir.display(),
        bin = env!("CARGO_BIN_EXE_warren"),
        cfg = cfg.display(),
    );
    TwoContexts {
        alpha,
        beta,
        conn,
        conn_b,
        dir,
        cmd,
    }
}
