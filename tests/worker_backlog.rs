//! The TUI's replay with a backlog cap, through its worker (the modal's `max_backlog`): 300
//! dead letters go back to `orders.process`, whose real consumer (prefetch 1, 20 ms a message)
//! sets the pace; the progress says why it waits, the target's ready count stays at about the
//! cap, every id is handled exactly once and the DLQ ends empty.

use crate::backlog_util;
use crate::common;
use crate::replay_util;

use std::time::{Duration, Instant};

use backlog_util::{
    Consumer, MAX, N, Sampler, TARGET, WORK, assert_once, assert_paced, dead_letters,
};
use common::amqp::{self as h, amqp_depth};
use common::{TestBroker, TestVhost};
use replay_util::Home;
use warren::config::Overrides;
use warren::domain::selection::Selection;
use warren::tui::{Command, ReplayRequest, Report};

async fn paced_by_the_consumer(broker: TestBroker) {
    let label = broker.label.clone();
    let vhost = TestVhost::new(&broker, "worker-backlog").await;
    let conn = h::connect(&vhost).await;
    let expected = dead_letters(&conn, "dlq", N).await;
    assert_eq!(amqp_depth(&conn, "dlq").await, u64::from(N), "{label}");
    let home = Home::new("worker-backlog-config");
    let overrides = Overrides {
        config_path: Some(home.dir.join("config.toml")),
        management_url: Some(vhost.broker.mgmt_url_with_creds()),
        amqp_url: Some(vhost.amqp_url()),
        vhost: Some(vhost.name.clone()),
        ..Default::default()
    };
    let (cmd_tx, mut rx, worker) = common::spawn_worker(overrides);
    let consumer = Consumer::start(&conn, WORK).await;
    let sampler = Sampler::start(&conn, Duration::from_millis(50)).await;
    let started = Instant::now();
    cmd_tx
        .send(Command::Replay(ReplayRequest {
            vhost: vhost.name.clone(),
            queue: "dlq".into(),
            selection: Selection::All,
            expected: u64::from(N),
            typed: true,
            rate: 0,
            keep_attempts: false,
            strip_failure_stamp: false,
            dry_run: false,
            job: Default::default(),
            max_backlog: Some(MAX),
            canary: None,
            create_audit: None,
            edited: None,
        }))
        .await
        .expect("send");
    let mut waits = Vec::new();
    let end = common::worker_until(
        &mut rx,
        &label,
        |e| matches!(e, Report::ReplayFinished(_)),
        |e| {
            if let Report::ReplayProgress(p) = e
                && let Some(w) = p.backlog
            {
                waits.push(w);
            }
        },
    )
    .await;
    let replay_took = started.elapsed();
    let handled = consumer
        .finish(&vhost, &conn, N as usize, Duration::from_secs(20))
        .await;
    let samples = sampler.finish().await;

    let Report::ReplayFinished(o) = end else {
        unreachable!()
    };
    assert_eq!(o.error, None, "{label}: {o:?}");
    assert_eq!(o.progress.moved, u64::from(N), "{label}: {o:?}");
    assert!(!waits.is_empty(), "{label}: the progress says it waits");
    assert!(
        waits
            .iter()
            .all(|w| w.queue == TARGET && w.max == MAX && w.ready >= MAX),
        "{label}: {waits:?}"
    );
    let max = assert_paced(&label, &samples);
    assert_once(&label, &handled, &expected);
    assert_eq!(
        amqp_depth(&conn, "dlq").await,
        0,
        "{label}: the DLQ is empty"
    );
    println!(
        "{label}: the worker replayed {N} with max_backlog {MAX} in {replay_took:?}; target ready: max {max}, {} samples; {} progress reports said it waits",
        samples.len(),
        waits.len()
    );
    cmd_tx.send(Command::Quit).await.expect("send");
    let _ = worker.await;
    let _ = conn.close(200, "done".into()).await;
    vhost.cleanup().await;
}

#[tokio::test]
async fn a_tui_replay_with_a_backlog_cap_is_paced_by_the_targets_consumer() {
    let home = Home::new("worker-backlog-store");
    // The worker opens Warren's store (the audit) from the environment.
    // SAFETY: set before any thread of this test reads the environment.
    unsafe {
        std::env::set_var("WARREN_STORE", home.store());
    }
    for broker in TestBroker::all() {
        paced_by_the_consumer(broker).await;
    }
}
