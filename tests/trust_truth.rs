//! Warren never says what is not true, against real brokers: two URLs reaching two brokers are
//! refused; a user who may not publish is refused before anything moves (CLI and TUI worker);
//! queue names with `[ ] | ^` reach the management API; broker text reaches the terminal only
//! sanitised, and `--json` escapes what a terminal would act on.

use crate::common;
use crate::replay_util;
use crate::tui_fixtures;

use std::time::Duration;

use common::amqp::{self as h, amqp_depth};
use common::{TestBroker, TestVhost, enc, unique};
use replay_util::{Home, dead_letter, simple, warren};
use warren::domain::features::QueueType;

/// Runs the binary with exactly these arguments (no URLs added), with a private home.
async fn bare(home: &Home, args: &[&str]) -> replay_util::Run {
    replay_util::run(replay_util::bare_command(home, args), args).await
}

/// Two brokers of different versions, when the extra versions run.
fn two_brokers() -> Option<(TestBroker, TestBroker)> {
    let all = TestBroker::all();
    let a = all.first()?.clone();
    let b = all.iter().find(|b| b.label != a.label)?.clone();
    Some((a, b))
}

#[tokio::test]
async fn a_non_default_amqp_port_derives_nothing() {
    let home = Home::new("truth-derive");
    for b in TestBroker::all() {
        let url = format!("amqp://guest:guest@{}:{}", b.host, b.amqp_port);
        let r = bare(&home, &["--amqp-url", &url, "queues"]).await;
        if b.amqp_port == 5672 {
            // The default port: the management URL is derived (and may or may not answer).
            assert!(!r.stderr.contains("not on RabbitMQ's default port"), "{r}");
        } else {
            assert_eq!(r.code, Some(2), "{r}");
            assert!(r.stderr.contains("--management-url"), "{r}");
            assert!(r.stderr.contains("management_urls"), "{r}");
            assert!(r.stdout.is_empty(), "{r}");
            // A management URL alone still serves what needs only the management API; AMQP
            // is not guessed from it.
            let r = bare(
                &home,
                &["--management-url", &b.mgmt_url_with_creds(), "queues"],
            )
            .await;
            assert_eq!(r.code, Some(0), "{r}");
        }
    }
}

#[tokio::test]
async fn urls_reaching_two_brokers_are_refused() {
    let Some((a, b)) = two_brokers() else {
        eprintln!("skipped: needs WARREN_TEST_VERSIONS with a second broker");
        return;
    };
    let home = Home::new("truth-mismatch");
    for (x, y) in [(&a, &b), (&b, &a)] {
        let amqp = format!("amqp://guest:guest@{}:{}", x.host, x.amqp_port);
        let mgmt = y.mgmt_url_with_creds();
        for cmd in [
            &["queues"][..],
            &["queues", "--json"],
            &["show", "some-dlq"],
        ] {
            let mut args = vec!["--amqp-url", &amqp, "--management-url", &mgmt];
            args.extend_from_slice(cmd);
            let r = bare(&home, &args).await;
            assert_eq!(r.code, Some(3), "{cmd:?} {r}");
            assert!(r.stderr.contains("different brokers"), "{r}");
            assert!(r.stdout.is_empty(), "{r}");
        }
        // The demo must not build on one broker and browse another.
        let vhost = unique("warren-demo-mismatch");
        let r = bare(
            &home,
            &[
                "--amqp-url",
                &amqp,
                "--management-url",
                &mgmt,
                "--vhost",
                &vhost,
                "demo",
            ],
        )
        .await;
        assert_eq!(r.code, Some(3), "{r}");
        assert!(r.stderr.contains("different brokers"), "{r}");
        let http = reqwest::Client::new();
        let status = http
            .get(format!("{}/api/vhosts/{}", y.mgmt_base(), enc(&vhost)))
            .basic_auth("guest", Some("guest"))
            .send()
            .await
            .expect("management answers")
            .status();
        assert_eq!(status, 404, "the demo vhost was not created on {}", y.label);
    }
    // The matching pair still works.
    let amqp = format!("amqp://guest:guest@{}:{}", a.host, a.amqp_port);
    let r = bare(
        &home,
        &[
            "--amqp-url",
            &amqp,
            "--management-url",
            &a.mgmt_url_with_creds(),
            "queues",
        ],
    )
    .await;
    assert_eq!(r.code, Some(0), "{r}");
}

// ---------------------------------------------------------------------------------------------
// Users who may not publish

/// A user of the test vhost, deleted by `drop_user`.
async fn make_user(vh: &TestVhost, tags: &str, write: &str) -> String {
    common::make_user(vh, tags, ".*", write).await
}

use common::{drop_user, urls_as};

/// A DLQ with three broker deaths from `work`.
async fn dlq_with_three(vh: &TestVhost, work: &str, dlq: &str) {
    let conn = h::connect(vh).await;
    let ch = h::confirm_channel(&conn).await;
    h::declare(&ch, dlq, QueueType::Classic, Default::default()).await;
    let msgs: Vec<_> = (0..3).map(|i| simple("truth", i, &[])).collect();
    dead_letter(&conn, work, dlq, &msgs).await;
    let _ = conn.close(200, "ok".into()).await;
}

async fn depths(vh: &TestVhost, queues: &[&str]) -> Vec<u64> {
    let conn = h::connect(vh).await;
    let mut out = Vec::new();
    for q in queues {
        out.push(amqp_depth(&conn, q).await);
    }
    let _ = conn.close(200, "ok".into()).await;
    out
}

async fn cli_replay_as(vh: &TestVhost, home: &Home, user: &str, dlq: &str) -> replay_util::Run {
    let (amqp, mgmt) = urls_as(vh, user);
    bare(
        home,
        &[
            "--amqp-url",
            &amqp,
            "--management-url",
            &mgmt,
            "--vhost",
            &vh.name,
            "replay",
            dlq,
            "--yes",
        ],
    )
    .await
}

#[tokio::test]
async fn a_management_user_without_write_is_refused_before_anything_moves() {
    for b in TestBroker::all() {
        let vh = TestVhost::new(&b, "truth-ro-mgmt").await;
        let home = Home::new("truth-ro-mgmt");
        dlq_with_three(&vh, "work", "work.dlq").await;
        let user = make_user(&vh, "management", "").await;
        let r = cli_replay_as(&vh, &home, &user, "work.dlq").await;
        drop_user(&vh, &user).await;
        eprintln!("{}: {}", b.label, r.stderr.trim());
        assert_eq!(r.code, Some(1), "{}: {r}", b.label);
        assert!(r.stderr.contains("read-only"), "{}: {r}", b.label);
        assert!(r.stderr.contains("may not publish"), "{}: {r}", b.label);
        assert!(r.stderr.contains("nothing moved"), "{}: {r}", b.label);
        assert_eq!(
            depths(&vh, &["work.dlq", "work"]).await,
            vec![3, 0],
            "{}: nothing moved",
            b.label
        );
        vh.cleanup().await;
    }
}

#[tokio::test]
async fn a_management_user_with_write_may_replay() {
    // The trial publish must not deliver anything, and must not refuse a user who may write.
    for b in TestBroker::all() {
        let vh = TestVhost::new(&b, "truth-rw-mgmt").await;
        let home = Home::new("truth-rw-mgmt");
        dlq_with_three(&vh, "work", "work.dlq").await;
        let user = make_user(&vh, "management", ".*").await;
        let (amqp, mgmt) = urls_as(&vh, &user);
        let dry = bare(
            &home,
            &[
                "--amqp-url",
                &amqp,
                "--management-url",
                &mgmt,
                "replay",
                "work.dlq",
                "--dry-run",
            ],
        )
        .await;
        assert_eq!(dry.code, Some(0), "{}: {dry}", b.label);
        let r = cli_replay_as(&vh, &home, &user, "work.dlq").await;
        drop_user(&vh, &user).await;
        assert_eq!(r.code, Some(0), "{}: {r}", b.label);
        assert!(!r.stderr.contains("may not publish"), "{}: {r}", b.label);
        // Exactly the three messages moved: no trial message arrived in `work`.
        assert_eq!(
            depths(&vh, &["work.dlq", "work"]).await,
            vec![0, 3],
            "{}",
            b.label
        );
        vh.cleanup().await;
    }
}

#[tokio::test]
async fn an_administrator_with_nothing_writable_is_refused_in_cli_and_worker() {
    use warren::config::Overrides;
    use warren::worker::protocol::{Command, ReplayRequest, Report};
    for b in TestBroker::all() {
        let vh = TestVhost::new(&b, "truth-ro-admin").await;
        let home = Home::new("truth-ro-admin");
        dlq_with_three(&vh, "work", "work.dlq").await;
        let user = make_user(&vh, "administrator", "^$").await;

        let r = cli_replay_as(&vh, &home, &user, "work.dlq").await;
        assert_eq!(r.code, Some(1), "{}: {r}", b.label);
        assert!(r.stderr.contains("may not publish"), "{}: {r}", b.label);

        // The TUI's worker, given the same user, refuses the same way.
        let (amqp, mgmt) = urls_as(&vh, &user);
        let overrides = Overrides {
            config_path: Some(home.dir.join("config.toml")),
            amqp_url: Some(amqp),
            management_url: Some(mgmt),
            vhost: Some(vh.name.clone()),
            ..Overrides::default()
        };
        let (cmd_tx, mut ev_rx, worker) = common::spawn_worker(overrides);
        cmd_tx
            .send(Command::Replay(ReplayRequest {
                vhost: vh.name.clone(),
                queue: "work.dlq".into(),
                selection: Default::default(),
                expected: 3,
                typed: true,
                rate: 0,
                keep_attempts: false,
                strip_failure_stamp: false,
                dry_run: false,
                job: Default::default(),
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
                    None => panic!("the worker stopped without finishing the replay"),
                }
            }
        })
        .await
        .expect("the worker answers within a minute");
        let _ = cmd_tx.send(Command::Quit).await;
        let _ = worker.await;
        drop_user(&vh, &user).await;
        let error = outcome.error.unwrap_or_default();
        eprintln!(
            "{}: CLI: {}\n{}: worker: {error}",
            b.label,
            r.stderr.trim(),
            b.label
        );
        assert!(error.contains("may not publish"), "{}: {error}", b.label);
        assert_eq!(outcome.progress.moved, 0, "{}", b.label);
        assert_eq!(
            depths(&vh, &["work.dlq", "work"]).await,
            vec![3, 0],
            "{}: nothing moved",
            b.label
        );
        vh.cleanup().await;
    }
}

// ---------------------------------------------------------------------------------------------
// Names the management API must receive percent-encoded

#[tokio::test]
async fn queue_names_with_brackets_pipes_and_carets_work() {
    let dlq = "a[b]|c^d e/f";
    for b in TestBroker::all() {
        let vh = TestVhost::new(&b, "truth-names").await;
        let home = Home::new("truth-names");
        dlq_with_three(&vh, "w[o]rk|^", dlq).await;

        let r = warren(&vh, &home, &["queues", "--json"]).await;
        assert_eq!(r.code, Some(0), "{}: {r}", b.label);
        let listed: Vec<_> = r.json().into_iter().filter(|v| v["name"] == dlq).collect();
        assert_eq!(listed.len(), 1, "{}: {r}", b.label);
        assert_eq!(listed[0]["depth"].as_u64().unwrap_or(3), 3, "{}", b.label);

        let r = warren(&vh, &home, &["show", dlq, "--json"]).await;
        assert_eq!(r.code, Some(0), "{}: {r}", b.label);
        assert!(r.stdout.contains("truth-0"), "{}: {r}", b.label);

        let r = warren(&vh, &home, &["replay", dlq, "--dry-run"]).await;
        assert_eq!(r.code, Some(0), "{}: {r}", b.label);
        assert_eq!(
            depths(&vh, &[dlq, "w[o]rk|^"]).await,
            vec![3, 0],
            "{}",
            b.label
        );
        vh.cleanup().await;
    }
}

// ---------------------------------------------------------------------------------------------
// "● connected" only when both APIs answered for the vhost

/// The connection states the worker reports for `overrides` after being asked for the queues.
async fn connection_states(overrides: warren::config::Overrides) -> Vec<String> {
    use warren::worker::protocol::{Command, ConnectionState, Report};
    let (cmd_tx, mut ev_rx, worker) = common::spawn_worker(overrides);
    cmd_tx
        .send(Command::LoadQueues)
        .await
        .expect("worker takes commands");
    let mut states = Vec::new();
    let _ = tokio::time::timeout(Duration::from_secs(60), async {
        while let Some(e) = ev_rx.recv().await {
            match e {
                Report::Connection(ConnectionState::Connecting) => states.push("connecting".into()),
                Report::Connection(ConnectionState::Connected) => {
                    states.push("connected".into());
                }
                Report::Connection(ConnectionState::Disconnected(why)) => {
                    states.push(format!("disconnected: {why}"));
                }
                Report::QueuesLoaded { .. } => {
                    states.push("queues".into());
                    break;
                }
                Report::Error(_) if states.iter().any(|s| s.starts_with("disconnected")) => break,
                _ => {}
            }
        }
    })
    .await;
    let _ = cmd_tx.send(Command::Quit).await;
    let _ = worker.await;
    states
}

#[tokio::test]
async fn connected_means_management_and_amqp_answered_for_the_vhost() {
    use warren::config::Overrides;
    for b in TestBroker::all() {
        let vh = TestVhost::new(&b, "truth-connected").await;
        let home = Home::new("truth-connected");
        let base = Overrides {
            config_path: Some(home.dir.join("config.toml")),
            amqp_url: Some(format!("amqp://guest:guest@{}:{}", b.host, b.amqp_port)),
            management_url: Some(b.mgmt_url_with_creds()),
            ..Overrides::default()
        };

        let good = connection_states(Overrides {
            vhost: Some(vh.name.clone()),
            ..base.clone()
        })
        .await;
        assert_eq!(good, ["connecting", "connected", "queues"], "{}", b.label);

        // The vhost does not exist: management answers, AMQP refuses.
        let missing = connection_states(Overrides {
            vhost: Some(unique("warren-no-such-vhost")),
            ..base.clone()
        })
        .await;
        assert!(
            !missing.iter().any(|s| s == "connected"),
            "{}: {missing:?}",
            b.label
        );
        assert!(
            missing
                .iter()
                .any(|s| s.starts_with("disconnected:") && s.contains("AMQP")),
            "{}: {missing:?}",
            b.label
        );

        // AMQP is not there at all (nothing listens on the port).
        let refused = connection_states(Overrides {
            vhost: Some(vh.name.clone()),
            amqp_url: Some(format!("amqp://guest:guest@{}:1", b.host)),
            ..base.clone()
        })
        .await;
        assert!(
            !refused.iter().any(|s| s == "connected"),
            "{}: {refused:?}",
            b.label
        );
        assert!(
            refused.iter().any(|s| s.starts_with("disconnected:")),
            "{}: {refused:?}",
            b.label
        );
        eprintln!("{}: {missing:?}\n{}: {refused:?}", b.label, b.label);
        vh.cleanup().await;
    }
}

// ---------------------------------------------------------------------------------------------
// Broker text reaches the terminal sanitised

const OSC: &str = "\u{1b}]0;pwned\u{7}";

/// A DLQ holding one message whose forged x-death carries an OSC title sequence (reason), a bidi
/// override (queue) and a colour escape (exchange), like a hostile producer could send.
async fn forged_death(vh: &TestVhost, dlq: &str) {
    use warren::domain::message::Properties;
    use warren::domain::value::{HeaderValue, Table};
    let conn = h::connect(vh).await;
    let ch = h::confirm_channel(&conn).await;
    h::declare(&ch, dlq, QueueType::Classic, Default::default()).await;
    let mut death = Table::new();
    death.insert("count", HeaderValue::I64(1));
    death.insert("reason", HeaderValue::string(OSC));
    death.insert("queue", HeaderValue::string("orders\u{202e}gnp.exe"));
    death.insert("exchange", HeaderValue::string("ex\u{1b}[31mred"));
    death.insert("time", HeaderValue::Timestamp(1_700_000_000));
    death.insert(
        "routing-keys",
        HeaderValue::Array(vec![HeaderValue::string("rk\u{200b}\u{2066}")]),
    );
    let mut headers = Table::new();
    headers.insert(
        "x-death",
        HeaderValue::Array(vec![HeaderValue::Table(death)]),
    );
    headers.insert("x-first-death-reason", HeaderValue::string(OSC));
    let props = Properties {
        message_id: Some("forged\u{1b}[2J-1".into()),
        ..Default::default()
    };
    h::publish(&ch, dlq, &props, &headers, b"body \x1b]0;pwned\x07").await;
    let _ = conn.close(200, "ok".into()).await;
}

/// True when some string inside `v` contains `needle`.
fn holds(v: &serde_json::Value, needle: &str) -> bool {
    match v {
        serde_json::Value::String(s) => s.contains(needle),
        serde_json::Value::Array(a) => a.iter().any(|x| holds(x, needle)),
        serde_json::Value::Object(o) => o.values().any(|x| holds(x, needle)),
        _ => false,
    }
}

fn raw_unsafe(text: &str) -> Vec<char> {
    text.chars()
        .filter(|c| *c != '\n' && warren::domain::sanitize::is_unsafe(*c))
        .collect()
}

#[tokio::test]
async fn show_sanitises_every_broker_string_and_json_escapes_them() {
    for b in TestBroker::all() {
        let vh = TestVhost::new(&b, "truth-sanitise").await;
        let home = Home::new("truth-sanitise");
        forged_death(&vh, "forged.dlq").await;

        let r = warren(&vh, &home, &["show", "forged.dlq"]).await;
        assert_eq!(r.code, Some(0), "{}: {r}", b.label);
        assert_eq!(
            raw_unsafe(&r.stdout),
            Vec::<char>::new(),
            "{}: {r}",
            b.label
        );
        assert_eq!(
            raw_unsafe(&r.stderr),
            Vec::<char>::new(),
            "{}: {r}",
            b.label
        );
        assert!(r.stdout.contains("\\e]0;pwned\\x07"), "{}: {r}", b.label);
        assert!(
            r.stdout.contains("orders\\u{202e}gnp.exe"),
            "{}: {r}",
            b.label
        );

        let r = warren(&vh, &home, &["show", "forged.dlq", "--json"]).await;
        assert_eq!(r.code, Some(0), "{}: {r}", b.label);
        assert_eq!(
            raw_unsafe(&r.stdout),
            Vec::<char>::new(),
            "{}: {r}",
            b.label
        );
        assert!(
            r.stdout.contains("\\u001b]0;pwned\\u0007"),
            "{}: {r}",
            b.label
        );
        assert!(r.stdout.contains("\\u202e"), "{}: {r}", b.label);
        // Still the same JSON: the reason reads back as the broker sent it.
        let v = r.json();
        assert_eq!(v.len(), 1, "{}: {r}", b.label);
        assert!(
            holds(&v[0], OSC),
            "{}: the parsed value keeps the reason exactly: {r}",
            b.label
        );

        // The TUI's detail view of the same message, read off the broker.
        let conn = h::connect(&vh).await;
        let mut messages = h::peek(&conn, "forged.dlq", 1).await;
        let _ = conn.close(200, "ok".into()).await;
        assert_eq!(messages.len(), 1, "{}", b.label);
        for m in &mut messages {
            m.queue = "orders.dlq".into();
        }
        let mut st = tui_fixtures::browsed(false, "orders.dlq", messages);
        warren::tui::update(
            &mut st,
            tui_fixtures::key(ratatui::crossterm::event::KeyCode::Enter),
        );
        let mut terminal =
            ratatui::Terminal::new(ratatui::backend::TestBackend::new(160, 48)).unwrap();
        terminal.draw(|f| warren::tui::view(&st, f)).unwrap();
        let buf = terminal.backend().buffer().clone();
        let mut screen = String::new();
        for y in 0..buf.area.height {
            for x in 0..buf.area.width {
                screen.push_str(buf[(x, y)].symbol());
            }
            screen.push('\n');
        }
        assert_eq!(
            raw_unsafe(&screen),
            Vec::<char>::new(),
            "{}:\n{screen}",
            b.label
        );
        assert!(
            screen.contains("\\e]0;pwned\\x07"),
            "{}:\n{screen}",
            b.label
        );
        vh.cleanup().await;
    }
}
