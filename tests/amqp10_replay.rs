//! A replay of messages an AMQP 1.0 client published reaches an AMQP 1.0 consumer as they were
//! (issue 40): on 4.0 and 4.3, python-qpid-proton publishes five messages with every property
//! the 0.9.1 conversion changes (ulong, binary, uuid and string ids, a binary correlation-id,
//! `subject`, `to`, `group-sequence`, `reply-to-group-id`, `absolute-expiry-time`, timestamps in
//! milliseconds, application properties; amqp-value, amqp-sequence and data bodies) into a
//! quorum queue, fails each with `modified` and an `x-opt-exception` (noting each as it first
//! got it); `warren replay` moves them
//! back with its defaults; the consumer reads every one back and each field of the bare message
//! is compared with what was published, then fails each again: `show` links every one to the run. The replay's marks come as annotations, the failure's
//! annotation does not, and the DLQ is empty. The plan of a read (`--dry-run`) says why.

use crate::amqp10::{PROTON, amqp10_brokers, amqp10_url, put, run_python, tempdir, wait_for_count};
use crate::common::{TestVhost, enc};
use crate::framework_util::python_venv;
use crate::replay_util::{Home, warren};
use serde_json::{Value, json};

/// `fail`: publishes the five to `/queues/work` and fails each (`modified`), printing each
/// message's fields as a JSON line; `read`: consumes `/queues/work` and prints the same.
const CLIENT: &str = r#"
import sys, uuid, json
from proton import Message, Disposition, symbol, ulong
from proton.utils import BlockingConnection

url, vhost, mode = sys.argv[1], sys.argv[2], sys.argv[3]
conn = BlockingConnection(url, virtual_host="vhost:" + vhost, timeout=30)

def plain(v):
    if isinstance(v, memoryview):
        v = bytes(v)
    if isinstance(v, bytes):
        return "b:" + v.hex()
    if isinstance(v, (dict, list, uuid.UUID)) or v is None:
        return repr(v)
    return repr(v) + ":" + type(v).__name__

def fields(m):
    return {"id": plain(m.id), "correlation_id": plain(m.correlation_id), "subject": m.subject,
            "to": m.address, "group_id": m.group_id, "group_sequence": m.group_sequence,
            "reply_to_group_id": m.reply_to_group_id, "creation_time": m.creation_time,
            "expiry_time": m.expiry_time, "content_type": str(m.content_type),
            "properties": {k: plain(v) for k, v in (m.properties or {}).items()},
            "body": plain(m.body), "durable": m.durable,
            "annotations": sorted(str(k) for k in (m.annotations or {}))}

if mode == "fail":
    sent = [
        Message(id=ulong(42), correlation_id=b"\x01c", subject="price", address="/queues/work",
                group_id="orders", group_sequence=7, reply_to_group_id="rg",
                creation_time=1700000000.123, expiry_time=1900000000.5,
                body={"order": 17, "price": -2.5, "tags": [1, None]}, inferred=False,
                properties={"tenant": "acme", "attempt": 3}, content_type="application/json"),
        Message(id=b"\x00\x01bin", body=[1, "two"], inferred=True, durable=True),
        Message(id=uuid.UUID("0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0"), body=b"raw \x00 data",
                inferred=True, durable=True, subject="s"),
        Message(id="plain-id", body="text value", inferred=False, group_sequence=1),
        Message(id=ulong(7), body=b'{"json": true}', inferred=True, creation_time=1.001),
    ]
    s = conn.create_sender("/queues/work")
    for m in sent:
        s.send(m)
    r = conn.create_receiver("/queues/work", credit=len(sent))
    for i in range(len(sent)):
        # As the consumer first got it: the header is the broker's (4.0 reads a message
        # without one as durable, 4.2+ does not), the bare message the producer's.
        print(json.dumps(fields(r.receive(timeout=30))))
        d = r.fetcher.unsettled.popleft()
        d.local.annotations = {symbol("x-opt-exception"): "ValueError: %d" % i}
        d.local.failed = True
        d.local.undeliverable = True
        d.update(Disposition.MODIFIED)
        d.settle()
else:
    r = conn.create_receiver("/queues/work", credit=20)
    while True:
        try:
            m = r.receive(timeout=5)
        except Exception:
            break
        print(json.dumps(fields(m)))
        if mode == "read":
            r.accept()
        else:
            # "fail-again": the bug is not fixed; the same consumer fails it once more.
            d = r.fetcher.unsettled.popleft()
            d.local.annotations = {symbol("x-opt-exception"): "ValueError: again"}
            d.local.failed = True
            d.local.undeliverable = True
            d.update(Disposition.MODIFIED)
            d.settle()
conn.close()
print("done")
"#;

async fn client(python: &std::path::Path, vh: &TestVhost, url: &str, mode: &str) -> Vec<Value> {
    let dir = tempdir(&format!("{}-{mode}", vh.name));
    let out = run_python(
        python,
        &dir,
        CLIENT,
        &[url.to_string(), vh.name.clone(), mode.into()],
    )
    .await;
    out.lines()
        .filter(|l| l.starts_with('{'))
        .map(|l| serde_json::from_str(l).expect("a JSON line"))
        .collect()
}

/// The fields of the bare message (and durability), without the annotations.
fn bare(v: &Value) -> Value {
    let mut v = v.clone();
    v.as_object_mut().expect("an object").remove("annotations");
    v
}

#[tokio::test]
async fn amqp10_messages_replay_unchanged_to_an_amqp10_consumer() {
    let Some(python) = python_venv("amqp10-proton", &[PROTON]) else {
        return;
    };
    for broker in amqp10_brokers() {
        let label = broker.label.clone();
        let vh = TestVhost::new(&broker, "amqp10-replay").await;
        let v = enc(&vh.name);
        put(
            &vh,
            &format!("/api/queues/{v}/dlq"),
            json!({"durable": true}),
        )
        .await;
        put(
            &vh,
            &format!("/api/queues/{v}/work"),
            json!({"durable": true, "arguments": {"x-queue-type": "quorum",
                "x-dead-letter-exchange": "", "x-dead-letter-routing-key": "dlq"}}),
        )
        .await;
        let url = amqp10_url(&broker);
        let sent = client(&python, &vh, &url, "fail").await;
        assert_eq!(sent.len(), 5, "{label}");
        wait_for_count(&vh, "dlq", "messages", 5).await;

        let home = Home::new("amqp10-replay");
        let plan = warren(
            &vh,
            &home,
            &["replay", "dlq", "--dry-run", "--window", "10"],
        )
        .await;
        assert_eq!(plan.code, Some(0), "{label}: {plan}");
        assert!(
            plan.stderr
                .contains("over AMQP 1.0: 5 of 5 looked at came from AMQP 1.0 clients"),
            "{label}: the plan says why: {plan}"
        );
        let run = warren(&vh, &home, &["replay", "dlq", "--yes", "--json"]).await;
        assert_eq!(run.code, Some(0), "{label}: {run}");
        wait_for_count(&vh, "dlq", "messages", 0).await;
        wait_for_count(&vh, "work", "messages", 5).await;

        let back = client(&python, &vh, &url, "fail-again").await;
        assert_eq!(back.len(), 5, "{label}: every id came back once: {back:?}");
        for original in &sent {
            let id = &original["id"];
            let copies: Vec<&Value> = back.iter().filter(|b| &b["id"] == id).collect();
            assert_eq!(copies.len(), 1, "{label}: {id} came back once");
            assert_eq!(bare(copies[0]), bare(original), "{label}: {id} unchanged");
            let anns = copies[0]["annotations"].as_array().expect("annotations");
            let has = |k: &str| anns.iter().any(|a| a == k);
            assert!(
                has("x-opt-warren-replay-id"),
                "{label}: {id} marked: {anns:?}"
            );
            assert!(
                !has("x-opt-exception"),
                "{label}: {id} without the old failure"
            );
            assert!(
                !has("x-opt-deaths"),
                "{label}: {id} with its retry budget reset"
            );
        }
        // Failed again: each dead letter links itself to the run that replayed it, from the
        // marks the replay left as annotations (a 0.9.1 reader's `x-opt-warren-*` headers).
        wait_for_count(&vh, "dlq", "messages", 5).await;
        let run_id = run.event("started")["run_id"].clone();
        let show = warren(&vh, &home, &["show", "dlq", "--json"]).await;
        assert_eq!(show.code, Some(0), "{label}: {show}");
        let shown = show.json();
        assert_eq!(shown.len(), 5, "{label}: {show}");
        for m in &shown {
            assert_eq!(m["failed_again"]["run_id"], run_id, "{label}: {m}");
        }
        vh.cleanup().await;
    }
}

/// Publishes `n` messages (ulong ids 0..n) over AMQP 1.0 to `/queues/QUEUE`.
const FILL: &str = r#"
import sys
from proton import Message, ulong
from proton.utils import BlockingConnection
url, vhost, queue, n = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
conn = BlockingConnection(url, virtual_host="vhost:" + vhost, timeout=60)
s = conn.create_sender("/queues/" + queue)
for i in range(n):
    s.send(Message(id=ulong(i), body=b"x" * 100, inferred=True, durable=True, subject="s"))
conn.close()
print("done")
"#;

/// More messages than the run's first credit (2,000): AMQP 1.0 credit is not given back by
/// settling as a 0.9.1 prefetch is, and a run that did not top it up stopped at 2,000 and
/// waited out the stall deadline (seen on 4.3 with 10,000).
#[tokio::test]
async fn an_amqp10_replay_past_its_first_credit_moves_everything() {
    let Some(python) = python_venv("amqp10-proton", &[PROTON]) else {
        return;
    };
    let Some(broker) = amqp10_brokers().into_iter().last() else {
        return;
    };
    let vh = TestVhost::new(&broker, "amqp10-credit").await;
    let v = enc(&vh.name);
    for q in ["dlq", "work"] {
        put(
            &vh,
            &format!("/api/queues/{v}/{q}"),
            json!({"durable": true}),
        )
        .await;
    }
    let n = 2_300u64;
    let dir = tempdir(&format!("{}-fill", vh.name));
    let args = [
        amqp10_url(&broker),
        vh.name.clone(),
        "dlq".into(),
        n.to_string(),
    ];
    run_python(&python, &dir, FILL, &args).await;
    wait_for_count(&vh, "dlq", "messages", n).await;
    let home = Home::new("amqp10-credit");
    let run = warren(
        &vh,
        &home,
        &[
            "replay",
            "dlq",
            "--to",
            "work",
            "--protocol",
            "amqp10",
            "--yes",
            "--json",
        ],
    )
    .await;
    assert_eq!(run.code, Some(0), "{run}");
    assert_eq!(run.summary_u64("moved"), n, "{run}");
    assert_eq!(run.event("summary")["protocol"], "AMQP 1.0", "{run}");
    wait_for_count(&vh, "dlq", "messages", 0).await;
    wait_for_count(&vh, "work", "messages", n).await;
    vh.cleanup().await;
}
