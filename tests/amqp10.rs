//! RabbitMQ 4's own protocol: dead letters made by a real AMQP 1.0 client (python-qpid-proton,
//! the engine under RabbitMQ's Python AMQP 1.0 client) on 4.0 and 4.3, read by the real binary.
//!
//! - Messages published over AMQP 1.0 (ulong, uuid and binary message-ids; amqp-value,
//!   amqp-sequence and data bodies) into a quorum queue with a dead-letter exchange; the
//!   consumer settles three `modified` (`delivery-failed`, `undeliverable-here`) with different
//!   `x-opt-exception` / `x-opt-dead-letter-reason` annotations and rejects one. `show` and
//!   `groups` then give three exception groups with the annotated texts, no `amqp-1.0` type,
//!   decoded bodies and every message's id (none a content hash).
//! - A quorum queue dead-lettering at least once through an exchange bound to nothing holds its
//!   rejected messages: `warren queues --json` lists it as stuck, with the count and why.
//!
//! 3.10 speaks AMQP 1.0 only through a plugin with other semantics: skipped there.

use crate::common;
use crate::framework_util;
use crate::replay_util;

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use common::{TestBroker, TestVhost, enc};
use framework_util::{python_venv, wait_for};
use replay_util::{Home, warren};
use serde_json::{Value, json};

pub(crate) const PROTON: &str = "python-qpid-proton==0.40.0";

/// Publishes four messages to `/queues/work` over AMQP 1.0, then consumes them and settles
/// each by its id: three `modified` with annotations, one `rejected`. Exits 0 when done.
const CLIENT: &str = r#"
import sys, uuid
from proton import Message, Disposition, symbol, ulong
from proton.utils import BlockingConnection

url, vhost = sys.argv[1], sys.argv[2]
conn = BlockingConnection(url, virtual_host="vhost:" + vhost, timeout=30)
sender = conn.create_sender("/queues/work")
sender.send(Message(id=ulong(42), body="hello text", inferred=False))
sender.send(Message(id=uuid.UUID("0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0"),
                    body={"order": 17, "sku": "A-1"}, inferred=False))
sender.send(Message(id=b"\x01\x02bin", body=[1, "two"], inferred=True))
sender.send(Message(id="plain-id", body=b'{"raw": "data"}', inferred=True))
failures = [
    {"x-opt-exception": "ValueError: bad price", "x-opt-dead-letter-reason": "price below zero"},
    {"x-opt-exception": "KeyError: unknown sku"},
    {"x-opt-dead-letter-reason": "carrier timeout"},
    None,
]
receiver = conn.create_receiver("/queues/work", credit=10)
for annotations in failures:
    receiver.receive(timeout=30)
    delivery = receiver.fetcher.unsettled.popleft()
    if annotations is None:
        delivery.update(Disposition.REJECTED)
    else:
        # What RabbitMQ's client's discard_with_annotations sends.
        delivery.local.annotations = {symbol(k): v for k, v in annotations.items()}
        delivery.local.failed = True
        delivery.local.undeliverable = True
        delivery.update(Disposition.MODIFIED)
    delivery.settle()
conn.close()
print("done")
"#;

/// Publishes `n` messages to `/queues/QUEUE` over AMQP 1.0 and rejects each.
const REJECTER: &str = r#"
import sys
from proton import Message, Disposition
from proton.utils import BlockingConnection

url, vhost, queue, n = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
conn = BlockingConnection(url, virtual_host="vhost:" + vhost, timeout=30)
sender = conn.create_sender("/queues/" + queue)
for i in range(n):
    sender.send(Message(id="m-%d" % i, body=b"payload %d" % i))
receiver = conn.create_receiver("/queues/" + queue, credit=n)
for _ in range(n):
    receiver.receive(timeout=30)
    d = receiver.fetcher.unsettled.popleft()
    d.update(Disposition.REJECTED)
    d.settle()
conn.close()
print("done")
"#;

/// The brokers that speak AMQP 1.0 natively; 3.10 is skipped with a reason.
pub(crate) fn amqp10_brokers() -> Vec<TestBroker> {
    TestBroker::all()
        .into_iter()
        .filter(|b| {
            let native = b.label != "3.10";
            if !native {
                eprintln!(
                    "SKIPPED on RabbitMQ {}: AMQP 1.0 is native from 4.0 on",
                    b.label
                );
            }
            native
        })
        .collect()
}

/// Runs a client script to completion (at most 90 s; killed by its PID when dropped).
pub(crate) async fn run_python(python: &Path, dir: &Path, script: &str, args: &[String]) -> String {
    let file = dir.join("client.py");
    std::fs::write(&file, script).expect("write client");
    let child = tokio::process::Command::new(python)
        .arg(&file)
        .args(args)
        .env("PYTHONDONTWRITEBYTECODE", "1")
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("start python");
    let out = tokio::time::timeout(Duration::from_secs(90), child.wait_with_output())
        .await
        .expect("the AMQP 1.0 client finished within 90 s")
        .expect("client output");
    assert!(
        out.status.success() && String::from_utf8_lossy(&out.stdout).contains("done"),
        "client failed: {}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

pub(crate) fn amqp10_url(b: &TestBroker) -> String {
    format!("amqp://guest:guest@{}:{}", b.host, b.amqp_port)
}

pub(crate) async fn put(vh: &TestVhost, path: &str, body: Value) {
    let r = vh.api(reqwest::Method::PUT, path, Some(body)).await;
    assert!(r.status().is_success(), "PUT {path}: {}", r.status());
}

/// Waits until the management API reports `field` of `queue` as `n`.
pub(crate) async fn wait_for_count(vh: &TestVhost, queue: &str, field: &str, n: u64) {
    let path = format!("/api/queues/{}/{}", enc(&vh.name), enc(queue));
    let seen = wait_for(Duration::from_secs(30), || async {
        let v = vh.get_json(&path).await;
        (v.get(field).and_then(Value::as_u64) == Some(n)).then_some(())
    })
    .await;
    assert!(seen.is_some(), "{queue}: {field} never reached {n}");
}

#[tokio::test]
async fn amqp10_dead_letters_are_explained_grouped_decoded_and_identified() {
    let Some(python) = python_venv("amqp10-proton", &[PROTON]) else {
        return;
    };
    for broker in amqp10_brokers() {
        let vh = TestVhost::new(&broker, "amqp10").await;
        let v = enc(&vh.name);
        put(
            &vh,
            &format!("/api/exchanges/{v}/dlx"),
            json!({"type": "fanout"}),
        )
        .await;
        put(
            &vh,
            &format!("/api/queues/{v}/dlq"),
            json!({"durable": true}),
        )
        .await;
        let r = vh
            .api(
                reqwest::Method::POST,
                &format!("/api/bindings/{v}/e/dlx/q/dlq"),
                Some(json!({"routing_key": ""})),
            )
            .await;
        assert!(r.status().is_success(), "bind: {}", r.status());
        put(
            &vh,
            &format!("/api/queues/{v}/work"),
            json!({"durable": true, "arguments": {"x-queue-type": "quorum", "x-dead-letter-exchange": "dlx"}}),
        )
        .await;
        let dir = tempdir(&vh.name);
        run_python(
            &python,
            &dir,
            CLIENT,
            &[amqp10_url(&broker), vh.name.clone()],
        )
        .await;
        wait_for_count(&vh, "dlq", "messages", 4).await;

        let home = Home::new("amqp10");
        let label = &broker.label;
        let show = warren(&vh, &home, &["show", "dlq", "--json"]).await;
        assert_eq!(show.code, Some(0), "{label}: {show}");
        let shown = show.json();
        assert_eq!(shown.len(), 4, "{label}: {show}");
        let by_id: BTreeMap<String, &Value> = shown
            .iter()
            .map(|m| (m["id"].as_str().unwrap_or_default().to_string(), m))
            .collect();
        let ids: Vec<&str> = by_id.keys().map(String::as_str).collect();
        assert_eq!(
            ids,
            [
                "0x010262696e",
                "42",
                "plain-id",
                "urn:uuid:0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0"
            ],
            "{label}: every id counted, the binary one from x-message-id"
        );
        assert!(
            shown
                .iter()
                .all(|m| !m["key"].as_str().unwrap_or("hash:").starts_with("hash:")),
            "{label}: no content hash: {show}"
        );
        let value = by_id["42"];
        assert_eq!(value["exception"]["type"], "ValueError", "{label}: {value}");
        assert_eq!(
            value["exception"]["message"],
            "bad price (price below zero)"
        );
        assert_eq!(value["body"]["decoded_from"], "AMQP 1.0 amqp-value");
        assert_eq!(value["body"]["text"], "hello text");
        assert_eq!(
            value["message_type"],
            Value::Null,
            "{label}: the marker is no type"
        );
        let map = by_id["urn:uuid:0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0"];
        assert_eq!(map["exception"]["type"], "KeyError");
        assert_eq!(map["body"]["format"], "JSON");
        let text = map["body"]["text"].as_str().unwrap_or_default();
        assert!(
            text.contains("\"order\": 17") && text.contains("\"A-1\""),
            "{text}"
        );
        let seq = by_id["0x010262696e"];
        assert_eq!(seq["exception"]["type"], "carrier timeout");
        assert_eq!(seq["body"]["decoded_from"], "AMQP 1.0 amqp-sequence");
        assert!(
            seq["body"]["text"]
                .as_str()
                .unwrap_or_default()
                .contains("\"two\"")
        );
        let data = by_id["plain-id"];
        assert_eq!(data["exception"], Value::Null);
        assert_eq!(data["body"]["decoded_from"], Value::Null);

        let groups = warren(
            &vh,
            &home,
            &["groups", "dlq", "--by", "exception", "--json"],
        )
        .await;
        assert_eq!(groups.code, Some(0), "{label}: {groups}");
        let values: BTreeMap<String, u64> = groups
            .json()
            .iter()
            .map(|g| {
                (
                    g["value"].as_str().unwrap_or_default().to_string(),
                    g["count"].as_u64().unwrap_or(0),
                )
            })
            .collect();
        let want: BTreeMap<String, u64> = [
            ("", 1),
            ("KeyError", 1),
            ("ValueError", 1),
            ("carrier timeout", 1),
        ]
        .into_iter()
        .map(|(k, n)| (k.to_string(), n))
        .collect();
        assert_eq!(values, want, "{label}: {groups}");

        let types = warren(&vh, &home, &["groups", "dlq", "--by", "type", "--json"]).await;
        assert_eq!(types.code, Some(0), "{label}: {types}");
        let type_groups = types.json();
        assert!(
            type_groups.iter().all(|g| g["value"] != "amqp-1.0"),
            "{label}: the marker made a type group: {types}"
        );
        let total: u64 = type_groups.iter().filter_map(|g| g["count"].as_u64()).sum();
        assert_eq!(total, 4, "{label}: {types}");
        let _ = std::fs::remove_dir_all(&dir);
        vh.cleanup().await;
    }
}

#[tokio::test]
async fn amqp10_at_least_once_dead_letters_with_no_route_are_listed_as_stuck() {
    let Some(python) = python_venv("amqp10-proton", &[PROTON]) else {
        return;
    };
    for broker in amqp10_brokers() {
        let vh = TestVhost::new(&broker, "amqp10-stuck").await;
        let v = enc(&vh.name);
        // A dead-letter exchange bound to no queue.
        put(
            &vh,
            &format!("/api/exchanges/{v}/nowhere"),
            json!({"type": "direct"}),
        )
        .await;
        put(
            &vh,
            &format!("/api/queues/{v}/payments"),
            json!({"durable": true, "arguments": {
                "x-queue-type": "quorum",
                "x-dead-letter-exchange": "nowhere",
                "x-dead-letter-strategy": "at-least-once",
                "x-overflow": "reject-publish"
            }}),
        )
        .await;
        let dir = tempdir(&vh.name);
        run_python(
            &python,
            &dir,
            REJECTER,
            &[
                amqp10_url(&broker),
                vh.name.clone(),
                "payments".into(),
                "3".into(),
            ],
        )
        .await;
        wait_for_count(&vh, "payments", "messages_dlx", 3).await;

        let home = Home::new("amqp10-stuck");
        let label = &broker.label;
        let run = warren(&vh, &home, &["queues", "--json"]).await;
        assert_eq!(run.code, Some(0), "{label}: {run}");
        let stuck: Vec<Value> = run
            .json()
            .into_iter()
            .filter(|q| q["kind"] == "stuck")
            .collect();
        assert_eq!(stuck.len(), 1, "{label}: {run}");
        let s = &stuck[0];
        assert_eq!(s["name"], "payments", "{label}: {s}");
        assert_eq!(s["stuck_dead_letters"], 3, "{label}: {s}");
        assert_eq!(s["why"], "no_route", "{label}: {s}");
        assert_eq!(s["dead_letter_exchange"], "nowhere");
        assert!(
            s["why_text"]
                .as_str()
                .unwrap_or_default()
                .contains("no binding"),
            "{label}: {s}"
        );
        let text = warren(&vh, &home, &["queues"]).await;
        assert!(
            text.stdout.contains("payments") && text.stdout.contains("3 dead letters held here"),
            "{label}: {text}"
        );
        let _ = std::fs::remove_dir_all(&dir);
        vh.cleanup().await;
    }
}

pub(crate) fn tempdir(name: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("warren-{name}"));
    std::fs::create_dir_all(&dir).expect("temp dir");
    dir
}
