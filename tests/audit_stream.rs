//! The record the rota shares and what came back, through the real binary on real brokers:
//! every replay is recorded in the local store and on the broker's audit stream; a second
//! Warren with a store of its own sees the first one's runs there; a run killed with SIGKILL
//! reads "interrupted" in both; a replayed message that a real consumer rejects again is linked
//! to its run (`show`) and counted as come back (`audit`).

use crate::common;
use crate::replay_util;
use crate::tmux_util;

use std::time::Duration;

use common::amqp::{self as h, amqp_depth};
use common::{TestBroker, TestVhost};
use futures_util::StreamExt;
use lapin::options::{BasicAckOptions, BasicConsumeOptions, BasicQosOptions, BasicRejectOptions};
use lapin::types::FieldTable;
use replay_util::{Home, command, dead_letter, eventually, simple, warren};
use serde_json::Value;
use warren::domain::features::QueueType;

/// The replay records of `warren audit --json`, by run id.
fn replay_of<'a>(records: &'a [Value], run: &str) -> Vec<&'a Value> {
    records
        .iter()
        .filter(|r| r["kind"] == "replay" && r["run_id"] == run)
        .collect()
}

/// Dead-letters `n` plain messages (`{prefix}-i`) from `work` into `dlq` (both declared here).
async fn dead(conn: &lapin::Connection, work: &str, dlq: &str, prefix: &str, n: u32) {
    let ch = h::confirm_channel(conn).await;
    h::declare(&ch, dlq, QueueType::Classic, FieldTable::default()).await;
    let msgs: Vec<_> = (0..n).map(|i| simple(prefix, i, &[])).collect();
    dead_letter(conn, work, dlq, &msgs).await;
    let _ = ch.close(200, "ok".into()).await;
}

/// `warren replay QUEUE --yes --json` and more `args`, which must succeed: the run and its id.
async fn replayed(
    vhost: &TestVhost,
    home: &Home,
    queue: &str,
    args: &[&str],
) -> (replay_util::Run, String) {
    let mut all = vec!["replay", queue, "--yes", "--json"];
    all.extend_from_slice(args);
    let run = warren(vhost, home, &all).await;
    assert_eq!(run.code, Some(0), "{}: {run}", vhost.broker.label);
    let id = run.event("started")["run_id"]
        .as_str()
        .unwrap_or_else(|| panic!("no run id: {run}"))
        .to_string();
    (run, id)
}

#[tokio::test]
async fn a_second_warren_sees_the_first_ones_runs_and_a_killed_run_reads_interrupted_in_both() {
    TestBroker::each(|broker| async move {
        let label = broker.label.clone();
        let vhost = TestVhost::new(&broker, "audit-stream").await;
        let alice = Home::new("audit-alice");
        let bob = Home::new("audit-bob");
        let conn = h::connect(&vhost).await;
        dead(&conn, "work", "dlq", "a", 5).await;

        // Without consent and without a terminal the stream is not created: the local record
        // still happens and Warren says the broker's was not written.
        let (run, first) = replayed(&vhost, &alice, "dlq", &["--limit", "1"]).await;
        assert_eq!(
            run.event("started")["broker_record"],
            false,
            "{label}: {run}"
        );
        assert!(
            run.stderr
                .contains("the broker audit record was not written"),
            "{label}: {run}"
        );

        // With consent: created, and both the start and the outcome are on the broker.
        let (run, r1) = replayed(&vhost, &alice, "dlq", &["--create-audit-stream"]).await;
        assert_eq!(
            run.event("started")["broker_record"],
            true,
            "{label}: {run}"
        );
        assert_ne!(r1, first);
        assert_eq!(run.summary_u64("moved"), 4, "{label}: {run}");
        let q = vhost
            .get_json(&format!(
                "/api/queues/{}/warren.audit",
                common::enc(&vhost.name)
            ))
            .await;
        assert_eq!(q["type"], "stream", "{label}: {q}");
        // Each replayed message carries its run's id.
        let moved = replay_util::read_all(&conn, "work", 5).await;
        assert_eq!(moved.len(), 5, "{label}");
        let ids: Vec<_> = moved
            .iter()
            .map(|m| {
                m.headers
                    .get_str("warren-replay-id")
                    .unwrap_or("")
                    .to_string()
            })
            .collect();
        assert_eq!(
            ids.iter().filter(|i| **i == first).count(),
            1,
            "{label}: {ids:?}"
        );
        assert_eq!(
            ids.iter().filter(|i| **i == r1).count(),
            4,
            "{label}: {ids:?}"
        );

        // Bob, with a store of his own, sees Alice's run through the broker.
        let audit = warren(&vhost, &bob, &["audit", "--json"]).await;
        assert_eq!(audit.code, Some(0), "{label}: {audit}");
        let records = audit.json();
        let seen = replay_of(&records, &r1);
        assert_eq!(seen.len(), 1, "{label}: {audit}");
        let r = seen[0];
        assert_eq!(r["seen"]["local"], false, "{label}: {r}");
        assert_eq!(r["seen"]["broker"], true, "{label}: {r}");
        assert_eq!(r["outcome"], "completed", "{label}: {r}");
        assert_eq!(r["moved"], 4, "{label}: {r}");
        assert_eq!(r["from_queue"], "dlq");
        assert_eq!(r["os_user"], warren::store::current_os_user());
        assert_eq!(
            r["id"],
            Value::Null,
            "{label}: no local number on Bob's side"
        );
        // The run that was not written to the broker is not Bob's to see.
        assert!(replay_of(&records, &first).is_empty(), "{label}: {audit}");

        // Alice sees the same run once (local and broker merged), and her first one locally.
        let audit = warren(&vhost, &alice, &["audit", "--json"]).await;
        let records = audit.json();
        let mine = replay_of(&records, &r1);
        assert_eq!(mine.len(), 1, "{label}: deduplicated: {audit}");
        assert_eq!(mine[0]["seen"]["local"], true);
        assert_eq!(mine[0]["seen"]["broker"], true);
        assert!(mine[0]["id"].is_i64(), "{label}: {audit}");
        let old = replay_of(&records, &first);
        assert_eq!(old.len(), 1, "{label}: {audit}");
        assert_eq!(old[0]["seen"]["broker"], false);

        // A run killed with SIGKILL mid-way: "interrupted" on both sides.
        dead(&conn, "work2", "dlq2", "b", 60).await;
        let mut cmd = command(
            &vhost,
            &alice,
            &["replay", "dlq2", "--yes", "--json", "--rate", "5"],
        );
        let mut child = cmd.spawn().expect("spawn warren");
        assert!(
            eventually(Duration::from_secs(30), || async {
                amqp_depth(&conn, "work2").await >= 2
            })
            .await,
            "{label}: the throttled replay started"
        );
        child.start_kill().expect("SIGKILL");
        let _ = child.wait().await;
        for (who, home) in [("alice", &alice), ("bob", &bob)] {
            let audit = warren(&vhost, home, &["audit", "--json"]).await;
            let records = audit.json();
            let killed: Vec<_> = records
                .iter()
                .filter(|r| r["kind"] == "replay" && r["from_queue"] == "dlq2")
                .collect();
            assert_eq!(killed.len(), 1, "{label} {who}: {audit}");
            assert_eq!(
                killed[0]["outcome"], "interrupted",
                "{label} {who}: {audit}"
            );
            assert_eq!(killed[0]["seen"]["broker"], true, "{label} {who}");
            assert_eq!(killed[0]["seen"]["local"], who == "alice", "{label} {who}");
        }
        // Nothing was lost: every message is in the DLQ or the work queue (one confirmed but not
        // yet acknowledged when the process died may be in both: at least once).
        assert!(
            eventually(Duration::from_secs(20), || async {
                amqp_depth(&conn, "dlq2").await + amqp_depth(&conn, "work2").await >= 60
            })
            .await,
            "{label}: all 60 back in a queue"
        );
        replay_util::assert_all_present(&conn, &["dlq2", "work2"], "b", 60).await;

        // The broker out of reach: the local records, and what could not be reached.
        let away = replay_util::run(
            replay_util::bare_command(
                &alice,
                &[
                    "--amqp-url",
                    "amqp://guest:guest@127.0.0.1:1",
                    "--management-url",
                    "http://guest:guest@127.0.0.1:1",
                    "audit",
                    "--json",
                ],
            ),
            &["audit"],
        )
        .await;
        assert_eq!(away.code, Some(0), "{label}: {away}");
        assert!(
            away.stderr.contains("broker audit stream unreachable")
                && away.stderr.contains("showing local records only"),
            "{label}: {away}"
        );
        let records = away.json();
        assert_eq!(replay_of(&records, &r1).len(), 1, "{label}: {away}");
        assert_eq!(replay_of(&records, &r1)[0]["seen"]["broker"], false);
        assert!(
            records.iter().any(|r| r["kind"] == "unreached"),
            "{label}: {away}"
        );

        // Text output names where each record was found; --local never asks the broker.
        let text = warren(&vhost, &bob, &["audit"]).await;
        assert!(text.stdout.contains("[broker]"), "{label}: {text}");
        let local = warren(&vhost, &bob, &["audit", "--local", "--json"]).await;
        assert!(
            local.json().iter().all(|r| r["kind"] != "replay"),
            "{label}: {local}"
        );

        let _ = conn.close(200, "done".into()).await;
        vhost.cleanup().await;
    })
    .await;
}

/// A real consumer on `queue`: rejects (without requeue) the first `reject` deliveries, acks
/// the next `ack`.
async fn consume(conn: &lapin::Connection, queue: &str, reject: usize, ack: usize) {
    let ch = conn.create_channel().await.expect("channel");
    ch.basic_qos(1, BasicQosOptions::default())
        .await
        .expect("qos");
    let mut consumer = ch
        .basic_consume(
            queue.into(),
            "test-worker".into(),
            BasicConsumeOptions::default(),
            FieldTable::default(),
        )
        .await
        .expect("consume");
    for i in 0..reject + ack {
        let d = tokio::time::timeout(Duration::from_secs(15), consumer.next())
            .await
            .expect("delivery in time")
            .expect("consumer open")
            .expect("delivery");
        if i < reject {
            d.reject(BasicRejectOptions { requeue: false })
                .await
                .expect("reject");
        } else {
            d.ack(BasicAckOptions::default()).await.expect("ack");
        }
    }
    let _ = ch.close(200, "done".into()).await;
}

#[tokio::test]
async fn messages_that_fail_again_are_linked_to_their_run_with_the_right_counts() {
    TestBroker::each(|broker| async move {
        let label = broker.label.clone();
        let vhost = TestVhost::new(&broker, "came-back").await;
        let alice = Home::new("cameback-alice");
        let bob = Home::new("cameback-bob");
        let conn = h::connect(&vhost).await;
        dead(&conn, "work", "dlq", "c", 6).await;
        let user = warren::store::current_os_user();

        let (_, r1) = replayed(&vhost, &alice, "dlq", &["--create-audit-stream"]).await;

        // Nothing came back yet.
        let audit = warren(&vhost, &alice, &["audit", "--json"]).await;
        let r = replay_of(&audit.json(), &r1)[0].clone();
        assert_eq!(r["came_back"], 0, "{label}: {audit}");

        // The worker still fails four of them (the work queue dead-letters them again) and
        // handles two.
        consume(&conn, "work", 4, 2).await;
        h::wait_for_depth(&conn, "dlq", 4, Duration::from_secs(20)).await;

        let audit = warren(&vhost, &alice, &["audit", "--json"]).await;
        assert_eq!(audit.code, Some(0), "{label}: {audit}");
        let r = replay_of(&audit.json(), &r1)[0].clone();
        assert_eq!(r["moved"], 6, "{label}: {r}");
        assert_eq!(r["came_back"], 4, "{label}: {r}");
        assert_eq!(r["top_failure_count"], 4, "{label}: {r}");
        let top = r["top_failure"].as_str().unwrap_or_default().to_string();
        assert!(!top.is_empty(), "{label}: {r}");

        // Each one says which run it came back from, who ran it and which replay it was; Bob
        // learns who ran it from the broker.
        for (who, home) in [("alice", &alice), ("bob", &bob)] {
            let show = warren(&vhost, home, &["show", "dlq", "--json"]).await;
            assert_eq!(show.code, Some(0), "{label} {who}: {show}");
            let msgs = show.json();
            assert_eq!(msgs.len(), 4, "{label} {who}: {show}");
            for m in &msgs {
                let f = &m["failed_again"];
                assert_eq!(f["run_id"], r1.as_str(), "{label} {who}: {m}");
                assert_eq!(f["by"], user.as_str(), "{label} {who}: {m}");
                assert_eq!(f["nth_replay"], 1, "{label} {who}: {m}");
                let text = f["text"].as_str().unwrap_or_default();
                assert!(text.starts_with("failed again "), "{label} {who}: {text}");
                assert!(
                    text.ends_with(&format!("after replay {r1} by {user} (1st replay)")),
                    "{label} {who}: {text}"
                );
                assert_eq!(m["group"], top.as_str(), "{label} {who}");
            }
        }

        // Replayed again and failed again: linked to the second run, the 2nd replay; the first
        // run's comebacks are the second's now.
        let (_, r2) = replayed(&vhost, &alice, "dlq", &[]).await;
        consume(&conn, "work", 4, 0).await;
        h::wait_for_depth(&conn, "dlq", 4, Duration::from_secs(20)).await;
        let show = warren(&vhost, &alice, &["show", "dlq", "--json"]).await;
        for m in show.json() {
            assert_eq!(m["failed_again"]["run_id"], r2.as_str(), "{label}: {m}");
            assert_eq!(m["failed_again"]["nth_replay"], 2, "{label}: {m}");
        }
        let text = warren(&vhost, &alice, &["show", "dlq"]).await;
        assert!(text.stdout.contains("(2nd replay)"), "{label}: {text}");
        let audit = warren(&vhost, &alice, &["audit", "--json"]).await;
        let records = audit.json();
        assert_eq!(
            replay_of(&records, &r2)[0]["came_back"],
            4,
            "{label}: {audit}"
        );
        assert_eq!(
            replay_of(&records, &r1)[0]["came_back"],
            0,
            "{label}: {audit}"
        );
        let text = warren(&vhost, &alice, &["audit"]).await;
        assert!(text.stdout.contains("came back 4"), "{label}: {text}");

        let _ = conn.close(200, "done".into()).await;
        vhost.cleanup().await;
    })
    .await;
}

#[tokio::test]
async fn a_protect_is_on_the_record_locally_and_on_the_broker() {
    for broker in TestBroker::all() {
        // 3.x refuses delivery-limit -1 in a policy: there is no protect to record.
        if broker.label == "3.10" {
            continue;
        }
        let label = broker.label.clone();
        let vhost = TestVhost::new(&broker, "audit-protect").await;
        let alice = Home::new("protect-alice");
        let bob = Home::new("protect-bob");
        let conn = h::connect(&vhost).await;
        let ch = h::confirm_channel(&conn).await;
        h::declare(&ch, "qdlq", QueueType::Quorum, FieldTable::default()).await;
        vhost
            .wait_queue("qdlq", "quorum queue", |v| v["type"] == "quorum")
            .await;
        let run = warren(
            &vhost,
            &alice,
            &["protect", "qdlq", "--yes", "--create-audit-stream"],
        )
        .await;
        assert_eq!(run.code, Some(0), "{label}: {run}");
        assert!(!run.stderr.contains("not written"), "{label}: {run}");
        for (who, home, local) in [("alice", &alice, true), ("bob", &bob, false)] {
            let audit = warren(&vhost, home, &["audit", "--json"]).await;
            let records = audit.json();
            let p: Vec<_> = records.iter().filter(|r| r["kind"] == "protect").collect();
            assert_eq!(p.len(), 1, "{label} {who}: {audit}");
            assert_eq!(p[0]["queue"], "qdlq");
            assert_eq!(p[0]["policy"], "warren-protect-qdlq", "{label}: {audit}");
            assert_eq!(p[0]["os_user"], warren::store::current_os_user());
            assert_eq!(p[0]["seen"]["local"], local, "{label} {who}");
            assert_eq!(p[0]["seen"]["broker"], true, "{label} {who}");
        }
        let _ = ch.close(200, "ok".into()).await;
        let _ = conn.close(200, "done".into()).await;
        vhost.cleanup().await;
    }
}

/// On a terminal Warren says what it will create and asks; declined, the broker record is not
/// written and it says so; accepted, the stream is created and the run recorded there.
#[tokio::test]
async fn on_a_terminal_warren_asks_before_it_creates_the_audit_stream() {
    for broker in TestBroker::all() {
        let label = broker.label.clone();
        let vhost = TestVhost::new(&broker, "audit-consent").await;
        let home = Home::new("audit-consent");
        let conn = h::connect(&vhost).await;
        dead(&conn, "work", "dlq", "t", 2).await;
        let cmd = format!(
            "WARREN_STORE={store} WARREN_LOG_DIR={dir} {bin} --config {cfg} --amqp-url '{amqp}' --management-url '{mgmt}' --vhost '{vhost}' replay dlq --limit 1; echo EXIT=$?; sleep 30",
            store = home.store().display(),
            dir = home.dir.join("logs").display(),
            cfg = home.dir.join("config.toml").display(),
            bin = env!("CARGO_BIN_EXE_warren"),
            amqp = vhost.amqp_url(),
            mgmt = broker.mgmt_url_with_creds(),
            vhost = vhost.name,
        );
        let path = format!("/api/queues/{}/warren.audit", common::enc(&vhost.name));
        for answer in ["n", "y"] {
            let t = tmux_util::Tmux::open(&cmd, None, 250, 40);
            t.wait_for("Replay them? [y/N]", Duration::from_secs(30));
            t.keys(&["y", "Enter"]);
            let screen = t.wait_for("Create it? [y/N]", Duration::from_secs(30));
            assert!(
                screen.contains("it will create the stream 'warren.audit'"),
                "{label}: {screen}"
            );
            t.keys(&[answer, "Enter"]);
            let screen = t.wait_for("EXIT=", Duration::from_secs(30));
            assert!(screen.contains("EXIT=0"), "{label} {answer}: {screen}");
            let q = vhost.get_json(&path).await;
            if answer == "n" {
                assert!(
                    screen.contains("the broker audit record was not written"),
                    "{label}: {screen}"
                );
                assert_ne!(q["type"], "stream", "{label}: nothing created: {q}");
            } else {
                assert!(
                    screen.contains("recorded here and on the broker"),
                    "{label}: {screen}"
                );
                assert_eq!(q["type"], "stream", "{label}: {q}");
            }
        }
        let _ = conn.close(200, "done".into()).await;
        vhost.cleanup().await;
    }
}

/// A session on `vhost` as the CLI opens one (the context from the URLs).
async fn session_on(vhost: &TestVhost) -> warren::broker::session::Session {
    use warren::config::{self, Config, Overrides};
    let overrides = Overrides {
        amqp_url: Some(vhost.amqp_url()),
        management_url: Some(vhost.broker.mgmt_url_with_creds()),
        vhost: Some(vhost.name.clone()),
        ..Default::default()
    };
    let target = config::resolve(&Config::default(), &overrides, &|_| None).expect("target");
    warren::broker::session::Session::open(target)
        .await
        .expect("session")
}

fn start_record(run_id: &str, vhost: &str) -> warren::store::AuditStart {
    warren::store::AuditStart {
        run_id: run_id.to_string(),
        at: jiff::Timestamp::now(),
        os_user: "alice".into(),
        broker_user: "guest".into(),
        context: "default".into(),
        vhost: vhost.to_string(),
        from_queue: "dlq".into(),
        targets: vec!["work".into()],
        filter: None,
        group: None,
        requested_limit: None,
        dry_run: false,
        keep_attempts: false,
        clear_expiry: false,
        strip_failure_stamp: false,
    }
}

fn outcome_record(moved: u64, ids: Vec<String>) -> warren::store::AuditOutcome {
    warren::store::AuditOutcome {
        canary: None,
        edits: Vec::new(),
        targets: Vec::new(),
        at: jiff::Timestamp::now(),
        moved,
        returned: 0,
        failed: 0,
        remaining: 0,
        message_ids: ids,
        duplicated: 0,
        duplicate_ids: Vec::new(),
        outcome: warren::domain::outcome::RunOutcome::Completed,
    }
}

#[tokio::test]
async fn a_run_of_many_ids_is_written_in_bounded_entries_and_warren_audit_reads_it_whole() {
    use warren::broker::audit::{self, AuditStream, BrokerRecord, Consent};
    for broker in TestBroker::all() {
        let label = broker.label.clone();
        let vhost = TestVhost::new(&broker, "audit-split").await;
        let s = session_on(&vhost).await;

        // A run of 25,003 moved ids: three given in the outcome, the rest in the run's spool
        // (a thousand of them long, so one entry is cut by bytes before it reaches its count).
        let big = audit::new_run_id(jiff::Timestamp::now());
        let mut record = BrokerRecord::open(&s, Consent::Create).await;
        assert!(record.is_written(), "{label}");
        let note = record
            .append("replay", "start", &big, &start_record(&big, &vhost.name))
            .await;
        assert_eq!(note, None, "{label}");
        let first: Vec<String> = (0..3).map(|i| format!("id:first-{i}")).collect();
        let spooled: Vec<String> = (0..25_000)
            .map(|i| {
                if (5_000..6_000).contains(&i) {
                    format!("id:long-{i}-{}", "x".repeat(1100))
                } else {
                    format!("id:m-{i}")
                }
            })
            .collect();
        let spool = warren::local::spool::Spool::default();
        spool.append(spooled.clone());
        let note = record
            .finish(
                "replay",
                &big,
                outcome_record(25_003, first.clone()),
                &spool,
            )
            .await;
        assert_eq!(note, None, "{label}");

        // Written before ids were split: one outcome entry with every id, as it still reads.
        let old = audit::new_run_id(jiff::Timestamp::now());
        let stream = AuditStream::open(&s, Consent::Refuse).await.expect("open");
        let old_ids: Vec<String> = (0..50).map(|i| format!("id:old-{i}")).collect();
        stream
            .append("replay", "start", &old, &start_record(&old, &vhost.name))
            .await
            .expect("start");
        stream
            .append(
                "replay",
                "outcome",
                &old,
                &outcome_record(50, old_ids.clone()),
            )
            .await
            .expect("outcome");

        // On the stream: bounded entries, the outcome last with how many came before it.
        let entries = audit::read(&s).await.expect("read");
        let parsed: Vec<Value> = entries
            .iter()
            .map(|b| serde_json::from_slice(b).unwrap())
            .collect();
        let of_big: Vec<&Value> = parsed.iter().filter(|v| v["run_id"] == big).collect();
        let parts: Vec<&Value> = of_big
            .iter()
            .copied()
            .filter(|v| v["event"] == "outcome-ids")
            .collect();
        // 25,003 ids: the first part ends by bytes (about 880 long ids fill its 1 MiB), the
        // second by count (10,000), the last 9,118 stay in the outcome.
        assert_eq!(parts.len(), 2, "{label}: {} parts", parts.len());
        for (body, v) in entries.iter().zip(&parsed) {
            if v["run_id"] == big {
                assert!(
                    body.len() < audit::ID_BYTES_PER_ENTRY + 64 * 1024,
                    "{label}: an entry of {} bytes",
                    body.len()
                );
                let ids = v["record"]["message_ids"].as_array().map_or(0, Vec::len);
                assert!(ids <= audit::IDS_PER_ENTRY, "{label}: {ids} ids in one");
            }
        }
        // One part was cut by bytes, not by count.
        assert!(
            parts.iter().any(
                |p| p["record"]["message_ids"].as_array().unwrap().len() < audit::IDS_PER_ENTRY
            ),
            "{label}"
        );
        let last = of_big.last().unwrap();
        assert_eq!(
            last["event"], "outcome",
            "{label}: the outcome closes the run"
        );
        assert_eq!(last["record"]["id_parts"], parts.len(), "{label}");
        for (n, p) in parts.iter().enumerate() {
            assert_eq!(p["record"]["part"], n + 1, "{label}");
        }

        // `warren audit` on another machine: both runs whole, in order, nothing skipped.
        let bob = Home::new("audit-split-bob");
        let audit = warren(&vhost, &bob, &["audit", "--json"]).await;
        assert_eq!(audit.code, Some(0), "{label}: {}", audit.stderr);
        assert!(
            !audit.stderr.contains("skipped"),
            "{label}: {}",
            audit.stderr
        );
        let records = audit.json();
        let ids_of = |run: &str| -> Vec<String> {
            let r = replay_of(&records, run);
            assert_eq!(r.len(), 1, "{label}: {run}");
            assert_eq!(r[0]["outcome"], "completed", "{label}");
            r[0]["message_ids"]
                .as_array()
                .unwrap()
                .iter()
                .map(|v| v.as_str().unwrap().to_string())
                .collect()
        };
        let mut want = first.clone();
        want.extend(spooled);
        assert_eq!(ids_of(&big), want, "{label}");
        assert_eq!(ids_of(&old), old_ids, "{label}");
        assert!(
            records
                .iter()
                .all(|r| r["kind"] != "outcome-ids" && r["event"] != "outcome-ids"),
            "{label}: no part listed as an unknown operation"
        );

        vhost.cleanup().await;
    }
}
