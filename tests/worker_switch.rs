//! `:ctx` and `:vhost` through the TUI's worker on a real broker: a switch is tried before
//! anything changes. A failed one is answered with `SwitchFailed` and the old session goes on
//! serving in the old generation; a successful one answers with the new place's queue list,
//! with that place's own read-only flag and reason; a bad vhost does not carry into the next
//! context; a dry run answers with the CLI's words.

use crate::common;

use std::time::Duration;

use common::amqp as amqp_h;
use common::{TestBroker, TestVhost};
use lapin::options::QueueDeclareOptions;
use lapin::types::FieldTable;
use tokio::sync::mpsc;
use warren::config::Overrides;
use warren::domain::selection::Selection;
use warren::worker::protocol::{Command, Overview, ReplayOutcome, ReplayRequest, Report, Ticket};

/// A config file with two contexts on one broker: `open` (writable) and `locked` (read-only),
/// each in a vhost of its own.
struct Home(std::path::PathBuf);

impl Home {
    fn new(a: &TestVhost, b: &TestVhost) -> Home {
        let dir = std::env::temp_dir().join(common::unique("warren-worker-switch"));
        std::fs::create_dir_all(&dir).expect("temp dir");
        let context = |name: &str, v: &TestVhost, read_only: bool| {
            format!(
                "[contexts.{name}]\namqp_urls = [\"{}\"]\nmanagement_urls = [\"{}\"]\nvhost = \"{}\"\nread_only = {read_only}\n\n",
                v.broker.amqp_url(&v.name),
                v.broker.mgmt_url_with_creds(),
                v.name
            )
        };
        let text = context("open", a, false) + &context("locked", b, true);
        std::fs::write(dir.join("config.toml"), text).expect("config");
        Home(dir)
    }

    fn config(&self) -> Option<std::path::PathBuf> {
        Some(self.0.join("config.toml"))
    }
}

impl Drop for Home {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Waits for the answer `pick` takes, skipping depth refreshes and connection news.
async fn wait_for<T>(
    rx: &mut mpsc::Receiver<Report>,
    what: &str,
    mut pick: impl FnMut(Report) -> Option<T>,
) -> T {
    let until = tokio::time::Instant::now() + Duration::from_secs(30);
    loop {
        let left = until.saturating_duration_since(tokio::time::Instant::now());
        match tokio::time::timeout(left, rx.recv()).await {
            Ok(Some(r)) => {
                if let Some(t) = pick(r) {
                    return t;
                }
            }
            _ => panic!("no {what} within 30 s"),
        }
    }
}

async fn listing(rx: &mut mpsc::Receiver<Report>) -> (Overview, Ticket) {
    wait_for(rx, "queue list", |r| match r {
        Report::QueuesLoaded {
            overview, ticket, ..
        } => Some((overview, ticket)),
        Report::Error(f) => panic!("{f}"),
        Report::SwitchFailed { text, .. } => panic!("switch failed: {text}"),
        _ => None,
    })
    .await
}

async fn switch_failed(rx: &mut mpsc::Receiver<Report>) -> (u64, String) {
    wait_for(rx, "switch failure", |r| match r {
        Report::SwitchFailed { generation, text } => Some((generation, text)),
        Report::QueuesLoaded { overview, .. } => {
            panic!("the switch succeeded: {overview:?}")
        }
        _ => None,
    })
    .await
}

#[tokio::test]
async fn switches_are_tried_first_and_each_place_has_its_own_read_only() {
    let broker = TestBroker::default_broker();
    let a = TestVhost::new(&broker, "switch-a").await;
    let b = TestVhost::new(&broker, "switch-b").await;
    let conn = amqp_h::connect(&a).await;
    let ch = conn.create_channel().await.expect("channel");
    ch.queue_declare(
        "orders.dlq".into(),
        QueueDeclareOptions {
            durable: true,
            ..Default::default()
        },
        FieldTable::default(),
    )
    .await
    .expect("declare");
    amqp_h::dead_letter_by_reject(&conn, "orders.process", "orders.dlq", 3).await;
    let home = Home::new(&a, &b);
    let (cmd_tx, mut rx, worker) = common::spawn_worker(Overrides {
        config_path: home.config(),
        context: Some("open".into()),
        ..Default::default()
    });

    cmd_tx.send(Command::LoadQueues).await.expect("send");
    let (ov, t) = listing(&mut rx).await;
    assert_eq!(
        (ov.context.as_str(), ov.vhost.as_str()),
        ("open", a.name.as_str())
    );
    assert!(!ov.read_only, "{ov:?}");
    assert_eq!(t.generation, 0);

    // A vhost that does not exist: refused, and the old session goes on serving.
    cmd_tx
        .send(Command::SwitchVhost {
            name: "warren-test-no-such-vhost".into(),
            generation: 1,
        })
        .await
        .expect("send");
    let (g, why) = switch_failed(&mut rx).await;
    assert_eq!(g, 1);
    assert!(why.contains("warren-test-no-such-vhost"), "{why}");
    cmd_tx
        .send(Command::Browse {
            vhost: a.name.clone(),
            queue: "orders.dlq".into(),
            limit: 500,
            read_again: false,
            restart: false,
        })
        .await
        .expect("send");
    let (n, t) = wait_for(&mut rx, "page", |r| match r {
        Report::MessagesLoaded {
            messages, ticket, ..
        } => Some((messages.len(), ticket)),
        Report::Error(f) => panic!("the old session is gone: {f}"),
        _ => None,
    })
    .await;
    assert_eq!((n, t.generation), (3, 0), "read on the old session");

    // A dry run there answers with the CLI's words, per target.
    cmd_tx
        .send(Command::Replay(ReplayRequest {
            vhost: a.name.clone(),
            queue: "orders.dlq".into(),
            selection: Selection::All,
            expected: 3,
            typed: true,
            rate: 50,
            keep_attempts: false,
            strip_failure_stamp: false,
            dry_run: true,
            job: Default::default(),
            canary: None,
            max_backlog: None,
            create_audit: None,
            edited: None,
        }))
        .await
        .expect("send");
    let outcome: ReplayOutcome = wait_for(&mut rx, "dry run", |r| match r {
        Report::ReplayFinished(o) => Some(o),
        _ => None,
    })
    .await;
    assert!(outcome.error.is_none(), "{outcome:?}");
    assert!(
        outcome.summary[0].starts_with("Would replay 3 message(s) from orders.dlq"),
        "{:?}",
        outcome.summary
    );
    assert!(
        outcome
            .summary
            .iter()
            .any(|l| l.contains("→ orders.process") && l.contains("reaches orders.process")),
        "{:?}",
        outcome.summary
    );

    // The read-only context: its own vhost (the bad one did not carry over), read-only, and why.
    cmd_tx
        .send(Command::SwitchContext {
            name: "locked".into(),
            vhost: None,
            generation: 2,
        })
        .await
        .expect("send");
    let (ov, t) = listing(&mut rx).await;
    assert_eq!(t.generation, 2);
    assert_eq!(
        (ov.context.as_str(), ov.vhost.as_str()),
        ("locked", b.name.as_str())
    );
    assert!(
        ov.read_only && ov.read_only_reason.contains("context 'locked'"),
        "{ov:?}"
    );

    // Back to the writable one: read-only does not stick.
    cmd_tx
        .send(Command::SwitchContext {
            name: "open".into(),
            vhost: None,
            generation: 3,
        })
        .await
        .expect("send");
    let (ov, t) = listing(&mut rx).await;
    assert_eq!(t.generation, 3);
    assert_eq!(ov.vhost, a.name);
    assert!(!ov.read_only && ov.read_only_reason.is_empty(), "{ov:?}");

    // A context that is not configured: refused, and the worker stays put.
    cmd_tx
        .send(Command::SwitchContext {
            name: "nope".into(),
            vhost: None,
            generation: 4,
        })
        .await
        .expect("send");
    let (g, why) = switch_failed(&mut rx).await;
    assert_eq!(g, 4);
    assert!(why.contains("nope"), "{why}");
    cmd_tx.send(Command::LoadQueues).await.expect("send");
    let (ov, t) = listing(&mut rx).await;
    assert_eq!((ov.context.as_str(), t.generation), ("open", 3));

    cmd_tx.send(Command::Quit).await.expect("send");
    let _ = worker.await;
    drop(conn);
    a.cleanup().await;
    b.cleanup().await;
}

#[tokio::test]
async fn with_read_only_on_the_command_line_every_place_is_read_only_and_says_why() {
    let broker = TestBroker::default_broker();
    let a = TestVhost::new(&broker, "switch-flag-a").await;
    let b = TestVhost::new(&broker, "switch-flag-b").await;
    let home = Home::new(&a, &b);
    let (cmd_tx, mut rx, worker) = common::spawn_worker(Overrides {
        config_path: home.config(),
        context: Some("open".into()),
        read_only: true,
        ..Default::default()
    });
    cmd_tx.send(Command::LoadQueues).await.expect("send");
    let (ov, _) = listing(&mut rx).await;
    assert!(
        ov.read_only && ov.read_only_reason.contains("--read-only"),
        "{ov:?}"
    );
    cmd_tx
        .send(Command::SwitchContext {
            name: "locked".into(),
            vhost: None,
            generation: 1,
        })
        .await
        .expect("send");
    let (ov, t) = listing(&mut rx).await;
    assert_eq!((ov.context.as_str(), t.generation), ("locked", 1));
    assert!(
        ov.read_only && ov.read_only_reason.contains("--read-only"),
        "{ov:?}"
    );
    cmd_tx.send(Command::Quit).await.expect("send");
    let _ = worker.await;
    a.cleanup().await;
    b.cleanup().await;
}
