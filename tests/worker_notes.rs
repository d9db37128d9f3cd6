//! The TUI's worker keeps group notes on a real broker's queue: a browse sends the queue's notes
//! with it (and whether it read the whole queue, so the UI may tell which groups are gone); a
//! note set is kept with who wrote it and read back; a forgotten one is gone from the store.

use crate::common;
use crate::replay_util;

use std::time::Duration;

use common::amqp as amqp_h;
use common::{TestBroker, TestVhost};
use lapin::types::FieldTable;
use replay_util::Home;
use tokio::sync::mpsc;
use warren::config::Overrides;
use warren::domain::explain::explain;
use warren::domain::features::QueueType;
use warren::domain::grouping::{GroupBy, GroupNote, WaitQueues, group_key};
use warren::tui::{Command, Report};

/// Events until `pick` takes one; errors fail the test.
async fn next<T>(
    rx: &mut mpsc::Receiver<Report>,
    label: &str,
    pick: impl Fn(Report) -> Option<T>,
) -> T {
    loop {
        let e = tokio::time::timeout(Duration::from_secs(60), rx.recv())
            .await
            .unwrap_or_else(|_| panic!("{label}: an event within 60 s"))
            .expect("the worker is alive");
        if let Report::Error(f) = &e {
            panic!("{label}: {f}");
        }
        if let Some(t) = pick(e) {
            return t;
        }
    }
}

fn notes_of(e: Report) -> Option<(Vec<GroupNote>, bool)> {
    match e {
        Report::GroupNotes { notes, whole, .. } => Some((notes, whole)),
        _ => None,
    }
}

#[tokio::test]
async fn the_worker_keeps_reads_and_forgets_group_notes() {
    let store = Home::new("worker-notes-store");
    // The worker opens Warren's store from the environment: this test's own, whatever schema
    // another Warren left in the default one.
    // SAFETY: set before any thread of this test reads the environment.
    unsafe { std::env::set_var("WARREN_STORE", store.store()) };
    for broker in TestBroker::all() {
        let label = broker.label.clone();
        let vhost = TestVhost::new(&broker, "worker-notes").await;
        let home = Home::new("worker-notes");
        let conn = amqp_h::connect(&vhost).await;
        let ch = conn.create_channel().await.expect("channel");
        amqp_h::declare(&ch, "work.dlq", QueueType::Classic, FieldTable::default()).await;
        amqp_h::dead_letter_by_reject(&conn, "work", "work.dlq", 3).await;
        let (cmd_tx, mut rx, worker) = common::spawn_worker(Overrides {
            config_path: Some(home.dir.join("config.toml")),
            amqp_url: Some(vhost.amqp_url()),
            management_url: Some(vhost.broker.mgmt_url_with_creds()),
            vhost: Some(vhost.name.clone()),
            ..Default::default()
        });
        let browse = Command::Browse {
            vhost: vhost.name.clone(),
            queue: "work.dlq".into(),
            limit: 500,
            read_again: false,
            restart: false,
        };

        cmd_tx.send(browse.clone()).await.unwrap();
        let messages = next(&mut rx, &label, |e| match e {
            Report::MessagesLoaded { messages, .. } => Some(messages),
            _ => None,
        })
        .await;
        assert_eq!(messages.len(), 3, "{label}");
        let (notes, whole) = next(&mut rx, &label, notes_of).await;
        assert!(notes.is_empty(), "{label}: {notes:?}");
        assert!(whole, "{label}: every message was read");

        let first = messages[0].unpack();
        let key = group_key(
            GroupBy::Reason,
            &first,
            &explain(&first),
            &WaitQueues::default(),
        );
        assert_eq!(key.value, "rejected");
        let note = GroupNote {
            queue: "work.dlq".into(),
            by: GroupBy::Reason,
            key: key.key.clone(),
            text: "carrier outage, replay after 10:00".into(),
            author: String::new(),
            at: jiff::Timestamp::UNIX_EPOCH,
        };
        cmd_tx
            .send(Command::SetGroupNote {
                vhost: vhost.name.clone(),
                note: note.clone(),
            })
            .await
            .unwrap();
        let (kept, whole) = next(&mut rx, &label, notes_of).await;
        assert!(!whole);
        assert_eq!(kept.len(), 1, "{label}: {kept:?}");
        assert_eq!(
            (kept[0].key.as_str(), kept[0].text.as_str()),
            (key.key.as_str(), note.text.as_str())
        );
        assert!(
            !kept[0].author.is_empty(),
            "{label}: the worker names who wrote it"
        );
        assert!(
            kept[0].at > jiff::Timestamp::UNIX_EPOCH,
            "{label}: and when"
        );
        let notice = next(&mut rx, &label, |e| match e {
            Report::Notice(n) => Some(n),
            _ => None,
        })
        .await;
        assert!(notice.contains("note kept"), "{label}: {notice}");

        // The next browse brings it along.
        cmd_tx.send(browse.clone()).await.unwrap();
        let (notes, _) = next(&mut rx, &label, notes_of).await;
        assert_eq!(notes, kept, "{label}");

        // Forgotten (as the UI asks once its group is gone): gone from the store too.
        cmd_tx
            .send(Command::ForgetGroupNotes {
                vhost: vhost.name.clone(),
                queue: "work.dlq".into(),
                notes: kept,
            })
            .await
            .unwrap();
        let (notes, _) = next(&mut rx, &label, notes_of).await;
        assert!(notes.is_empty(), "{label}: {notes:?}");
        cmd_tx.send(browse).await.unwrap();
        let (notes, _) = next(&mut rx, &label, notes_of).await;
        assert!(notes.is_empty(), "{label}: {notes:?}");

        cmd_tx.send(Command::Quit).await.unwrap();
        let _ = worker.await;
        conn.close(200, "done".into()).await.ok();
        vhost.cleanup().await;
    }
}
