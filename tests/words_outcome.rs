//! Issue 41: a run ends with one line in its operation's own verb, with where things went —
//! "archived 3 to warren.archive", "discarded 2 (snapshot in …)" — first in the summary the CLI
//! prints, and the same line (`headline`) in `--json`; on real brokers, the ids counted.

use crate::common;
use crate::replay_util;

use common::amqp::{self as h, amqp_depth, read_stream_expecting};
use common::{TestBroker, TestVhost};
use lapin::types::FieldTable;
use replay_util::{Home, fill, message_ids, read_all, warren};
use warren::domain::features::QueueType;

const ARCHIVE: &str = "warren.archive";

/// The summary's first line on stderr: the line after the progress, which starts with a verb.
fn headline(stderr: &str, verb: &str) -> String {
    stderr
        .lines()
        .find(|l| l.starts_with(verb))
        .unwrap_or_else(|| panic!("no line starting with {verb:?} in:\n{stderr}"))
        .to_string()
}

#[tokio::test]
async fn archive_and_discard_end_with_their_own_verb_and_where_things_went() {
    for broker in TestBroker::all() {
        let label = broker.label.clone();
        let vhost = TestVhost::new(&broker, "words-outcome").await;
        let home = Home::new("words-outcome");
        let conn = h::connect(&vhost).await;
        let ch = h::confirm_channel(&conn).await;
        h::declare(&ch, "dlq", QueueType::Classic, FieldTable::default()).await;
        fill(&conn, "dlq", "m", 8).await;

        // Archive the first 3: "archived 3 to warren.archive", and exactly those are there.
        let run = warren(
            &vhost,
            &home,
            &[
                "archive",
                "dlq",
                "--limit",
                "3",
                "--reason",
                "INC-41",
                "--create-archive",
                "--yes",
            ],
        )
        .await;
        assert_eq!(run.code, Some(0), "{label}: {run}");
        assert_eq!(
            headline(&run.stderr, "archived"),
            "archived 3 to warren.archive",
            "{label}: {run}"
        );
        // The headline comes first, before the counts.
        let at = |start: &str| run.stderr.lines().position(|l| l.starts_with(start));
        assert!(
            at("archived") < at("moved 3, returned 0"),
            "{label}: the headline comes first: {run}"
        );
        let archived = read_stream_expecting(&conn, ARCHIVE, 3, 10).await;
        assert_eq!(
            message_ids(&archived),
            ["m-0", "m-1", "m-2"],
            "{label}: the 3 archived"
        );
        assert_eq!(amqp_depth(&conn, "dlq").await, 5, "{label}");

        // Discard the next 2 with a snapshot: "discarded 2 (snapshot in <file>)".
        let snap = home.dir.join("two.jsonl");
        let run = warren(
            &vhost,
            &home,
            &[
                "discard",
                "dlq",
                "--limit",
                "2",
                "--yes",
                "--json",
                "-o",
                snap.to_str().unwrap(),
            ],
        )
        .await;
        assert_eq!(run.code, Some(0), "{label}: {run}");
        let want = format!("discarded 2 (snapshot in {})", snap.display());
        assert_eq!(
            run.event("summary")["headline"],
            want.as_str(),
            "{label}: {run}"
        );
        let text = std::fs::read_to_string(&snap).expect("the snapshot");
        let (_, saved) = warren::domain::snapshot::read(&text).expect("a snapshot");
        assert_eq!(message_ids(&saved), ["m-3", "m-4"], "{label}");
        let left = read_all(&conn, "dlq", 8).await;
        assert_eq!(
            message_ids(&left),
            ["m-5", "m-6", "m-7"],
            "{label}: the 3 left"
        );

        let _ = ch.close(200, "ok".into()).await;
        let _ = conn.close(200, "done".into()).await;
        vhost.cleanup().await;
    }
}
