//! Every vhost at once through the TUI's worker (`:vhost *`, `warren --vhost '*'`) on a real
//! broker: one listing shows the dead-letter queues of two vhosts, each named with its vhost
//! (the same queue name in both stays two queues); a browse of the second vhost's DLQ returns
//! its own messages, read through a session of that vhost; a replay there moves its messages
//! back in that vhost and leaves the first vhost's alone; what fails again there is counted for
//! that run in the Replays view.

use crate::common;
use crate::replay_util;

use common::amqp as amqp_h;
use common::{TestBroker, TestVhost};
use lapin::types::FieldTable;
use replay_util::Home;
use tokio::sync::mpsc;
use warren::config::Overrides;
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

#[tokio::test]
async fn every_vhost_lists_both_and_reads_and_replays_in_the_second() {
    let store = Home::new("worker-every-vhost-store");
    // SAFETY: set before any thread of this test reads the environment.
    unsafe { std::env::set_var("WARREN_STORE", store.store()) };
    for broker in TestBroker::all() {
        let label = broker.label.clone();
        let a = TestVhost::new(&broker, "every-a").await;
        let b = TestVhost::new(&broker, "every-b").await;
        // The same names in both vhosts: 2 dead letters in a's orders.dlq, 3 in b's.
        for (vhost, n) in [(&a, 2), (&b, 3)] {
            let conn = amqp_h::connect(vhost).await;
            let ch = conn.create_channel().await.expect("channel");
            amqp_h::declare(&ch, "orders.dlq", QueueType::Classic, FieldTable::default()).await;
            amqp_h::dead_letter_by_reject(&conn, "orders.process", "orders.dlq", n).await;
            conn.close(200, "set up".into()).await.ok();
        }
        let home = Home::new("worker-every-vhost");
        let (cmd_tx, mut rx, worker) = common::spawn_worker(Overrides {
            config_path: Some(home.dir.join("config.toml")),
            // The URL names vhost a; `*` asks for every vhost, listed through a's session.
            amqp_url: Some(a.amqp_url()),
            management_url: Some(a.broker.mgmt_url_with_creds()),
            vhost: Some("*".into()),
            ..Default::default()
        });
        let send = |c: Command| {
            let tx = cmd_tx.clone();
            async move { tx.send(c).await.expect("send") }
        };
        send(Command::LoadQueues).await;
        let Report::QueuesLoaded {
            overview,
            discovery,
            ..
        } = next(&mut rx, &label, |e| {
            matches!(e, Report::QueuesLoaded { .. })
        })
        .await
        else {
            unreachable!()
        };
        assert_eq!(overview.vhost, "*", "{label}: the scope is every vhost");
        let ours: Vec<(&str, &str)> = discovery
            .dead_letter_queues
            .iter()
            .filter(|q| q.vhost == a.name || q.vhost == b.name)
            .map(|q| (q.vhost.as_str(), q.name.as_str()))
            .collect();
        assert!(
            ours.contains(&(a.name.as_str(), "orders.dlq"))
                && ours.contains(&(b.name.as_str(), "orders.dlq")),
            "{label}: both vhosts' DLQs in the one listing: {ours:?}"
        );
        assert_eq!(ours.len(), 2, "{label}: {ours:?}");
        // The feeder is found in each DLQ's own vhost.
        assert!(
            discovery
                .dead_letter_queues
                .iter()
                .filter(|q| q.vhost == b.name)
                .all(|q| q.feeders == vec!["orders.process".to_string()]),
            "{label}"
        );
        // The depth refresh is one listing of every vhost, each depth by vhost and name.
        send(Command::RefreshDepths).await;
        let Report::DepthsRefreshed { depths, .. } = next(&mut rx, &label, |e| {
            matches!(e, Report::DepthsRefreshed { .. })
        })
        .await
        else {
            unreachable!()
        };
        for v in [&a.name, &b.name] {
            assert!(
                depths
                    .iter()
                    .any(|(q, _)| &q.vhost == v && q.name == "orders.dlq"),
                "{label}: {v} in the refresh"
            );
        }

        // A browse of b's orders.dlq: b's three messages, named with b; a's, through a's own
        // session: its two.
        for (vhost, n) in [(&b.name, 3), (&a.name, 2)] {
            send(Command::Browse {
                vhost: vhost.clone(),
                queue: "orders.dlq".into(),
                limit: 500,
                read_again: false,
                restart: false,
            })
            .await;
            let page = next(&mut rx, &label, |e| {
                matches!(e, Report::MessagesLoaded { .. })
            })
            .await;
            assert!(
                matches!(&page, Report::MessagesLoaded { vhost: v, queue, messages, .. }
                    if v == vhost && queue == "orders.dlq" && messages.len() == n),
                "{label}: {vhost}'s {n} messages: {page:?}"
            );
        }

        // A replay of b's DLQ moves b's three back to b's orders.process; a's stay put.
        send(common::replay_all(&b.name, "orders.dlq", 3)).await;
        let Report::ReplayFinished(outcome) =
            next(&mut rx, &label, |e| matches!(e, Report::ReplayFinished(_))).await
        else {
            unreachable!()
        };
        assert_eq!(
            (outcome.progress.moved, outcome.error.as_deref()),
            (3, None),
            "{label}: {outcome:?}"
        );
        let conn_b = amqp_h::connect(&b).await;
        assert_eq!(
            amqp_h::amqp_depth(&conn_b, "orders.dlq").await,
            0,
            "{label}"
        );
        assert_eq!(
            amqp_h::amqp_depth(&conn_b, "orders.process").await,
            3,
            "{label}: back where they failed, in b"
        );
        let conn_a = amqp_h::connect(&a).await;
        assert_eq!(
            amqp_h::amqp_depth(&conn_a, "orders.dlq").await,
            2,
            "{label}: a's untouched"
        );
        assert_eq!(amqp_h::amqp_depth(&conn_a, "orders.process").await, 0);

        // Two of b's fail again: the Replays view, scoped to every vhost, counts them for b's
        // run (through b's session; the scope was listed through a's).
        replay_util::reject_all(&conn_b, "orders.process", 2).await;
        amqp_h::wait_for_depth(&conn_b, "orders.dlq", 2, std::time::Duration::from_secs(20)).await;
        send(Command::LoadReplays).await;
        let Report::ReplaysLoaded {
            runs, unreached, ..
        } = next(&mut rx, &label, |e| {
            matches!(e, Report::ReplaysLoaded { .. })
        })
        .await
        else {
            unreachable!()
        };
        let run = runs
            .iter()
            .find(|r| r.vhost == b.name)
            .unwrap_or_else(|| panic!("{label}: b's run listed: {runs:?}"));
        assert_eq!(run.moved, Some(3), "{label}: {run:?}");
        assert_eq!(
            run.came_back.as_ref().map(|c| c.came_back),
            Some(2),
            "{label}: {run:?}; unreached {unreached:?}"
        );
        cmd_tx.send(Command::Quit).await.ok();
        worker.await.ok();
        conn_a.close(200, "done".into()).await.ok();
        conn_b.close(200, "done".into()).await.ok();
        a.cleanup().await;
        b.cleanup().await;
    }
}
