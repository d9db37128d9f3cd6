//! A replay cut short says so (issue 38, item 1): the testers' `replay --rate 0.5` of four
//! dead letters, Ctrl-C while the last one waited for its rate slot, said "remaining 0", "went
//! through every message the queue held at the start", exited 0 and recorded `completed` with
//! one message still in the DLQ; the TUI's Ctrl-C printed nothing and exited 0. Here the words,
//! the exit code and the audit are read, and every id is counted on the broker.

use crate::common;
use crate::replay_util;
use crate::tmux_util;

use std::time::{Duration, Instant};

use crate::trust_signals::{exit_code, gone_within, tui_command, warren_pid};
use common::amqp::{amqp_depth, confirm_channel, connect, dead_letter_by_reject, declare};
use common::{TestBroker, TestVhost};
use lapin::types::FieldTable;
use replay_util::{Home, assert_all_present, command, eventually, warren};
use serde_json::Value;
use tmux_util::Tmux;
use warren::domain::features::QueueType;

async fn declare_dlq(conn: &lapin::Connection) {
    let ch = confirm_channel(conn).await;
    declare(&ch, "dlq", QueueType::Classic, FieldTable::default()).await;
}

/// The run's record in the audit, by its DLQ.
async fn audit_of(vhost: &TestVhost, home: &Home, label: &str) -> Value {
    let audit = warren(vhost, home, &["audit", "--json"]).await;
    let runs: Vec<Value> = audit
        .json()
        .into_iter()
        .filter(|r| r["kind"] == "replay" && r["from_queue"] == "dlq")
        .collect();
    assert_eq!(runs.len(), 1, "{label}: {audit}");
    runs.into_iter().next().unwrap_or_default()
}

/// Three dead letters at one every four seconds: the third is delivered (the run has seen all
/// the queue held) while it waits for its slot, and the Ctrl-C comes then.
#[tokio::test(flavor = "multi_thread")]
async fn ctrl_c_while_the_last_waits_for_its_slot_is_a_cancel() {
    TestBroker::each(|broker| async move {
        let label = broker.label.clone();
        let vhost = TestVhost::new(&broker, "cancel-last").await;
        let home = Home::new("cancel-last");
        let conn = connect(&vhost).await;
        declare_dlq(&conn).await;
        dead_letter_by_reject(&conn, "work", "dlq", 3).await;
        let started = Instant::now();
        let child = command(&vhost, &home, &["replay", "dlq", "--rate", "0.25", "--yes"])
            .spawn()
            .expect("spawn warren");
        let two = eventually(Duration::from_secs(30), || async {
            amqp_depth(&conn, "work").await >= 2
        })
        .await;
        assert!(two, "{label}: two messages reached the work queue");
        let pid = child.id().expect("running").to_string();
        let sent = std::process::Command::new("kill")
            .args(["-INT", &pid])
            .status()
            .expect("kill -INT");
        assert!(sent.success());
        let out = tokio::time::timeout(Duration::from_secs(60), child.wait_with_output())
            .await
            .expect("warren ended within 60 s of the Ctrl-C")
            .expect("output");
        let stderr = String::from_utf8_lossy(&out.stderr);
        let why = format!("{label}: after {:?}:\n{stderr}", started.elapsed());
        assert_eq!(out.status.code(), Some(1), "{why}");
        assert!(
            stderr.contains("moved 2, returned 0, failed 0, remaining 1 (the DLQ holds 1 now)"),
            "{why}"
        );
        assert!(stderr.contains("cancelled"), "{why}");
        assert!(!stderr.contains("went through every message"), "{why}");

        // The broker is the judge: two in the work queue, one in the DLQ, each id once.
        assert_eq!(amqp_depth(&conn, "work").await, 2, "{why}");
        assert_eq!(amqp_depth(&conn, "dlq").await, 1, "{why}");
        assert_eq!(assert_all_present(&conn, &["dlq", "work"], "m", 3).await, 3);
        let run = audit_of(&vhost, &home, &label).await;
        assert_eq!(run["outcome"], "cancelled", "{label}: {run}");
        assert_eq!(run["moved"].as_u64(), Some(2), "{label}: {run}");
        vhost.cleanup().await;
    })
    .await;
}

/// Ctrl-C in the TUI during a replay: the screen goes, the same summary is printed on the way
/// out, the exit is 1, and its figures are the broker's.
#[tokio::test(flavor = "multi_thread")]
async fn ctrl_c_in_the_tui_mid_replay_prints_the_summary_and_exits_1() {
    const N: u32 = 20;
    for broker in TestBroker::all() {
        let label = broker.label.clone();
        let vhost = TestVhost::new(&broker, "cancel-tui").await;
        let home = Home::new("cancel-tui");
        let conn = connect(&vhost).await;
        declare_dlq(&conn).await;
        dead_letter_by_reject(&conn, "work", "dlq", N).await;
        std::fs::write(
            home.dir.join("config.toml"),
            "[replay]\nrate = 2\ncanary_above = 0\n",
        )
        .expect("config");
        let t = Tmux::open(&tui_command(&vhost, &home), None, 120, 36);
        t.wait_for("dlq", Duration::from_secs(20));
        t.keys(&["Enter"]);
        t.wait_for("Rejected", Duration::from_secs(30));
        t.keys(&["a"]);
        t.wait_for(&format!("[{N} selected]"), Duration::from_secs(10));
        t.keys(&["r"]);
        t.wait_for("Reaches", Duration::from_secs(30));
        t.keys(&["Enter"]);
        let started = eventually(Duration::from_secs(30), || async {
            amqp_depth(&conn, "work").await >= 3
        })
        .await;
        assert!(started, "{label}: the replay started:\n{}", t.screen());
        let pid = warren_pid(&home);
        t.keys(&["C-c"]);
        assert!(
            gone_within(pid, Duration::from_secs(40)),
            "{label}: warren still runs 40 s after Ctrl-C"
        );
        let code = exit_code(&home, &t);
        let stderr = std::fs::read_to_string(home.dir.join("stderr")).unwrap_or_default();
        let in_work = amqp_depth(&conn, "work").await;
        let in_dlq = amqp_depth(&conn, "dlq").await;
        let why = format!("{label}: work {in_work}, dlq {in_dlq}:\n{stderr}");
        assert_eq!(code, 1, "{why}");
        assert!(
            stderr.contains(&format!("moved {in_work}, returned 0, failed 0, remaining {in_dlq} (the DLQ holds {in_dlq} now)")),
            "{why}"
        );
        assert!(stderr.contains("cancelled"), "{why}");
        assert!(in_dlq > 0, "{why}: stopped mid-way");
        assert_eq!(
            assert_all_present(&conn, &["dlq", "work"], "m", N).await,
            N as usize,
            "{why}"
        );
        let run = audit_of(&vhost, &home, &label).await;
        assert_eq!(run["outcome"], "cancelled", "{label}: {run}");
        assert_eq!(run["moved"].as_u64(), Some(in_work), "{label}: {run}");
        drop(t);
        vhost.cleanup().await;
    }
}
