//! "No message can crash Warren", against real brokers and the real binary.
//!
//! A quorum DLQ holds ordinary messages, one with a header nested 5,000 levels deep (35 KB, legal
//! AMQP) and one nested 10,000 levels deep (50 KB). Deeper still is legal (26,000 levels fit in a
//! 128 KiB frame; `broker::amqp`'s tests parse that on Warren's stack), but RabbitMQ's own cost
//! per delivery grows with the square of the depth (measured: about 1.4 s for 20,000 levels on
//! 4.3), close to the 2 s a browse waits for the next message, which made that case flaky here.
//! Before the fix lapin's IO thread overflowed its stack parsing such a header and Warren aborted
//! (exit 134), dropping the connection, which on a quorum DLQ costs every message a delivery.
//! Here `warren show`, `show --json`, `export`, `replay --dry-run`, the TUI and a real replay run
//! against it; none may crash, every message id is still in the DLQ after the read-only commands, and the
//! replay moves the deep headers byte for byte.
//!
//! The test process itself talks AMQP through lapin too, whose IO thread has the default stack:
//! the publishing and the counting run in a child of this test binary started with
//! `RUST_MIN_STACK` (the same remedy `warren`'s `main` applies to itself), see `helper`.
//!
//! Also here: a closed stdout (`warren show --json | head -1`), `--to` of 300 bytes and
//! `--rate 1e-20` end with the documented exit code and no panic.

use crate::common;
use crate::replay_util;

use std::process::Stdio;
use std::time::Duration;

use lapin::types::{AMQPValue, FieldArray, FieldTable, LongString, ShortString};
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, BufReader};
use warren::broker::amqp::{DEEP_STACK, encode_value};
use warren::domain::features::QueueType;
use warren::domain::value::{HeaderValue, Table};

use common::{TestBroker, TestVhost};
use replay_util::{Home, command, warren};

const ORDINARY: u32 = 6;

/// The real binary in a tmux pane, as tests/tui_e2e.rs drives it.
struct Tmux {
    session: String,
}

impl Tmux {
    fn start(cmd: &str) -> Tmux {
        let session = common::unique("warren-trust");
        let ok = std::process::Command::new("tmux")
            .args([
                "new-session",
                "-d",
                "-s",
                &session,
                "-x",
                "140",
                "-y",
                "40",
                cmd,
            ])
            .status()
            .expect("tmux must be installed (scripts/test installs it)");
        assert!(ok.success(), "tmux new-session failed");
        Tmux { session }
    }

    fn screen(&self) -> String {
        let out = std::process::Command::new("tmux")
            .args(["capture-pane", "-p", "-t", &self.session])
            .output()
            .expect("capture-pane");
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    fn keys(&self, keys: &[&str]) {
        for k in keys {
            let ok = std::process::Command::new("tmux")
                .args(["send-keys", "-t", &self.session, k])
                .status()
                .expect("send-keys");
            assert!(ok.success());
            // Time, not an event: a terminal's input parser reads an Esc followed at once by a
            // key as Alt+key (one read of `\x1bj`): keys are sent as typed, apart.
            std::thread::sleep(Duration::from_millis(150));
        }
    }

    fn wait_for(&self, text: &str, within: Duration) -> String {
        common::wait::poll_blocking(within, || {
            let s = self.screen();
            if s.contains(text) { Ok(s) } else { Err(s) }
        })
        .unwrap_or_else(|s| panic!("waited {within:?} for {text:?}; the screen shows:\n{s}"))
    }
}

impl Drop for Tmux {
    fn drop(&mut self) {
        let _ = std::process::Command::new("tmux")
            .args(["kill-session", "-t", &self.session])
            .status();
    }
}

/// A header value `n` levels deep, built without recursion: tables (`k` → …) or arrays.
fn deep(n: usize, arrays: bool) -> AMQPValue {
    let mut v = AMQPValue::LongString(LongString::from(&b"bottom"[..]));
    for _ in 0..n {
        v = if arrays {
            AMQPValue::FieldArray(FieldArray::from(vec![v]))
        } else {
            let mut t = FieldTable::default();
            t.insert(ShortString::try_new("k").expect("short"), v);
            AMQPValue::FieldTable(t)
        };
    }
    v
}

/// The deep messages: id, depth, tables or arrays.
const DEEP: [(&str, usize, bool); 2] = [("deep-5000", 5000, false), ("deep-10000", 10_000, true)];

/// Runs `mode` of [`helper`] in a child of this test binary with a stack big enough for lapin.
async fn run_helper(mode: &str, vhost: &TestVhost, queue: &str, extra: &str) -> Value {
    let out = tokio::process::Command::new(std::env::current_exe().expect("test binary"))
        .args([
            "trust_input::helper",
            "--exact",
            "--ignored",
            "--nocapture",
            "--test-threads=1",
        ])
        .env("RUST_MIN_STACK", DEEP_STACK.to_string())
        .env("TRUST_HELPER", mode)
        .env("TRUST_AMQP_URL", vhost.amqp_url())
        .env("TRUST_VHOST", &vhost.name)
        .env("TRUST_QUEUE", queue)
        .env("TRUST_EXTRA", extra)
        .stdin(Stdio::null())
        .output()
        .await
        .expect("run helper");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let line = stdout
        .lines()
        .find_map(|l| l.split_once("TRUST-RESULT ").map(|(_, r)| r))
        .unwrap_or_else(|| {
            panic!(
                "helper {mode} gave no result ({:?})\n{stdout}\n{}",
                out.status,
                String::from_utf8_lossy(&out.stderr)
            )
        });
    serde_json::from_str(line).expect("helper JSON")
}

/// The child's side: `publish` dead-letters the ordinary and deep messages from `TRUST_EXTRA`
/// (a work queue) into the DLQ; `read` reads every message of a queue without settling any and
/// reports each id with, for a deep header, its depth and exact bytes.
#[test]
#[ignore = "run by trust_input's tests in a child process"]
fn helper() {
    let Ok(mode) = std::env::var("TRUST_HELPER") else {
        return;
    };
    let env = |k: &str| std::env::var(k).unwrap_or_default();
    let (url, vhost, queue, extra) = (
        env("TRUST_AMQP_URL"),
        env("TRUST_VHOST"),
        env("TRUST_QUEUE"),
        env("TRUST_EXTRA"),
    );
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .thread_stack_size(64 << 20)
        .enable_all()
        .build()
        .expect("runtime");
    let result = rt.block_on(async move {
        let conn = warren::broker::amqp::connect(&[url], &vhost, "guest", "guest", None)
            .await
            .expect("connect");
        match mode.as_str() {
            "publish" => {
                let mut msgs = Vec::new();
                for i in 0..ORDINARY {
                    msgs.push(replay_util::simple("plain", i, &[]));
                }
                let mut raws = serde_json::Map::new();
                for (id, depth, arrays) in DEEP {
                    let raw = encode_value(&deep(depth, arrays));
                    raws.insert(id.into(), json!(raw.len()));
                    let mut h = Table::new();
                    h.insert("seq", HeaderValue::I32(99));
                    h.insert("nested", HeaderValue::TooDeep { depth, raw });
                    let p = warren::domain::message::Properties {
                        message_id: Some(id.into()),
                        delivery_mode: Some(2),
                        ..Default::default()
                    };
                    msgs.push((p, h, format!("{id} body").into_bytes()));
                }
                replay_util::dead_letter(&conn, &extra, &queue, &msgs).await;
                json!({ "published": msgs.len(), "raw_bytes": raws })
            }
            "read" => {
                let n: usize = extra.parse().expect("count");
                let ms = replay_util::read_all(&conn, &queue, n + 5).await;
                let rows: Vec<Value> = ms
                    .iter()
                    .map(|m| {
                        let deep = match m.headers.get("nested") {
                            Some(HeaderValue::TooDeep { depth, raw }) => {
                                json!({"depth": depth, "raw": encode_hex(raw)})
                            }
                            Some(other) => json!({"unexpected": other.type_name()}),
                            None => Value::Null,
                        };
                        json!({
                            "id": m.properties.message_id,
                            "deep": deep,
                            "body": String::from_utf8_lossy(&m.body),
                        })
                    })
                    .collect();
                json!(rows)
            }
            other => panic!("unknown helper mode {other}"),
        }
    });
    println!("TRUST-RESULT {result}");
}

fn encode_hex(b: &[u8]) -> String {
    // A digest is enough to compare bytes exactly: length plus FNV-1a 64.
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for &x in b {
        h ^= u64::from(x);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    format!("{}:{h:016x}", b.len())
}

/// The expected digest of each deep header, computed here as the helper built it.
fn expected_digest(depth: usize, arrays: bool) -> String {
    let v = deep(depth, arrays);
    // Called on a thread with room: deep lapin values drop recursively.
    encode_hex(&encode_value(&v))
}

fn ids(rows: &Value) -> Vec<String> {
    let mut v: Vec<String> = rows
        .as_array()
        .expect("rows")
        .iter()
        .map(|r| r["id"].as_str().unwrap_or_default().to_string())
        .collect();
    v.sort();
    v
}

fn all_ids() -> Vec<String> {
    let mut v: Vec<String> = (0..ORDINARY).map(|i| format!("plain-{i}")).collect();
    v.extend(DEEP.iter().map(|(id, _, _)| id.to_string()));
    v.sort();
    v
}

fn assert_no_crash(run: &replay_util::Run, what: &str) {
    assert!(
        !run.stderr.contains("panicked") && !run.stderr.contains("overflow"),
        "{what} crashed:\n{run}"
    );
    assert!(
        matches!(run.code, Some(0..=3)),
        "{what} ended outside the documented exit codes:\n{run}"
    );
}

#[tokio::test]
async fn deep_headers_on_a_quorum_dlq_crash_nothing_and_replay_exactly() {
    let digests: Vec<(String, String)> = tokio::task::spawn_blocking(|| {
        std::thread::Builder::new()
            .stack_size(DEEP_STACK)
            .spawn(|| {
                DEEP.iter()
                    .map(|(id, d, a)| (id.to_string(), expected_digest(*d, *a)))
                    .collect()
            })
            .expect("thread")
            .join()
            .expect("digests")
    })
    .await
    .expect("join");

    for broker in TestBroker::all() {
        let vhost = TestVhost::new(&broker, "trust-deep").await;
        let home = Home::new("trust-deep");
        let dlq = "orders.dlq";
        let work = "orders";
        {
            let conn = common::amqp::connect(&vhost).await;
            let ch = common::amqp::confirm_channel(&conn).await;
            let mut args = FieldTable::default();
            if broker.label == "3.10" {
                // 3.10 counts deliveries only with a limit; 20 leaves room for this test's reads.
                args.insert("x-delivery-limit".into(), AMQPValue::LongLongInt(20));
            }
            common::amqp::declare(&ch, dlq, QueueType::Quorum, args).await;
            let _ = ch.close(200, "ok".into()).await;
            let _ = conn.close(200, "ok".into()).await;
        }
        let published = run_helper("publish", &vhost, dlq, work).await;
        let total = (ORDINARY as usize) + DEEP.len();
        assert_eq!(published["published"], json!(total), "{published}");

        let before = run_helper("read", &vhost, dlq, &total.to_string()).await;
        assert_eq!(ids(&before), all_ids(), "{}: before", broker.label);
        for row in before.as_array().expect("rows") {
            let id = row["id"].as_str().unwrap_or_default();
            if let Some((_, want)) = digests.iter().find(|(d, _)| d == id) {
                // Through RabbitMQ and back, kept whole and exact.
                assert_eq!(row["deep"]["raw"].as_str(), Some(want.as_str()), "{id}");
            }
        }

        let show = warren(&vhost, &home, &["show", dlq]).await;
        assert_no_crash(&show, "warren show");
        assert_eq!(show.code, Some(0), "{show}");
        assert!(
            show.stdout.contains("deep-5000") && show.stdout.contains("deep-10000"),
            "{show}"
        );

        // Reading a quorum DLQ again spends deliveries: this test accepts that cost.
        let json = warren(&vhost, &home, &["show", dlq, "--json", "--read-again"]).await;
        assert_no_crash(&json, "warren show --json");
        assert_eq!(json.code, Some(0), "{json}");
        assert_eq!(json.json().len(), total, "{json}");

        let file = home.dir.join("deep.jsonl");
        let file_s = file.to_string_lossy().to_string();
        let export = warren(
            &vhost,
            &home,
            &["export", dlq, "-o", &file_s, "--read-again"],
        )
        .await;
        assert_no_crash(&export, "warren export");
        assert_eq!(export.code, Some(0), "{export}");
        let text = std::fs::read_to_string(&file).expect("snapshot");
        assert_eq!(text.lines().count(), total + 1, "header plus one line each");
        assert_eq!(text.matches("\"too-deep\"").count(), DEEP.len());
        // The snapshot reads back (no broker) and says what it holds.
        let snap = warren(&vhost, &home, &["show", "--snapshot", &file_s]).await;
        assert_no_crash(&snap, "warren show --snapshot");
        assert_eq!(snap.code, Some(0), "{snap}");
        assert!(snap.stdout.contains("deep-10000"), "{snap}");

        let dry = warren(&vhost, &home, &["replay", dlq, "--dry-run", "--read-again"]).await;
        assert_no_crash(&dry, "warren replay --dry-run");
        assert_eq!(dry.code, Some(0), "{dry}");

        // The TUI: browse the DLQ, show the deepest header, quit cleanly (no abort in raw mode).
        let tui = Tmux::start(&format!(
            "WARREN_STORE={store} WARREN_LOG_DIR={logs} {bin} --amqp-url '{amqp}' \
             --management-url '{mgmt}' --vhost '{vh}' --config {cfg}; \
             echo \"warren exited $?\"; sleep 30",
            store = home.store().display(),
            logs = home.dir.join("logs").display(),
            bin = env!("CARGO_BIN_EXE_warren"),
            amqp = vhost.amqp_url(),
            mgmt = broker.mgmt_url_with_creds(),
            vh = vhost.name,
            cfg = home.dir.join("config.toml").display(),
        ));
        tui.wait_for(dlq, Duration::from_secs(20));
        tui.keys(&["Enter"]);
        // Before 4.3 every read of a quorum queue with a delivery limit costs a delivery: the
        // TUI warns first, Enter again browses; then the read ledger knows the CLI read it and
        // the TUI says what reading again costs. On 4.3 a read costs nothing and nobody asks.
        if broker.label != "4.3" {
            tui.wait_for(
                "is a quorum queue with a delivery limit",
                Duration::from_secs(10),
            );
            tui.keys(&["Enter"]);
            tui.wait_for("Warren has read", Duration::from_secs(10));
            tui.keys(&["Enter"]);
        }
        tui.wait_for(&format!("{total} messages"), Duration::from_secs(30));
        tui.keys(&["G"]);
        let screen = tui.wait_for("10000 levels deep", Duration::from_secs(10));
        assert!(screen.contains("deep-10000"), "{screen}");
        tui.keys(&["Escape", "q"]);
        let screen = tui.wait_for("warren exited", Duration::from_secs(20));
        assert!(screen.contains("warren exited 0"), "{screen}");
        drop(tui);

        let after = run_helper("read", &vhost, dlq, &total.to_string()).await;
        assert_eq!(
            ids(&after),
            all_ids(),
            "{}: every message still there",
            broker.label
        );

        // A real replay moves the deep headers back byte for byte.
        let replay = warren(
            &vhost,
            &home,
            &["replay", dlq, "--yes", "--json", "--read-again"],
        )
        .await;
        assert_no_crash(&replay, "warren replay");
        assert_eq!(replay.code, Some(0), "{replay}");
        assert_eq!(replay.summary_u64("moved"), total as u64, "{replay}");
        let moved = run_helper("read", &vhost, work, &total.to_string()).await;
        assert_eq!(ids(&moved), all_ids(), "{}: all replayed", broker.label);
        for row in moved.as_array().expect("rows") {
            let id = row["id"].as_str().unwrap_or_default();
            if let Some((_, want)) = digests.iter().find(|(d, _)| d == id) {
                assert_eq!(
                    row["deep"]["raw"].as_str(),
                    Some(want.as_str()),
                    "{}: {id} replayed exactly",
                    broker.label
                );
            }
        }
        vhost.cleanup().await;
    }
}

#[tokio::test]
async fn a_closed_stdout_ends_quietly() {
    let broker = TestBroker::default_broker();
    let vhost = TestVhost::new(&broker, "trust-pipe").await;
    let home = Home::new("trust-pipe");
    let conn = common::amqp::connect(&vhost).await;
    let ch = common::amqp::confirm_channel(&conn).await;
    common::amqp::declare(&ch, "pipe.dlq", QueueType::Classic, FieldTable::default()).await;
    for i in 0..50 {
        let (p, h, b) = replay_util::simple("pipe", i, &[]);
        common::amqp::publish(&ch, "pipe.dlq", &p, &h, &b).await;
    }
    // `warren show --json | head -1`: read one line, then close the pipe.
    let mut child = command(&vhost, &home, &["show", "pipe.dlq", "--json"])
        .spawn()
        .expect("spawn");
    let stdout = child.stdout.take().expect("stdout");
    let mut lines = BufReader::new(stdout).lines();
    let first = lines.next_line().await.expect("read").expect("one line");
    assert!(first.contains("pipe-0"), "{first}");
    drop(lines);
    let out = tokio::time::timeout(Duration::from_secs(60), child.wait_with_output())
        .await
        .expect("warren ends")
        .expect("output");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");
    assert!(stderr.trim().is_empty(), "quiet: {stderr}");
    assert_eq!(common::amqp::amqp_depth(&conn, "pipe.dlq").await, 50);
    let _ = conn.close(200, "ok".into()).await;
    vhost.cleanup().await;
}

#[tokio::test]
async fn out_of_range_arguments_are_usage_errors() {
    let broker = TestBroker::default_broker();
    let vhost = TestVhost::new(&broker, "trust-args").await;
    let home = Home::new("trust-args");
    let long = "q".repeat(300);
    for (args, says) in [
        (
            vec!["replay", "dlq", "--to", long.as_str(), "--dry-run"],
            "300 bytes; AMQP allows 255",
        ),
        (
            vec!["replay", "dlq", "--rate", "1e-20", "--dry-run"],
            "out of range",
        ),
        (
            vec!["replay", "dlq", "--rate", "inf", "--dry-run"],
            "out of range",
        ),
        (vec!["show", long.as_str()], "300 bytes; AMQP allows 255"),
    ] {
        let run = warren(&vhost, &home, &args).await;
        assert_eq!(run.code, Some(2), "{args:?}: {run}");
        assert!(run.stderr.contains(says), "{args:?}: {run}");
        assert!(!run.stderr.contains("panicked"), "{args:?}: {run}");
    }
    // lapin's connection.open panicked on a vhost name over 255 bytes.
    let out = tokio::process::Command::new(env!("CARGO_BIN_EXE_warren"))
        .args(["--vhost", long.as_str(), "queues"])
        .env("WARREN_LOG_DIR", home.dir.join("logs"))
        .env("WARREN_STORE", home.store())
        .output()
        .await
        .expect("run");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("300 bytes; AMQP allows 255"), "{stderr}");
    vhost.cleanup().await;
}

/// A Spring message whose original routing key is 300 bytes (legal in a header, not as an AMQP
/// routing key). lapin's `&str` → short string conversion panicked on it in the replay preview;
/// now the target is refused with the reason and every message stays where it is.
#[tokio::test]
async fn a_routing_key_too_long_for_amqp_holds_its_message() {
    let broker = TestBroker::default_broker();
    let vhost = TestVhost::new(&broker, "trust-key").await;
    let home = Home::new("trust-key");
    let conn = common::amqp::connect(&vhost).await;
    let ch = common::amqp::confirm_channel(&conn).await;
    common::amqp::declare(&ch, "spring.dlq", QueueType::Classic, FieldTable::default()).await;
    common::amqp::declare(&ch, "orders", QueueType::Classic, FieldTable::default()).await;
    let long_key = "r".repeat(300);
    for (i, key) in [("long", long_key.as_str()), ("fine", "orders")] {
        let (mut p, mut h, b) = replay_util::simple("spring", 0, &[]);
        p.message_id = Some(format!("spring-{i}"));
        h.insert("x-exception-message", HeaderValue::string("boom"));
        h.insert("x-original-exchange", HeaderValue::string(""));
        h.insert("x-original-routingKey", HeaderValue::string(key));
        common::amqp::publish(&ch, "spring.dlq", &p, &h, &b).await;
    }
    let dry = warren(&vhost, &home, &["replay", "spring.dlq", "--dry-run"]).await;
    assert_no_crash(&dry, "replay --dry-run");
    assert!(dry.stderr.contains("300 bytes; AMQP allows 255"), "{dry}");
    let run = warren(&vhost, &home, &["replay", "spring.dlq", "--yes", "--json"]).await;
    assert_no_crash(&run, "replay --yes");
    // Whatever else moved, the message with the long key is still in the DLQ, and none is lost.
    let left = common::amqp::peek(&conn, "spring.dlq", 10).await;
    let moved = common::amqp::peek(&conn, "orders", 10).await;
    let left_ids = replay_util::message_ids(&left);
    assert!(
        left_ids.contains(&"spring-long".to_string()),
        "{left_ids:?}\n{run}"
    );
    assert_eq!(left.len() + moved.len(), 2, "{left_ids:?}\n{run}");
    let _ = conn.close(200, "ok".into()).await;
    vhost.cleanup().await;
}
