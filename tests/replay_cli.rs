//! `warren replay` driven through the real binary against real brokers: broker deaths go back to
//! the queue they died in with body and properties untouched, death headers stripped and Warren's
//! added; a second replay counts 2; `--keep-attempts` keeps the deaths; `--dry-run` and a missing
//! `--yes` without a terminal move nothing; `--limit`, `--rate`, read-only, the audit.

use crate::common;
use crate::replay_util;

use std::time::{Duration, Instant};

use common::amqp::{self as h, amqp_depth};
use common::{TestBroker, TestVhost};
use lapin::types::FieldTable;
use replay_util::{Home, dead_letter, message_ids, read_all, reject_all, simple, warren};
use serde_json::Value;
use warren::domain::features::QueueType;
use warren::domain::message::Properties;
use warren::domain::value::{HeaderValue, Table};

fn sorted(t: &Table) -> Vec<(String, HeaderValue)> {
    let mut v: Vec<_> = t.iter().map(|(k, v)| (k.to_string(), v.clone())).collect();
    v.sort_by(|a, b| a.0.cmp(&b.0));
    v
}

/// A message with every header type, every common property and a binary body.
fn rich(i: u32) -> replay_util::Msg {
    let props = Properties {
        message_id: Some(format!("rich-{i}")),
        correlation_id: Some(format!("corr-{i}")),
        content_type: Some("application/octet-stream".into()),
        content_encoding: Some("identity".into()),
        delivery_mode: Some(2),
        priority: Some(3),
        reply_to: Some("replies".into()),
        timestamp: Some(1_700_000_000 + u64::from(i)),
        kind: Some("Shop.OrderPlaced".into()),
        user_id: Some("guest".into()),
        app_id: Some("shop".into()),
        ..Properties::default()
    };
    (
        props,
        h::every_type_headers(i),
        h::binary_body(i, 200 + i as usize),
    )
}

/// Checks a replayed message against what was published: same body, same properties, the
/// original headers plus exactly Warren's four, and the replay count expected.
fn assert_replayed(m: &warren::domain::message::DeadLetter, i: u32, count: i64, label: &str) {
    let (props, headers, body) = rich(i);
    assert_eq!(m.body, body, "{label}: body of message {i}");
    assert_eq!(m.properties, props, "{label}: properties of message {i}");
    let mut expected = headers.clone();
    for k in [
        "warren-replayed-from",
        "warren-replayed-at",
        "warren-replay-count",
        "warren-replay-id",
    ] {
        let v = m
            .headers
            .get(k)
            .unwrap_or_else(|| panic!("{label}: message {i} lacks {k}"));
        expected.insert(k, v.clone());
    }
    assert_eq!(
        sorted(&m.headers),
        sorted(&expected),
        "{label}: headers of message {i}"
    );
    assert_eq!(m.headers.get_str("warren-replayed-from"), Some("dlq"));
    assert_eq!(m.headers.get_i64("warren-replay-count"), Some(count));
    let at = m.headers.get_str("warren-replayed-at").unwrap_or_default();
    assert!(
        at.parse::<jiff::Timestamp>().is_ok(),
        "{label}: replayed-at {at:?}"
    );
}

#[tokio::test]
async fn broker_deaths_go_back_untouched_but_for_the_headers() {
    const N: u32 = 30;
    for broker in TestBroker::all() {
        let label = broker.label.clone();
        let vhost = TestVhost::new(&broker, "replay-deaths").await;
        let home = Home::new("replay-deaths");
        let conn = h::connect(&vhost).await;
        let ch = h::confirm_channel(&conn).await;
        h::declare(&ch, "dlq", QueueType::Classic, FieldTable::default()).await;
        let msgs: Vec<_> = (0..N).map(rich).collect();
        dead_letter(&conn, "work", "dlq", &msgs).await;

        // --dry-run: the plan, nothing moves.
        let run = warren(&vhost, &home, &["replay", "dlq", "--dry-run", "--json"]).await;
        assert_eq!(run.code, Some(0), "{label} dry run: {run}");
        let plan = run.event("plan");
        assert_eq!(plan["selected"], N, "{label}: {plan}");
        assert_eq!(
            plan["targets"]["work"]["queues"],
            serde_json::json!(["work"])
        );
        assert!(
            plan["removes"]
                .as_array()
                .is_some_and(|r| r.contains(&Value::from("x-death")))
        );
        assert_eq!(amqp_depth(&conn, "dlq").await, u64::from(N), "{label}");
        assert_eq!(amqp_depth(&conn, "work").await, 0, "{label}");

        // No terminal and no --yes: refused with the usage code, nothing moves.
        let run = warren(&vhost, &home, &["replay", "dlq"]).await;
        assert_eq!(run.code, Some(2), "{label} without --yes: {run}");
        assert!(run.stderr.contains("--yes"), "{label}: {run}");
        assert_eq!(amqp_depth(&conn, "dlq").await, u64::from(N), "{label}");
        assert_eq!(amqp_depth(&conn, "work").await, 0, "{label}");

        // The replay.
        let run = warren(&vhost, &home, &["replay", "dlq", "--yes", "--json"]).await;
        assert_eq!(run.code, Some(0), "{label} replay: {run}");
        assert_eq!(run.summary_u64("moved"), u64::from(N), "{label}: {run}");
        assert_eq!(run.summary_u64("returned"), 0);
        assert_eq!(run.summary_u64("failed"), 0);
        assert_eq!(run.event("summary")["targets"]["work"], N);
        assert_eq!(amqp_depth(&conn, "dlq").await, 0, "{label}");
        let back = read_all(&conn, "work", N as usize).await;
        assert_eq!(back.len(), N as usize, "{label}");
        for (i, m) in back.iter().enumerate() {
            assert_replayed(m, i as u32, 1, &label);
        }

        // Fails again: a second replay counts 2 and the plan says they were replayed before.
        reject_all(&conn, "work", N as usize).await;
        h::wait_for_depth(&conn, "dlq", u64::from(N), Duration::from_secs(10)).await;
        let run = warren(&vhost, &home, &["replay", "dlq", "--yes", "--json"]).await;
        assert_eq!(run.code, Some(0), "{label} second replay: {run}");
        // Nothing was read before it (only 'work' dead-letters into the DLQ): the run says it.
        assert_eq!(run.event("plan")["examined"], 0, "{label}: {run}");
        assert_eq!(run.event("summary")["replayed_before"], N, "{label}: {run}");
        let back = read_all(&conn, "work", N as usize).await;
        assert_eq!(back.len(), N as usize);
        for (i, m) in back.iter().enumerate() {
            assert_replayed(m, i as u32, 2, &label);
        }

        // --keep-attempts: the death record goes out as it was.
        reject_all(&conn, "work", N as usize).await;
        h::wait_for_depth(&conn, "dlq", u64::from(N), Duration::from_secs(10)).await;
        let dead = read_all(&conn, "dlq", N as usize).await;
        let run = warren(
            &vhost,
            &home,
            &["replay", "dlq", "--yes", "--json", "--keep-attempts"],
        )
        .await;
        assert_eq!(run.code, Some(0), "{label} keep attempts: {run}");
        let back = read_all(&conn, "work", N as usize).await;
        assert_eq!(back.len(), N as usize);
        for (d, m) in dead.iter().zip(&back) {
            assert_eq!(m.headers.get("x-death"), d.headers.get("x-death"));
            assert!(m.headers.get("x-death").is_some(), "{label}: x-death kept");
            assert_eq!(m.headers.get_i64("warren-replay-count"), Some(3));
            assert_eq!(m.body, d.body);
        }

        // The audit: three completed replays, newest first, with the ids moved.
        let audit = warren(&vhost, &home, &["audit", "--json"]).await;
        assert_eq!(audit.code, Some(0), "{audit}");
        let records = audit.json();
        assert_eq!(records.len(), 3, "{label}: {audit}");
        for r in &records {
            assert_eq!(r["outcome"], "completed", "{label}: {r}");
            assert_eq!(r["moved"], N, "{label}: {r}");
            assert_eq!(r["from_queue"], "dlq");
            assert_eq!(r["vhost"], vhost.name.as_str());
            let ids = r["message_ids"].as_array().map(Vec::len).unwrap_or(0);
            assert_eq!(ids, N as usize, "{label}: {r}");
        }
        assert_eq!(records[0]["keep_attempts"], true);
        assert_eq!(records[2]["keep_attempts"], false);

        let _ = conn.close(200, "done".into()).await;
        vhost.cleanup().await;
    }
}

#[tokio::test]
async fn limit_moves_exactly_that_many_from_the_head() {
    let vhost = TestVhost::new(&TestBroker::default_broker(), "replay-limit").await;
    let home = Home::new("replay-limit");
    let conn = h::connect(&vhost).await;
    let ch = h::confirm_channel(&conn).await;
    h::declare(&ch, "dlq", QueueType::Classic, FieldTable::default()).await;
    let msgs: Vec<_> = (0..20).map(|i| simple("m", i, &[])).collect();
    dead_letter(&conn, "work", "dlq", &msgs).await;

    let run = warren(
        &vhost,
        &home,
        &["replay", "dlq", "--yes", "--json", "--limit", "7"],
    )
    .await;
    assert_eq!(run.code, Some(0), "{run}");
    assert_eq!(run.summary_u64("moved"), 7, "{run}");
    let moved = read_all(&conn, "work", 20).await;
    assert_eq!(
        message_ids(&moved),
        (0..7).map(|i| format!("m-{i}")).collect::<Vec<_>>()
    );
    let left = h::peek(&conn, "dlq", 100).await;
    assert_eq!(
        message_ids(&left),
        (7..20).map(|i| format!("m-{i}")).collect::<Vec<_>>(),
        "the rest stays, in order"
    );
    vhost.cleanup().await;
}

/// 200 messages at 100 per second: the arrival rate in the target (first to last arrival) is
/// within 5% of 100/s.
#[tokio::test]
async fn rate_is_honoured_within_five_percent() {
    use futures_util::StreamExt;
    const N: u32 = 200;
    let vhost = TestVhost::new(&TestBroker::default_broker(), "replay-rate").await;
    let home = Home::new("replay-rate");
    let conn = h::connect(&vhost).await;
    let ch = h::confirm_channel(&conn).await;
    h::declare(&ch, "dlq", QueueType::Classic, FieldTable::default()).await;
    let msgs: Vec<_> = (0..N).map(|i| simple("r", i, &[])).collect();
    dead_letter(&conn, "work", "dlq", &msgs).await;

    // A consumer on the target timestamps each arrival.
    let cch = conn.create_channel().await.expect("channel");
    let mut consumer = cch
        .basic_consume(
            "work".into(),
            "rate-watch".into(),
            lapin::options::BasicConsumeOptions {
                no_ack: true,
                ..Default::default()
            },
            FieldTable::default(),
        )
        .await
        .expect("consume");
    let watch = tokio::spawn(async move {
        let mut at = Vec::new();
        while at.len() < N as usize {
            match tokio::time::timeout(Duration::from_secs(20), consumer.next()).await {
                Ok(Some(Ok(_))) => at.push(Instant::now()),
                _ => break,
            }
        }
        at
    });
    let run = warren(
        &vhost,
        &home,
        &["replay", "dlq", "--yes", "--json", "--rate", "100"],
    )
    .await;
    assert_eq!(run.code, Some(0), "{run}");
    assert_eq!(run.summary_u64("moved"), u64::from(N));
    let at = watch.await.expect("watcher");
    assert_eq!(at.len(), N as usize);
    let (Some(first), Some(last)) = (at.first(), at.last()) else {
        unreachable!("checked the length")
    };
    let span = last.duration_since(*first).as_secs_f64();
    let rate = f64::from(N - 1) / span;
    assert!(
        (95.0..=105.0).contains(&rate),
        "arrival rate {rate:.1}/s over {span:.3} s, expected 100/s ± 5%"
    );
    // Progress events carried the rate and an ETA while running.
    let progress: Vec<Value> = run
        .json()
        .into_iter()
        .filter(|v| v["event"] == "progress")
        .collect();
    assert!(progress.len() >= 5, "{run}");
    assert!(
        progress
            .iter()
            .any(|p| p["eta_secs"].as_u64().is_some() && p["remaining"].as_u64() > Some(0)),
        "{run}"
    );
    vhost.cleanup().await;
}

#[tokio::test]
async fn read_only_refuses_and_moves_nothing() {
    let broker = TestBroker::default_broker();
    let vhost = TestVhost::new(&broker, "replay-readonly").await;
    let home = Home::new("replay-readonly");
    let conn = h::connect(&vhost).await;
    let ch = h::confirm_channel(&conn).await;
    h::declare(&ch, "dlq", QueueType::Classic, FieldTable::default()).await;
    let msgs: Vec<_> = (0..5).map(|i| simple("ro", i, &[])).collect();
    dead_letter(&conn, "work", "dlq", &msgs).await;

    // The flag.
    let run = warren(&vhost, &home, &["--read-only", "replay", "dlq", "--yes"]).await;
    assert_eq!(run.code, Some(1), "{run}");
    assert!(run.stderr.contains("read-only"), "{run}");
    assert!(run.stderr.contains("--read-only"), "says which: {run}");
    // The dry run still shows the plan.
    let run = warren(
        &vhost,
        &home,
        &["--read-only", "replay", "dlq", "--dry-run", "--json"],
    )
    .await;
    assert_eq!(run.code, Some(0), "{run}");
    assert_eq!(run.event("plan")["selected"], 5);

    // A context configured read-only.
    let cfg = home.dir.join("ro.toml");
    std::fs::write(
        &cfg,
        format!(
            "[contexts.prod]\namqp_urls = [\"{}\"]\nmanagement_urls = [\"{}\"]\nvhost = \"{}\"\nread_only = true\n",
            broker.amqp_url(&vhost.name),
            broker.mgmt_url_with_creds(),
            vhost.name
        ),
    )
    .expect("config");
    // Same binary, but the context's settings instead of URLs on the command line.
    let out = tokio::process::Command::new(env!("CARGO_BIN_EXE_warren"))
        .args(["--config"])
        .arg(&cfg)
        .args(["--context", "prod", "replay", "dlq", "--yes"])
        .env("WARREN_STORE", home.store())
        .env("WARREN_LOG_DIR", home.dir.join("logs"))
        .stdin(std::process::Stdio::null())
        .output()
        .await
        .expect("run warren");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("read-only") && stderr.contains("prod"),
        "{stderr}"
    );

    // A broker user who may not write: the management API says so, and Warren names the user.
    let user = "warren-reader";
    let put = vhost
        .api(
            reqwest::Method::PUT,
            &format!("/api/users/{user}"),
            Some(serde_json::json!({"password": "reader", "tags": "administrator"})),
        )
        .await;
    assert!(put.status().is_success());
    let perm = vhost
        .api(
            reqwest::Method::PUT,
            &format!("/api/permissions/{}/{user}", common::enc(&vhost.name)),
            Some(serde_json::json!({"configure": "", "write": "", "read": ".*"})),
        )
        .await;
    assert!(perm.status().is_success());
    let amqp = format!(
        "amqp://{user}:reader@127.0.0.1:{}/{}",
        broker.amqp_port,
        common::enc(&vhost.name)
    );
    let mgmt = format!("http://{user}:reader@127.0.0.1:{}", broker.mgmt_port);
    let out = tokio::process::Command::new(env!("CARGO_BIN_EXE_warren"))
        .args(["--config"])
        .arg(home.dir.join("config.toml"))
        .args([
            "--amqp-url",
            &amqp,
            "--management-url",
            &mgmt,
            "--vhost",
            &vhost.name,
        ])
        .args(["replay", "dlq", "--yes"])
        .env("WARREN_STORE", home.store())
        .env("WARREN_LOG_DIR", home.dir.join("logs"))
        .stdin(std::process::Stdio::null())
        .output()
        .await
        .expect("run warren");
    let stderr = String::from_utf8_lossy(&out.stderr);
    let _ = vhost
        .api(reqwest::Method::DELETE, &format!("/api/users/{user}"), None)
        .await;
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("read-only") && stderr.contains(user),
        "{stderr}"
    );

    assert_eq!(amqp_depth(&conn, "dlq").await, 5);
    assert_eq!(amqp_depth(&conn, "work").await, 0);
    // Nothing was ever audited as a replay: refusals happen before the record.
    let audit = warren(&vhost, &home, &["audit", "--json"]).await;
    assert!(audit.json().is_empty(), "{audit}");
    vhost.cleanup().await;
}

/// Several targets, none known without looking (two queues dead-letter into the DLQ, and a third
/// that did is gone): nothing is read first, the plan says each target is checked as the run
/// first meets it, and the count confirmed is the queue's. The run checks `orders`, then `gone`
/// (missing: its messages stay in the DLQ, in order, said why), then `billing`; the others all
/// move, each once, and the audit names exactly the moved ones.
#[tokio::test]
async fn several_targets_are_checked_as_first_met_and_a_missing_one_keeps_only_its_own() {
    use lapin::options::QueueDeleteOptions;
    for broker in TestBroker::all() {
        let label = broker.label.clone();
        let vhost = TestVhost::new(&broker, "replay-first-met").await;
        let home = Home::new("replay-first-met");
        let conn = h::connect(&vhost).await;
        let ch = h::confirm_channel(&conn).await;
        h::declare(&ch, "dlq", QueueType::Classic, FieldTable::default()).await;
        let orders: Vec<_> = (0..6).map(|i| simple("o", i, &[])).collect();
        let gone: Vec<_> = (0..3).map(|i| simple("g", i, &[])).collect();
        let billing: Vec<_> = (0..4).map(|i| simple("b", i, &[])).collect();
        dead_letter(&conn, "orders", "dlq", &orders[..3]).await;
        dead_letter(&conn, "gone", "dlq", &gone).await;
        dead_letter(&conn, "billing", "dlq", &billing).await;
        dead_letter(&conn, "orders", "dlq", &orders[3..]).await;
        ch.queue_delete("gone".into(), QueueDeleteOptions::default())
            .await
            .expect("delete gone");

        let run = warren(&vhost, &home, &["replay", "dlq", "--yes", "--json"]).await;
        assert_eq!(run.code, Some(1), "{label}: partial, so exit 1: {run}");
        let plan = run.event("plan");
        assert_eq!(plan["examined"], 0, "{label}: nothing read first: {plan}");
        assert_eq!(plan["checked_as_met"], true, "{label}: {plan}");
        assert_eq!(plan["selected"], 13, "{label}: the queue's count: {plan}");
        assert!(
            plan["unread"]
                .as_str()
                .is_some_and(|u| u.contains("targets are checked as they are first met")),
            "{label}: {plan}"
        );
        let sum = run.event("summary");
        assert_eq!(run.summary_u64("moved"), 10, "{label}: {run}");
        assert_eq!(run.summary_u64("failed"), 3, "{label}: {run}");
        assert_eq!(sum["targets"]["orders"], 6, "{label}: {sum}");
        assert_eq!(sum["targets"]["billing"], 4, "{label}: {sum}");
        let problems = sum["problems"].as_object().cloned().unwrap_or_default();
        assert_eq!(problems.len(), 1, "{label}: {sum}");
        let (why, n) = problems.iter().next().expect("one problem");
        assert_eq!(n, 3, "{label}: {sum}");
        assert!(
            why.contains("'gone' does not exist") && why.contains("stay in the DLQ"),
            "{label}: {why}"
        );

        // The missing target's messages stay, in order; the others arrived once each.
        let left = h::peek(&conn, "dlq", 100).await;
        assert_eq!(message_ids(&left), vec!["g-0", "g-1", "g-2"], "{label}");
        let o = read_all(&conn, "orders", 6).await;
        assert_eq!(
            message_ids(&o),
            (0..6).map(|i| format!("o-{i}")).collect::<Vec<_>>(),
            "{label}"
        );
        let b = read_all(&conn, "billing", 4).await;
        assert_eq!(
            message_ids(&b),
            (0..4).map(|i| format!("b-{i}")).collect::<Vec<_>>(),
            "{label}"
        );
        assert_eq!(amqp_depth(&conn, "orders").await, 6, "{label}: none twice");
        assert_eq!(amqp_depth(&conn, "billing").await, 4, "{label}: none twice");

        let audit = warren(&vhost, &home, &["audit", "--json"]).await;
        let records = audit.json();
        assert_eq!(records.len(), 1, "{label}: {audit}");
        let mut ids: Vec<String> = records[0]["message_ids"]
            .as_array()
            .map(|a| {
                a.iter()
                    .filter_map(|v| v.as_str().map(String::from))
                    .collect()
            })
            .unwrap_or_default();
        ids.sort();
        let mut want: Vec<String> = (0..4)
            .map(|i| format!("id:b-{i}"))
            .chain((0..6).map(|i| format!("id:o-{i}")))
            .collect();
        want.sort();
        assert_eq!(ids, want, "{label}: {audit}");
        assert!(
            records[0]["outcome"]
                .as_str()
                .is_some_and(|o| o.starts_with("partial")),
            "{label}: {audit}"
        );

        let _ = conn.close(200, "done".into()).await;
        vhost.cleanup().await;
    }
}

/// The consumer's prefetch is cut to about 16 MiB by the size of the queue's first message,
/// read before the consumer starts: a consumer keeps the prefetch it started with, and the
/// broker's average (which lags behind a fresh fill, and here is small) cannot be trusted to
/// bound what the run holds. The first message is replayed like the others, first.
#[tokio::test]
async fn the_first_messages_size_bounds_the_prefetch_whatever_the_average_says() {
    for broker in TestBroker::all() {
        let label = broker.label.clone();
        let vhost = TestVhost::new(&broker, "replay-prefetch").await;
        let home = Home::new("replay-prefetch");
        let conn = h::connect(&vhost).await;
        let ch = h::confirm_channel(&conn).await;
        h::declare(&ch, "dlq", QueueType::Classic, FieldTable::default()).await;
        let (p, hd, _) = simple("big", 0, &[]);
        let mut msgs = vec![(p, hd, vec![7u8; 1 << 20])];
        msgs.extend((0..300).map(|i| simple("small", i, &[])));
        dead_letter(&conn, "work", "dlq", &msgs).await;

        let cmd = replay_util::command(
            &vhost,
            &home,
            &["replay", "dlq", "--yes", "--json", "--rate", "30"],
        );
        let run = tokio::spawn(replay_util::run(cmd, &["replay"]));
        // The running consumer's prefetch, as the broker reports it.
        let path = format!("/api/consumers/{}", common::enc(&vhost.name));
        let prefetch = common::wait::poll(Duration::from_secs(30), || async {
            let consumers = vhost.get_json(&path).await;
            consumers
                .as_array()
                .and_then(|all| {
                    all.iter()
                        .find(|c| c["queue"]["name"] == "dlq")
                        .and_then(|c| c["prefetch_count"].as_u64())
                })
                .ok_or(())
        })
        .await
        .ok();
        // 16 MiB / (1 MiB + 512 B of a frame's overhead); by the average it would be 2,000.
        assert_eq!(prefetch, Some(15), "{label}");

        let run = run.await.expect("the run");
        // Only a signal ends a run `cancelled`, and this test sends none: one that came from
        // outside it is named as such (warren's stderr says which signal).
        assert!(
            !run.stderr.contains("stopping ("),
            "{label}: warren was sent a signal, not by this test: {run}"
        );
        assert_eq!(run.code, Some(0), "{label}: {run}");
        assert_eq!(run.summary_u64("moved"), 301, "{label}: {run}");
        let moved = read_all(&conn, "work", 301).await;
        assert_eq!(moved.len(), 301, "{label}");
        assert_eq!(
            moved[0].properties.message_id.as_deref(),
            Some("big-0"),
            "{label}"
        );
        assert_eq!(moved[0].body.len(), 1 << 20, "{label}");
        assert_eq!(amqp_depth(&conn, "dlq").await, 0, "{label}");
        let _ = conn.close(200, "done".into()).await;
        vhost.cleanup().await;
    }
}
