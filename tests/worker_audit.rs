//! The terminal UI's side of the shared record, through its worker on real brokers: a replay
//! from the TUI is on the broker's audit stream when the context allows creating it (the TUI
//! cannot stop to ask), the Replays view lists it with what came back, and a page of the DLQ
//! names who ran the run each message came back from. Without that consent the notice line
//! says the broker record was not written.

use crate::common;
use crate::replay_util;

use std::time::Duration;

use common::amqp as amqp_h;
use common::{TestBroker, TestVhost};
use lapin::types::FieldTable;
use replay_util::{Home, reject_all};
use tokio::sync::mpsc;
use warren::config::Overrides;
use warren::domain::features::QueueType;
use warren::domain::selection::Selection;
use warren::tui::{Command, ReplayRequest, Report};
use warren::worker::protocol::RunSummary;

/// Events until `done` says stop; a notice seen on the way is kept.
async fn until(
    rx: &mut mpsc::Receiver<Report>,
    notices: &mut Vec<String>,
    label: &str,
    done: impl Fn(&Report) -> bool,
) -> Report {
    common::worker_until(rx, label, done, |e| {
        if let Report::Notice(n) = e {
            notices.push(n);
        }
    })
    .await
}

/// The Replays view's runs of `vhost` (the store is shared by the test's sessions).
async fn replays(
    cmd: &mpsc::Sender<Command>,
    rx: &mut mpsc::Receiver<Report>,
    label: &str,
    vhost: &str,
) -> Vec<RunSummary> {
    cmd.send(Command::LoadReplays).await.unwrap();
    match until(rx, &mut Vec::new(), label, |e| {
        matches!(e, Report::ReplaysLoaded { .. })
    })
    .await
    {
        Report::ReplaysLoaded { runs, .. } => {
            runs.into_iter().filter(|r| r.vhost == vhost).collect()
        }
        _ => unreachable!(),
    }
}

type Worker = (
    Home,
    TestVhost,
    lapin::Connection,
    lapin::Channel,
    mpsc::Sender<Command>,
    mpsc::Receiver<Report>,
    tokio::task::JoinHandle<Option<warren::worker::protocol::ReplayOutcome>>,
);

/// Three dead letters in `dlq` of a fresh vhost, and the TUI's worker on a context `c` whose
/// `create_audit_stream` is `create` (unset when `None`).
async fn three_dead_letters(broker: &TestBroker, prefix: &str, create: Option<bool>) -> Worker {
    let vhost = TestVhost::new(broker, prefix).await;
    let home = Home::new(prefix);
    let conn = amqp_h::connect(&vhost).await;
    let ch = amqp_h::confirm_channel(&conn).await;
    amqp_h::declare(&ch, "dlq", QueueType::Classic, FieldTable::default()).await;
    amqp_h::dead_letter_by_reject(&conn, "work", "dlq", 3).await;
    let create = create.map_or(String::new(), |c| format!("create_audit_stream = {c}\n"));
    let config = format!(
        "[contexts.c]\nmanagement_urls = [\"{}\"]\namqp_urls = [\"amqp://{}:{}\"]\nvhost = \"{}\"\nusername = \"guest\"\npassword_env = \"WARREN_TEST_AUDIT_PASSWORD\"\n{create}",
        vhost.broker.mgmt_base(),
        vhost.broker.host,
        vhost.broker.amqp_port,
        vhost.name
    );
    std::fs::write(home.dir.join("config.toml"), config).expect("config");
    let overrides = Overrides {
        config_path: Some(home.dir.join("config.toml")),
        context: Some("c".into()),
        ..Default::default()
    };
    let (cmd_tx, rx, worker) = common::spawn_worker(overrides);
    // The home holds the config file: the caller keeps it for the worker's whole life.
    (home, vhost, conn, ch, cmd_tx, rx, worker)
}

async fn session(broker: TestBroker, create: bool) {
    let label = format!("{} (create_audit_stream = {create})", broker.label);
    let (_home, vhost, conn, ch, cmd_tx, mut rx, worker) =
        three_dead_letters(&broker, "worker-audit", Some(create)).await;
    let mut notices = Vec::new();
    cmd_tx
        .send(Command::Replay(ReplayRequest {
            vhost: vhost.name.clone(),
            queue: "dlq".into(),
            selection: Selection::All,
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
        .unwrap();
    let end = until(&mut rx, &mut notices, &label, |e| {
        matches!(e, Report::ReplayFinished(_))
    })
    .await;
    if let Report::ReplayFinished(o) = &end {
        assert_eq!(o.progress.moved, 3, "{label}: {o:?}");
    }
    let runs = replays(&cmd_tx, &mut rx, &label, &vhost.name).await;
    assert_eq!(runs.len(), 1, "{label}: {runs:?}");
    assert!(runs[0].local, "{label}");
    assert_eq!(runs[0].broker, create, "{label}: {runs:?}");
    assert_eq!(runs[0].moved, Some(3), "{label}");
    assert_eq!(runs[0].came_back.as_ref().map(|b| b.came_back), Some(0));
    if create {
        assert!(notices.is_empty(), "{label}: {notices:?}");
    } else {
        assert!(
            notices
                .iter()
                .any(|n| n.contains("the broker audit record was not written")),
            "{label}: {notices:?}"
        );
    }

    // Two fail again: the view counts them, and a page of the DLQ names who ran their run.
    reject_all(&conn, "work", 2).await;
    amqp_h::wait_for_depth(&conn, "dlq", 2, Duration::from_secs(20)).await;
    let runs = replays(&cmd_tx, &mut rx, &label, &vhost.name).await;
    let back = runs[0].came_back.clone().unwrap_or_default();
    assert_eq!(back.came_back, 2, "{label}: {runs:?}");
    assert_eq!(back.top_failure_count, 2, "{label}: {runs:?}");
    cmd_tx
        .send(Command::Browse {
            vhost: vhost.name.clone(),
            queue: "dlq".into(),
            limit: 500,
            read_again: false,
            restart: false,
        })
        .await
        .unwrap();
    let page = until(&mut rx, &mut notices, &label, |e| {
        matches!(e, Report::MessagesLoaded { .. })
    })
    .await;
    if let Report::MessagesLoaded {
        messages, authors, ..
    } = &page
    {
        assert_eq!(messages.len(), 2, "{label}");
        let run = runs[0].run_id.clone().expect("a run id");
        assert!(
            messages
                .iter()
                .all(|m| m.headers().get_str("warren-replay-id") == Some(run.as_str())),
            "{label}"
        );
        assert_eq!(
            authors.get(&run).map(String::as_str),
            Some(warren::store::current_os_user().as_str()),
            "{label}: {authors:?}"
        );
    }
    cmd_tx.send(Command::Quit).await.unwrap();
    let _ = worker.await;
    let _ = ch.close(200, "ok".into()).await;
    let _ = conn.close(200, "done".into()).await;
    vhost.cleanup().await;
}

#[tokio::test]
async fn a_tui_replay_is_on_the_shared_record_when_the_context_allows_it() {
    let home = Home::new("worker-audit-store");
    // The worker opens Warren's store and reads the password from the environment.
    // SAFETY: set before any thread of this test reads the environment.
    unsafe {
        std::env::set_var("WARREN_STORE", home.store());
        std::env::set_var("WARREN_TEST_AUDIT_PASSWORD", "guest");
    }
    for broker in TestBroker::all() {
        session(broker.clone(), true).await;
        session(broker, false).await;
    }
}

/// A context that neither allows nor forbids creating the audit stream: the worker's plan
/// asks (`create_audit`), and the operator's answer in the modal decides — yes creates the
/// stream and puts the run on it; no keeps the run local and says nothing more about it.
async fn asked(broker: TestBroker, answer: bool) {
    let label = format!("{} (answered {answer})", broker.label);
    let (_home, vhost, conn, _ch, cmd_tx, mut rx, worker) =
        three_dead_letters(&broker, "worker-asked", None).await;
    let mut notices = Vec::new();
    cmd_tx
        .send(Command::PreviewReplay {
            vhost: vhost.name.clone(),
            queue: "dlq".into(),
            selection: Selection::All,
            keep_attempts: false,
            edited: None,
            strip_failure_stamp: false,
        })
        .await
        .unwrap();
    let plan = until(&mut rx, &mut notices, &label, |e| {
        matches!(e, Report::ReplayPreview(_))
    })
    .await;
    let Report::ReplayPreview(plan) = plan else {
        unreachable!()
    };
    let question = plan.create_audit.unwrap_or_default();
    assert!(question.contains("warren.audit"), "{label}: {question:?}");
    cmd_tx
        .send(Command::Replay(ReplayRequest {
            vhost: vhost.name.clone(),
            queue: "dlq".into(),
            selection: Selection::All,
            expected: 3,
            typed: true,
            create_audit: Some(answer),
            edited: None,
            ..Default::default()
        }))
        .await
        .unwrap();
    until(&mut rx, &mut notices, &label, |e| {
        matches!(e, Report::ReplayFinished(_))
    })
    .await;
    let path = format!("/api/queues/{}/warren.audit", common::enc(&vhost.name));
    let exists = vhost
        .api(reqwest::Method::GET, &path, None)
        .await
        .status()
        .is_success();
    assert_eq!(
        exists, answer,
        "{label}: the stream exists only after a yes"
    );
    let runs = replays(&cmd_tx, &mut rx, &label, &vhost.name).await;
    assert_eq!(runs.len(), 1, "{label}: {runs:?}");
    assert_eq!(runs[0].broker, answer, "{label}: {runs:?}");
    assert!(
        !notices
            .iter()
            .any(|n| n.contains("audit record was not written")),
        "{label}: an answer is not nagged about: {notices:?}"
    );
    cmd_tx.send(Command::Quit).await.unwrap();
    let _ = worker.await;
    let _ = conn.close(200, "done".into()).await;
    vhost.cleanup().await;
}

#[tokio::test]
async fn the_operator_s_answer_in_the_modal_decides_the_shared_record() {
    let home = Home::new("worker-asked-store");
    // SAFETY: set before any thread of this test reads the environment.
    unsafe {
        std::env::set_var("WARREN_STORE", home.store());
        std::env::set_var("WARREN_TEST_AUDIT_PASSWORD", "guest");
    }
    for broker in TestBroker::all() {
        asked(broker.clone(), true).await;
        asked(broker, false).await;
    }
}
