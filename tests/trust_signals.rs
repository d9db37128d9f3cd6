//! The terminal UI stopped by a signal mid-run (issue 22, item 5): a TUI replay of 5,000
//! messages, then `kill -HUP`, `kill -TERM` or `tmux kill-session` (what an SSH drop does).
//! Warren must cancel the run through its worker, settle what is in flight, finish the audit
//! record with its counts and ids, put the terminal back when it still can and exit 128 + the
//! signal. Checked on the broker: every id in exactly one place (the DLQ or the target), and the
//! audit's moved count equal to what the target holds.

use crate::common;
use crate::replay_util;
use crate::tmux_util;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use common::amqp::{amqp_depth, confirm_channel, connect, dead_letter_by_reject, declare};
use common::{TestBroker, TestVhost};
use lapin::types::FieldTable;
use replay_util::{Home, assert_all_present, eventually, warren};
use serde_json::Value;
use tmux_util::Tmux;
use warren::domain::features::QueueType;

/// The testers replayed 5,000; 2,000 at 400/s keep the run as long (5 s) and the signal as far
/// into it, for less than half the setup (each is dead-lettered for real, on every version).
const N: u32 = 2000;

#[derive(Clone, Copy, Debug)]
enum How {
    Hup,
    Term,
    KillSession,
}

// The brokers at once: each waits on its own tmux session, blocking a thread of its own.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn sighup_mid_replay_settles_and_records_the_run() {
    TestBroker::each(|broker| async move { stopped_mid_replay(&broker, How::Hup).await }).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn sigterm_mid_replay_settles_and_restores_the_terminal() {
    TestBroker::each(|broker| async move { stopped_mid_replay(&broker, How::Term).await }).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_killed_tmux_session_mid_replay_settles_and_records_the_run() {
    TestBroker::each(|broker| async move { stopped_mid_replay(&broker, How::KillSession).await })
        .await;
}

/// Outside a run a signal just ends the UI: the terminal is back and the exit is 143.
#[tokio::test(flavor = "multi_thread")]
async fn sigterm_outside_a_run_restores_the_terminal_and_exits_143() {
    let broker = TestBroker::default_broker();
    let vhost = TestVhost::new(&broker, "sig-idle").await;
    let conn = connect(&vhost).await;
    let ch = confirm_channel(&conn).await;
    declare(&ch, "dlq", QueueType::Classic, FieldTable::default()).await;
    dead_letter_by_reject(&conn, "work", "dlq", 3).await;
    let home = Home::new("sig-idle");
    let t = Tmux::open(&tui_command(&vhost, &home), None, 120, 36);
    t.wait_for("dlq", Duration::from_secs(20));
    let pid = warren_pid(&home);
    kill(pid, "-TERM");
    assert!(
        gone_within(pid, Duration::from_secs(10)),
        "warren still runs"
    );
    assert_eq!(exit_code(&home, &t), 143);
    assert_eq!(
        alternate_screen(&t),
        "0",
        "the terminal is back on the main screen"
    );
    assert_eq!(amqp_depth(&conn, "dlq").await, 3, "nothing moved");
    vhost.cleanup().await;
}

async fn stopped_mid_replay(broker: &TestBroker, how: How) {
    let label = format!("{} {how:?}", broker.label);
    let vhost = TestVhost::new(broker, "sig").await;
    let conn = connect(&vhost).await;
    let ch = confirm_channel(&conn).await;
    declare(&ch, "dlq", QueueType::Classic, FieldTable::default()).await;
    dead_letter_by_reject(&conn, "work", "dlq", N).await;
    let home = Home::new("sig");
    // Fast enough that many messages are in flight when the signal comes (the testers saw up to
    // ten in both places), slow enough that most of the run is still to go.
    // No canary (the modal starts one above 100 messages): nothing consumes the target here.
    std::fs::write(
        home.dir.join("config.toml"),
        "[replay]\nrate = 400\ncanary_above = 0\n",
    )
    .expect("config");
    let t = Tmux::open(&tui_command(&vhost, &home), None, 120, 36);

    // The whole queue is one failure group: `f` shows the groups, `r` replays the group.
    t.wait_for("dlq", Duration::from_secs(20));
    t.keys(&["Enter"]);
    t.wait_for("Rejected", Duration::from_secs(30));
    t.keys(&["f"]);
    t.keys(&["r"]);
    t.wait_for(&format!("type {N} to confirm"), Duration::from_secs(60));
    t.keys(&[&N.to_string(), "Enter"]);
    assert!(
        eventually(Duration::from_secs(60), || async {
            amqp_depth(&conn, "work").await >= 200
        })
        .await,
        "{label}: the replay started"
    );
    let pid = warren_pid(&home);
    let signalled = Instant::now();
    match how {
        How::Hup => kill(pid, "-HUP"),
        How::Term => kill(pid, "-TERM"),
        How::KillSession => {
            let ok = std::process::Command::new("tmux")
                .args(["kill-session", "-t", t.name()])
                .status()
                .expect("tmux kill-session");
            assert!(ok.success());
        }
    }
    assert!(
        gone_within(pid, Duration::from_secs(40)),
        "{label}: warren still runs 40 s after the signal"
    );
    let took = signalled.elapsed();
    let stderr = std::fs::read_to_string(home.dir.join("stderr")).unwrap_or_default();
    let name = match how {
        How::Term => "SIGTERM",
        _ => "SIGHUP",
    };
    assert!(
        stderr.contains(&format!("stopped by {name}")) && stderr.contains("settled"),
        "{label}: warren said how it stopped: {stderr:?}"
    );
    match how {
        How::Hup => assert_eq!(exit_code(&home, &t), 129, "{label}"),
        How::Term => {
            assert_eq!(exit_code(&home, &t), 143, "{label}");
            assert_eq!(alternate_screen(&t), "0", "{label}: the terminal is back");
        }
        How::KillSession => {}
    }

    // The broker is the judge: every id in exactly one place.
    let in_target = amqp_depth(&conn, "work").await;
    let in_dlq = amqp_depth(&conn, "dlq").await;
    let copies = assert_all_present(&conn, &["dlq", "work"], "m", N).await;
    assert_eq!(
        copies, N as usize,
        "{label}: {in_dlq} in the DLQ + {in_target} in the target: no id in both places"
    );
    assert!(in_target > 0 && in_dlq > 0, "{label}: stopped mid-way");

    // The audit has the run's outcome, its moved count equal to the target's, with the ids.
    let audit = warren(&vhost, &home, &["audit", "--json"]).await;
    let records = audit.json();
    let run: Vec<&Value> = records
        .iter()
        .filter(|r| r["kind"] == "replay" && r["from_queue"] == "dlq")
        .collect();
    assert_eq!(run.len(), 1, "{label}: {audit}");
    let run = run[0];
    assert_eq!(run["outcome"], "cancelled", "{label}: {run}");
    assert_eq!(run["moved"].as_u64(), Some(in_target), "{label}: {run}");
    assert_eq!(
        run["message_ids"].as_array().map(Vec::len),
        Some(in_target as usize),
        "{label}: {run}"
    );
    eprintln!(
        "{label}: moved {in_target}, {in_dlq} left in the DLQ, {copies} copies of {N} ids; exited {took:?} after the signal"
    );
    drop(t);
    vhost.cleanup().await;
}

/// The TUI in a shell that records warren's pid (the inner shell `exec`s it), its stderr and
/// its exit code, then waits so the screen can still be read.
pub(crate) fn tui_command(vhost: &TestVhost, home: &Home) -> String {
    let dir = home.dir.display();
    format!(
        "sh -c 'echo $$ > {dir}/pid; exec env WARREN_STORE={store} WARREN_LOG_DIR={dir}/logs {bin} --config {dir}/config.toml --amqp-url {amqp} --management-url {mgmt} --vhost {vhost} 2> {dir}/stderr'; echo $? > {dir}/exit; sleep 60",
        store = home.store().display(),
        bin = replay_util::bin().display(),
        amqp = vhost.amqp_url(),
        mgmt = vhost.broker.mgmt_url_with_creds(),
        vhost = vhost.name,
    )
}

pub(crate) fn warren_pid(home: &Home) -> u32 {
    std::fs::read_to_string(home.dir.join("pid"))
        .expect("pid file")
        .trim()
        .parse()
        .expect("pid")
}

fn kill(pid: u32, sig: &str) {
    let ok = std::process::Command::new("kill")
        .args([sig, &pid.to_string()])
        .status()
        .expect("kill");
    assert!(ok.success(), "kill {sig} {pid}");
}

/// Whether the process is gone (or a zombie) within `limit`.
pub(crate) fn gone_within(pid: u32, limit: Duration) -> bool {
    let stat = PathBuf::from(format!("/proc/{pid}/stat"));
    common::wait::holds_blocking(limit, || match std::fs::read_to_string(&stat) {
        Err(_) => true,
        Ok(s) => s
            .rsplit(')')
            .next()
            .is_some_and(|r| r.trim_start().starts_with('Z')),
    })
}

/// The exit code the outer shell wrote, waited for (it writes it right after warren ends).
pub(crate) fn exit_code(home: &Home, t: &Tmux) -> i32 {
    let file = home.dir.join("exit");
    common::wait::poll_blocking(Duration::from_secs(10), || read_code(&file).ok_or(()))
        .unwrap_or_else(|()| panic!("no exit code; the screen:\n{}", t.screen()))
}

fn read_code(file: &Path) -> Option<i32> {
    std::fs::read_to_string(file).ok()?.trim().parse().ok()
}

/// tmux's `alternate_on` for the pane: "1" while a program holds the alternate screen.
fn alternate_screen(t: &Tmux) -> String {
    let out = std::process::Command::new("tmux")
        .args(["display", "-p", "-t", t.name(), "#{alternate_on}"])
        .output()
        .expect("tmux display");
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}
