//! Replay never hangs and never stops without saying why, through the real binary:
//! - a stall (a target that nacks every publish past its length) is not reported as "empty";
//! - on the 3-node cluster (`cluster.sh`): a memory alarm is reported as `blocked` while it
//!   happens, and Ctrl-C or SIGTERM ends the run within seconds, settled, with the audit and the
//!   exit code telling the truth; a frozen node ends the run within its deadlines with a reason,
//!   and every message is still in the DLQ or the target, duplicates reported ≥ actual.
//!
//! The cluster tests skip (printing why) when the cluster is not running, except under
//! `CI=true`, where they start it (`cluster.sh up`) and fail if they cannot.

mod common;
mod replay_util;

use std::collections::HashSet;
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::amqp::{self as h, amqp_depth};
use common::{TestBroker, TestVhost};
use lapin::options::BasicPublishOptions;
use lapin::types::{AMQPValue, FieldTable};
use replay_util::{Home, Run, message_ids, read_all};
use serde_json::Value;
use tokio::io::AsyncBufReadExt;
use warren::domain::message::Properties;
use warren::domain::quorum::QueueType;
use warren::domain::value::Table;

const CLUSTER: &str = "/work/shared/brokers/cluster.sh";

/// Fills `queue` with `n` persistent messages with ids `{prefix}-{i}`.
async fn fill(conn: &lapin::Connection, queue: &str, prefix: &str, n: u32) {
    let ch = h::confirm_channel(conn).await;
    let mut pending = Vec::new();
    for i in 0..n {
        let props = Properties {
            message_id: Some(format!("{prefix}-{i}")),
            delivery_mode: Some(2),
            ..Properties::default()
        };
        let props = warren::broker::amqp::properties_to_amqp(&props, &Table::new()).expect("props");
        let c = ch
            .basic_publish(
                "".into(),
                queue.into(),
                BasicPublishOptions::default(),
                &h::binary_body(i, 128),
                props,
            )
            .await
            .expect("publish");
        pending.push(c);
        if pending.len() >= 500 {
            for c in pending.drain(..) {
                assert!(c.await.expect("confirm").is_ack());
            }
        }
    }
    for c in pending {
        assert!(c.await.expect("confirm").is_ack());
    }
    let _ = ch.close(200, "filled".into()).await;
}

/// Every id `{prefix}-0..n` is in `queues`; returns the number of copies in all.
async fn count_ids(conn: &lapin::Connection, queues: &[&str], prefix: &str, n: u32) -> usize {
    let mut seen = HashSet::new();
    let mut copies = 0;
    for q in queues {
        let depth = amqp_depth(conn, q).await as usize;
        let ms = read_all(conn, q, depth).await;
        copies += ms.len();
        seen.extend(message_ids(&ms));
    }
    let missing: Vec<String> = (0..n)
        .map(|i| format!("{prefix}-{i}"))
        .filter(|id| !seen.contains(id))
        .collect();
    assert!(
        missing.is_empty(),
        "{} messages lost, e.g. {:?}",
        missing.len(),
        &missing[..missing.len().min(5)]
    );
    copies
}

/// A running warren whose stdout lines are collected as they come.
struct Live {
    child: tokio::process::Child,
    lines: Arc<Mutex<Vec<String>>>,
    started: Instant,
}

impl Live {
    fn spawn(mut cmd: tokio::process::Command) -> Live {
        let mut child = cmd.stdout(Stdio::piped()).spawn().expect("spawn warren");
        let out = child.stdout.take().expect("stdout");
        let lines = Arc::new(Mutex::new(Vec::new()));
        let sink = lines.clone();
        tokio::spawn(async move {
            let mut r = tokio::io::BufReader::new(out).lines();
            while let Ok(Some(l)) = r.next_line().await {
                if let Ok(mut v) = sink.lock() {
                    v.push(l);
                }
            }
        });
        Live {
            child,
            lines,
            started: Instant::now(),
        }
    }

    fn events(&self, name: &str) -> Vec<Value> {
        self.lines
            .lock()
            .map(|v| v.clone())
            .unwrap_or_default()
            .iter()
            .filter_map(|l| serde_json::from_str::<Value>(l).ok())
            .filter(|v| v["event"] == name)
            .collect()
    }

    async fn wait_event(&self, name: &str, within: Duration) -> bool {
        let until = Instant::now() + within;
        while Instant::now() < until {
            if !self.events(name).is_empty() {
                return true;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        false
    }

    fn signal(&self, sig: &str) {
        let pid = self.child.id().expect("running").to_string();
        let ok = std::process::Command::new("kill")
            .args([&format!("-{sig}"), &pid])
            .status()
            .expect("kill");
        assert!(ok.success());
    }

    /// Waits for the exit (at most `within`, else the test fails).
    async fn finish(mut self, within: Duration) -> Run {
        let status = tokio::time::timeout(within, self.child.wait()).await;
        let elapsed = self.started.elapsed();
        let status = match status {
            Ok(s) => s.expect("wait"),
            Err(_) => {
                let _ = self.child.kill().await;
                panic!("warren did not exit within {within:?}");
            }
        };
        tokio::time::sleep(Duration::from_millis(200)).await;
        let mut stderr = String::new();
        if let Some(mut e) = self.child.stderr.take() {
            use tokio::io::AsyncReadExt;
            let _ = e.read_to_string(&mut stderr).await;
        }
        Run {
            code: status.code(),
            stdout: self.lines.lock().map(|v| v.join("\n")).unwrap_or_default(),
            stderr,
            elapsed,
        }
    }
}

/// A stall: a target that rejects publishes beyond its length (`x-overflow reject-publish`), so
/// nearly every publish is nacked and held. The run must not call that "the queue is empty",
/// must not exit 0, and must leave every message in the DLQ or the target.
#[tokio::test]
async fn a_target_that_nacks_is_not_reported_as_empty() {
    const N: u32 = 2_000;
    let vhost = TestVhost::new(&TestBroker::default_broker(), "trust-nack").await;
    let home = Home::new("trust-nack");
    let conn = h::connect(&vhost).await;
    let ch = h::confirm_channel(&conn).await;
    h::declare(&ch, "dlq", QueueType::Classic, FieldTable::default()).await;
    let mut args = FieldTable::default();
    args.insert("x-max-length".into(), AMQPValue::LongInt(10));
    args.insert(
        "x-overflow".into(),
        AMQPValue::LongString("reject-publish".into()),
    );
    h::declare(&ch, "work", QueueType::Classic, args).await;
    fill(&conn, "dlq", "n", N).await;

    let run = replay_util::warren(
        &vhost,
        &home,
        &[
            "replay", "dlq", "--to", "work", "--yes", "--json", "--window", "5000",
        ],
    )
    .await;
    let stop = run.event("summary")["stop"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    assert!(!stop.contains("empty"), "{run}");
    assert_eq!(run.code, Some(1), "{run}");
    assert_eq!(run.summary_u64("moved"), 10, "{run}");
    assert_eq!(run.summary_u64("failed"), u64::from(N) - 10, "{run}");
    let audit = replay_util::warren(&vhost, &home, &["audit", "--json"]).await;
    let rec = audit.json().into_iter().next().expect("an audit record");
    let outcome = rec["outcome"].as_str().unwrap_or_default();
    assert!(outcome.starts_with("partial"), "{rec}");
    assert_eq!(amqp_depth(&conn, "work").await, 10);
    let copies = count_ids(&conn, &["dlq", "work"], "n", N).await;
    assert_eq!(copies, N as usize, "no duplicates, nothing lost");
    vhost.cleanup().await;
}

fn cluster_node(n: u16) -> TestBroker {
    TestBroker {
        label: format!("cluster c{n}"),
        amqp_port: 5680 + n,
        mgmt_port: 15680 + n,
        host: "127.0.0.1".into(),
    }
}

async fn cluster_up() -> bool {
    let up = || async {
        reqwest::Client::new()
            .get("http://127.0.0.1:15681/api/overview")
            .basic_auth("guest", Some("guest"))
            .timeout(Duration::from_secs(3))
            .send()
            .await
            .is_ok_and(|r| r.status().is_success())
    };
    if up().await {
        return true;
    }
    if std::env::var("CI").as_deref() == Ok("true") {
        let st = tokio::process::Command::new(CLUSTER)
            .arg("up")
            .status()
            .await
            .unwrap_or_else(|e| panic!("CI=true: {CLUSTER} up failed to run: {e}"));
        assert!(st.success(), "CI=true: {CLUSTER} up failed");
        assert!(up().await, "CI=true: the cluster did not come up");
        return true;
    }
    eprintln!("skipped: the test cluster is not running (start it with {CLUSTER} up)");
    false
}

async fn cluster(args: &[&str]) {
    let st = tokio::process::Command::new(CLUSTER)
        .args(args)
        .status()
        .await
        .expect("cluster.sh");
    assert!(st.success(), "cluster.sh {args:?}");
}

/// A context with the three nodes' URLs, node 1 first.
fn cluster_command(vhost: &TestVhost, home: &Home, args: &[&str]) -> tokio::process::Command {
    let v = common::enc(&vhost.name);
    let amqp: Vec<String> = (1..=3)
        .map(|n| format!("\"amqp://127.0.0.1:{}/{v}\"", 5680 + n))
        .collect();
    let mgmt: Vec<String> = (1..=3)
        .map(|n| format!("\"http://127.0.0.1:{}\"", 15680 + n))
        .collect();
    let config = format!(
        "default_context = \"cluster\"\n[contexts.cluster]\namqp_urls = [{}]\nmanagement_urls = [{}]\nvhost = \"{}\"\nusername = \"guest\"\npassword_env = \"WARREN_TEST_CLUSTER_PASSWORD\"\n",
        amqp.join(", "),
        mgmt.join(", "),
        vhost.name
    );
    let path = home.dir.join("cluster.toml");
    std::fs::write(&path, config).expect("config");
    let mut c = tokio::process::Command::new(env!("CARGO_BIN_EXE_warren"));
    c.arg("--config")
        .arg(&path)
        .args(args)
        .env("WARREN_STORE", home.store())
        .env("WARREN_LOG_DIR", home.dir.join("logs"))
        .env("WARREN_TEST_CLUSTER_PASSWORD", "guest")
        .env_remove("WARREN_CONTEXT")
        .env_remove("WARREN_AMQP_URL")
        .env_remove("WARREN_MANAGEMENT_URL")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    c
}

/// Under a memory alarm publishes are blocked: Warren says so as it happens, and a signal ends
/// the run within seconds, settled: every message still in the DLQ or the target, the audit
/// "cancelled" with its counts, exit 1 (selected messages were left behind).
#[tokio::test]
async fn memory_alarm_is_reported_and_signals_settle_within_seconds() {
    if !cluster_up().await {
        return;
    }
    const N: u32 = 3_000;
    let vhost = TestVhost::new(&cluster_node(1), "trust-alarm").await;
    let home = Home::new("trust-alarm");
    let conn = h::connect(&vhost).await;
    let ch = h::confirm_channel(&conn).await;
    h::declare(&ch, "dlq", QueueType::Classic, FieldTable::default()).await;
    h::declare(&ch, "work", QueueType::Classic, FieldTable::default()).await;
    fill(&conn, "dlq", "a", N).await;

    // Duplicates add up over the rounds (the ids are counted in both queues each time).
    let mut reported = 0;
    for sig in ["INT", "TERM"] {
        cluster(&["alarm", "1", "on"]).await;
        let live = Live::spawn(cluster_command(
            &vhost,
            &home,
            &["replay", "dlq", "--to", "work", "--yes", "--json"],
        ));
        let blocked = live.wait_event("blocked", Duration::from_secs(30)).await;
        if !blocked {
            cluster(&["alarm", "1", "off"]).await;
            let run = live.finish(Duration::from_secs(60)).await;
            panic!("no blocked event within 30 s: {run}");
        }
        let asked = Instant::now();
        live.signal(sig);
        let run = live.finish(Duration::from_secs(20)).await;
        let took = asked.elapsed();
        cluster(&["alarm", "1", "off"]).await;
        eprintln!("SIG{sig}: exited {:?} {took:?} after the signal", run.code);
        assert!(
            took < Duration::from_secs(15),
            "SIG{sig} took {took:?}: {run}"
        );
        assert_eq!(run.code, Some(1), "SIG{sig}: {run}");
        let stop = run.event("summary")["stop"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        assert!(stop.contains("cancelled"), "SIG{sig}: {run}");
        let audit = replay_util::warren(&vhost, &home, &["audit", "--json"]).await;
        let rec = audit.json().into_iter().next().expect("an audit record");
        assert_eq!(rec["outcome"], "cancelled", "SIG{sig}: {rec}");
        assert_eq!(rec["moved"], run.summary_u64("moved"), "{rec}");
        assert!(rec["duplicated"].is_u64(), "{rec}");
        // Nothing lost; the DLQ and the target hold every message, duplicates ≤ reported.
        tokio::time::sleep(Duration::from_secs(1)).await;
        let copies = count_ids(&conn, &["dlq", "work"], "a", N).await;
        let dups = (copies - N as usize) as u64;
        reported += run.summary_u64("duplicated");
        eprintln!("SIG{sig}: {dups} duplicates so far, {reported} reported so far");
        assert!(
            dups <= reported,
            "SIG{sig}: {dups} duplicates, reported {reported} in all: {run}"
        );
    }
    vhost.cleanup().await;
}

/// The node Warren is connected to freezes mid-run (sockets open, nothing answers): Warren stops
/// within its deadlines with a reason and a non-zero code; after the node thaws, every message
/// is in the DLQ or the target and the duplicates reported are at least the real ones.
#[tokio::test]
async fn a_frozen_node_stops_the_run_cleanly_within_the_deadline() {
    if !cluster_up().await {
        return;
    }
    const N: u32 = 3_000;
    let vhost = TestVhost::new(&cluster_node(1), "trust-freeze").await;
    let home = Home::new("trust-freeze");
    let conn = h::connect(&vhost).await;
    let ch = h::confirm_channel(&conn).await;
    h::declare(&ch, "dlq", QueueType::Classic, FieldTable::default()).await;
    h::declare(&ch, "work", QueueType::Classic, FieldTable::default()).await;
    fill(&conn, "dlq", "f", N).await;
    let _ = ch.close(200, "set up".into()).await;
    let _ = conn.close(200, "set up".into()).await;

    let live = Live::spawn(cluster_command(
        &vhost,
        &home,
        &[
            "replay", "dlq", "--to", "work", "--yes", "--json", "--rate", "300",
        ],
    ));
    assert!(live.wait_event("progress", Duration::from_secs(30)).await);
    tokio::time::sleep(Duration::from_secs(2)).await;
    cluster(&["freeze", "1"]).await;
    let frozen = Instant::now();
    let run = live.finish(Duration::from_secs(90)).await;
    let took = frozen.elapsed();
    cluster(&["thaw", "1"]).await;
    eprintln!(
        "frozen node: exited {:?} {took:?} after the freeze",
        run.code
    );
    assert!(took < Duration::from_secs(60), "took {took:?}: {run}");
    assert_ne!(run.code, Some(0), "{run}");
    let summary = run.event("summary");
    let stop = summary["stop"].as_str().unwrap_or_default();
    assert!(!stop.contains("empty") && !stop.is_empty(), "{run}");
    let reported = summary["duplicated"].as_u64().unwrap_or(0);

    // Let the thawed node notice the dead connections and requeue their deliveries.
    let conn = h::connect(&vhost).await;
    let mut copies = 0;
    for _ in 0..30 {
        let unacked = vhost
            .get_json(&format!("/api/queues/{}/dlq", common::enc(&vhost.name)))
            .await["messages_unacknowledged"]
            .as_u64()
            .unwrap_or(1);
        if unacked == 0 {
            copies = count_ids(&conn, &["dlq", "work"], "f", N).await;
            break;
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    assert!(
        copies >= N as usize,
        "could not count after the thaw: {run}"
    );
    let dups = (copies - N as usize) as u64;
    eprintln!("frozen node: {dups} duplicates, {reported} reported");
    assert!(
        dups <= reported,
        "{dups} duplicates, reported {reported}: {run}"
    );
    vhost.cleanup().await;
}
