//! Archive and discard from the terminal UI, through its worker on real brokers: archiving 3 of
//! 5 leaves 2 in the DLQ and 3 in the archive stream with the reason; a discard writes its
//! snapshot of exactly what goes before anything is deleted, and both are on the record; a
//! restore of 3 of 5 archived (the restore modal's plan, then the run) puts exactly those back
//! into their DLQ as they were, and a second restore of the same is refused unless again; a
//! restore stopped (Esc) publishes nothing after the stop (and one stopped midway, through the
//! engine: `restore_engine`); one the broker does not vouch for is refused.

use crate::common;
use crate::replay_util;

use std::time::Duration;

use common::amqp::{self as h, amqp_depth, read_stream_expecting};
use common::{TestBroker, TestVhost};
use lapin::types::FieldTable;
use replay_util::{Home, fill, message_ids, read_all};
use tokio::sync::mpsc;
use warren::config::Overrides;
use warren::domain::features::QueueType;
use warren::domain::selection::Selection;
use warren::tui::{Command, ReplayRequest, Report};
use warren::worker::protocol::{JobKind, RestoreHow, RestorePreview};

async fn run(
    cmd: &mpsc::Sender<Command>,
    rx: &mut mpsc::Receiver<Report>,
    label: &str,
    vhost: &str,
    job: JobKind,
    expected: u64,
) -> (warren::tui::event::ReplayOutcome, Vec<String>) {
    run_on(cmd, rx, label, vhost, "dlq", Selection::All, job, expected).await
}

/// One run the operator accepted, on `queue`'s `selection`: its outcome and the notices on the way.
#[allow(clippy::too_many_arguments)]
async fn run_on(
    cmd: &mpsc::Sender<Command>,
    rx: &mut mpsc::Receiver<Report>,
    label: &str,
    vhost: &str,
    queue: &str,
    selection: Selection,
    job: JobKind,
    expected: u64,
) -> (warren::tui::event::ReplayOutcome, Vec<String>) {
    cmd.send(Command::Replay(ReplayRequest {
        vhost: vhost.into(),
        queue: queue.into(),
        selection,
        expected,
        typed: true,
        rate: 0,
        keep_attempts: false,
        strip_failure_stamp: false,
        dry_run: false,
        job,
        canary: None,
        max_backlog: None,
        create_audit: None,
        edited: None,
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

/// The worker's queue listing.
async fn listing(
    cmd: &mpsc::Sender<Command>,
    rx: &mut mpsc::Receiver<Report>,
    label: &str,
) -> warren::domain::discovery::Discovery {
    cmd.send(Command::LoadQueues).await.unwrap();
    match common::worker_until(
        rx,
        label,
        |e| matches!(e, Report::QueuesLoaded { .. }),
        |_| {},
    )
    .await
    {
        Report::QueuesLoaded { discovery, .. } => discovery,
        _ => unreachable!(),
    }
}

/// The worker's read of `queue` (up to 100): its messages and how the read ended.
async fn browsed(
    cmd: &mpsc::Sender<Command>,
    rx: &mut mpsc::Receiver<Report>,
    label: &str,
    vhost: &str,
    queue: &str,
) -> (Vec<warren::domain::packed::Packed>, String) {
    cmd.send(Command::Browse {
        vhost: vhost.into(),
        queue: queue.into(),
        limit: 100,
        read_again: false,
        restart: false,
    })
    .await
    .unwrap();
    match common::worker_until(
        rx,
        label,
        |e| matches!(e, Report::MessagesLoaded { .. }),
        |_| {},
    )
    .await
    {
        Report::MessagesLoaded { messages, stop, .. } => (messages, stop),
        _ => unreachable!(),
    }
}

/// A private home whose store the worker uses (set before any thread of the test reads the
/// environment).
fn home(prefix: &str) -> Home {
    let home = Home::new(prefix);
    // SAFETY: called first in each test, before anything reads the environment.
    unsafe {
        std::env::set_var("WARREN_STORE", home.store());
        std::env::set_var("WARREN_TEST_ARCHIVE_PASSWORD", "guest");
    }
    home
}

/// The operations the local record holds for `vhost`.
fn recorded(home: &Home, vhost: &TestVhost) -> Vec<String> {
    warren::store::Store::open(&home.store())
        .expect("store")
        .list_audit(50)
        .expect("audit")
        .into_iter()
        .filter(|e| e.vhost == vhost.name)
        .map(|e| e.operation.as_str().to_string())
        .collect()
}

/// The TUI's worker on `vhost`, in a context that may create the archive stream.
fn worker_on(
    vhost: &TestVhost,
    home: &Home,
    label: &str,
) -> (
    mpsc::Sender<Command>,
    mpsc::Receiver<Report>,
    tokio::task::JoinHandle<Option<warren::worker::protocol::ReplayOutcome>>,
) {
    worker_in(vhost, home, label, "archive_create = true\n")
}

/// The TUI's worker on `vhost`, with `more` lines of context settings (`archive_create`,
/// `archive_local`).
fn worker_in(
    vhost: &TestVhost,
    home: &Home,
    label: &str,
    more: &str,
) -> (
    mpsc::Sender<Command>,
    mpsc::Receiver<Report>,
    tokio::task::JoinHandle<Option<warren::worker::protocol::ReplayOutcome>>,
) {
    let config = format!(
        "[contexts.c]\nmanagement_urls = [\"{}\"]\namqp_urls = [\"amqp://{}:{}\"]\nvhost = \"{}\"\nusername = \"guest\"\npassword_env = \"WARREN_TEST_ARCHIVE_PASSWORD\"\n{more}",
        vhost.broker.mgmt_base(),
        vhost.broker.host,
        vhost.broker.amqp_port,
        vhost.name
    );
    let path = home.dir.join(format!("config-{label}-{}.toml", vhost.name));
    std::fs::write(&path, config).expect("config");
    let overrides = Overrides {
        config_path: Some(path),
        context: Some("c".into()),
        ..Default::default()
    };
    common::spawn_worker(overrides)
}

/// The local archive file in the terminal UI: archived there (the context chose local), listed
/// with the DLQs as the archive with its count, read like a queue, restored from back into the
/// DLQ, and not twice.
async fn local_session(broker: TestBroker, home: &Home) {
    use warren::domain::archive::LOCAL_QUEUE;
    let label = broker.label.clone();
    let vhost = TestVhost::new(&broker, "worker-local-archive").await;
    let conn = h::connect(&vhost).await;
    let ch = h::confirm_channel(&conn).await;
    h::declare(&ch, "dlq", QueueType::Classic, FieldTable::default()).await;
    fill(&conn, "dlq", "l", 4).await;
    let (cmd_tx, mut rx, worker) = worker_in(&vhost, home, &label, "archive_local = true\n");

    let job = JobKind::Archive {
        reason: "keep locally".into(),
        place: Default::default(),
    };
    let (o, _) = run(&cmd_tx, &mut rx, &label, &vhost.name, job, 4).await;
    assert_eq!(
        (o.progress.moved, o.error.as_deref()),
        (4, None),
        "{label}: {o:?}"
    );
    assert_eq!(amqp_depth(&conn, "dlq").await, 0, "{label}");

    let discovery = listing(&cmd_tx, &mut rx, &label).await;
    let local = discovery
        .dlq(LOCAL_QUEUE)
        .unwrap_or_else(|| panic!("{label}: the local archive is listed: {discovery:?}"));
    assert_eq!(
        (local.kind, local.depth),
        (warren::domain::discovery::DlqKind::Archive, Some(4)),
        "{label}"
    );
    assert!(
        discovery.dlq("warren.archive").is_none(),
        "{label}: no stream"
    );

    let (messages, stop) = browsed(&cmd_tx, &mut rx, &label, &vhost.name, LOCAL_QUEUE).await;
    assert_eq!(messages.len(), 4, "{label}: {stop}");
    assert!(
        stop.contains("4 of 4 messages from the local archive"),
        "{stop}"
    );
    for m in &messages {
        assert_eq!(
            m.headers().get_str("warren-archive-reason"),
            Some("keep locally"),
            "{label}"
        );
    }

    let back = RestoreHow::default();
    let all = Selection::All;
    let p = plan_of(
        &cmd_tx,
        &mut rx,
        &label,
        &vhost.name,
        LOCAL_QUEUE,
        &all,
        back,
    )
    .await
    .0;
    assert_eq!((p.count, p.restored_before), (4, 0), "{label}: {p:?}");
    assert_eq!(p.targets, vec!["dlq × 4".to_string()], "{label}: {p:?}");
    let (o, _) = run_on(
        &cmd_tx,
        &mut rx,
        &label,
        &vhost.name,
        LOCAL_QUEUE,
        all.clone(),
        JobKind::Restore(back),
        4,
    )
    .await;
    assert_eq!(
        (o.progress.moved, o.progress.failed),
        (4, 0),
        "{label}: {o:?}"
    );
    assert_eq!(amqp_depth(&conn, "dlq").await, 4, "{label}");
    let mut ids = message_ids(&read_all(&conn, "dlq", 4).await);
    ids.sort();
    assert_eq!(ids, ["l-0", "l-1", "l-2", "l-3"], "{label}");
    let p = plan_of(
        &cmd_tx,
        &mut rx,
        &label,
        &vhost.name,
        LOCAL_QUEUE,
        &all,
        back,
    )
    .await
    .0;
    assert_eq!((p.count, p.restored_before), (0, 4), "{label}: {p:?}");

    cmd_tx.send(Command::Quit).await.unwrap();
    let _ = worker.await;
    let _ = ch.close(200, "ok".into()).await;
    let _ = conn.close(200, "done".into()).await;
    vhost.cleanup().await;
}

async fn session(broker: TestBroker, home: &Home) {
    let label = broker.label.clone();
    let vhost = TestVhost::new(&broker, "worker-archive").await;
    let conn = h::connect(&vhost).await;
    let ch = h::confirm_channel(&conn).await;
    h::declare(&ch, "dlq", QueueType::Classic, FieldTable::default()).await;
    fill(&conn, "dlq", "m", 5).await;
    let (cmd_tx, mut rx, worker) = worker_on(&vhost, home, &label);

    // Archive 3 of 5: the archive stream is created (the context allows it), 2 stay.
    let (o, _) = run(
        &cmd_tx,
        &mut rx,
        &label,
        &vhost.name,
        JobKind::Archive {
            reason: "customer gone".into(),
            place: Default::default(),
        },
        3,
    )
    .await;
    assert_eq!(o.progress.moved, 3, "{label}: {o:?}");
    assert!(o.error.is_none(), "{label}: {o:?}");
    // The line the run leaves, in its own verb and with where they went (issue 41).
    assert_eq!(o.headline, "archived 3 to warren.archive", "{label}: {o:?}");
    // The two left are handed back by the run's end, which the broker does not confirm.
    h::wait_for_depth(&conn, "dlq", 2, Duration::from_secs(10)).await;
    let archived = read_stream_expecting(&conn, ARCHIVE, 3, 10).await;
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
    let discovery = listing(&cmd_tx, &mut rx, &label).await;
    assert_eq!(
        discovery.dlq("warren.archive").map(|d| d.kind),
        Some(warren::domain::discovery::DlqKind::Archive),
        "{label}: {discovery:?}"
    );
    let (messages, _) = browsed(&cmd_tx, &mut rx, &label, &vhost.name, "warren.archive").await;
    assert_eq!(messages.len(), 3, "{label}");
    for m in &messages {
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
    assert_eq!(
        read_stream_expecting(&conn, ARCHIVE, 3, 10).await.len(),
        3,
        "{label}: browsing the archive took nothing"
    );

    // Discard 1: its snapshot is written first, with exactly that message, and named.
    let (o, notices) = run(&cmd_tx, &mut rx, &label, &vhost.name, JobKind::Discard, 1).await;
    assert_eq!(o.progress.moved, 1, "{label}: {o:?}");
    h::wait_for_depth(&conn, "dlq", 1, Duration::from_secs(10)).await;
    let said = notices
        .iter()
        .find(|n| n.starts_with("snapshot written: 1 message(s) in "))
        .unwrap_or_else(|| panic!("{label}: {notices:?}"));
    let file = said
        .trim_start_matches("snapshot written: 1 message(s) in ")
        .trim_end_matches(" (`warren open` reads it)");
    assert_eq!(
        o.headline,
        format!("discarded 1 (snapshot in {file})"),
        "{label}: {o:?}"
    );
    let text = std::fs::read_to_string(file).expect("the snapshot");
    // A header line and the one message.
    assert_eq!(text.lines().count(), 2, "{label}: {text}");
    assert!(
        text.contains("m-3"),
        "{label}: the head of the DLQ after the archive: {text}"
    );

    // Both are on the local record.
    let ops = recorded(home, &vhost);
    assert!(ops.contains(&"archive".to_string()), "{label}: {ops:?}");
    assert!(ops.contains(&"discard".to_string()), "{label}: {ops:?}");

    cmd_tx.send(Command::Quit).await.unwrap();
    let _ = worker.await;
    let _ = ch.close(200, "ok".into()).await;
    let _ = conn.close(200, "done".into()).await;
    vhost.cleanup().await;
}

const ARCHIVE: &str = "warren.archive";

/// A restore of `selection` the operator accepted, `how` it goes, with `expected` confirmed.
async fn restore_run(
    cmd: &mpsc::Sender<Command>,
    rx: &mut mpsc::Receiver<Report>,
    label: &str,
    vhost: &str,
    selection: &Selection,
    how: RestoreHow,
    expected: u64,
) -> warren::tui::event::ReplayOutcome {
    let job = JobKind::Restore(how);
    run_on(
        cmd,
        rx,
        label,
        vhost,
        ARCHIVE,
        selection.clone(),
        job,
        expected,
    )
    .await
    .0
}

/// The restore modal's plan for `selection` of the archive.
async fn restore_plan(
    cmd: &mpsc::Sender<Command>,
    rx: &mut mpsc::Receiver<Report>,
    label: &str,
    vhost: &str,
    selection: &Selection,
    how: RestoreHow,
) -> RestorePreview {
    let (p, reads) = plan_of(cmd, rx, label, vhost, ARCHIVE, selection, how).await;
    // The modal heard the read of the archive as it went, up to what the plan looked at.
    assert!(
        !reads.is_empty(),
        "{label}: no reading report before the plan"
    );
    assert!(reads.is_sorted(), "{label}: {reads:?}");
    assert!(
        reads
            .last()
            .is_some_and(|&r| r >= p.count && r >= p.restored_before),
        "{label}: {reads:?} for {p:?}"
    );
    p
}

/// The restore modal's plan for `selection` of `queue` (the archive, or a queue that is not),
/// with the read counts the worker reported for it on the way.
async fn plan_of(
    cmd: &mpsc::Sender<Command>,
    rx: &mut mpsc::Receiver<Report>,
    label: &str,
    vhost: &str,
    queue: &str,
    selection: &Selection,
    how: RestoreHow,
) -> (RestorePreview, Vec<u64>) {
    cmd.send(Command::PreviewRestore {
        vhost: vhost.into(),
        queue: queue.into(),
        selection: selection.clone(),
        how,
    })
    .await
    .unwrap();
    let mut reads = Vec::new();
    let p = match common::worker_until(
        rx,
        label,
        |e| matches!(e, Report::RestorePreview(_)),
        |e| {
            if let Report::RestoreReading { read, how: h, .. } = e
                && h == how
            {
                reads.push(read);
            }
        },
    )
    .await
    {
        Report::RestorePreview(p) => p,
        _ => unreachable!(),
    };
    (p, reads)
}

async fn restore_session(broker: TestBroker, home: &Home) {
    let label = broker.label.clone();
    let vhost = TestVhost::new(&broker, "worker-restore").await;
    let conn = h::connect(&vhost).await;
    let ch = h::confirm_channel(&conn).await;
    h::declare(&ch, "dlq", QueueType::Classic, FieldTable::default()).await;
    fill(&conn, "dlq", "r", 5).await;
    let originals = read_all(&conn, "dlq", 5).await;
    let (cmd_tx, mut rx, worker) = worker_on(&vhost, home, &label);

    // All 5 into the archive.
    let (o, _) = run(
        &cmd_tx,
        &mut rx,
        &label,
        &vhost.name,
        JobKind::Archive {
            reason: "later".into(),
            place: Default::default(),
        },
        5,
    )
    .await;
    assert_eq!(
        (o.progress.moved, o.error.as_deref()),
        (5, None),
        "{label}: {o:?}"
    );
    assert_eq!(amqp_depth(&conn, "dlq").await, 0, "{label}");

    // Restore 3 of them, picked by key as the TUI picks them: the plan first.
    let three = Selection::Keys(["id:r-0", "id:r-2", "id:r-4"].map(String::from).into());
    let back = RestoreHow::default();
    let p = restore_plan(&cmd_tx, &mut rx, &label, &vhost.name, &three, back).await;
    assert_eq!(p.count, 3, "{label}: {p:?}");
    assert_eq!(p.targets, vec!["dlq × 3".to_string()], "{label}");
    assert_eq!(p.restored_before, 0, "{label}");
    assert!(p.refusals.is_empty(), "{label}: {p:?}");
    assert!(
        p.removes.iter().any(|h| h == "warren-archived-from"),
        "{label}: {p:?}"
    );
    let o = restore_run(&cmd_tx, &mut rx, &label, &vhost.name, &three, back, 3).await;
    assert_eq!(
        (o.progress.moved, o.progress.failed),
        (3, 0),
        "{label}: {o:?}"
    );
    assert!(o.error.is_none() && !o.cancelled, "{label}: {o:?}");

    // The DLQ holds exactly those 3, as they were before the archive; the archive still all 5.
    assert_eq!(amqp_depth(&conn, "dlq").await, 3, "{label}");
    let restored = read_all(&conn, "dlq", 3).await;
    let mut ids = message_ids(&restored);
    ids.sort();
    assert_eq!(ids, ["r-0", "r-2", "r-4"], "{label}");
    for m in &restored {
        let was = originals
            .iter()
            .find(|x| x.properties.message_id == m.properties.message_id)
            .expect("an original");
        assert_eq!(m.body, was.body, "{label}: body byte for byte");
        assert_eq!(
            m.headers, was.headers,
            "{label}: no archive header left, the rest as it was"
        );
    }
    assert_eq!(
        read_stream_expecting(&conn, ARCHIVE, 5, 10).await.len(),
        5,
        "{label}"
    );

    // A second restore of the same is refused, in the plan and in the run, unless again.
    let p = restore_plan(&cmd_tx, &mut rx, &label, &vhost.name, &three, back).await;
    assert_eq!((p.count, p.restored_before), (0, 3), "{label}: {p:?}");
    assert!(
        p.refusals.iter().any(|r| r.contains("restored before")),
        "{label}: {p:?}"
    );
    let o = restore_run(&cmd_tx, &mut rx, &label, &vhost.name, &three, back, 3).await;
    assert_eq!(o.progress.moved, 0, "{label}: {o:?}");
    assert!(
        o.error.as_deref().unwrap_or("").contains("restored before"),
        "{label}: {o:?}"
    );
    assert_eq!(
        amqp_depth(&conn, "dlq").await,
        3,
        "{label}: nothing restored twice"
    );
    let again = RestoreHow {
        replay: false,
        again: true,
    };
    let p = restore_plan(&cmd_tx, &mut rx, &label, &vhost.name, &three, again).await;
    assert_eq!((p.count, p.restored_before), (3, 3), "{label}: {p:?}");
    // The other two are still restorable.
    let p = restore_plan(&cmd_tx, &mut rx, &label, &vhost.name, &Selection::All, back).await;
    assert_eq!((p.count, p.restored_before), (2, 3), "{label}: {p:?}");

    // A restore stopped at once (Esc before its first batch) publishes nothing; the two are
    // still there to restore.
    cmd_tx
        .send(Command::Replay(ReplayRequest {
            vhost: vhost.name.clone(),
            queue: ARCHIVE.into(),
            selection: Selection::All,
            expected: 2,
            typed: true,
            rate: 0,
            keep_attempts: false,
            strip_failure_stamp: false,
            dry_run: false,
            job: JobKind::Restore(back),
            canary: None,
            max_backlog: None,
            create_audit: None,
            edited: None,
        }))
        .await
        .unwrap();
    cmd_tx.send(Command::CancelReplay).await.unwrap();
    let end = common::worker_until(
        &mut rx,
        &label,
        |e| matches!(e, Report::ReplayFinished(_)),
        |_| {},
    )
    .await;
    let Report::ReplayFinished(o) = end else {
        unreachable!()
    };
    assert!(o.cancelled && o.progress.moved == 0, "{label}: {o:?}");
    assert_eq!(
        amqp_depth(&conn, "dlq").await,
        3,
        "{label}: nothing published"
    );
    let o = restore_run(
        &cmd_tx,
        &mut rx,
        &label,
        &vhost.name,
        &Selection::All,
        back,
        2,
    )
    .await;
    assert_eq!(
        (o.progress.moved, o.error.as_deref()),
        (2, None),
        "{label}: {o:?}"
    );
    assert_eq!(amqp_depth(&conn, "dlq").await, 5, "{label}");

    // A plan that cannot be made says why in the modal: only the archive is restored from.
    let p = plan_of(
        &cmd_tx,
        &mut rx,
        &label,
        &vhost.name,
        "dlq",
        &Selection::All,
        back,
    )
    .await
    .0;
    assert_eq!(p.count, 0, "{label}: {p:?}");
    assert!(
        p.refusals.iter().any(|r| r.contains("is not the archive")),
        "{label}: {p:?}"
    );

    // A message put into the archive stream by hand, without a user id the broker vouched
    // for, naming a live queue: the TUI refuses to restore it, saying why, and nothing moves.
    let mut forged = warren::domain::value::Table::new();
    for (k, v) in [
        ("warren-archived-from", "dlq"),
        ("warren-archived-by", "eve@guest"),
        ("warren-archived-at", "2026-01-01T00:00:00Z"),
    ] {
        forged.insert(k, warren::domain::value::HeaderValue::string(v));
    }
    let props = warren::domain::message::Properties {
        message_id: Some("forged-0".into()),
        ..Default::default()
    };
    h::publish(&ch, ARCHIVE, &props, &forged, b"{}").await;
    let one = Selection::Keys(["id:forged-0".to_string()].into());
    let p = restore_plan(&cmd_tx, &mut rx, &label, &vhost.name, &one, back).await;
    assert!(
        p.refusals
            .iter()
            .any(|r| r.contains("1 of the chosen archived message(s) carry no user id")),
        "{label}: {p:?}"
    );
    let o = restore_run(&cmd_tx, &mut rx, &label, &vhost.name, &one, back, 1).await;
    assert_eq!(o.progress.moved, 0, "{label}: {o:?}");
    assert_eq!(
        amqp_depth(&conn, "dlq").await,
        5,
        "{label}: nothing restored"
    );

    // On the record as a restore.
    let ops = recorded(home, &vhost);
    assert!(ops.contains(&"restore".to_string()), "{label}: {ops:?}");

    cmd_tx.send(Command::Quit).await.unwrap();
    let _ = worker.await;
    let _ = ch.close(200, "ok".into()).await;
    let _ = conn.close(200, "done".into()).await;
    vhost.cleanup().await;
}

#[tokio::test]
async fn the_tui_restores_3_of_5_archived_into_their_dlq_and_not_twice_unless_again() {
    let home = home("worker-restore");
    for broker in TestBroker::all() {
        restore_session(broker, &home).await;
    }
}

#[tokio::test]
async fn the_tui_archives_3_of_5_and_discards_after_writing_its_snapshot() {
    let home = home("worker-archive");
    for broker in TestBroker::all() {
        session(broker, &home).await;
    }
}

#[tokio::test]
async fn the_tui_lists_reads_and_restores_a_local_archive() {
    let home = home("worker-local-archive");
    for broker in TestBroker::all() {
        local_session(broker, &home).await;
    }
}

/// A context that neither creates the archive stream nor keeps the archive locally: the
/// listing says what an archive would create (the modal asks), and the operator's answer goes
/// with the run — `s` creates the stream and archives there, every id once.
async fn asked_session(broker: TestBroker, home: &Home) {
    use warren::worker::protocol::ArchivePlace;
    let label = broker.label.clone();
    let vhost = TestVhost::new(&broker, "worker-archive-asked").await;
    let conn = h::connect(&vhost).await;
    let ch = h::confirm_channel(&conn).await;
    h::declare(&ch, "dlq", QueueType::Classic, FieldTable::default()).await;
    fill(&conn, "dlq", "q", 3).await;
    let (cmd_tx, mut rx, worker) = worker_in(&vhost, home, &label, "");
    cmd_tx.send(Command::LoadQueues).await.unwrap();
    let question = match common::worker_until(
        &mut rx,
        &label,
        |e| matches!(e, Report::QueuesLoaded { .. }),
        |_| {},
    )
    .await
    {
        Report::QueuesLoaded { overview, .. } => overview.archive_question,
        _ => unreachable!(),
    };
    let question = question.unwrap_or_else(|| panic!("{label}: the listing asks about the stream"));
    assert!(question.contains("warren.archive"), "{label}: {question}");
    let job = JobKind::Archive {
        reason: "asked".into(),
        place: ArchivePlace::Create,
    };
    let (o, _) = run(&cmd_tx, &mut rx, &label, &vhost.name, job, 3).await;
    assert_eq!(
        (o.progress.moved, o.error.as_deref()),
        (3, None),
        "{label}: {o:?}"
    );
    assert_eq!(amqp_depth(&conn, "dlq").await, 0, "{label}");
    let archived = read_stream_expecting(&conn, ARCHIVE, 3, 3).await;
    assert_eq!(message_ids(&archived), ["q-0", "q-1", "q-2"], "{label}");
    // Once it exists, nothing is asked.
    cmd_tx.send(Command::LoadQueues).await.unwrap();
    if let Report::QueuesLoaded { overview, .. } = common::worker_until(
        &mut rx,
        &label,
        |e| matches!(e, Report::QueuesLoaded { .. }),
        |_| {},
    )
    .await
    {
        assert_eq!(overview.archive_question, None, "{label}");
    }
    drop(cmd_tx);
    let _ = worker.await;
    vhost.cleanup().await;
}

#[tokio::test]
async fn the_tui_asks_about_a_missing_archive_stream_and_the_answer_goes_with_the_run() {
    let home = home("worker-archive-asked");
    for broker in TestBroker::all() {
        asked_session(broker, &home).await;
    }
}

/// A stream the management API counted empty, written just after: the count lags seconds behind
/// (0 for up to 5 s after the writes, measured on 3.10 and 4.3), and a read bounded by it read nothing —
/// the archive browsed right after an archive run listed 0 of 3 on a loaded machine. The worker
/// reads a stream to its tail instead.
async fn stale_count_session(broker: TestBroker, home: &Home) {
    let label = broker.label.clone();
    let vhost = TestVhost::new(&broker, "worker-stream-lag").await;
    let conn = h::connect(&vhost).await;
    let ch = h::confirm_channel(&conn).await;
    h::declare(&ch, "log", QueueType::Stream, FieldTable::default()).await;
    // The event this waits for: the management API has counted the stream, empty.
    assert_eq!(h::mgmt_depth(&vhost, "log", 0).await, Some(0), "{label}");
    for i in 0..3 {
        let props = warren::domain::message::Properties {
            message_id: Some(format!("s-{i}")),
            ..Default::default()
        };
        h::publish(&ch, "log", &props, &Default::default(), b"x").await;
    }
    let counted = vhost
        .get_json(&format!("/api/queues/{}/log", common::enc(&vhost.name)))
        .await["messages"]
        .as_u64();
    let (cmd_tx, mut rx, worker) = worker_on(&vhost, home, &label);
    let (messages, stop) = browsed(&cmd_tx, &mut rx, &label, &vhost.name, "log").await;
    let ids: Vec<_> = messages
        .iter()
        .map(|m| m.unpack().properties.message_id.unwrap_or_default())
        .collect();
    assert_eq!(ids, ["s-0", "s-1", "s-2"], "{label}: {stop}");
    assert!(stop.starts_with("all 3 messages"), "{label}: {stop}");
    eprintln!("RabbitMQ {label}: the management API counted {counted:?} of 3 when the read began");
    cmd_tx.send(Command::Quit).await.unwrap();
    let _ = worker.await;
    let _ = conn.close(200, "done".into()).await;
    vhost.cleanup().await;
}

#[tokio::test]
async fn a_stream_written_after_the_management_api_counted_it_empty_is_read_whole() {
    let home = home("worker-stream-lag");
    for broker in TestBroker::all() {
        stale_count_session(broker, &home).await;
    }
}
