//! A restore checks where each message comes to rest, as a replay does (issue 22, item 2): a DLQ
//! capped with `max-length 1000, overflow drop-head` that holds 800 would drop 300 of its own
//! oldest messages to take back 500, so the restore is refused and nothing moves; a restore that
//! fits goes ahead. Every id is counted, in the DLQ and in the archive.

use crate::common;
use crate::replay_util;

use std::collections::HashSet;

use common::amqp::{self as h, amqp_depth};
use common::{TestBroker, TestVhost};
use replay_util::{Home, fill, message_ids, read_all, read_stream, warren};
use warren::domain::features::QueueType;

async fn ids_everywhere(conn: &lapin::Connection) -> (usize, usize, HashSet<String>) {
    let depth = amqp_depth(conn, "work.dlq").await as usize;
    let dlq = message_ids(&read_all(conn, "work.dlq", depth).await);
    let archived = message_ids(&read_stream(conn, "warren.archive", 2000).await);
    let mut all: HashSet<String> = dlq.iter().cloned().collect();
    all.extend(archived.iter().cloned());
    (dlq.len(), archived.len(), all)
}

#[tokio::test]
async fn a_restore_that_would_push_a_capped_dlq_past_its_limit_is_refused() {
    TestBroker::each(|b| async move {
        let vh = TestVhost::new(&b, "restore-room").await;
        let home = Home::new("restore-room");
        let conn = h::connect(&vh).await;
        let ch = h::confirm_channel(&conn).await;
        h::declare(&ch, "work.dlq", QueueType::Classic, Default::default()).await;
        fill(&conn, "work.dlq", "m", 1300).await;
        let r = warren(
            &vh,
            &home,
            &[
                "archive",
                "work.dlq",
                "--limit",
                "500",
                "--create-archive",
                "--yes",
            ],
        )
        .await;
        assert_eq!(r.code, Some(0), "{}: {r}", b.label);
        let path = format!("/api/policies/{}/cap", common::enc(&vh.name));
        let policy = serde_json::json!({
            "pattern": "^work\\.dlq$",
            "definition": {"max-length": 1000, "overflow": "drop-head"},
            "apply-to": "queues",
        });
        let p = vh.api(reqwest::Method::PUT, &path, Some(policy)).await;
        assert!(p.status().is_success(), "{}: {}", b.label, p.status());

        let r = warren(&vh, &home, &["restore", "--yes"]).await;
        assert_eq!(r.code, Some(1), "{}: {r}", b.label);
        assert!(r.stderr.contains("drop-head"), "{}: {r}", b.label);
        assert!(r.stderr.contains("nothing restored"), "{}: {r}", b.label);
        let (in_dlq, in_archive, all) = ids_everywhere(&conn).await;
        assert_eq!((in_dlq, in_archive), (800, 500), "{}", b.label);
        assert_eq!(all.len(), 1300, "{}: every id somewhere", b.label);

        // 200 fit: they go back, and nothing of the DLQ's own is dropped.
        let r = warren(&vh, &home, &["restore", "--limit", "200", "--yes"]).await;
        assert_eq!(r.code, Some(0), "{}: {r}", b.label);
        let (in_dlq, _, all) = ids_everywhere(&conn).await;
        assert_eq!(in_dlq, 1000, "{}", b.label);
        assert_eq!(all.len(), 1300, "{}: every id somewhere", b.label);
        let _ = conn.close(200, "ok".into()).await;
        vh.cleanup().await;
    })
    .await;
}
