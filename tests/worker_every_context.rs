//! Every context at once through the TUI's worker (`:ctx *`, `warren tui --context '*'`) on real
//! brokers: a config file with two live contexts (on two brokers when more than one is up, e.g.
//! 3.10 and 4.3, else two vhosts of one), one whose broker does not answer and one whose password
//! comes from a `password_command` nobody ran. One listing shows both live contexts' DLQs, each
//! named with its context (the same vhost-less name in both stays two); the two others are
//! reported with why, and nothing waits on them. Work is refused in this scope; opening a queue
//! is a switch to its context and vhost, with that context's own read-only; `*` comes back.

use crate::common;
use crate::replay_util;

use common::amqp as amqp_h;
use common::{TestBroker, TestVhost};
use lapin::types::FieldTable;
use replay_util::Home;
use tokio::sync::mpsc;
use warren::config::{Overrides, Unlocked};
use warren::domain::features::QueueType;
use warren::tui::{Command, Report};

/// The worker's next event that `done` takes (errors fail the test).
async fn next(
    rx: &mut mpsc::Receiver<Report>,
    label: &str,
    done: impl Fn(&Report) -> bool,
) -> Report {
    common::worker_until(rx, label, done, |_| {}).await
}

/// The next queue list: its overview, discovery and ticket.
async fn listed(
    rx: &mut mpsc::Receiver<Report>,
    label: &str,
) -> (
    warren::tui::event::Overview,
    warren::domain::discovery::Discovery,
    warren::tui::event::Ticket,
) {
    match next(rx, label, |e| matches!(e, Report::QueuesLoaded { .. })).await {
        Report::QueuesLoaded {
            overview,
            discovery,
            ticket,
        } => (overview, discovery, ticket),
        _ => unreachable!(),
    }
}

/// A context of the config file for `v` (its broker's URLs, its vhost).
fn context(name: &str, v: &TestVhost, read_only: bool) -> String {
    format!(
        "[contexts.{name}]\namqp_urls = [\"{}\"]\nmanagement_urls = [\"{}\"]\nvhost = \"{}\"\nread_only = {read_only}\n\n",
        v.broker.amqp_url(&v.name),
        v.broker.mgmt_url_with_creds(),
        v.name
    )
}

#[tokio::test]
async fn every_context_lists_each_context_s_dlqs_reports_the_unreached_and_opens_in_context() {
    let store = Home::new("worker-every-context-store");
    // SAFETY: set before any thread of this test reads the environment.
    unsafe { std::env::set_var("WARREN_STORE", store.store()) };
    let brokers = TestBroker::all();
    let (first, second) = (&brokers[0], &brokers[brokers.len() - 1]);
    let label = format!("{} + {}", first.label, second.label);
    let a = TestVhost::new(first, "every-ctx-a").await;
    let b = TestVhost::new(second, "every-ctx-b").await;
    // The same queue name in both: 2 dead letters in a's orders.dlq, 3 in b's.
    for (vhost, n) in [(&a, 2), (&b, 3)] {
        let conn = amqp_h::connect(vhost).await;
        let ch = conn.create_channel().await.expect("channel");
        amqp_h::declare(&ch, "orders.dlq", QueueType::Classic, FieldTable::default()).await;
        amqp_h::dead_letter_by_reject(&conn, "orders.process", "orders.dlq", n).await;
        conn.close(200, "set up".into()).await.ok();
    }
    let home = Home::new("worker-every-context");
    let text = context("alpha", &a, false)
        + &context("beta", &b, true)
        + "[contexts.gone]\nmanagement_urls = [\"http://guest:guest@127.0.0.1:9\"]\namqp_urls = [\"amqp://guest:guest@127.0.0.1:9/%2f\"]\n\n"
        // Would hang a minute if anything ran it: the worker never does.
        + &format!(
            "[contexts.vault]\namqp_urls = [\"amqp://ops@127.0.0.1:{}/%2f\"]\nmanagement_urls = [\"http://127.0.0.1:{}\"]\nusername = \"ops\"\npassword_command = \"sleep 60; echo secret\"\n",
            first.amqp_port, first.mgmt_port
        );
    std::fs::write(home.dir.join("config.toml"), text).expect("config");
    let (cmd_tx, mut rx, worker) = common::spawn_worker(Overrides {
        config_path: Some(home.dir.join("config.toml")),
        context: Some("*".into()),
        // As the terminal UI starts it: password commands answered before, never by the worker.
        unlocked: Some(Unlocked::default()),
        ..Default::default()
    });
    let send = |c: Command| {
        let tx = cmd_tx.clone();
        async move { tx.send(c).await.expect("send") }
    };
    let started = std::time::Instant::now();
    send(Command::LoadQueues).await;
    let (overview, discovery, ticket) = listed(&mut rx, &label).await;
    assert!(
        started.elapsed() < std::time::Duration::from_secs(20),
        "{label}: nothing waited on the locked context ({:?})",
        started.elapsed()
    );
    assert_eq!(overview.context, "*", "{label}");
    assert!(overview.read_only, "{label}: the scope is for looking");
    // Each context, in the file's order: the two live ones listed with their own vhost, broker
    // and read-only; the two others with why.
    let reach = |name: &str| {
        overview
            .contexts
            .iter()
            .find(|r| r.context == name)
            .unwrap_or_else(|| panic!("{label}: {name} in {:?}", overview.contexts))
    };
    let names: Vec<&str> = overview
        .contexts
        .iter()
        .map(|r| r.context.as_str())
        .collect();
    assert_eq!(names, ["alpha", "beta", "gone", "vault"], "{label}");
    assert_eq!(reach("alpha").vhost, a.name, "{label}");
    assert!(reach("alpha").unreached.is_none() && !reach("alpha").read_only);
    assert_eq!(reach("beta").vhost, b.name, "{label}");
    assert!(reach("beta").unreached.is_none() && reach("beta").read_only);
    assert!(
        reach("beta").broker_version.starts_with(&second.label),
        "{label}: {:?}",
        reach("beta")
    );
    assert!(reach("gone").unreached.is_some(), "{label}");
    let locked = reach("vault").unreached.clone().unwrap_or_default();
    assert!(
        locked.contains("password_command") && locked.contains(":ctx vault"),
        "{label}: {locked}"
    );
    // One listing: both contexts' orders.dlq, each with its context and vhost and depth.
    let ours: Vec<(&str, &str, Option<u64>)> = discovery
        .dead_letter_queues
        .iter()
        .filter(|q| q.name == "orders.dlq")
        .map(|q| (q.context.as_str(), q.vhost.as_str(), q.depth))
        .collect();
    assert!(
        ours.iter().any(|&(c, v, _)| c == "alpha" && v == a.name)
            && ours.iter().any(|&(c, v, _)| c == "beta" && v == b.name),
        "{label}: {ours:?}"
    );
    assert_eq!(ours.len(), 2, "{label}: {ours:?}");
    assert!(
        discovery.other_queues.is_empty(),
        "{label}: dead-letter queues only"
    );

    // The depth refresh: each context's listing, each depth named with its context.
    send(Command::RefreshDepths).await;
    let Report::DepthsRefreshed { depths, .. } = next(&mut rx, &label, |e| {
        matches!(e, Report::DepthsRefreshed { .. })
    })
    .await
    else {
        unreachable!()
    };
    for (c, v) in [("alpha", &a.name), ("beta", &b.name)] {
        assert!(
            depths.iter().any(|(q, d)| q.context == c
                && &q.vhost == v
                && q.name == "orders.dlq"
                && d.is_some()),
            "{label}: {c} in the refresh"
        );
    }

    // A read in this scope is refused, with why.
    send(Command::Browse {
        vhost: b.name.clone(),
        queue: "orders.dlq".into(),
        limit: 500,
        read_again: false,
        restart: false,
    })
    .await;
    let refused = loop {
        match rx.recv().await.expect("alive") {
            Report::Error(f) => break f,
            Report::MessagesLoaded { .. } => panic!("{label}: read in every context"),
            _ => {}
        }
    };
    assert!(refused.text.contains("for looking"), "{label}: {refused}");
    assert_eq!(refused.generation, Some(ticket.generation));

    // Opening beta's queue: a switch to beta and its vhost, read-only as beta is; then the read.
    send(Command::SwitchContext {
        name: "beta".into(),
        vhost: Some(b.name.clone()),
        generation: 1,
    })
    .await;
    let (overview, _, ticket) = listed(&mut rx, &label).await;
    assert_eq!(ticket.generation, 1);
    assert_eq!(
        (overview.context.as_str(), overview.vhost.as_str()),
        ("beta", b.name.as_str()),
        "{label}"
    );
    assert!(
        overview.read_only && overview.contexts.is_empty(),
        "{label}"
    );
    send(Command::Browse {
        vhost: b.name.clone(),
        queue: "orders.dlq".into(),
        limit: 500,
        read_again: false,
        restart: false,
    })
    .await;
    let Report::MessagesLoaded { messages, .. } = next(&mut rx, &label, |e| {
        matches!(e, Report::MessagesLoaded { .. })
    })
    .await
    else {
        unreachable!()
    };
    assert_eq!(messages.len(), 3, "{label}: beta's own queue");

    // Back to every context.
    send(Command::SwitchContext {
        name: "*".into(),
        vhost: None,
        generation: 2,
    })
    .await;
    let (overview, _, ticket) = listed(&mut rx, &label).await;
    assert_eq!((overview.context.as_str(), ticket.generation), ("*", 2));
    send(Command::Quit).await;
    worker.await.expect("worker ends");

    // Only unreachable contexts: the connect fails, saying each, and nothing hangs.
    std::fs::write(
        home.dir.join("config.toml"),
        "[contexts.gone]\nmanagement_urls = [\"http://guest:guest@127.0.0.1:9\"]\namqp_urls = [\"amqp://guest:guest@127.0.0.1:9/%2f\"]\n",
    )
    .expect("config");
    let (cmd_tx, mut rx, worker) = common::spawn_worker(Overrides {
        config_path: Some(home.dir.join("config.toml")),
        context: Some("*".into()),
        unlocked: Some(Unlocked::default()),
        ..Default::default()
    });
    cmd_tx.send(Command::LoadQueues).await.expect("send");
    let why = loop {
        match rx.recv().await.expect("alive") {
            Report::Error(f) => break f.text,
            Report::QueuesLoaded { .. } => panic!("{label}: listed nothing reachable"),
            _ => {}
        }
    };
    assert!(
        why.contains("no context could be reached") && why.contains("gone"),
        "{label}: {why}"
    );
    cmd_tx.send(Command::Quit).await.expect("send");
    worker.await.expect("worker ends");
    a.cleanup().await;
    b.cleanup().await;
}

/// A context unreached at first is tried again with the next listing (Ctrl-R): once its broker
/// lets its user in, its dead-letter queues join the list without leaving the scope.
#[tokio::test]
async fn an_unreached_context_is_tried_again_with_the_next_listing() {
    let store = Home::new("worker-every-context-retry-store");
    // SAFETY: set before any thread of this test reads the environment.
    unsafe { std::env::set_var("WARREN_STORE", store.store()) };
    let broker = TestBroker::default_broker();
    let label = broker.label.clone();
    let a = TestVhost::new(&broker, "every-ctx-retry").await;
    let conn = amqp_h::connect(&a).await;
    let ch = conn.create_channel().await.expect("channel");
    amqp_h::declare(&ch, "orders.dlq", QueueType::Classic, FieldTable::default()).await;
    amqp_h::dead_letter_by_reject(&conn, "orders.process", "orders.dlq", 2).await;
    conn.close(200, "set up".into()).await.ok();
    // A user that does not exist yet: "late" cannot be reached until it does.
    let user = format!("warren-late-{}", std::process::id());
    let home = Home::new("worker-every-context-retry");
    let late = format!(
        "[contexts.late]\namqp_urls = [\"amqp://{user}:late@127.0.0.1:{}/{}\"]\nmanagement_urls = [\"http://{user}:late@127.0.0.1:{}\"]\nvhost = \"{}\"\n",
        broker.amqp_port,
        common::enc(&a.name),
        broker.mgmt_port,
        a.name
    );
    std::fs::write(
        home.dir.join("config.toml"),
        context("alpha", &a, false) + &late,
    )
    .expect("config");
    let (cmd_tx, mut rx, worker) = common::spawn_worker(Overrides {
        config_path: Some(home.dir.join("config.toml")),
        context: Some("*".into()),
        unlocked: Some(Unlocked::default()),
        ..Default::default()
    });
    let contexts_of = |d: &warren::domain::discovery::Discovery| -> Vec<String> {
        let mut c: Vec<String> = d
            .dead_letter_queues
            .iter()
            .filter(|q| q.name == "orders.dlq")
            .map(|q| q.context.clone())
            .collect();
        c.sort();
        c
    };
    cmd_tx.send(Command::LoadQueues).await.expect("send");
    let (overview, discovery, _) = listed(&mut rx, &label).await;
    let late_reach = overview.contexts.iter().find(|r| r.context == "late");
    assert!(
        late_reach.is_some_and(|r| r.unreached.is_some()),
        "{label}: {:?}",
        overview.contexts
    );
    assert_eq!(contexts_of(&discovery), ["alpha"], "{label}");

    let put = a
        .api(
            reqwest::Method::PUT,
            &format!("/api/users/{user}"),
            Some(serde_json::json!({"password": "late", "tags": "monitoring"})),
        )
        .await;
    assert!(put.status().is_success(), "{label}: {put:?}");
    let perm = a
        .api(
            reqwest::Method::PUT,
            &format!("/api/permissions/{}/{user}", common::enc(&a.name)),
            Some(serde_json::json!({"configure": ".*", "write": ".*", "read": ".*"})),
        )
        .await;
    assert!(perm.status().is_success(), "{label}: {perm:?}");

    cmd_tx.send(Command::LoadQueues).await.expect("send");
    let (overview, discovery, _) = listed(&mut rx, &label).await;
    let late_reach = overview.contexts.iter().find(|r| r.context == "late");
    assert!(
        late_reach.is_some_and(|r| r.unreached.is_none()),
        "{label}: tried again and reached: {:?}",
        overview.contexts
    );
    assert_eq!(contexts_of(&discovery), ["alpha", "late"], "{label}");

    cmd_tx.send(Command::Quit).await.expect("send");
    worker.await.expect("worker ends");
    a.api(reqwest::Method::DELETE, &format!("/api/users/{user}"), None)
        .await;
    a.cleanup().await;
}
