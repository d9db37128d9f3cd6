//! The command log's source: the TUI's worker reports every broker operation as it happens,
//! with what it cost. On a real broker: the connect, the listing, a read of a quorum DLQ with its
//! delivery cost in this broker's terms, a reused read and a plan that read nothing, a read of a
//! classic queue that costs nothing, and a replay's publishes and acks.

use crate::common;
use crate::replay_util;

use common::amqp as amqp_h;
use common::{TestBroker, TestVhost};
use lapin::types::{AMQPValue, FieldTable};
use replay_util::Home;
use tokio::sync::mpsc;
use warren::config::Overrides;
use warren::domain::features::QueueType;
use warren::domain::selection::Selection;
use warren::tui::{Command, Operation, OperationKind, ReplayRequest, Report};

const MESSAGES: u32 = 6;

/// Events until `done` says stop, with every operation reported on the way.
async fn until(
    rx: &mut mpsc::Receiver<Report>,
    ops: &mut Vec<Operation>,
    label: &str,
    done: impl Fn(&Report) -> bool,
) -> Report {
    common::worker_until(rx, label, done, |e| {
        if let Report::Operation(op) = e {
            ops.push(op);
        }
    })
    .await
}

async fn session(broker: TestBroker) {
    let label = broker.label.clone();
    let vhost = TestVhost::new(&broker, "worker-oplog").await;
    let home = Home::new("worker-oplog");
    let conn = amqp_h::connect(&vhost).await;
    let ch = conn.create_channel().await.expect("channel");
    let mut args = FieldTable::default();
    if label == "3.10" {
        args.insert("x-delivery-limit".into(), AMQPValue::LongLongInt(20));
    }
    amqp_h::declare(&ch, "orders.dlq", QueueType::Quorum, args).await;
    amqp_h::dead_letter_by_reject(&conn, "orders.process", "orders.dlq", MESSAGES).await;
    amqp_h::declare(&ch, "plain.dlq", QueueType::Classic, FieldTable::default()).await;
    amqp_h::dead_letter_by_reject(&conn, "plain.process", "plain.dlq", MESSAGES).await;
    let overrides = Overrides {
        config_path: Some(home.dir.join("config.toml")),
        amqp_url: Some(vhost.amqp_url()),
        management_url: Some(vhost.broker.mgmt_url_with_creds()),
        vhost: Some(vhost.name.clone()),
        ..Default::default()
    };
    let (cmd_tx, mut rx, worker) = common::spawn_worker(overrides);
    let mut ops = Vec::new();

    cmd_tx.send(Command::LoadQueues).await.unwrap();
    until(&mut rx, &mut ops, &label, |e| {
        matches!(e, Report::QueuesLoaded { .. })
    })
    .await;
    let browse = |queue: &str| Command::Browse {
        vhost: vhost.name.clone(),
        queue: queue.into(),
        limit: 500,
        read_again: false,
        restart: false,
    };
    let loaded = |e: &Report| matches!(e, Report::MessagesLoaded { .. });
    cmd_tx.send(browse("orders.dlq")).await.unwrap();
    until(&mut rx, &mut ops, &label, loaded).await;
    // Again: what was read is reused, nothing is read, nothing is logged as a read.
    cmd_tx.send(browse("orders.dlq")).await.unwrap();
    until(&mut rx, &mut ops, &label, loaded).await;
    cmd_tx
        .send(Command::PreviewReplay {
            vhost: vhost.name.clone(),
            queue: "orders.dlq".into(),
            selection: Selection::All,
            keep_attempts: false,
            edited: None,
            strip_failure_stamp: false,
        })
        .await
        .unwrap();
    until(&mut rx, &mut ops, &label, |e| {
        matches!(e, Report::ReplayPreview(_))
    })
    .await;
    cmd_tx.send(browse("plain.dlq")).await.unwrap();
    until(&mut rx, &mut ops, &label, loaded).await;
    cmd_tx
        .send(Command::Replay(ReplayRequest {
            vhost: vhost.name.clone(),
            queue: "plain.dlq".into(),
            selection: Selection::All,
            expected: u64::from(MESSAGES),
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
    let end = until(&mut rx, &mut ops, &label, |e| {
        matches!(e, Report::ReplayFinished(_))
    })
    .await;
    cmd_tx.send(Command::Quit).await.unwrap();
    // Operations reported before the worker ended are all in the channel.
    while let Some(e) = rx.recv().await {
        if let Report::Operation(op) = e {
            ops.push(op);
        }
    }
    let _ = worker.await;
    if let Report::ReplayFinished(o) = &end {
        assert_eq!(o.progress.moved, u64::from(MESSAGES), "{label}: {o:?}");
    }

    for op in &ops {
        println!("{label}: {:<8} {}", op.kind.label(), op.text);
    }
    let kinds: Vec<OperationKind> = ops.iter().map(|o| o.kind).collect();
    assert_eq!(kinds.first(), Some(&OperationKind::Connect), "{label}");
    assert!(
        ops[0].text.contains(&vhost.name),
        "{label}: {}",
        ops[0].text
    );
    assert_eq!(kinds.get(1), Some(&OperationKind::List), "{label}");
    assert!(ops[1].text.contains("orders.dlq") || ops[1].text.contains("dead-letter"));

    let reads: Vec<&str> = ops
        .iter()
        .filter(|o| o.kind == OperationKind::Read)
        .map(|o| o.text.as_str())
        .collect();
    // The quorum read, with its cost in this broker's terms.
    let quorum = reads[0];
    assert!(
        quorum.starts_with(&format!(
            "browsed orders.dlq: {MESSAGES} of {MESSAGES} messages"
        )),
        "{label}: {quorum}"
    );
    if label == "4.3" {
        assert!(
            quorum.contains("counts only failed deliveries"),
            "{label}: {quorum}"
        );
    } else {
        assert!(
            quorum.contains(&format!(
                "this read cost each of {MESSAGES} message(s) 1 delivery of the limit of 20"
            )),
            "{label}: {quorum}"
        );
    }
    // A look at a quorum queue returns its messages out of place: it says the next look may
    // list them in another order (the classic one below says nothing of the kind).
    assert!(
        quorum.contains("the next look may list them in another order"),
        "{label}: {quorum}"
    );
    // 3.10 and 4.0: the second browse reused the read, and the plan read nothing. 4.3 reads
    // are free, so both read again.
    let rest: &[&str] = if label == "4.3" {
        assert!(
            reads[1].starts_with("browsed orders.dlq:"),
            "{label}: {}",
            reads[1]
        );
        assert!(
            reads[2].starts_with("planned a replay from orders.dlq: read 6 messages")
                && reads[2].contains("cost none of it"),
            "{label}: {}",
            reads[2]
        );
        &reads[3..]
    } else {
        assert!(
            reads[1].starts_with("planned a replay from orders.dlq: looked at the")
                && reads[1].contains("no read"),
            "{label}: {}",
            reads[1]
        );
        &reads[2..]
    };
    assert!(
        rest[0].starts_with(&format!("browsed plain.dlq: {MESSAGES} of {MESSAGES}"))
            && rest[0].ends_with("cost no deliveries"),
        "{label}: {}",
        rest[0]
    );
    // The replay: its plan's read, then what it published and acked.
    assert!(
        rest[1].starts_with("planned a replay from plain.dlq: read"),
        "{label}: {}",
        rest[1]
    );
    assert_eq!(rest.len(), 2, "{label}: {reads:?}");
    let replay: Vec<&Operation> = ops
        .iter()
        .filter(|o| o.kind == OperationKind::Replay)
        .collect();
    assert_eq!(replay.len(), 1, "{label}");
    assert!(
        replay[0].text.starts_with(&format!(
            "from plain.dlq: {MESSAGES} published, confirmed and acked off plain.dlq; 0 returned"
        )),
        "{label}: {}",
        replay[0].text
    );
    // In the order they happened.
    assert!(ops.windows(2).all(|w| w[0].at <= w[1].at), "{label}");
    let _ = conn.close(200, "done".into()).await;
    vhost.cleanup().await;
}

#[tokio::test]
async fn the_worker_reports_each_broker_operation_with_its_cost() {
    let home = Home::new("worker-oplog-store");
    // The worker opens Warren's store (read ledger, audit) from the environment.
    // SAFETY: set before any thread of this test reads the environment.
    unsafe { std::env::set_var("WARREN_STORE", home.store()) };
    futures_util::future::join_all(TestBroker::all().into_iter().map(session)).await;
}
