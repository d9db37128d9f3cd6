//! Edit, then replay, through the real binary with a script as `$EDITOR`, on real brokers:
//! the edited message is replayed as edited (a field changed from "x" to 5) and only it; its
//! original is in the archive first; the audit shows the edit; a document saved unchanged, one
//! that does not read, and a read-only session move nothing. Every message id is counted.

use crate::common;
use crate::replay_util;

use common::amqp::{self as h, peek};
use common::{TestBroker, TestVhost};
use replay_util::{Home, Run, command, run};
use serde_json::Value;

/// A shell script for `$EDITOR` that runs `body` with the document's path as `$1`.
fn editor(home: &Home, name: &str, body: &str) -> String {
    let path = home.dir.join(name);
    std::fs::write(&path, format!("#!/bin/sh\nset -e\n{body}\n")).expect("editor script");
    let mut perm = std::fs::metadata(&path).expect("script").permissions();
    std::os::unix::fs::PermissionsExt::set_mode(&mut perm, 0o755);
    std::fs::set_permissions(&path, perm).expect("chmod");
    path.display().to_string()
}

async fn edit_run(vhost: &TestVhost, home: &Home, script: &str, args: &[&str]) -> Run {
    let mut full = vec![
        "replay",
        "orders.dlq",
        "--edit",
        "--yes",
        "--create-archive",
    ];
    full.extend_from_slice(args);
    let mut cmd = command(vhost, home, &full);
    cmd.env("EDITOR", script).env_remove("VISUAL");
    run(cmd, &full).await
}

fn ids(messages: &[warren::domain::message::DeadLetter]) -> Vec<String> {
    messages
        .iter()
        .map(|m| m.properties.message_id.clone().unwrap_or_default())
        .collect()
}

/// Nothing moved: the DLQ holds the three, the work queue none.
async fn untouched(conn: &lapin::Connection, label: &str) {
    assert_eq!(
        ids(&peek(conn, "orders.dlq", 10).await),
        ["o-1", "o-2", "o-3"],
        "{label}"
    );
    assert!(peek(conn, "orders", 10).await.is_empty(), "{label}");
}

#[tokio::test]
async fn an_edited_message_is_replayed_as_edited_with_its_original_archived_first() {
    for broker in TestBroker::all().into_iter().filter(|b| b.label != "4.0") {
        let label = broker.label.clone();
        let vhost = TestVhost::new(&broker, "replay-edit").await;
        let home = Home::new("replay-edit");
        let conn = h::connect(&vhost).await;
        h::dead_json_orders(&conn, 3).await;

        // Saved unchanged: nothing moves.
        let same = edit_run(&vhost, &home, &editor(&home, "same.sh", "true"), &[]).await;
        assert_eq!(same.code, Some(1), "{label}: {same}");
        assert!(
            same.stderr.contains("unchanged or emptied"),
            "{label}: {same}"
        );
        untouched(&conn, &label).await;

        // A body that no longer reads: refused with its line, nothing moves.
        let broken = editor(
            &home,
            "broken.sh",
            r#"sed -i 's/"order": "x"/"order": x/' "$1""#,
        );
        let bad = edit_run(&vhost, &home, &broken, &[]).await;
        assert_eq!(bad.code, Some(1), "{label}: {bad}");
        assert!(
            bad.stderr.contains("line ") && bad.stderr.contains("not JSON"),
            "{label}: {bad}"
        );
        untouched(&conn, &label).await;

        // Read-only refuses before any editor opens.
        let marker = home.dir.join("opened");
        let spy = editor(&home, "spy.sh", &format!("touch {}", marker.display()));
        let ro = edit_run(&vhost, &home, &spy, &["--read-only"]).await;
        assert_ne!(ro.code, Some(0), "{label}: {ro}");
        assert!(!marker.exists(), "{label}: read-only opened the editor");
        untouched(&conn, &label).await;
        // A dry run too (issue 38: it opened the editor and exited 0).
        let ro = edit_run(&vhost, &home, &spy, &["--read-only", "--dry-run"]).await;
        assert_eq!(ro.code, Some(1), "{label}: {ro}");
        assert!(ro.stderr.contains("read-only"), "{label}: {ro}");
        assert!(
            !marker.exists(),
            "{label}: a read-only dry run opened the editor"
        );
        untouched(&conn, &label).await;

        // o-2's order changed from "x" to 5: only o-2 moves, as edited.
        let change = editor(
            &home,
            "change.sh",
            r#"sed -i '/=== message 2 of/,/=== message 3 of/ s/"order": "x"/"order": 5/' "$1""#,
        );
        let done = edit_run(&vhost, &home, &change, &["--json"]).await;
        assert_eq!(done.code, Some(0), "{label}: {done}");
        assert_eq!(done.summary_u64("moved"), 1, "{label}: {done}");
        let replayed = peek(&conn, "orders", 10).await;
        assert_eq!(ids(&replayed), ["o-2"], "{label}");
        let body: Value = serde_json::from_slice(&replayed[0].body).expect("JSON body");
        assert_eq!(
            body,
            serde_json::json!({"id": "o-2", "order": 5}),
            "{label}"
        );
        assert_eq!(
            ids(&peek(&conn, "orders.dlq", 10).await),
            ["o-1", "o-3"],
            "{label}"
        );

        // The original, exactly as it died, is in the archive.
        let list = replay_util::warren(&vhost, &home, &["archive", "list", "--json"]).await;
        assert_eq!(list.code, Some(0), "{label}: {list}");
        let rows = list.json();
        assert_eq!(rows.len(), 1, "{label}: {list}");
        assert!(list.stdout.contains("o-2"), "{label}: {list}");
        let reason = rows[0]["archived"]["reason"].as_str().unwrap_or_default();
        assert!(reason.contains("edited and replayed"), "{label}: {list}");

        // The audit says what changed, with the digests before and after.
        let audit = replay_util::warren(&vhost, &home, &["audit", "--json"]).await;
        let runs = audit.json();
        let edited = runs
            .iter()
            .find(|r| r["edits"].as_array().is_some_and(|e| !e.is_empty()))
            .unwrap_or_else(|| panic!("{label}: no run with edits: {audit}"));
        let e = &edited["edits"][0];
        assert_eq!(e["key"], "id:o-2", "{label}: {audit}");
        assert_eq!(
            e["changes"][0], r#"body.order: "x" → 5"#,
            "{label}: {audit}"
        );
        assert_ne!(e["before"], e["after"], "{label}: {audit}");
        println!("{label}: o-2 replayed as edited, o-1 and o-3 left, the original archived");
        let _ = conn.close(200, "done".into()).await;
        vhost.cleanup().await;
    }
}
