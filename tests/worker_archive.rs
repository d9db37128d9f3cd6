//! Archive and discard from the terminal UI, through its worker on real brokers: archiving 3 of
//! 5 leaves 2 in the DLQ and 3 in the archive stream with the reason; a discard writes its
//! snapshot of exactly what goes before anything is deleted, and both are on the record.

mod common;
mod replay_util;

use common::amqp::{self as h, amqp_depth};
use common::{TestBroker, TestVhost};
use lapin::types::FieldTable;
use replay_util::{Home, fill, read_stream};
use tokio::sync::mpsc;
use warren::broker::config::Overrides;
use warren::domain::features::QueueType;
use warren::domain::selection::Selection;
use warren::tui::{Command, ReplayRequest, Report};
use warren::worker::protocol::JobKind;

async fn run(
    cmd: &mpsc::Sender<Command>,
    rx: &mut mpsc::Receiver<Report>,
    label: &str,
    vhost: &str,
    job: JobKind,
    expected: u64,
) -> (warren::tui::event::ReplayOutcome, Vec<String>) {
    cmd.send(Command::Replay(ReplayRequest {
        vhost: vhost.into(),
        queue: "dlq".into(),
        selection: Selection::All,
        expected,
        rate: 0,
        keep_attempts: false,
        dry_run: false,
        job,
    }))
    .await
    .unwrap();
    let mut notices = Vec::new();
    let end = common::worker_until(
        rx,
        label,
        |e| matches!(e, Report::ReplayFinished(_)),
        |e| {
            if let Report::Notice(n) = e {
                notices.push(n);
            }
        },
    )
    .await;
    match end {
        Report::ReplayFinished(o) => (o, notices),
        _ => unreachable!(),
    }
}

async fn session(broker: TestBroker, home: &Home) {
    let label = broker.label.clone();
    let vhost = TestVhost::new(&broker, "worker-archive").await;
    let conn = h::connect(&vhost).await;
    let ch = h::confirm_channel(&conn).await;
    h::declare(&ch, "dlq", QueueType::Classic, FieldTable::default()).await;
    fill(&conn, "dlq", "m", 5).await;
    let config = format!(
        "[contexts.c]\nmanagement_urls = [\"{}\"]\namqp_urls = [\"amqp://{}:{}\"]\nvhost = \"{}\"\nusername = \"guest\"\npassword_env = \"WARREN_TEST_ARCHIVE_PASSWORD\"\narchive_create = true\n",
        vhost.broker.mgmt_base(),
        vhost.broker.host,
        vhost.broker.amqp_port,
        vhost.name
    );
    let path = home.dir.join(format!("config-{label}.toml"));
    std::fs::write(&path, config).expect("config");
    let overrides = Overrides {
        config_path: Some(path),
        context: Some("c".into()),
        ..Default::default()
    };
    let (cmd_tx, mut rx, worker) = common::spawn_worker(overrides);

    // Archive 3 of 5: the archive stream is created (the context allows it), 2 stay.
    let (o, _) = run(
        &cmd_tx,
        &mut rx,
        &label,
        &vhost.name,
        JobKind::Archive {
            reason: "customer gone".into(),
        },
        3,
    )
    .await;
    assert_eq!(o.progress.moved, 3, "{label}: {o:?}");
    assert!(o.error.is_none(), "{label}: {o:?}");
    assert_eq!(amqp_depth(&conn, "dlq").await, 2, "{label}");
    let archived = read_stream(&conn, "warren.archive", 10).await;
    assert_eq!(archived.len(), 3, "{label}");
    for m in &archived {
        assert_eq!(
            m.headers.get_str("warren-archive-reason"),
            Some("customer gone"),
            "{label}"
        );
        assert_eq!(m.headers.get_str("warren-archived-from"), Some("dlq"));
    }

    // The archive is listed with the DLQs, marked; browsing it shows who, when and why.
    cmd_tx.send(Command::LoadQueues).await.unwrap();
    let listed = common::worker_until(
        &mut rx,
        &label,
        |e| matches!(e, Report::QueuesLoaded { .. }),
        |_| {},
    )
    .await;
    if let Report::QueuesLoaded { discovery, .. } = &listed {
        assert_eq!(
            discovery.dlq("warren.archive").map(|d| d.kind),
            Some(warren::domain::discovery::DlqKind::Archive),
            "{label}: {discovery:?}"
        );
    }
    cmd_tx
        .send(Command::Browse {
            vhost: vhost.name.clone(),
            queue: "warren.archive".into(),
            limit: 100,
            read_again: false,
        })
        .await
        .unwrap();
    let page = common::worker_until(
        &mut rx,
        &label,
        |e| matches!(e, Report::MessagesLoaded { .. }),
        |_| {},
    )
    .await;
    if let Report::MessagesLoaded { messages, .. } = &page {
        assert_eq!(messages.len(), 3, "{label}");
        for m in messages {
            assert_eq!(
                m.headers().get_str("warren-archive-reason"),
                Some("customer gone"),
                "{label}"
            );
            assert!(
                m.headers().get_str("warren-archived-by").is_some(),
                "{label}"
            );
        }
    }
    assert_eq!(
        read_stream(&conn, "warren.archive", 10).await.len(),
        3,
        "{label}: browsing the archive took nothing"
    );

    // Discard 1: its snapshot is written first, with exactly that message, and named.
    let (o, notices) = run(&cmd_tx, &mut rx, &label, &vhost.name, JobKind::Discard, 1).await;
    assert_eq!(o.progress.moved, 1, "{label}: {o:?}");
    assert_eq!(amqp_depth(&conn, "dlq").await, 1, "{label}");
    let said = notices
        .iter()
        .find(|n| n.starts_with("snapshot written: 1 message(s) in "))
        .unwrap_or_else(|| panic!("{label}: {notices:?}"));
    let file = said
        .trim_start_matches("snapshot written: 1 message(s) in ")
        .trim_end_matches(" (`warren open` reads it)");
    let text = std::fs::read_to_string(file).expect("the snapshot");
    // A header line and the one message.
    assert_eq!(text.lines().count(), 2, "{label}: {text}");
    assert!(
        text.contains("m-3"),
        "{label}: the head of the DLQ after the archive: {text}"
    );

    // Both are on the local record.
    let store = warren::store::Store::open(&home.store()).expect("store");
    let ops: Vec<String> = store
        .list_audit(50)
        .expect("audit")
        .into_iter()
        .filter(|e| e.vhost == vhost.name)
        .map(|e| e.operation.as_str().to_string())
        .collect();
    assert!(ops.contains(&"archive".to_string()), "{label}: {ops:?}");
    assert!(ops.contains(&"discard".to_string()), "{label}: {ops:?}");

    cmd_tx.send(Command::Quit).await.unwrap();
    let _ = worker.await;
    let _ = ch.close(200, "ok".into()).await;
    let _ = conn.close(200, "done".into()).await;
    vhost.cleanup().await;
}

#[tokio::test]
async fn the_tui_archives_3_of_5_and_discards_after_writing_its_snapshot() {
    let home = Home::new("worker-archive");
    // SAFETY: set before any thread of this test reads the environment.
    unsafe {
        std::env::set_var("WARREN_STORE", home.store());
        std::env::set_var("WARREN_TEST_ARCHIVE_PASSWORD", "guest");
    }
    for broker in TestBroker::all() {
        session(broker, &home).await;
    }
}
