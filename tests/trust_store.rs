//! Issue 22, items 7 and 9, through the real binary on real brokers. A store locked by another
//! process (`BEGIN EXCLUSIVE`) when a `replay --yes` of 20,000 ends: the outcome is tried again
//! while the lock lasts a few seconds, kept in a pending file (and said loudly) when it lasts
//! longer, and written into the store by the next open; `warren audit` merges by what is known
//! (the broker's `completed` beats a local record without an outcome). And the small traps: a
//! malformed URL's password never printed or logged, an empty filter and `--window 0` refused
//! (exit 2), a discard whose snapshot cannot be written whole discards nothing and leaves no
//! partial file, a management redirect to another host refused and said.

use crate::common;
use crate::replay_util;

use std::io::{BufRead, Write};
use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, Instant};

use common::amqp::{amqp_depth, confirm_channel, connect, dead_letter_to, declare, wait_for_depth};
use common::{TestBroker, TestVhost};
use lapin::types::FieldTable;
use replay_util::{Home, Run, assert_all_present, command, eventually, fill, run, warren};
use serde_json::Value;
use warren::domain::features::QueueType;

const N: u32 = 20_000;

/// `n` messages `{prefix}-i` dead-lettered for real from `work` into `dlq` (both declared).
async fn dead_letters(conn: &lapin::Connection, prefix: &str, n: u32, body: usize) {
    let ch = confirm_channel(conn).await;
    declare(&ch, "dlq", QueueType::Classic, FieldTable::default()).await;
    declare(&ch, "work", QueueType::Classic, dead_letter_to("dlq")).await;
    if body == 0 {
        fill(conn, "work", prefix, n).await;
    } else {
        let msgs: Vec<_> = (0..n)
            .map(|i| {
                let (p, h, _) = replay_util::simple(prefix, i, &[]);
                (p, h, vec![b'x'; body])
            })
            .collect();
        for (p, h, b) in &msgs {
            common::amqp::publish(&ch, "work", p, h, b).await;
        }
    }
    common::amqp::reject_consumed(conn, "work", n, 1000).await;
    wait_for_depth(conn, "dlq", u64::from(n), Duration::from_secs(60)).await;
    let _ = ch.close(200, "ok".into()).await;
}

/// `replay dlq --yes --json` and `more`, spawned, once the first 1,000 reached the target.
async fn replay_started(
    vhost: &TestVhost,
    home: &Home,
    conn: &lapin::Connection,
    more: &[&str],
) -> tokio::process::Child {
    let mut args = vec!["replay", "dlq", "--yes", "--json"];
    args.extend_from_slice(more);
    let child = command(vhost, home, &args).spawn().expect("spawn");
    assert!(
        eventually(Duration::from_secs(60), || async {
            amqp_depth(conn, "work").await >= 1000
        })
        .await,
        "{}: the replay started",
        vhost.broker.label
    );
    child
}

/// The store at `path` held with `BEGIN EXCLUSIVE`, as another process would, until dropped.
fn lock_store(path: &Path) -> rusqlite::Connection {
    let c = rusqlite::Connection::open(path).expect("open the store");
    c.execute_batch("BEGIN EXCLUSIVE").expect("lock the store");
    c
}

/// Waits for a line containing `text` in Warren's log files under `dir`.
async fn logged(dir: &Path, text: &str, within: Duration) -> bool {
    eventually(within, || async {
        std::fs::read_dir(dir)
            .into_iter()
            .flatten()
            .flatten()
            .any(|e| std::fs::read_to_string(e.path()).is_ok_and(|s| s.contains(text)))
    })
    .await
}

/// The one replay record of `warren audit [--local] --json`.
async fn the_record(vhost: &TestVhost, home: &Home, local: bool) -> (Value, Run) {
    let mut args = vec!["audit", "--json"];
    if local {
        args.push("--local");
    }
    let audit = warren(vhost, home, &args).await;
    assert_eq!(audit.code, Some(0), "{audit}");
    let records: Vec<Value> = audit
        .json()
        .into_iter()
        .filter(|r| r["kind"] == "replay")
        .collect();
    assert_eq!(records.len(), 1, "{audit}");
    (records[0].clone(), audit)
}

/// Every id in exactly one place: all `N` in the target, none left in the DLQ.
async fn all_moved_once(conn: &lapin::Connection, label: &str) {
    assert_eq!(amqp_depth(conn, "dlq").await, 0, "{label}");
    let copies = assert_all_present(conn, &["dlq", "work"], "s", N).await;
    assert_eq!(copies, N as usize, "{label}: no id twice");
}

/// A lock that outlasts a first try but not the patience: the record is completed in the run.
#[tokio::test(flavor = "multi_thread")]
async fn a_store_locked_for_seconds_at_the_end_of_a_replay_still_gets_its_outcome() {
    TestBroker::each(|broker| async move {
        let label = broker.label.clone();
        let vhost = TestVhost::new(&broker, "store-lock").await;
        let conn = connect(&vhost).await;
        dead_letters(&conn, "s", N, 0).await;
        let home = Home::new("store-lock");
        let child = replay_started(&vhost, &home, &conn, &[]).await;
        let lock = lock_store(&home.store());
        let held = Instant::now();
        assert!(
            logged(
                &home.dir.join("logs"),
                "trying again",
                Duration::from_secs(120)
            )
            .await,
            "{label}: the outcome was refused once"
        );
        drop(lock);
        let out = tokio::time::timeout(Duration::from_secs(60), child.wait_with_output())
            .await
            .expect("warren ended")
            .expect("output");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(0), "{label}: {stderr}");
        assert!(!stderr.contains("NOT COMPLETE"), "{label}: {stderr}");
        all_moved_once(&conn, &label).await;
        let (r, audit) = the_record(&vhost, &home, true).await;
        assert_eq!(r["outcome"], "completed", "{label}: {audit}");
        assert_eq!(r["moved"], N, "{label}");
        assert_eq!(r["message_ids"].as_array().map(Vec::len), Some(N as usize));
        eprintln!(
            "{label}: lock held {:?}; {N} moved, the record completed in the run",
            held.elapsed()
        );
        vhost.cleanup().await;
    })
    .await;
}

/// A lock that outlasts the patience: said loudly, kept pending, completed by the next open;
/// without the pending file the broker's copy still says `completed`.
#[tokio::test(flavor = "multi_thread")]
async fn a_store_locked_past_the_end_keeps_the_outcome_pending_and_the_next_open_completes_it() {
    TestBroker::each(|broker| async move {
        let label = broker.label.clone();
        let vhost = TestVhost::new(&broker, "store-pending").await;
        let conn = connect(&vhost).await;
        dead_letters(&conn, "s", N, 0).await;
        let home = Home::new("store-pending");
        let child = replay_started(&vhost, &home, &conn, &["--create-audit-stream"]).await;
        let lock = lock_store(&home.store());
        let out = tokio::time::timeout(Duration::from_secs(120), child.wait_with_output())
            .await
            .expect("warren ended")
            .expect("output");
        drop(lock);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(0), "{label}: all moved: {stderr}");
        assert!(
            stderr.contains("IS NOT COMPLETE") && stderr.contains("kept in"),
            "{label}: said loudly: {stderr}"
        );
        all_moved_once(&conn, &label).await;
        let pending = warren::store::pending_dir(&home.store());
        let files: Vec<_> = std::fs::read_dir(&pending)
            .expect("pending dir")
            .flatten()
            .map(|e| e.path())
            .collect();
        assert_eq!(files.len(), 1, "{label}: {files:?}");

        // Merged by what is known: without the pending file, the broker's outcome wins over
        // the local record that has none.
        let aside = home.dir.join("aside.jsonl");
        std::fs::rename(&files[0], &aside).expect("set aside");
        let (r, audit) = the_record(&vhost, &home, false).await;
        assert_eq!(r["outcome"], "completed", "{label}: {audit}");
        assert_eq!(r["moved"], N, "{label}");
        assert_eq!(r["seen"]["local"], true, "{label}");
        assert_eq!(r["seen"]["broker"], true, "{label}");
        let (r, _) = the_record(&vhost, &home, true).await;
        assert_eq!(r["outcome"], "interrupted", "{label}: the local copy alone");

        // Back in place: the next open writes it into the store and removes it.
        std::fs::rename(&aside, &files[0]).expect("put back");
        let (r, audit) = the_record(&vhost, &home, true).await;
        assert_eq!(r["outcome"], "completed", "{label}: {audit}");
        assert_eq!(r["moved"], N, "{label}");
        assert_eq!(r["message_ids"].as_array().map(Vec::len), Some(N as usize));
        assert!(!files[0].exists(), "{label}: the pending file is gone");
        eprintln!(
            "{label}: {N} moved; the outcome kept pending and completed by the next open; stderr:\n{stderr}"
        );
        vhost.cleanup().await;
    })
    .await;
}

#[tokio::test]
async fn a_malformed_url_never_shows_its_password() {
    let home = Home::new("url-redact");
    for (flag, url) in [
        ("--amqp-url", "amqp//user:PASSWORD1@host"),
        ("--management-url", "http//user:PASSWORD1@host:15672"),
        ("--amqp-url", "user:PASSWORD1@host"),
    ] {
        let mut cmd = replay_util::bare_command(&home, &[flag, url, "queues"]);
        cmd.stdin(Stdio::null());
        let r = run(cmd, &[flag, url]).await;
        assert_eq!(r.code, Some(2), "{r}");
        assert!(r.stderr.contains("not usable"), "{r}");
        assert!(!r.stderr.contains("PASSWORD1"), "{r}");
    }
    let logs = home.dir.join("logs");
    assert!(
        !logged(&logs, "PASSWORD1", Duration::from_millis(100)).await,
        "the log never holds it"
    );
}

#[tokio::test]
async fn an_empty_filter_or_a_zero_window_is_refused_and_nothing_moves() {
    let broker = TestBroker::default_broker();
    let vhost = TestVhost::new(&broker, "empty-filter").await;
    let conn = connect(&vhost).await;
    dead_letters(&conn, "s", 10, 0).await;
    let home = Home::new("empty-filter");
    let unset = std::env::var("WARREN_SURELY_UNSET").unwrap_or_default();
    for args in [
        vec!["discard", "dlq", "--filter", unset.as_str(), "--yes"],
        vec!["discard", "dlq", "--filter", "   ", "--yes"],
        vec!["archive", "dlq", "--filter", "", "--yes"],
        vec!["replay", "dlq", "--filter", "", "--yes"],
        vec!["show", "dlq", "--filter", ""],
        vec!["replay", "dlq", "--window", "0", "--yes"],
    ] {
        let r = warren(&vhost, &home, &args).await;
        assert_eq!(r.code, Some(2), "{args:?}: {r}");
        assert!(
            r.stderr.contains("empty") || r.stderr.contains("window of 0"),
            "{args:?}: {r}"
        );
    }
    assert_eq!(amqp_depth(&conn, "dlq").await, 10, "nothing moved");
    vhost.cleanup().await;
}

/// A snapshot that cannot be written whole (the file size limit stands in for a full disk):
/// nothing is discarded and no partial snapshot or temporary file is left.
#[tokio::test]
async fn a_discard_whose_snapshot_cannot_be_written_whole_discards_nothing() {
    let broker = TestBroker::default_broker();
    let vhost = TestVhost::new(&broker, "snap-full").await;
    let conn = connect(&vhost).await;
    // 1,000 messages of 4 KiB: a snapshot of more than 4 MiB against a 1 MiB limit.
    dead_letters(&conn, "s", 1000, 4096).await;
    let home = Home::new("snap-full");
    // The store and its log exist before the limit, so only the snapshot meets it.
    let first = warren(&vhost, &home, &["audit", "--local"]).await;
    assert_eq!(first.code, Some(0), "{first}");
    let script = format!(
        "trap '' XFSZ; ulimit -f 2048; exec \"$0\" --config {cfg} --amqp-url {amqp} --management-url {mgmt} --vhost {vh} discard dlq --yes --json",
        cfg = home.dir.join("config.toml").display(),
        amqp = vhost.amqp_url(),
        mgmt = vhost.broker.mgmt_url_with_creds(),
        vh = vhost.name,
    );
    let mut cmd = tokio::process::Command::new("sh");
    cmd.arg("-c")
        .arg(&script)
        .arg(replay_util::bin())
        .env("WARREN_STORE", home.store())
        .env("WARREN_LOG_DIR", home.dir.join("logs"))
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let r = run(cmd, &["discard (limited)"]).await;
    assert_ne!(r.code, Some(0), "{r}");
    assert!(r.stderr.contains("cannot write the snapshot"), "{r}");
    assert!(r.stderr.contains("nothing deleted"), "{r}");
    let copies = assert_all_present(&conn, &["dlq"], "s", 1000).await;
    assert_eq!(copies, 1000, "nothing discarded");
    let left: Vec<_> = std::fs::read_dir(home.dir.join("discarded"))
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.file_name())
        .collect();
    assert!(
        left.is_empty(),
        "no partial snapshot, no temporary file: {left:?}"
    );
    vhost.cleanup().await;
}

/// A management API that redirects to another host: not followed, and said.
#[tokio::test]
async fn a_management_redirect_to_another_host_is_not_followed() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let port = listener.local_addr().expect("addr").port();
    let served = std::thread::spawn(move || {
        let mut asked = Vec::new();
        listener.set_nonblocking(false).expect("blocking listener");
        for stream in listener.incoming().take(1) {
            let mut stream = stream.expect("connection");
            let mut reader = std::io::BufReader::new(stream.try_clone().expect("clone"));
            let mut line = String::new();
            while reader.read_line(&mut line).is_ok_and(|n| n > 2) {
                asked.push(line.clone());
                line.clear();
            }
            let _ = stream.write_all(
                b"HTTP/1.1 302 Found\r\nLocation: http://localhost:15672/api/overview\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
            );
        }
        asked
    });
    let home = Home::new("redirect");
    let mgmt = format!("http://guest:guest@127.0.0.1:{port}");
    let r = run(
        replay_util::bare_command(
            &home,
            &[
                "--management-url",
                &mgmt,
                "--amqp-url",
                "amqp://127.0.0.1:5672",
                "queues",
            ],
        ),
        &["queues"],
    )
    .await;
    assert_eq!(r.code, Some(3), "{r}");
    assert!(r.stderr.contains("redirected to another host"), "{r}");
    assert!(r.stderr.contains("not followed"), "{r}");
    let asked = served.join().expect("server");
    assert!(!asked.is_empty(), "the API was asked once");
}
