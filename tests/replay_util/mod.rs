//! Helpers for the replay tests: run the real `warren` binary against a test vhost with its own
//! store, config and log directory, read its JSON lines, and read queues back (every message,
//! without settling any) to check that nothing was lost.
#![allow(dead_code)]

use std::collections::HashSet;
use std::path::PathBuf;
use std::process::Stdio;
use std::time::{Duration, Instant};

use futures_util::StreamExt;
use lapin::options::{BasicConsumeOptions, BasicPublishOptions, BasicQosOptions};
use lapin::types::FieldTable;
use serde_json::Value;
use warren::broker::amqp::dead_letter_from_delivery;
use warren::domain::message::{DeadLetter, Properties};
use warren::domain::value::{HeaderValue, Table};

use crate::common::{TestVhost, unique};

/// A private working directory for one warren invocation series: store, logs, empty config.
pub struct Home {
    pub dir: PathBuf,
}

impl Home {
    pub fn new(prefix: &str) -> Home {
        let dir = std::env::temp_dir().join(unique(&format!("warren-{prefix}")));
        std::fs::create_dir_all(dir.join("logs")).expect("temp dir");
        std::fs::write(dir.join("config.toml"), "").expect("empty config");
        Home { dir }
    }

    pub fn store(&self) -> PathBuf {
        self.dir.join("warren.db")
    }
}

impl Drop for Home {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// The binary with the vhost's URLs, the private store/config/logs and stdin closed (so it is
/// never a terminal).
pub fn command(vhost: &TestVhost, home: &Home, args: &[&str]) -> tokio::process::Command {
    let amqp = vhost.amqp_url();
    let mgmt = vhost.broker.mgmt_url_with_creds();
    let mut full = vec![
        "--amqp-url",
        amqp.as_str(),
        "--management-url",
        mgmt.as_str(),
        "--vhost",
        vhost.name.as_str(),
    ];
    full.extend_from_slice(args);
    bare_command(home, &full)
}

/// The binary under test: `WARREN_TEST_BIN` when set (a copy of a build, which another build
/// into a shared target directory cannot replace while the tests run), else Cargo's.
pub fn bin() -> PathBuf {
    std::env::var_os("WARREN_TEST_BIN")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_BIN_EXE_warren")))
}

/// The binary with exactly these arguments (no URLs added), the private store/config/logs and
/// stdin closed.
pub fn bare_command(home: &Home, args: &[&str]) -> tokio::process::Command {
    let mut cmd = tokio::process::Command::new(bin());
    cmd.arg("--config")
        .arg(home.dir.join("config.toml"))
        .args(args)
        .env("WARREN_STORE", home.store())
        .env("WARREN_LOG_DIR", home.dir.join("logs"))
        .env_remove("WARREN_CONTEXT")
        .env_remove("WARREN_AMQP_URL")
        .env_remove("WARREN_MANAGEMENT_URL")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    cmd
}

/// What one run of the binary produced.
#[derive(Debug)]
pub struct Run {
    pub code: Option<i32>,
    pub stdout: String,
    pub stderr: String,
    pub elapsed: Duration,
}

impl Run {
    /// The JSON lines on stdout.
    pub fn json(&self) -> Vec<Value> {
        self.stdout
            .lines()
            .filter_map(|l| serde_json::from_str(l).ok())
            .collect()
    }

    /// The JSON line whose `event` is `name` (the last one).
    pub fn event(&self, name: &str) -> Value {
        self.json()
            .into_iter()
            .rev()
            .find(|v| v.get("event").and_then(Value::as_str) == Some(name))
            .unwrap_or_else(|| panic!("no {name} event in output:\n{self}"))
    }

    pub fn summary_u64(&self, field: &str) -> u64 {
        self.event("summary")
            .get(field)
            .and_then(Value::as_u64)
            .unwrap_or_else(|| panic!("summary has no {field}:\n{self}"))
    }
}

impl std::fmt::Display for Run {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "exit {:?} after {:?}\n--- stdout\n{}\n--- stderr\n{}",
            self.code, self.elapsed, self.stdout, self.stderr
        )
    }
}

/// Runs warren to completion (at most two minutes).
pub async fn warren(vhost: &TestVhost, home: &Home, args: &[&str]) -> Run {
    run(command(vhost, home, args), args).await
}

/// Runs a prepared command to completion (at most two minutes).
pub async fn run(mut cmd: tokio::process::Command, args: &[&str]) -> Run {
    let start = Instant::now();
    let child = cmd.spawn().expect("spawn warren");
    let out = tokio::time::timeout(Duration::from_secs(120), child.wait_with_output())
        .await
        .unwrap_or_else(|_| panic!("warren {args:?} did not finish within 2 minutes"))
        .expect("warren output");
    Run {
        code: out.status.code(),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        elapsed: start.elapsed(),
    }
}

/// Every message in `queue` (at most `n`), read by a consumer that settles nothing; closing
/// the channel hands them all back in order.
pub async fn read_all(conn: &lapin::Connection, queue: &str, n: usize) -> Vec<DeadLetter> {
    // What the queue holds now is waited for patiently (a loaded broker or a deep header can take
    // seconds per message); anything beyond it only briefly, since nothing should be arriving.
    let ready = crate::common::amqp::amqp_depth(conn, queue).await as usize;
    let expected = ready.min(n);
    let ch = conn.create_channel().await.expect("channel");
    // An explicit prefetch: a quorum queue caps an unlimited one (0) at 2,000 deliveries.
    ch.basic_qos(u16::MAX, BasicQosOptions::default())
        .await
        .expect("qos");
    let mut consumer = ch
        .basic_consume(
            queue.into(),
            unique("test-read-all").as_str().into(),
            BasicConsumeOptions::default(),
            FieldTable::default(),
        )
        .await
        .expect("consume");
    let mut out = Vec::new();
    while out.len() < n {
        let wait = if out.len() < expected {
            Duration::from_secs(20)
        } else {
            Duration::from_millis(500)
        };
        match tokio::time::timeout(wait, consumer.next()).await {
            Ok(Some(Ok(d))) => {
                let pos = out.len() as u64;
                out.push(dead_letter_from_delivery(queue, pos, d, usize::MAX));
            }
            _ => break,
        }
    }
    let _ = ch.close(200, "read".into()).await;
    out
}

/// Each message's id, in order.
pub fn message_ids(ms: &[DeadLetter]) -> Vec<String> {
    ms.iter()
        .map(|m| m.properties.message_id.clone().unwrap_or_default())
        .collect()
}

/// Polls until `f` holds or `timeout` passes; returns whether it held (`common::wait::holds`).
pub async fn eventually<F, Fut>(timeout: Duration, f: F) -> bool
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    crate::common::wait::holds(timeout, f).await
}

/// One message to dead-letter: properties, headers, body.
pub type Msg = (
    warren::domain::message::Properties,
    warren::domain::value::Table,
    Vec<u8>,
);

/// Publishes `msgs` to `work` (declared here, dead-lettering into `dlq`, which must exist) and
/// rejects each one with `basic.get` + `basic.reject(requeue=false)`, in order, so the broker
/// writes `x-death` and the DLQ holds them in the order given.
pub async fn dead_letter(conn: &lapin::Connection, work: &str, dlq: &str, msgs: &[Msg]) {
    use crate::common::amqp as h;
    use warren::domain::features::QueueType;
    let ch = h::confirm_channel(conn).await;
    h::declare(&ch, work, QueueType::Classic, h::dead_letter_to(dlq)).await;
    let before = h::amqp_depth(conn, dlq).await;
    for (p, headers, body) in msgs {
        h::publish(&ch, work, p, headers, body).await;
    }
    reject_all(conn, work, msgs.len()).await;
    h::wait_for_depth(
        conn,
        dlq,
        before + msgs.len() as u64,
        Duration::from_secs(20),
    )
    .await;
    let _ = ch.close(200, "ok".into()).await;
}

/// Takes `n` messages from `queue` one at a time and rejects them without requeue.
pub async fn reject_all(conn: &lapin::Connection, queue: &str, n: usize) {
    use lapin::options::{BasicGetOptions, BasicRejectOptions};
    use std::sync::atomic::{AtomicUsize, Ordering};
    let ch = conn.create_channel().await.expect("channel");
    let done = AtomicUsize::new(0);
    crate::common::wait::until_ok(
        &format!("{n} messages in {queue} to reject"),
        Duration::from_secs(30),
        || async {
            while done.load(Ordering::Relaxed) < n {
                match ch
                    .basic_get(queue.into(), BasicGetOptions::default())
                    .await
                    .expect("basic.get")
                {
                    Some(m) => {
                        m.delivery
                            .reject(BasicRejectOptions { requeue: false })
                            .await
                            .expect("reject");
                        done.fetch_add(1, Ordering::Relaxed);
                    }
                    None => {
                        let done = done.load(Ordering::Relaxed);
                        return Err(format!("only {done} of {n} messages reached {queue}"));
                    }
                }
            }
            Ok(())
        },
    )
    .await;
    let _ = ch.close(200, "ok".into()).await;
}

/// A plain message: id `{prefix}-{i}`, header `seq` = i plus `extra`, body `{prefix} body {i}`.
pub fn simple(prefix: &str, i: u32, extra: &[(&str, &str)]) -> Msg {
    use warren::domain::value::{HeaderValue, Table};
    let mut h = Table::new();
    h.insert("seq", HeaderValue::I32(i as i32));
    for (k, v) in extra {
        h.insert(*k, HeaderValue::string(*v));
    }
    let p = warren::domain::message::Properties {
        message_id: Some(format!("{prefix}-{i}")),
        delivery_mode: Some(2),
        ..Default::default()
    };
    (p, h, format!("{prefix} body {i}").into_bytes())
}

/// Fills `queue` with `n` messages (id `{prefix}-{i}`, 256-byte body), confirms pipelined.
pub async fn fill(conn: &lapin::Connection, queue: &str, prefix: &str, n: u32) {
    let ch = crate::common::amqp::confirm_channel(conn).await;
    let mut pending = Vec::new();
    for i in 0..n {
        let mut hd = Table::new();
        hd.insert("seq", HeaderValue::I32(i as i32));
        let props = Properties {
            message_id: Some(format!("{prefix}-{i}")),
            delivery_mode: Some(2),
            ..Properties::default()
        };
        let props = warren::broker::amqp::properties_to_amqp(&props, &hd).expect("properties");
        let confirm = ch
            .basic_publish(
                "".into(),
                queue.into(),
                BasicPublishOptions::default(),
                &crate::common::amqp::binary_body(i, 256),
                props,
            )
            .await
            .expect("publish");
        pending.push(confirm);
        if pending.len() >= 1000 {
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

/// Every id `{prefix}-0..n` is in `queues` together; returns how many copies there are in all.
pub async fn assert_all_present(
    conn: &lapin::Connection,
    queues: &[&str],
    prefix: &str,
    n: u32,
) -> usize {
    let mut seen = HashSet::new();
    let mut copies = 0;
    for q in queues {
        let depth = crate::common::amqp::amqp_depth(conn, q).await as usize;
        let ms = read_all(conn, q, depth).await;
        assert_eq!(ms.len(), depth, "read all of {q}");
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

/// Every message of a stream from its first offset, until `want` were read or it is silent:
/// the first waited for patiently (a loaded 4.3 takes seconds to serve a stream's first chunk),
/// see `common::amqp::read_stream_expecting`.
pub async fn read_stream(conn: &lapin::Connection, stream: &str, want: usize) -> Vec<DeadLetter> {
    crate::common::amqp::read_stream_expecting(conn, stream, want.min(1), want).await
}
