//! The TUI's worker never waits on the network in its command loop: a cancel and a quit act at
//! once while a connect hangs on a management API that accepts and never answers, and two
//! browses of one queue asked back to back read it once, answered by the newest.

use crate::common;

use std::time::{Duration, Instant};

use common::amqp as amqp_h;
use common::{TestBroker, TestVhost};
use lapin::options::QueueDeclareOptions;
use lapin::types::FieldTable;
use tokio::sync::mpsc;
use warren::config::Overrides;
use warren::domain::selection::Selection;
use warren::worker::protocol::{Command, ConnectionState, ReplayOutcome, ReplayRequest, Report};

/// A private config file (empty: everything comes from the overrides).
struct Home(std::path::PathBuf);

impl Home {
    fn new(prefix: &str) -> Home {
        let dir = std::env::temp_dir().join(common::unique(prefix));
        std::fs::create_dir_all(&dir).expect("temp dir");
        std::fs::write(dir.join("config.toml"), "").expect("empty config");
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

/// The next event within `within`, or `None`.
async fn next(rx: &mut mpsc::Receiver<Report>, within: Duration) -> Option<Report> {
    tokio::time::timeout(within, rx.recv()).await.ok().flatten()
}

#[tokio::test]
async fn cancel_and_quit_act_at_once_while_a_connect_hangs() {
    // Accepts every connection and never answers: only the management client's own request
    // timeout (15 s) would end the connect.
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("listen");
    let addr = listener.local_addr().expect("address");
    let silent = tokio::spawn(async move {
        let mut held = Vec::new();
        while let Ok((socket, _)) = listener.accept().await {
            held.push(socket);
        }
    });
    let home = Home::new("warren-worker-cancel");
    let overrides = Overrides {
        config_path: home.config(),
        management_url: Some(format!("http://guest:guest@{addr}")),
        amqp_url: Some(format!("amqp://guest:guest@{addr}/")),
        vhost: Some("/".into()),
        ..Default::default()
    };
    let (cmd_tx, mut ev_rx, worker) = common::spawn_worker(overrides);
    cmd_tx
        .send(Command::Replay(ReplayRequest {
            vhost: "/".into(),
            queue: "orders.dlq".into(),
            selection: Selection::All,
            expected: 4,
            typed: true,
            rate: 10,
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
        .expect("send");
    assert!(
        matches!(
            next(&mut ev_rx, Duration::from_secs(2)).await,
            Some(Report::Connection(ConnectionState::Connecting))
        ),
        "the worker starts connecting"
    );
    let asked = Instant::now();
    cmd_tx.send(Command::CancelReplay).await.expect("send");
    let answer = next(&mut ev_rx, Duration::from_secs(2)).await;
    assert!(
        matches!(
            &answer,
            Some(Report::ReplayFinished(ReplayOutcome {
                cancelled: true,
                error: None,
                ..
            }))
        ),
        "the cancel is answered while the connect still hangs: {answer:?}"
    );
    let cancel_took = asked.elapsed();
    assert!(cancel_took < Duration::from_secs(1), "{cancel_took:?}");

    let asked = Instant::now();
    cmd_tx.send(Command::Quit).await.expect("send");
    tokio::time::timeout(Duration::from_secs(2), worker)
        .await
        .expect("the worker ends at once on Quit")
        .expect("the worker does not panic");
    let quit_took = asked.elapsed();
    // Nothing else was said: the connect neither succeeded nor failed in that time.
    while let Ok(e) = ev_rx.try_recv() {
        assert!(!matches!(e, Report::Connection(_)), "{e:?}");
    }
    println!(
        "cancel answered in {cancel_took:?}, quit in {quit_took:?}, the connect still pending"
    );
    silent.abort();
}

const MESSAGES: u32 = 20;

/// Asks for two browses of one queue back to back, as Ctrl-R pressed twice does.
async fn overlapping_browses(broker: TestBroker) {
    let vhost = TestVhost::new(&broker, "worker-overlap").await;
    let home = Home::new("warren-worker-overlap");
    let conn = amqp_h::connect(&vhost).await;
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
    amqp_h::dead_letter_by_reject(&conn, "orders.process", "orders.dlq", MESSAGES).await;
    let overrides = Overrides {
        config_path: home.config(),
        amqp_url: Some(vhost.amqp_url()),
        management_url: Some(vhost.broker.mgmt_url_with_creds()),
        vhost: Some(vhost.name.clone()),
        ..Default::default()
    };
    let (cmd_tx, mut ev_rx, worker) = common::spawn_worker(overrides);
    // Connected first, so the first browse is running when the second arrives.
    cmd_tx.send(Command::LoadQueues).await.expect("send");
    loop {
        match next(&mut ev_rx, Duration::from_secs(30)).await {
            Some(Report::QueuesLoaded { .. }) => break,
            Some(Report::Error(f)) => panic!("{}: {f}", broker.label),
            Some(_) => {}
            None => panic!("{}: no queue list within 30 s", broker.label),
        }
    }
    let browse = Command::Browse {
        vhost: vhost.name.clone(),
        queue: "orders.dlq".into(),
        limit: 500,
        read_again: false,
        restart: true,
    };
    cmd_tx.send(browse.clone()).await.expect("send");
    cmd_tx.send(browse).await.expect("send");
    let mut pages = Vec::new();
    // The browse stops after 2 s without a delivery; a second page would come well within 10 s.
    let until = Instant::now() + Duration::from_secs(10);
    while let Some(e) = next(&mut ev_rx, until.saturating_duration_since(Instant::now())).await {
        match e {
            Report::MessagesLoaded {
                messages,
                ticket,
                stop,
                ..
            } => {
                assert!(
                    stop.starts_with("read again from the start: "),
                    "{}: {stop}",
                    broker.label
                );
                pages.push((messages.len(), ticket))
            }
            Report::Error(f) => panic!("{}: {f}", broker.label),
            _ => {}
        }
    }
    cmd_tx.send(Command::Quit).await.expect("send");
    let _ = worker.await;
    assert_eq!(
        pages.len(),
        1,
        "{}: one answer, the newest request's: {pages:?}",
        broker.label
    );
    assert_eq!(
        pages[0].0, MESSAGES as usize,
        "{}: the whole queue, not split between two readers",
        broker.label
    );
    assert_eq!(
        amqp_h::amqp_depth(&conn, "orders.dlq").await,
        u64::from(MESSAGES),
        "{}: nothing lost",
        broker.label
    );
    println!(
        "{}: one page of {} messages ({:?})",
        broker.label, pages[0].0, pages[0].1
    );
    vhost.cleanup().await;
}

#[tokio::test]
async fn two_browses_of_one_queue_read_it_once_and_the_newest_answers() {
    futures_util::future::join_all(TestBroker::all().into_iter().map(overlapping_browses)).await;
}

/// Enter on a queue whose read is under way, as the report did a second after the first:
/// not a new read. The read under way answers, once, and the worker says it is already reading.
async fn second_open_during_a_read(broker: TestBroker) {
    let vhost = TestVhost::new(&broker, "worker-second-open").await;
    let home = Home::new("warren-worker-second-open");
    let conn = amqp_h::connect(&vhost).await;
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
    amqp_h::dead_letter_by_reject(&conn, "orders.process", "orders.dlq", MESSAGES).await;
    let overrides = Overrides {
        config_path: home.config(),
        amqp_url: Some(vhost.amqp_url()),
        management_url: Some(vhost.broker.mgmt_url_with_creds()),
        vhost: Some(vhost.name.clone()),
        ..Default::default()
    };
    let (cmd_tx, mut ev_rx, worker) = common::spawn_worker(overrides);
    cmd_tx.send(Command::LoadQueues).await.expect("send");
    loop {
        match next(&mut ev_rx, Duration::from_secs(30)).await {
            Some(Report::QueuesLoaded { .. }) => break,
            Some(Report::Error(f)) => panic!("{}: {f}", broker.label),
            Some(_) => {}
            None => panic!("{}: no queue list within 30 s", broker.label),
        }
    }
    let open = Command::Browse {
        vhost: vhost.name.clone(),
        queue: "orders.dlq".into(),
        limit: 500,
        read_again: false,
        restart: false,
    };
    cmd_tx.send(open.clone()).await.expect("send");
    cmd_tx.send(open).await.expect("send");
    let (mut pages, mut notices) = (Vec::new(), Vec::new());
    // The page, then a quiet 5 s in which no second page may come.
    let mut until = Instant::now() + Duration::from_secs(60);
    while let Some(e) = next(&mut ev_rx, until.saturating_duration_since(Instant::now())).await {
        match e {
            Report::MessagesLoaded {
                messages,
                ticket,
                stop,
                ..
            } => {
                pages.push((messages.len(), ticket, stop));
                until = Instant::now() + Duration::from_secs(5);
            }
            Report::Notice(n) => notices.push(n),
            Report::Error(f) => panic!("{}: {f}", broker.label),
            _ => {}
        }
    }
    cmd_tx.send(Command::Quit).await.expect("send");
    let _ = worker.await;
    println!("{}: {pages:?} {notices:?}", broker.label);
    assert_eq!(pages.len(), 1, "{}: one read: {pages:?}", broker.label);
    let (n, _, stop) = &pages[0];
    assert_eq!(*n, MESSAGES as usize, "{}", broker.label);
    assert_eq!(
        stop,
        &format!("all {MESSAGES} messages"),
        "{}",
        broker.label
    );
    assert!(
        notices
            .iter()
            .any(|n| n.starts_with("already reading orders.dlq")),
        "{}: {notices:?}",
        broker.label
    );
    vhost.cleanup().await;
}

#[tokio::test]
async fn a_second_open_during_a_read_does_not_start_it_again() {
    futures_util::future::join_all(TestBroker::all().into_iter().map(second_open_during_a_read))
        .await;
}
