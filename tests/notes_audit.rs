//! Group notes on the shared record, through the real binary on real brokers: with the audit
//! stream there, a note set and removed with `warren groups --note` is appended to it (kind
//! `note`, events `set` and `forget`) and `warren audit` shows both, for a second Warren with a
//! store of its own too; without the stream (and no consent in the config) the note is kept
//! locally, Warren says the broker's copy was not written, and nothing is created.

use crate::common;
use crate::replay_util;

use common::amqp::{self as h};
use common::{TestBroker, TestVhost};
use lapin::types::FieldTable;
use replay_util::{Home, dead_letter, simple, warren};
use warren::domain::features::QueueType;

#[tokio::test]
async fn a_group_note_reaches_the_broker_audit_and_warren_audit_shows_it() {
    for broker in TestBroker::all() {
        let label = broker.label.clone();
        let vhost = TestVhost::new(&broker, "notes-audit").await;
        let alice = Home::new("notes-alice");
        let bob = Home::new("notes-bob");
        let conn = h::connect(&vhost).await;
        let ch = h::confirm_channel(&conn).await;
        h::declare(&ch, "dlq", QueueType::Classic, FieldTable::default()).await;
        let msgs: Vec<_> = (0..3).map(|i| simple("n", i, &[])).collect();
        dead_letter(&conn, "work", "dlq", &msgs).await;

        // No stream and no consent: kept here only, said so, exit 0, nothing created.
        let run = warren(
            &vhost,
            &alice,
            &[
                "groups",
                "dlq",
                "--by",
                "reason",
                "--note",
                "rejected",
                "local only",
            ],
        )
        .await;
        assert_eq!(run.code, Some(0), "{label}: {run}");
        assert!(
            run.stderr.contains("kept on this machine only"),
            "{label}: {run}"
        );
        let path = format!("/api/queues/{}/warren.audit", common::enc(&vhost.name));
        assert_eq!(
            vhost.api(reqwest::Method::GET, &path, None).await.status(),
            reqwest::StatusCode::NOT_FOUND,
            "{label}: the stream was created without consent"
        );

        // With the stream: set, then removed; both on the broker's record.
        h::declare(
            &ch,
            "warren.audit",
            QueueType::Stream,
            FieldTable::default(),
        )
        .await;
        let note = "carrier outage, replay after 10:00";
        for text in [note, ""] {
            let run = warren(
                &vhost,
                &alice,
                &[
                    "groups", "dlq", "--by", "reason", "--note", "rejected", text,
                ],
            )
            .await;
            assert_eq!(run.code, Some(0), "{label}: {run}");
            assert!(!run.stderr.contains("not written"), "{label}: {run}");
        }
        // Bob's store knows nothing: what he sees comes from the broker.
        let audit = warren(&vhost, &bob, &["audit", "--json"]).await;
        assert_eq!(audit.code, Some(0), "{label}: {audit}");
        let notes: Vec<_> = audit
            .json()
            .into_iter()
            .filter(|v| v["kind"] == "note")
            .collect();
        assert_eq!(notes.len(), 2, "{label}: {audit}");
        // Newest first: the removal, then the note.
        assert_eq!(notes[0]["event"], "forget", "{label}: {audit}");
        assert_eq!(notes[1]["event"], "set", "{label}: {audit}");
        assert_eq!(notes[1]["text"], note, "{label}");
        assert_eq!(notes[1]["queue"], "dlq", "{label}");
        assert_eq!(notes[1]["by"], "reason", "{label}");
        assert_eq!(notes[1]["vhost"], vhost.name.as_str(), "{label}");
        let text = warren(&vhost, &bob, &["audit"]).await;
        assert!(
            text.stdout.contains("note set") && text.stdout.contains(note),
            "{label}: {text}"
        );
        let _ = ch.close(200, "ok".into()).await;
        vhost.cleanup().await;
    }
}
