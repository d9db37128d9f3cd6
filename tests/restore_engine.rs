//! A restore's publishing goes through the replay engine (`broker::restore::publish_on`), on
//! real brokers: a restore cancelled midway remembers exactly what the broker shows in the
//! target queue, the rest stays restorable and a second restore puts back exactly the rest; a
//! second cancel ends it at once and counts what may come twice; a publish returned
//! unroutable is counted returned, not remembered, and the others go on.

use crate::common;
use crate::replay_util;

use std::collections::HashSet;
use std::time::Instant;

use common::amqp::{self as h, amqp_depth};
use common::{TestBroker, TestVhost};
use lapin::types::FieldTable;
use replay_util::{Home, fill, message_ids, read_all, warren};
use warren::broker::archive::Publish;
use warren::broker::restore::{Plan, publish_on};
use warren::domain::features::QueueType;

/// A plan of `n` publishes, `r{i}` each, to `route(i)` by the default exchange.
fn plan(n: u32, skip: &HashSet<String>, route: impl Fn(u32) -> &'static str) -> Plan {
    let mut plan = Plan::default();
    for i in (0..n).filter(|i| !skip.contains(&format!("r{i}"))) {
        let r = format!("r{i}");
        let queue = route(i);
        *plan.targets.entry(queue.to_string()).or_insert(0) += 1;
        plan.keys_of.insert(r.clone(), format!("k{i}"));
        plan.target_of.insert(r.clone(), queue.to_string());
        plan.items.push(Publish {
            reference: r,
            exchange: String::new(),
            routing_key: queue.into(),
            props: lapin::BasicProperties::default().with_message_id(format!("m{i}").into()),
            body: format!("restored {i}").into_bytes(),
        });
    }
    plan
}

#[tokio::test]
async fn a_restore_cancelled_midway_remembers_exactly_what_arrived_and_the_rest_restores_once() {
    const N: u32 = 20_000;
    for broker in TestBroker::all() {
        let label = broker.label.clone();
        let vhost = TestVhost::new(&broker, "restore-engine-cancel").await;
        let conn = h::connect(&vhost).await;
        let ch = h::confirm_channel(&conn).await;
        h::declare(&ch, "dlq", QueueType::Classic, FieldTable::default()).await;

        // Cancelled as the first confirmed ones are remembered: what is in flight settles.
        let (stop, cancel) = tokio::sync::watch::channel(false);
        let mut remembered: Vec<String> = Vec::new();
        let out = publish_on(
            &conn,
            plan(N, &HashSet::new(), |_| "dlq"),
            &cancel,
            |refs| {
                remembered.extend_from_slice(refs);
                // One cancel: a second would end the run at once.
                if !*stop.borrow() {
                    let _ = stop.send(true);
                }
                Ok(())
            },
            |_, _, _| {},
        )
        .await;
        let moved = out.restored();
        assert!(out.cancelled, "{label}: {out:?}");
        assert!(moved > 0 && moved < u64::from(N), "{label}: {moved}");
        assert_eq!(
            out.audit.outcome.to_string(),
            format!(
                "cancelled: {moved} restored, {} not sent",
                u64::from(N) - moved
            ),
            "{label}"
        );
        assert_eq!(remembered.len() as u64, moved, "{label}: remembered");
        assert_eq!(out.audit.message_ids.len() as u64, moved, "{label}");
        assert_eq!((out.failed(), out.audit.duplicated), (0, 0), "{label}");
        assert_eq!(amqp_depth(&conn, "dlq").await, moved, "{label}: arrived");

        // The second restore takes what was not remembered, and puts back exactly that.
        let done: HashSet<String> = remembered.iter().cloned().collect();
        let mut again = Vec::new();
        let (_stop, cancel) = tokio::sync::watch::channel(false);
        let rest = publish_on(
            &conn,
            plan(N, &done, |_| "dlq"),
            &cancel,
            |refs| {
                again.extend_from_slice(refs);
                Ok(())
            },
            |_, _, _| {},
        )
        .await;
        assert_eq!(
            rest.audit.outcome.to_string(),
            "completed",
            "{label}: {rest:?}"
        );
        assert_eq!(rest.restored(), u64::from(N) - moved, "{label}");
        assert!(again.iter().all(|r| !done.contains(r)), "{label}");
        let back = read_all(&conn, "dlq", 2 * N as usize).await;
        let ids: HashSet<String> = message_ids(&back).into_iter().collect();
        assert_eq!(back.len(), N as usize, "{label}: none twice");
        assert_eq!(ids.len(), N as usize, "{label}: every one once");
        eprintln!("restore of {N} on {label}: cancelled after {moved}, the rest by a second run");
        let _ = conn.close(200, "done".into()).await;
        vhost.cleanup().await;
    }
}

/// A second cancel ends the run at once (as a replay's does): recorded interrupted; what was
/// remembered arrived; what was confirmed and not yet remembered, or sent and not answered, is
/// counted as possibly duplicated, and a later restore puts back at most that many twice.
#[tokio::test]
async fn a_second_cancel_ends_a_restore_at_once_and_counts_what_may_come_twice() {
    const N: u32 = 20_000;
    for broker in TestBroker::all() {
        let label = broker.label.clone();
        let vhost = TestVhost::new(&broker, "restore-engine-force").await;
        let conn = h::connect(&vhost).await;
        let ch = h::confirm_channel(&conn).await;
        h::declare(&ch, "dlq", QueueType::Classic, FieldTable::default()).await;
        let (stop, cancel) = tokio::sync::watch::channel(false);
        let mut remembered: Vec<String> = Vec::new();
        let mut calls = 0;
        let out = publish_on(
            &conn,
            plan(N, &HashSet::new(), |_| "dlq"),
            &cancel,
            |refs| {
                remembered.extend_from_slice(refs);
                calls += 1;
                // A cancel at the first, a second at the next: heard apart.
                if calls <= 2 {
                    let _ = stop.send(true);
                }
                Ok(())
            },
            |_, _, _| {},
        )
        .await;
        let moved = out.restored();
        assert!(
            out.audit
                .outcome
                .to_string()
                .starts_with("interrupted: stopped at once by a second signal; "),
            "{label}: {}",
            out.audit.outcome
        );
        assert!(!out.cancelled, "{label}");
        let kept = remembered.len() as u64;
        assert!(kept > 0 && kept <= moved, "{label}: {kept} of {moved}");
        // Publishes given up at the second cancel may still be on their way.
        tokio::time::sleep(std::time::Duration::from_secs(1)).await;
        let arrived = amqp_depth(&conn, "dlq").await;
        assert!(
            kept <= arrived && arrived <= kept + out.audit.duplicated,
            "{label}: {kept} remembered, {arrived} arrived, {} possibly twice: {:?}",
            out.audit.duplicated,
            out.problems
        );

        let done: HashSet<String> = remembered.iter().cloned().collect();
        let (_stop, cancel) = tokio::sync::watch::channel(false);
        let rest = publish_on(
            &conn,
            plan(N, &done, |_| "dlq"),
            &cancel,
            |_| Ok(()),
            |_, _, _| {},
        )
        .await;
        assert_eq!(
            rest.audit.outcome.to_string(),
            "completed",
            "{label}: {rest:?}"
        );
        let back = read_all(&conn, "dlq", 2 * N as usize).await;
        let ids: HashSet<String> = message_ids(&back).into_iter().collect();
        assert_eq!(ids.len(), N as usize, "{label}: every one");
        let twice = back.len() as u64 - u64::from(N);
        assert!(twice <= out.audit.duplicated, "{label}: {twice} twice");
        eprintln!(
            "second cancel on {label}: {kept} remembered, {arrived} arrived, {} counted possibly twice, {twice} twice after the next restore",
            out.audit.duplicated
        );
        let _ = conn.close(200, "done".into()).await;
        vhost.cleanup().await;
    }
}

#[tokio::test]
async fn a_publish_returned_unroutable_is_counted_returned_and_stays_restorable() {
    const N: u32 = 600;
    for broker in TestBroker::all() {
        let label = broker.label.clone();
        let vhost = TestVhost::new(&broker, "restore-engine-return").await;
        let conn = h::connect(&vhost).await;
        let ch = h::confirm_channel(&conn).await;
        h::declare(&ch, "dlq", QueueType::Classic, FieldTable::default()).await;
        // Every tenth goes to a queue that is not there (deleted since the plan was made).
        let route = |i: u32| if i % 10 == 3 { "gone" } else { "dlq" };
        let (_stop, cancel) = tokio::sync::watch::channel(false);
        let mut remembered: Vec<String> = Vec::new();
        let out = publish_on(
            &conn,
            plan(N, &HashSet::new(), route),
            &cancel,
            |refs| {
                remembered.extend_from_slice(refs);
                Ok(())
            },
            |_, _, _| {},
        )
        .await;
        let returned = u64::from(N / 10);
        assert_eq!(out.audit.returned, returned, "{label}: {out:?}");
        assert_eq!(out.restored(), u64::from(N) - returned, "{label}");
        assert_eq!(out.audit.remaining, 0, "{label}");
        assert_eq!(
            out.audit.outcome.to_string(),
            format!("partial: {returned} returned unroutable"),
            "{label}"
        );
        assert!(
            out.problems.keys().any(|w| w.contains("NO_ROUTE")),
            "{label}: {:?}",
            out.problems
        );
        assert_eq!(out.audit.targets, vec!["dlq".to_string()], "{label}");
        assert_eq!(amqp_depth(&conn, "dlq").await, out.restored(), "{label}");
        let kept: HashSet<&String> = remembered.iter().collect();
        assert_eq!(kept.len() as u64, out.restored(), "{label}: each once");
        for i in (0..N).filter(|i| i % 10 == 3) {
            assert!(
                !kept.contains(&format!("r{i}")),
                "{label}: r{i} not restored"
            );
        }
        let _ = conn.close(200, "done".into()).await;
        vhost.cleanup().await;
    }
}

/// Figures, not a check of behaviour: `warren restore` of N archived messages (10,000, or
/// `WARREN_RESTORE_N`) timed through the binary the user runs (`WARREN_TEST_BIN` picks the
/// build), three times each on every broker, the DLQ purged between. On demand: `--ignored`.
#[tokio::test]
#[ignore = "a measurement, run on demand"]
async fn figures_warren_restore_of_n_archived_messages() {
    let n: u32 = std::env::var("WARREN_RESTORE_N")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(10_000);
    let window = n.to_string();
    for broker in TestBroker::all() {
        let label = broker.label.clone();
        let vhost = TestVhost::new(&broker, "restore-figures").await;
        let home = Home::new("restore-figures");
        let conn = h::connect(&vhost).await;
        let ch = h::confirm_channel(&conn).await;
        h::declare(&ch, "dlq", QueueType::Classic, FieldTable::default()).await;
        fill(&conn, "dlq", "f", n).await;
        let args = ["archive", "dlq", "--yes", "--json", "--create-archive"];
        let run = warren(&vhost, &home, &args).await;
        assert_eq!(run.code, Some(0), "{label} archive: {run}");
        for round in 1..=3 {
            let mut args = vec!["restore", "--yes", "--json", "--window", &window];
            if round > 1 {
                args.push("--again");
            }
            // The same restore without its publishing (the read, the choice and the plan).
            let mut dry = args.clone();
            dry.push("--dry-run");
            let started = Instant::now();
            let run = warren(&vhost, &home, &dry).await;
            let planned = started.elapsed();
            assert_eq!(run.code, Some(0), "{label} dry run: {run}");
            let started = Instant::now();
            let run = warren(&vhost, &home, &args).await;
            let took = started.elapsed();
            assert_eq!(run.code, Some(0), "{label} restore: {run}");
            assert_eq!(run.summary_u64("moved"), u64::from(n), "{label}: {run}");
            assert_eq!(amqp_depth(&conn, "dlq").await, u64::from(n), "{label}");
            eprintln!(
                "FIGURE warren restore of {n} on {label}, round {round}: {:.2}s ({:.0} msg/s); its --dry-run {:.2}s",
                took.as_secs_f64(),
                f64::from(n) / took.as_secs_f64(),
                planned.as_secs_f64()
            );
            ch.queue_purge("dlq".into(), Default::default())
                .await
                .expect("purge");
        }
        // The publishing alone, in process: the mover with a remember that only counts.
        let (_stop, cancel) = tokio::sync::watch::channel(false);
        let mut calls = 0;
        let started = Instant::now();
        let out = publish_on(
            &conn,
            plan(n, &HashSet::new(), |_| "dlq"),
            &cancel,
            |_| {
                calls += 1;
                Ok(())
            },
            |_, _, _| {},
        )
        .await;
        let took = started.elapsed();
        assert_eq!(
            out.audit.outcome.to_string(),
            "completed",
            "{label}: {out:?}"
        );
        eprintln!(
            "FIGURE publishing alone, {n} on {label}: {:.2}s ({:.0} msg/s), remembered in {calls} calls",
            took.as_secs_f64(),
            f64::from(n) / took.as_secs_f64()
        );
        let _ = conn.close(200, "done".into()).await;
        vhost.cleanup().await;
    }
}
