//! Read-only holds on every path, through the operations' one home (`warren::ops`): a broker
//! user with a viewer's rights (`monitoring` tag; configure `^$`, write `^$`, read `.*`) moves
//! nothing with `discard`, `archive` (stream and `--local`), `restore` and `replay` from the CLI,
//! nor with the TUI worker's discard, archive and replay; the TUI's header is told it is
//! read-only and why. Every message id is counted before and after.

use crate::common;
use crate::replay_util;

use std::time::Duration;

use common::amqp::{self as h, amqp_depth};
use common::{TestBroker, TestVhost, drop_user, urls_as};
use replay_util::{Home, dead_letter, message_ids, read_all, read_stream, simple, warren};
use warren::domain::features::QueueType;
use warren::worker::protocol::{Command, JobKind, ReplayRequest, Report};

/// A viewer: reads everything, may configure and publish nothing.
async fn make_viewer(vh: &TestVhost) -> String {
    common::make_user(vh, "monitoring", "^$", "^$").await
}

/// `orders.dlq` with five broker deaths from `orders` (ids v-0 … v-4), then two of them
/// archived by guest into the stream (so a restore has something to take).
async fn setup(vh: &TestVhost, home: &Home) {
    let conn = h::connect(vh).await;
    let ch = h::confirm_channel(&conn).await;
    h::declare(&ch, "orders.dlq", QueueType::Classic, Default::default()).await;
    let msgs: Vec<_> = (0..5).map(|i| simple("v", i, &[])).collect();
    dead_letter(&conn, "orders", "orders.dlq", &msgs).await;
    let _ = conn.close(200, "ok".into()).await;
    let r = warren(
        vh,
        home,
        &[
            "archive",
            "orders.dlq",
            "--limit",
            "2",
            "--create-archive",
            "--yes",
        ],
    )
    .await;
    assert_eq!(r.code, Some(0), "guest archives 2: {r}");
}

/// Where every message is: the DLQ's ids, the work queue's depth, the stream's ids.
async fn where_they_are(vh: &TestVhost) -> (Vec<String>, u64, Vec<String>) {
    let conn = h::connect(vh).await;
    let depth = amqp_depth(&conn, "orders.dlq").await as usize;
    let mut dlq = message_ids(&read_all(&conn, "orders.dlq", depth).await);
    dlq.sort();
    let work = amqp_depth(&conn, "orders").await;
    let mut archived = message_ids(&read_stream(&conn, "warren.archive", 10).await);
    archived.sort();
    let _ = conn.close(200, "ok".into()).await;
    (dlq, work, archived)
}

fn expected() -> (Vec<String>, u64, Vec<String>) {
    (
        vec!["v-2".into(), "v-3".into(), "v-4".into()],
        0,
        vec!["v-0".into(), "v-1".into()],
    )
}

#[tokio::test]
async fn a_viewer_moves_nothing_from_the_command_line() {
    for b in TestBroker::all() {
        let vh = TestVhost::new(&b, "ops-viewer-cli").await;
        let home = Home::new("ops-viewer-cli");
        setup(&vh, &home).await;
        let viewer = make_viewer(&vh).await;
        let (amqp, mgmt) = urls_as(&vh, &viewer);
        let as_viewer = |cmd: &'static [&'static str]| {
            let mut args: Vec<String> = vec![
                "--amqp-url".into(),
                amqp.clone(),
                "--management-url".into(),
                mgmt.clone(),
                "--vhost".into(),
                vh.name.clone(),
            ];
            args.extend(cmd.iter().map(|a| a.to_string()));
            let home = &home;
            async move {
                let args: Vec<&str> = args.iter().map(String::as_str).collect();
                replay_util::run(replay_util::bare_command(home, &args), &args).await
            }
        };
        let cmds: [&'static [&'static str]; 5] = [
            &[
                "discard",
                "orders.dlq",
                "--limit",
                "1",
                "--no-snapshot",
                "--yes",
            ],
            &["archive", "orders.dlq", "--limit", "1", "--local", "--yes"],
            &["archive", "orders.dlq", "--limit", "1", "--yes"],
            &["restore", "--yes"],
            &["replay", "orders.dlq", "--yes"],
        ];
        for cmd in cmds {
            let r = as_viewer(cmd).await;
            assert_eq!(r.code, Some(1), "{} {cmd:?}: {r}", b.label);
            assert!(r.stderr.contains("read-only"), "{} {cmd:?}: {r}", b.label);
            assert!(
                r.stderr.contains("may not publish"),
                "{} {cmd:?}: {r}",
                b.label
            );
            assert!(
                r.stderr.contains("nothing moved")
                    || r.stderr.contains("nothing deleted")
                    || r.stderr.contains("nothing restored"),
                "{} {cmd:?}: {r}",
                b.label
            );
            assert!(!r.stderr.contains("run 2"), "no run started: {r}");
        }
        // Looking stays open.
        let r = as_viewer(&["show", "orders.dlq", "--json"]).await;
        assert_eq!(r.code, Some(0), "{}: {r}", b.label);
        drop_user(&vh, &viewer).await;
        assert_eq!(where_they_are(&vh).await, expected(), "{}", b.label);
        // No local archive was written for the viewer, and the audit holds only guest's run.
        let local = home.dir.join("archive");
        assert!(
            !local.exists() || std::fs::read_dir(&local).map(|d| d.count()).unwrap_or(0) == 0,
            "{}: a local archive was written",
            b.label
        );
        let audit = warren(&vh, &home, &["audit", "--json"]).await;
        let runs: Vec<_> = audit
            .json()
            .into_iter()
            .filter(|v| v.get("operation").is_some())
            .collect();
        assert_eq!(
            runs.len(),
            1,
            "{}: only guest's archive is on record: {audit}",
            b.label
        );
        vh.cleanup().await;
    }
}

#[tokio::test]
async fn a_viewer_moves_nothing_from_the_terminal_ui_and_its_header_says_read_only() {
    use warren::config::Overrides;
    for b in TestBroker::all() {
        let vh = TestVhost::new(&b, "ops-viewer-tui").await;
        let home = Home::new("ops-viewer-tui");
        setup(&vh, &home).await;
        let viewer = make_viewer(&vh).await;
        let (amqp, mgmt) = urls_as(&vh, &viewer);
        let overrides = Overrides {
            config_path: Some(home.dir.join("config.toml")),
            amqp_url: Some(amqp),
            management_url: Some(mgmt),
            vhost: Some(vh.name.clone()),
            ..Overrides::default()
        };
        let (cmd_tx, mut ev_rx, worker) = common::spawn_worker(overrides);
        cmd_tx
            .send(Command::LoadQueues)
            .await
            .expect("worker takes commands");
        // The header: the listing's overview says read-only, and why.
        let overview = tokio::time::timeout(Duration::from_secs(60), async {
            loop {
                match ev_rx.recv().await {
                    Some(Report::QueuesLoaded { overview, .. }) => return overview,
                    Some(_) => {}
                    None => panic!("the worker stopped before listing"),
                }
            }
        })
        .await
        .expect("a listing within a minute");
        assert!(overview.read_only, "{}: {overview:?}", b.label);
        assert!(
            overview.read_only_reason.contains("may not publish"),
            "{}: {}",
            b.label,
            overview.read_only_reason
        );
        for job in [
            JobKind::Discard,
            JobKind::Archive {
                reason: "x".into(),
                place: Default::default(),
            },
            JobKind::Replay,
        ] {
            cmd_tx
                .send(Command::Replay(ReplayRequest {
                    vhost: vh.name.clone(),
                    queue: "orders.dlq".into(),
                    selection: Default::default(),
                    expected: 3,
                    typed: true,
                    rate: 0,
                    keep_attempts: false,
                    strip_failure_stamp: false,
                    dry_run: false,
                    job: job.clone(),
                    canary: None,
                    max_backlog: None,
                    create_audit: None,
                    edited: None,
                }))
                .await
                .expect("worker takes commands");
            let outcome = tokio::time::timeout(Duration::from_secs(60), async {
                loop {
                    match ev_rx.recv().await {
                        Some(Report::ReplayFinished(o)) => return o,
                        Some(_) => {}
                        None => panic!("the worker stopped without finishing"),
                    }
                }
            })
            .await
            .expect("the worker answers within a minute");
            let error = outcome.error.unwrap_or_default();
            assert!(error.contains("read-only"), "{} {job:?}: {error}", b.label);
            assert!(
                error.contains("may not publish"),
                "{} {job:?}: {error}",
                b.label
            );
            assert_eq!(outcome.progress.moved, 0, "{} {job:?}", b.label);
        }
        let _ = cmd_tx.send(Command::Quit).await;
        let _ = worker.await;
        drop_user(&vh, &viewer).await;
        assert_eq!(where_they_are(&vh).await, expected(), "{}", b.label);
        vh.cleanup().await;
    }
}

/// A `management`-tagged user may use its vhost though the API answers 401 when it asks about
/// the vhost itself: a queue that does not exist yet (the audit stream) is missing, not "no
/// access", so Warren creates the stream it was allowed to, and the run is on the shared record.
#[tokio::test]
async fn a_management_user_gets_the_audit_stream_it_was_allowed_to_create() {
    for b in TestBroker::all() {
        let vh = TestVhost::new(&b, "ops-mgmt-audit").await;
        let home = Home::new("ops-mgmt-audit");
        let conn = h::connect(&vh).await;
        let ch = h::confirm_channel(&conn).await;
        h::declare(&ch, "orders.dlq", QueueType::Classic, Default::default()).await;
        let msgs: Vec<_> = (0..3).map(|i| simple("m", i, &[])).collect();
        dead_letter(&conn, "orders", "orders.dlq", &msgs).await;
        let user = common::make_user(&vh, "management", ".*", ".*").await;
        let (amqp, mgmt) = urls_as(&vh, &user);
        let args = [
            "--amqp-url",
            amqp.as_str(),
            "--management-url",
            mgmt.as_str(),
            "--vhost",
            vh.name.as_str(),
            "--create-audit-stream",
            "replay",
            "orders.dlq",
            "--yes",
        ];
        let r = replay_util::run(replay_util::bare_command(&home, &args), &args).await;
        drop_user(&vh, &user).await;
        assert_eq!(r.code, Some(0), "{}: {r}", b.label);
        assert!(!r.stderr.contains("no access"), "{}: {r}", b.label);
        assert!(
            r.stderr.contains("recorded here and on the broker"),
            "{}: {r}",
            b.label
        );
        assert_eq!(amqp_depth(&conn, "orders").await, 3, "{}", b.label);
        let _ = conn.close(200, "ok".into()).await;
        vh.cleanup().await;
    }
}

/// A publish the broker refuses (403: this user may publish to the default exchange but not to
/// the target's) is a refusal, not a possible duplicate: the record says nothing moved and why.
/// The DLQ holds MassTransit faults of an endpoint and nothing dead-letters into it, so its
/// targets are checked as they are first met and the refusal comes from the publish itself.
#[tokio::test]
async fn a_publish_the_broker_refuses_is_a_refusal_not_a_duplicate() {
    use lapin::options::{ExchangeDeclareOptions, QueueBindOptions};
    use warren::domain::value::{HeaderValue as V, Table};
    for b in TestBroker::all() {
        let vh = TestVhost::new(&b, "ops-refused").await;
        let home = Home::new("ops-refused");
        let conn = h::connect(&vh).await;
        let ch = h::confirm_channel(&conn).await;
        // MassTransit's endpoint: an exchange of the queue's name, bound to it.
        ch.exchange_declare(
            "orders".into(),
            lapin::ExchangeKind::Fanout,
            ExchangeDeclareOptions {
                durable: true,
                ..Default::default()
            },
            Default::default(),
        )
        .await
        .expect("exchange");
        h::declare(&ch, "orders", QueueType::Classic, Default::default()).await;
        ch.queue_bind(
            "orders".into(),
            "orders".into(),
            "".into(),
            QueueBindOptions::default(),
            Default::default(),
        )
        .await
        .expect("bind");
        h::declare(&ch, "mixed.dlq", QueueType::Classic, Default::default()).await;
        for i in 0..3 {
            let mut hd = Table::new();
            hd.insert("MT-Reason", V::string("fault"));
            hd.insert("MT-Fault-ExceptionType", V::string("Shop.CardDeclined"));
            hd.insert("MT-Fault-Message", V::string("card declined"));
            hd.insert(
                "MT-Fault-InputAddress",
                V::string("rabbitmq://localhost/orders"),
            );
            let p = warren::domain::message::Properties {
                message_id: Some(format!("r-{i}")),
                content_type: Some("application/vnd.masstransit+json".into()),
                ..Default::default()
            };
            h::publish(&ch, "mixed.dlq", &p, &hd, b"{}").await;
        }
        let user = common::make_user(&vh, "management", ".*", "^amq\\.default$").await;
        let (amqp, mgmt) = urls_as(&vh, &user);
        for limit in [None, Some("1")] {
            let mut args = vec![
                "--amqp-url",
                amqp.as_str(),
                "--management-url",
                mgmt.as_str(),
                "--vhost",
                vh.name.as_str(),
                "replay",
                "mixed.dlq",
                "--yes",
                "--json",
            ];
            if let Some(l) = limit {
                args.extend(["--limit", l]);
            }
            let r = replay_util::run(replay_util::bare_command(&home, &args), &args).await;
            assert_eq!(r.code, Some(1), "{} {limit:?}: {r}", b.label);
            let sum = r.event("summary");
            assert_eq!(sum["moved"], 0, "{} {limit:?}: {sum}", b.label);
            assert_eq!(sum["duplicated"], 0, "{} {limit:?}: {sum}", b.label);
            assert_eq!(sum["left_in_dlq"], 3, "{} {limit:?}: {sum}", b.label);
            let outcome = sum["outcome"].as_str().unwrap_or_default();
            assert!(
                outcome.contains("refused the publish"),
                "{} {limit:?}: {outcome}",
                b.label
            );
            assert_eq!(amqp_depth(&conn, "mixed.dlq").await, 3, "{}", b.label);
            assert_eq!(amqp_depth(&conn, "orders").await, 0, "{}", b.label);
        }
        drop_user(&vh, &user).await;
        // The record keeps it: no duplicates claimed.
        let audit = warren(&vh, &home, &["audit", "--json"]).await;
        for run in audit
            .json()
            .into_iter()
            .filter(|v| v.get("operation").is_some())
        {
            assert_eq!(run["duplicated"], 0, "{}: {run}", b.label);
        }
        let _ = conn.close(200, "ok".into()).await;
        vh.cleanup().await;
    }
}

/// Another consumer holding messages of the DLQ unacknowledged when a replay starts: the run
/// never sees them, so it does not say it went through everything the queue held; it says how
/// many were out of its reach, and exits 1. Every id is accounted for once that consumer lets
/// them go.
#[tokio::test]
async fn messages_another_consumer_holds_are_said_not_passed_over() {
    use futures_util::StreamExt;
    use lapin::options::{BasicConsumeOptions, BasicQosOptions};
    TestBroker::each(|b| async move {
        let vh = TestVhost::new(&b, "ops-held").await;
        let home = Home::new("ops-held");
        let conn = h::connect(&vh).await;
        let ch = h::confirm_channel(&conn).await;
        h::declare(&ch, "held.dlq", QueueType::Classic, Default::default()).await;
        h::declare(&ch, "work", QueueType::Classic, Default::default()).await;
        replay_util::fill(&conn, "held.dlq", "hd", 300).await;
        // The other consumer takes 100 and sits on them.
        let other = conn.create_channel().await.expect("channel");
        other
            .basic_qos(100, BasicQosOptions::default())
            .await
            .expect("qos");
        let mut consumer = other
            .basic_consume(
                "held.dlq".into(),
                "someone-else".into(),
                BasicConsumeOptions::default(),
                Default::default(),
            )
            .await
            .expect("consume");
        for _ in 0..100 {
            tokio::time::timeout(Duration::from_secs(10), consumer.next())
                .await
                .expect("a delivery")
                .expect("stream open")
                .expect("delivery");
        }
        // The management API counts them before the run asks.
        assert!(
            replay_util::eventually(Duration::from_secs(15), || async {
                let q = vh
                    .api(
                        reqwest::Method::GET,
                        &format!("/api/queues/{}/held.dlq", common::enc(&vh.name)),
                        None,
                    )
                    .await;
                let v: serde_json::Value = q.json().await.unwrap_or_default();
                v["messages_unacknowledged"].as_u64() == Some(100)
            })
            .await,
            "{}: the management API saw the 100 held",
            b.label
        );
        let r = warren(
            &vh,
            &home,
            &["replay", "held.dlq", "--to", "work", "--yes", "--json"],
        )
        .await;
        assert_eq!(r.code, Some(1), "{}: {r}", b.label);
        let sum = r.event("summary");
        assert_eq!(sum["moved"], 200, "{}: {sum}", b.label);
        assert_eq!(sum["held_elsewhere"], 100, "{}: {sum}", b.label);
        let outcome = sum["outcome"].as_str().unwrap_or_default();
        assert!(
            outcome.contains("held unacknowledged by another consumer"),
            "{}: {outcome}",
            b.label
        );
        other.close(200, "let go".into()).await.expect("close");
        replay_util::assert_all_present(&conn, &["held.dlq", "work"], "hd", 300).await;
        assert_eq!(amqp_depth(&conn, "work").await, 200, "{}", b.label);
        let _ = conn.close(200, "ok".into()).await;
        vh.cleanup().await;
    })
    .await;
}
