//! Urgency and watch through the real binary against real brokers: a dead-letter queue fed at a
//! steady rate sorts first in `warren queues` and shows its growth; `--vhost '*'` lists the
//! dead-letter queues of two vhosts in one call; `warren watch --once` exits 1 on each kind of
//! alert and 0 when clear, 3 when the broker is unreachable; `--exec` gets the alert as JSON;
//! `--format prometheus` prints escaped labels; dead letters stuck in an at-least-once quorum
//! queue are an alert without being asked for, counted as the management API counts them.

use crate::common;
use crate::replay_util;

use std::time::Duration;

use common::amqp::{self as h, mgmt_depth};
use common::{TestBroker, TestVhost};
use lapin::types::FieldTable;
use replay_util::{Home, bare_command, dead_letter, fill, run, simple, warren};
use serde_json::Value;
use warren::domain::features::QueueType;

async fn declare_all(conn: &lapin::Connection, names: &[&str]) {
    let ch = conn.create_channel().await.expect("channel");
    for n in names {
        h::declare(&ch, n, QueueType::Classic, FieldTable::default()).await;
    }
    let _ = ch.close(200, "ok".into()).await;
}

/// A vhost of its own with a store of its own and `queue` (classic) holding `n` messages, once
/// the management API reports them.
async fn one_dlq(
    broker: &TestBroker,
    prefix: &str,
    queue: &str,
    n: u32,
) -> (TestVhost, Home, lapin::Connection) {
    let vhost = TestVhost::new(broker, prefix).await;
    let home = Home::new(prefix);
    let conn = h::connect(&vhost).await;
    declare_all(&conn, &[queue]).await;
    fill(&conn, queue, prefix, n).await;
    assert_eq!(
        mgmt_depth(&vhost, queue, u64::from(n)).await,
        Some(u64::from(n))
    );
    (vhost, home, conn)
}

fn names_in_order(lines: &[Value]) -> Vec<String> {
    lines
        .iter()
        .filter_map(|v| v["name"].as_str().map(str::to_string))
        .collect()
}

#[tokio::test]
async fn a_steadily_fed_dlq_sorts_first_and_shows_its_growth() {
    TestBroker::each(|broker| async move {
        let vhost = TestVhost::new(&broker, "triage-growth").await;
        let home = Home::new("triage-growth");
        let conn = h::connect(&vhost).await;
        declare_all(&conn, &["big.dlq", "quiet.dlq", "grow.dlq"]).await;
        fill(&conn, "big.dlq", "big", 50).await;
        fill(&conn, "quiet.dlq", "quiet", 5).await;
        fill(&conn, "grow.dlq", "grow0", 1).await;
        for (q, n) in [("big.dlq", 50), ("quiet.dlq", 5), ("grow.dlq", 1)] {
            assert_eq!(mgmt_depth(&vhost, q, n).await, Some(n), "{q}");
        }
        // The first listing: depth order, nothing known of growth yet.
        let first = warren(&vhost, &home, &["queues", "--json"]).await;
        assert_eq!(first.code, Some(0), "{first}");
        let lines = first.json();
        assert_eq!(
            names_in_order(&lines),
            ["big.dlq", "quiet.dlq", "grow.dlq"],
            "{first}"
        );
        assert!(
            lines.iter().all(|l| l["growth_per_min"].is_null()),
            "{first}"
        );

        // A steady trickle into grow.dlq: one message every 150 ms. Time, not an event: a rate
        // of growth is what is tested.
        for i in 0..20 {
            fill(&conn, "grow.dlq", &format!("grow{}", i + 1), 1).await;
            tokio::time::sleep(Duration::from_millis(150)).await;
        }
        assert_eq!(mgmt_depth(&vhost, "grow.dlq", 21).await, Some(21));
        let after = warren(&vhost, &home, &["queues", "--json"]).await;
        assert_eq!(after.code, Some(0), "{after}");
        let lines = after.json();
        assert_eq!(
            names_in_order(&lines),
            ["grow.dlq", "big.dlq", "quiet.dlq"],
            "{} {after}",
            broker.label
        );
        let growth = lines[0]["growth_per_min"].as_f64().expect("growth");
        assert!(
            growth > 20.0,
            "20 messages in a few seconds: {growth}/min {after}"
        );
        assert_eq!(lines[1]["growth_per_min"].as_f64(), Some(0.0), "{after}");
        // The age is a lower bound (nothing was read): since the first listing.
        assert_eq!(lines[1]["oldest_is_lower_bound"], true, "{after}");
        assert!(lines[0]["last_arrival"].is_string(), "{after}");

        // The table says it too, with the sort in the column title.
        let text = warren(&vhost, &home, &["queues"]).await;
        let mut rows = text.stdout.lines();
        let header = rows.next().unwrap_or_default();
        assert!(header.contains("growth▼"), "{text}");
        let top = rows.next().unwrap_or_default();
        assert!(top.starts_with("grow.dlq"), "{text}");
        assert!(top.contains("/min"), "{text}");
        // Another order on request.
        let by_name = warren(&vhost, &home, &["queues", "--json", "--sort", "name"]).await;
        assert_eq!(
            names_in_order(&by_name.json()),
            ["big.dlq", "grow.dlq", "quiet.dlq"]
        );
        let bad = warren(&vhost, &home, &["queues", "--sort", "size"]).await;
        assert_eq!(bad.code, Some(2), "{bad}");
        assert!(bad.stderr.contains("urgency, depth"), "{bad}");

        let _ = conn.close(200, "done".into()).await;
        vhost.cleanup().await;
    })
    .await;
}

#[tokio::test]
async fn every_vhost_is_one_listing() {
    TestBroker::each(|broker| async move {
        let a = TestVhost::new(&broker, "triage-scope-a").await;
        let b = TestVhost::new(&broker, "triage-scope-b").await;
        let home = Home::new("triage-scope");
        for (vh, q) in [(&a, "alpha.dlq"), (&b, "beta_error")] {
            let conn = h::connect(vh).await;
            declare_all(&conn, &[q]).await;
            fill(&conn, q, q, 2).await;
            assert_eq!(mgmt_depth(vh, q, 2).await, Some(2));
            let _ = conn.close(200, "ok".into()).await;
        }
        let mgmt = broker.mgmt_url_with_creds();
        let amqp = broker.amqp_url("/");
        let args = [
            "--amqp-url",
            amqp.as_str(),
            "--management-url",
            mgmt.as_str(),
            "--vhost",
            "*",
            "queues",
            "--json",
        ];
        let r = run(bare_command(&home, &args), &args).await;
        assert_eq!(r.code, Some(0), "{r}");
        let lines = r.json();
        let find = |vh: &str, q: &str| {
            lines
                .iter()
                .any(|l| l["vhost"] == vh && l["name"] == q && l["depth"] == 2)
        };
        assert!(find(&a.name, "alpha.dlq"), "{} {r}", broker.label);
        assert!(find(&b.name, "beta_error"), "{} {r}", broker.label);
        // The table names each queue with its vhost.
        let args_text = &args[..args.len() - 1];
        let r = run(bare_command(&home, args_text), args_text).await;
        assert!(
            r.stdout
                .lines()
                .any(|l| l.starts_with(&a.name) && l.contains(" alpha.dlq ")),
            "{r}"
        );
        // A command about one queue refuses the every-vhost scope.
        let mut show = args_text.to_vec();
        show.extend(["show", "alpha.dlq"]);
        show.retain(|a| *a != "queues");
        let r = run(bare_command(&home, &show), &show).await;
        assert_eq!(r.code, Some(2), "{r}");
        assert!(r.stderr.contains("every vhost"), "{r}");
        a.cleanup().await;
        b.cleanup().await;
    })
    .await;
}

#[tokio::test]
async fn watch_once_alerts_on_each_kind_and_is_clear_otherwise() {
    TestBroker::each(|broker| async move {
        let (vhost, home, conn) = one_dlq(&broker, "triage-watch", "orders.dlq", 3).await;
        let label = broker.label.clone();
        let once = |extra: &'static [&'static str]| {
            let mut args = vec!["watch", "--once"];
            args.extend_from_slice(extra);
            args
        };

        // The first look: every group is new (no message of it seen before).
        let r = warren(&vhost, &home, &once(&["--alert", "new-group"])).await;
        let first_look = std::time::Instant::now();
        assert_eq!(r.code, Some(1), "{label} {r}");
        assert!(r.stdout.contains("ALERT new-group: orders.dlq"), "{r}");
        // Nothing new since, no threshold: all clear.
        let r = warren(&vhost, &home, &once(&["--alert", "new-group"])).await;
        assert_eq!(r.code, Some(0), "{label} {r}");
        assert!(
            r.stdout
                .contains("all clear: 1 dead-letter queues, 3 dead letters"),
            "{r}"
        );

        // Depth.
        let r = warren(&vhost, &home, &once(&["--alert", "depth>2"])).await;
        assert_eq!(r.code, Some(1), "{r}");
        assert!(
            r.stdout
                .contains("ALERT depth>2: orders.dlq 3 dead letters"),
            "{r}"
        );
        let r = warren(&vhost, &home, &once(&["--alert", "depth>100"])).await;
        assert_eq!(r.code, Some(0), "{r}");

        // Age: Warren first saw them at the first look, over a second ago. Time, not an event:
        // an age is what is tested (counted from the first look's end; the looks since took
        // part of it).
        tokio::time::sleep(Duration::from_millis(2_100).saturating_sub(first_look.elapsed())).await;
        let r = warren(&vhost, &home, &once(&["--alert", "age>1s", "--json"])).await;
        assert_eq!(r.code, Some(1), "{r}");
        let ev = r.event("age");
        assert_eq!(ev["queue"], "orders.dlq");
        assert_eq!(ev["alert"], "age>1s");
        assert!(ev["age_secs"].as_u64().unwrap_or(0) >= 1, "{r}");
        let r = warren(&vhost, &home, &once(&["--alert", "age>1h"])).await;
        assert_eq!(r.code, Some(0), "{r}");

        // Growth: five more since the first look's sample.
        fill(&conn, "orders.dlq", "later", 5).await;
        assert_eq!(mgmt_depth(&vhost, "orders.dlq", 8).await, Some(8));
        let r = warren(&vhost, &home, &once(&["--alert", "growth>1/min"])).await;
        assert_eq!(r.code, Some(1), "{r}");
        assert!(
            r.stdout.contains("ALERT growth>1/min: orders.dlq growing"),
            "{r}"
        );
        let r = warren(&vhost, &home, &once(&["--alert", "growth>1000000/min"])).await;
        assert_eq!(r.code, Some(0), "{r}");

        // A new failure: a real broker dead letter, a group of its own.
        dead_letter(
            &conn,
            "orders.work",
            "orders.dlq",
            &[simple("dead", 1, &[])],
        )
        .await;
        assert_eq!(mgmt_depth(&vhost, "orders.dlq", 9).await, Some(9));
        let r = warren(&vhost, &home, &once(&["--alert", "new-group", "--json"])).await;
        assert_eq!(r.code, Some(1), "{r}");
        let ev = r.event("new-group");
        assert_eq!(ev["count"], 1, "{r}");
        assert_eq!(ev["alert"], "new-group");

        // Bad thresholds are usage errors that say what is accepted.
        let r = warren(&vhost, &home, &once(&["--alert", "depth>lots"])).await;
        assert_eq!(r.code, Some(2), "{r}");
        assert!(r.stderr.contains("whole number"), "{r}");

        // Prometheus: the figures, labels escaped.
        let r = warren(&vhost, &home, &once(&["--format", "prometheus"])).await;
        assert_eq!(r.code, Some(0), "{r}");
        let vh = vhost.name.replace('\\', "\\\\").replace('"', "\\\"");
        assert!(
            r.stdout.contains(&format!(
                "warren_dead_letters{{vhost=\"{vh}\",queue=\"orders.dlq\"}} 9"
            )),
            "{r}"
        );
        assert!(
            r.stdout.contains("warren_oldest_dead_letter_age_seconds{"),
            "{r}"
        );
        assert!(
            r.stdout.contains("warren_failure_group_dead_letters{"),
            "{r}"
        );
        let r = warren(&vhost, &home, &["watch", "--format", "prometheus"]).await;
        assert_eq!(r.code, Some(2), "prometheus needs --once: {r}");

        let _ = conn.close(200, "done".into()).await;
        vhost.cleanup().await;
    })
    .await;
}

#[tokio::test]
async fn exec_gets_the_alert_as_json_and_an_unreachable_broker_is_exit_3() {
    let broker = TestBroker::default_broker();
    let (vhost, home, conn) = one_dlq(&broker, "triage-exec", "pay_error", 4).await;
    let out = home.dir.join("alert.json");
    let cmd = format!("cat > '{}'", out.display());
    let r = warren(
        &vhost,
        &home,
        &["watch", "--once", "--alert", "depth>3", "--exec", &cmd],
    )
    .await;
    assert_eq!(r.code, Some(1), "{r}");
    let text = std::fs::read_to_string(&out).expect("the --exec command wrote its stdin");
    let v: Value = serde_json::from_str(text.trim()).expect("one JSON object");
    assert_eq!(v["event"], "depth", "{text}");
    assert_eq!(v["queue"], "pay_error");
    assert_eq!(v["vhost"], vhost.name.as_str());
    assert_eq!(v["depth"], 4);
    assert_eq!(v["alert"], "depth>3");

    let args = [
        "--amqp-url",
        "amqp://guest:guest@127.0.0.1:1",
        "--management-url",
        "http://guest:guest@127.0.0.1:1",
        "watch",
        "--once",
    ];
    let r = run(bare_command(&home, &args), &args).await;
    assert_eq!(r.code, Some(3), "{r}");
    let _ = conn.close(200, "done".into()).await;
    vhost.cleanup().await;
}

/// The terminal UI's worker continues from the samples the store kept (here written by
/// `warren queues`): its listing is followed by the last hour of depths, so a restart does not
/// forget them.
#[tokio::test]
async fn the_tuis_worker_continues_from_the_stores_samples() {
    use warren::worker::protocol::{Command, Report};
    let broker = TestBroker::default_broker();
    let (vhost, home, conn) = one_dlq(&broker, "triage-restart", "restart.dlq", 3).await;
    let r = warren(&vhost, &home, &["queues"]).await;
    assert_eq!(r.code, Some(0), "{r}");

    // The worker reads the same store (this test's process only).
    unsafe { std::env::set_var("WARREN_STORE", home.store()) };
    let (tx, mut rx, worker) = common::spawn_worker(warren::config::Overrides {
        config_path: Some(home.dir.join("config.toml")),
        amqp_url: Some(vhost.amqp_url()),
        management_url: Some(broker.mgmt_url_with_creds()),
        vhost: Some(vhost.name.clone()),
        ..Default::default()
    });
    tx.send(Command::LoadQueues).await.expect("send");
    let samples = tokio::time::timeout(Duration::from_secs(30), async {
        loop {
            match rx.recv().await {
                Some(Report::DepthHistory { samples, .. }) => return samples,
                Some(_) => continue,
                None => panic!("the worker stopped"),
            }
        }
    })
    .await
    .expect("a depth history after the listing");
    let kept = samples
        .iter()
        .find(|(q, _)| q.name == "restart.dlq")
        .map(|(_, s)| s)
        .expect("the queue's samples");
    assert_eq!(kept.iter().map(|s| s.depth).collect::<Vec<_>>(), [3]);
    let _ = tx.send(Command::Quit).await;
    let _ = tokio::time::timeout(Duration::from_secs(10), worker).await;
    let _ = conn.close(200, "done".into()).await;
    vhost.cleanup().await;
}

/// Watching never erodes a quorum queue: where a read would spend deliveries (3.10 and 4.0 with
/// a delivery limit) the queue is not read, and the watch says where it could not look; on
/// 4.3, where reads are free, its groups are read.
#[tokio::test]
async fn watch_does_not_read_a_quorum_dlq_whose_reads_cost_and_says_so() {
    use lapin::types::AMQPValue;
    TestBroker::each(|broker| async move {
        let vhost = TestVhost::new(&broker, "triage-quorum").await;
        let home = Home::new("triage-quorum");
        let conn = h::connect(&vhost).await;
        let ch = conn.create_channel().await.expect("channel");
        let mut args = FieldTable::default();
        args.insert("x-delivery-limit".into(), AMQPValue::LongLongInt(20));
        h::declare(&ch, "orders.dlq", QueueType::Quorum, args).await;
        fill(&conn, "orders.dlq", "q", 2).await;
        assert_eq!(mgmt_depth(&vhost, "orders.dlq", 2).await, Some(2));
        let version = h::broker_version(&vhost).await;
        let costly = warren::domain::features::reads_spend_deliveries(
            Some(version),
            &QueueType::Quorum,
            Some(20),
        );
        for _ in 0..3 {
            let r = warren(&vhost, &home, &["watch", "--once", "--json"]).await;
            assert_eq!(r.code, Some(0), "{r}");
            let not_read = r
                .json()
                .into_iter()
                .find(|v| v["event"] == "not-read" && v["queue"] == "orders.dlq");
            assert_eq!(not_read.is_some(), costly, "{} {r}", broker.label);
            if let Some(v) = not_read {
                let why = v["reason"].as_str().unwrap_or_default();
                assert!(why.contains("delivery limit of 20"), "{why}");
                assert!(why.contains("warren protect orders.dlq"), "{why}");
            }
        }
        let prom = warren(
            &vhost,
            &home,
            &["watch", "--once", "--format", "prometheus"],
        )
        .await;
        let flag = if costly { 0 } else { 1 };
        let line = prom
            .stdout
            .lines()
            .find(|l| l.starts_with("warren_queue_read_for_groups{") && l.contains("orders.dlq"))
            .unwrap_or_default();
        assert!(line.ends_with(&format!("}} {flag}")), "{prom}");
        if costly {
            // Nothing was read: the first delivery now is the messages' first.
            for m in h::peek(&conn, "orders.dlq", 10).await {
                assert_eq!(
                    m.headers.get_i64("x-delivery-count").unwrap_or(0),
                    0,
                    "{}: watching spent a delivery",
                    broker.label
                );
            }
        }
        let _ = ch.close(200, "ok".into()).await;
        let _ = conn.close(200, "done".into()).await;
        vhost.cleanup().await;
    })
    .await;
}

/// `warren watch` without `--once` keeps looking and prints each change as it happens: new
/// dead letters in a queue (one JSON object per line).
#[tokio::test]
async fn watch_follows_new_dead_letters() {
    use tokio::io::AsyncBufReadExt as _;
    let broker = TestBroker::default_broker();
    let (vhost, home, conn) = one_dlq(&broker, "triage-follow", "follow.dlq", 1).await;
    let mut child = replay_util::command(
        &vhost,
        &home,
        &["watch", "--json", "--interval", "1", "--alert", "depth>2"],
    )
    .spawn()
    .expect("spawn warren watch");
    let mut lines = tokio::io::BufReader::new(child.stdout.take().expect("stdout")).lines();
    // The first look is the baseline: it reads the queue's one message (the management API
    // counts the delivery), then three more arrive.
    vhost
        .wait_queue("follow.dlq", "Warren's first read", |v| {
            v["message_stats"]["deliver_get"].as_u64().unwrap_or(0) >= 1
        })
        .await;
    fill(&conn, "follow.dlq", "b", 3).await;
    let mut seen = Vec::new();
    let found = tokio::time::timeout(Duration::from_secs(30), async {
        let mut new = false;
        let mut alert = false;
        while let Ok(Some(line)) = lines.next_line().await {
            let v: Value = serde_json::from_str(&line).expect("a JSON line");
            new |= v["event"] == "new-dead-letters" && v["queue"] == "follow.dlq";
            alert |= v["event"] == "depth" && v["alert"] == "depth>2" && v["depth"] == 4;
            seen.push(line);
            if new && alert {
                return true;
            }
        }
        false
    })
    .await;
    let _ = child.kill().await;
    assert_eq!(found, Ok(true), "{seen:#?}");
    let _ = conn.close(200, "done".into()).await;
    vhost.cleanup().await;
}

/// A queue name that names nothing is the command's mistake, not the broker's: exit 2, and
/// the words say which vhost was looked in and how to list the queues (issue 26).
#[tokio::test]
async fn a_missing_queue_is_named_with_its_vhost_and_exits_2() {
    let b = TestBroker::default_broker();
    let vh = TestVhost::new(&b, "no-queue").await;
    let home = Home::new("no-queue");
    for args in [
        &["show", "nosuch.dlq"][..],
        &["replay", "nosuch.dlq", "--dry-run"][..],
    ] {
        let r = warren(&vh, &home, args).await;
        assert_eq!(r.code, Some(2), "{args:?}: {r}");
        assert!(
            r.stderr
                .contains(&format!("no queue 'nosuch.dlq' in vhost '{}'", vh.name))
                && r.stderr.contains("`warren queues` lists them"),
            "{args:?}: {r}"
        );
    }
    vh.cleanup().await;
}

/// Nothing consuming the work queue is the first thing to know: `queues --json` counts the
/// consumers of each DLQ's feeders (`origin_consumers`) where the management API has them,
/// although the cheap listing carries none: 0 with nobody on `work`, 1 with one (issue 26).
#[tokio::test]
async fn the_consumers_of_the_work_queue_are_counted() {
    TestBroker::each(|b| async move {
        let vh = TestVhost::new(&b, "consumers").await;
        let home = Home::new("consumers");
        let conn = h::connect(&vh).await;
        let ch = h::confirm_channel(&conn).await;
        h::declare(&ch, "dlq", QueueType::Classic, FieldTable::default()).await;
        dead_letter(&conn, "work", "dlq", &[simple("m", 0, &[])]).await;
        let origin = |r: &replay_util::Run| {
            r.json()
                .iter()
                .find(|v| v["name"] == "dlq")
                .map(|v| v["origin_consumers"].clone())
        };
        // The broker's statistics of a queue declared a moment ago come within seconds.
        let counted = |n: u64| {
            let (vh, home) = (&vh, &home);
            common::wait::poll(Duration::from_secs(30), move || async move {
                let seen = origin(&warren(vh, home, &["queues", "--json"]).await);
                if seen == Some(Value::from(n)) {
                    Ok(seen)
                } else {
                    Err(seen)
                }
            })
        };
        let seen = counted(0).await.unwrap_or_else(|last| last);
        assert_eq!(
            seen,
            Some(Value::from(0)),
            "{}: nobody consumes work",
            b.label
        );
        let consumer = conn.create_channel().await.unwrap();
        let _held = consumer
            .basic_consume(
                "work".into(),
                "c".into(),
                Default::default(),
                FieldTable::default(),
            )
            .await
            .unwrap();
        let seen = counted(1).await.unwrap_or_else(|last| last);
        assert_eq!(
            seen,
            Some(Value::from(1)),
            "{}: one consumer on work",
            b.label
        );
        let _ = conn.close(200, "ok".into()).await;
        vh.cleanup().await;
    })
    .await;
}

/// Waits until the management API reports `messages_dlx` of `queue` as `n` (its stats are
/// emitted every few seconds), within 30 s.
async fn wait_for_held(vh: &TestVhost, queue: &str, n: u64) {
    let path = format!(
        "/api/queues/{}/{}",
        common::enc(&vh.name),
        common::enc(queue)
    );
    common::wait::until_ok(
        &format!("{queue}: messages_dlx to reach {n}"),
        Duration::from_secs(30),
        || async {
            let v = vh.get_json(&path).await;
            if v.get("messages_dlx").and_then(Value::as_u64) == Some(n) {
                Ok(())
            } else {
                Err(v)
            }
        },
    )
    .await
}

/// An at-least-once quorum queue whose dead-letter exchange routes nowhere keeps its rejected
/// messages (`messages_dlx`): `warren watch --once` alerts on them with no `--alert` given
/// (exit 1), names the queue with the count and why, its JSON count is the management API's,
/// and Prometheus has the gauge (a gauge only: its exit stays 0 for the textfile recipe).
/// At-least-once dead-lettering exists since 3.10, so every broker runs it.
#[tokio::test]
async fn watch_once_alerts_on_dead_letters_stuck_in_an_at_least_once_queue() {
    TestBroker::each(|broker| async move {
        let vh = TestVhost::new(&broker, "triage-stuck").await;
        let home = Home::new("triage-stuck");
        let label = broker.label.clone();
        let v = common::enc(&vh.name);
        for (path, body) in [
            (
                format!("/api/exchanges/{v}/nowhere"),
                serde_json::json!({"type": "direct"}),
            ),
            (
                format!("/api/queues/{v}/payments"),
                serde_json::json!({"durable": true, "arguments": {
                    "x-queue-type": "quorum",
                    "x-dead-letter-exchange": "nowhere",
                    "x-dead-letter-strategy": "at-least-once",
                    "x-overflow": "reject-publish"
                }}),
            ),
        ] {
            let r = vh.api(reqwest::Method::PUT, &path, Some(body)).await;
            assert!(
                r.status().is_success(),
                "{label}: PUT {path}: {}",
                r.status()
            );
        }
        let conn = h::connect(&vh).await;
        fill(&conn, "payments", "pay", 3).await;
        h::reject_consumed(&conn, "payments", 3, 10).await;
        wait_for_held(&vh, "payments", 3).await;

        let r = warren(&vh, &home, &["watch", "--once"]).await;
        assert_eq!(r.code, Some(1), "{label}: {r}");
        assert!(
            r.stdout.contains(
                "ALERT stuck: payments 3 dead letters stuck in the queue, in no DLQ (at-least-once): dead-letter exchange 'nowhere' has no binding to any queue"
            ),
            "{label}: {r}"
        );
        assert!(!r.stdout.contains("all clear"), "{label}: {r}");

        let r = warren(&vh, &home, &["watch", "--once", "--json"]).await;
        assert_eq!(r.code, Some(1), "{label}: {r}");
        let ev = r.event("stuck");
        assert_eq!(ev["queue"], "payments", "{label}: {ev}");
        assert_eq!(ev["alert"], "stuck", "{label}: {ev}");
        assert_eq!(ev["why"], "no_route", "{label}: {ev}");
        assert_eq!(ev["dead_letter_exchange"], "nowhere", "{label}: {ev}");
        // The count is the broker's own.
        let held = vh.get_json(&format!("/api/queues/{v}/payments")).await;
        assert_eq!(ev["count"], held["messages_dlx"], "{label}: {ev} vs {held}");
        assert_eq!(ev["count"], 3, "{label}: {ev}");

        let r = warren(&vh, &home, &["watch", "--once", "--format", "prometheus"]).await;
        assert_eq!(r.code, Some(0), "{label}: a gauge, not an exit: {r}");
        let vl = vh.name.replace('\\', "\\\\").replace('"', "\\\"");
        assert!(
            r.stdout.contains(&format!(
                "warren_stuck_dead_letters{{vhost=\"{vl}\",queue=\"payments\",why=\"no_route\"}} 3"
            )),
            "{label}: {r}"
        );

        let _ = conn.close(200, "done".into()).await;
        vh.cleanup().await;
    })
    .await;
}
