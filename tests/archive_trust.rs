//! Trusting the archive, on real brokers with every id counted: a full disk never tears the
//! local archive (a failed append leaves the file as it was; a torn last line from a crash is
//! read past, said, and moved aside by the next archive); a stream whose real retention is
//! shorter than the plan says is refused; archived messages and audit entries carry the user id
//! the broker vouched for, and what does not is refused or marked.

use crate::common;
use crate::replay_util;

use std::collections::HashSet;
use std::path::{Path, PathBuf};

use common::amqp::{self as h, amqp_depth};
use common::{TestBroker, TestVhost};
use lapin::types::FieldTable;
use replay_util::{Home, Run, command, fill, message_ids, read_all, run, warren};
use warren::domain::features::QueueType;
use warren::domain::message::Properties;
use warren::domain::value::{HeaderValue, Table};

/// A small tmpfs mounted on `dir`, unmounted when dropped.
struct Tmpfs(PathBuf);

impl Tmpfs {
    fn mount(dir: &Path, size: &str) -> Tmpfs {
        std::fs::create_dir_all(dir).unwrap();
        let out = std::process::Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"])
            .arg(dir)
            .output()
            .expect("mount");
        assert!(
            out.status.success(),
            "mount a tmpfs (this test needs root): {}",
            String::from_utf8_lossy(&out.stderr)
        );
        Tmpfs(dir.to_path_buf())
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = std::process::Command::new("umount").arg(&self.0).status();
    }
}

/// Fills the file system of `dir` with `filler` until the disk is full, then frees `room`
/// bytes of it.
fn fill_disk(filler: &Path, room: u64) {
    use std::io::Write as _;
    let mut f = std::fs::File::create(filler).unwrap();
    let chunk = vec![0u8; 64 * 1024];
    loop {
        match f.write(&chunk) {
            Ok(0) | Err(_) => break,
            Ok(_) => {}
        }
    }
    let _ = f.sync_all();
    let len = f.metadata().unwrap().len();
    f.set_len(len.saturating_sub(room)).unwrap();
    f.sync_all().unwrap();
}

/// The one local archive file under `dir`.
fn archive_file(dir: &Path) -> PathBuf {
    std::fs::read_dir(dir)
        .expect("the archive directory")
        .flat_map(|d| std::fs::read_dir(d.unwrap().path()).unwrap())
        .map(|f| f.unwrap().path())
        .find(|p| p.extension().is_some_and(|e| e == "jsonl"))
        .expect("the local archive")
}

/// The ids `warren archive list --local --json` lists.
async fn listed(vhost: &TestVhost, home: &Home) -> (Run, Vec<String>) {
    let list = warren(
        vhost,
        home,
        &["archive", "list", "--local", "--window", "5000", "--json"],
    )
    .await;
    let ids = list
        .json()
        .iter()
        .filter(|l| l.get("event").is_none())
        .filter_map(|l| l["message_id"].as_str().map(str::to_string))
        .collect();
    (list, ids)
}

/// A vhost of its own with a classic `dlq` holding `n` messages (`{prefix}-i`), a home, a
/// connection and a confirm channel.
async fn setup(
    broker: &TestBroker,
    name: &str,
    prefix: &str,
    n: u32,
) -> (TestVhost, Home, lapin::Connection, lapin::Channel) {
    let vhost = TestVhost::new(broker, name).await;
    let home = Home::new(name);
    let conn = h::connect(&vhost).await;
    let ch = h::confirm_channel(&conn).await;
    h::declare(&ch, "dlq", QueueType::Classic, FieldTable::default()).await;
    fill(&conn, "dlq", prefix, n).await;
    (vhost, home, conn, ch)
}

fn ids(prefix: &str, n: u32) -> HashSet<String> {
    (0..n).map(|i| format!("{prefix}-{i}")).collect()
}

#[tokio::test]
async fn a_full_disk_leaves_the_local_archive_as_it_was_and_a_torn_line_is_read_past() {
    for broker in TestBroker::all() {
        full_disk_on(&broker).await;
    }
}

async fn full_disk_on(broker: &TestBroker) {
    let label = &broker.label;
    let (vhost, home, conn, _ch) = setup(broker, "archive-disk", "first", 500).await;
    // The local archive lives in `archive/` beside the store: only it is on the small disk.
    let disk = Tmpfs::mount(&home.dir.join("archive"), "2m");
    let archive = |extra: &'static [&'static str]| {
        let mut args = vec!["archive", "dlq", "--local", "--yes", "--json"];
        args.extend_from_slice(extra);
        args
    };
    let a = archive(&[]);
    let ran = warren(&vhost, &home, &a).await;
    assert_eq!(ran.code, Some(0), "{label}: {ran}");
    assert_eq!(ran.summary_u64("moved"), 500, "{label}: {ran}");
    assert_eq!(amqp_depth(&conn, "dlq").await, 0, "{label}");
    let file = archive_file(&disk.0);
    let before = std::fs::read(&file).unwrap();

    // The disk fills; the next archive cannot be written whole.
    fill(&conn, "dlq", "second", 500).await;
    let filler = disk.0.join("filler");
    fill_disk(&filler, 48 * 1024);
    let ran = run(command(&vhost, &home, &a), &a).await;
    assert_eq!(ran.code, Some(1), "{label}: {ran}");
    assert!(
        ran.stderr.contains("No space left on device") && ran.stderr.contains("nothing moved"),
        "{label}: {ran}"
    );
    let after = std::fs::read(&file).unwrap();
    assert!(
        after == before,
        "{label}: the failed append left {} bytes where there were {}",
        after.len(),
        before.len()
    );
    let back = read_all(&conn, "dlq", 500).await;
    assert_eq!(
        message_ids(&back).into_iter().collect::<HashSet<_>>(),
        ids("second", 500),
        "{label}: the second 500 are all still in the DLQ"
    );
    let (list, got) = listed(&vhost, &home).await;
    assert_eq!(list.code, Some(0), "{label}: {list}");
    assert_eq!(
        got.iter().cloned().collect::<HashSet<_>>(),
        ids("first", 500),
        "{label}"
    );
    assert_eq!(got.len(), 500, "{label}");

    // A crash mid-write (before this fix, a full disk too) leaves a torn last line: it is read
    // past and said, and the next archive moves it aside instead of burying it.
    std::fs::remove_file(&filler).unwrap();
    let whole = String::from_utf8(before.clone()).unwrap();
    let last = whole.lines().last().unwrap();
    let torn = &last[..last.len() / 2];
    std::fs::write(&file, format!("{whole}{torn}")).unwrap();
    let torn_line = whole.lines().count() + 1;
    let (list, got) = listed(&vhost, &home).await;
    assert_eq!(list.code, Some(0), "{label}: {list}");
    assert_eq!(got.len(), 500, "{label}: {list}");
    assert!(
        list.stderr
            .contains(&format!("line {torn_line} of the local archive"))
            && list.stderr.contains("torn"),
        "{label}: {list}"
    );
    let ran = warren(&vhost, &home, &a).await;
    assert_eq!(ran.code, Some(0), "{label}: {ran}");
    assert_eq!(ran.summary_u64("moved"), 500, "{label}: {ran}");
    let mut aside = file.as_os_str().to_owned();
    aside.push(".torn");
    assert_eq!(
        std::fs::read_to_string(Path::new(&aside)).unwrap(),
        format!("{torn}\n"),
        "{label}"
    );
    let (list, got) = listed(&vhost, &home).await;
    assert!(!list.stderr.contains("torn"), "{label}: {list}");
    let mut want = ids("first", 500);
    want.extend(ids("second", 500));
    assert_eq!(got.len(), 1000, "{label}: {list}");
    assert_eq!(got.into_iter().collect::<HashSet<_>>(), want, "{label}");

    // Everything restores, each once.
    let r = ["restore", "--local", "--window", "5000", "--yes", "--json"];
    let ran = warren(&vhost, &home, &r).await;
    assert_eq!(ran.code, Some(0), "{label}: {ran}");
    assert_eq!(ran.summary_u64("moved"), 1000, "{label}: {ran}");
    let back = read_all(&conn, "dlq", 1000).await;
    assert_eq!(back.len(), 1000, "{label}");
    assert_eq!(
        message_ids(&back).into_iter().collect::<HashSet<_>>(),
        want,
        "{label}"
    );
    drop(disk);
    vhost.cleanup().await;
}

/// A message as anyone with write access could put it into the archive stream: Warren's
/// headers, naming a live queue, and `user_id` as given (`None`: none).
fn forged(i: u32, by: &str, user_id: Option<&str>) -> (Properties, Table, Vec<u8>) {
    let mut headers = Table::new();
    headers.insert("warren-archived-from", HeaderValue::string("payments"));
    headers.insert(
        "warren-archived-at",
        HeaderValue::string(jiff::Timestamp::now().to_string()),
    );
    headers.insert("warren-archived-by", HeaderValue::string(by));
    headers.insert("warren-archive-reason", HeaderValue::string(""));
    let props = Properties {
        message_id: Some(format!("forged-{i}")),
        user_id: user_id.map(str::to_string),
        ..Properties::default()
    };
    (props, headers, format!("{{\"refund\": {i}}}").into_bytes())
}

#[tokio::test]
async fn a_restore_refuses_what_the_broker_does_not_vouch_for_unless_trusted() {
    for broker in TestBroker::all() {
        vouched_restore_on(&broker).await;
    }
}

async fn vouched_restore_on(broker: &TestBroker) {
    let label = &broker.label;
    let (vhost, home, conn, ch) = setup(broker, "archive-vouch", "own", 5).await;
    h::declare(&ch, "payments", QueueType::Classic, FieldTable::default()).await;
    let ran = warren(
        &vhost,
        &home,
        &["archive", "dlq", "--create-archive", "--yes", "--json"],
    )
    .await;
    assert_eq!(ran.code, Some(0), "{label}: {ran}");
    assert_eq!(ran.summary_u64("moved"), 5, "{label}: {ran}");
    // What Warren archived carries the archiver as its user id, its own (none) kept beside.
    let archived = replay_util::read_stream(&conn, "warren.archive", 5).await;
    assert_eq!(archived.len(), 5, "{label}");
    for m in &archived {
        assert_eq!(m.properties.user_id.as_deref(), Some("guest"), "{label}");
        assert_eq!(
            m.headers.get_str("warren-archived-user-id"),
            Some(""),
            "{label}"
        );
    }
    // The broker refuses a user id that is not the connection's user.
    let (p, hd, body) = forged(9, "eve@admin", Some("admin"));
    let refused = ch
        .basic_publish(
            "".into(),
            "warren.archive".into(),
            Default::default(),
            &body,
            warren::broker::amqp::properties_to_amqp(&p, &hd).unwrap(),
        )
        .await;
    let refused = match refused {
        Ok(c) => c.await.map(|c| c.is_ack()).unwrap_or(false),
        Err(_) => false,
    };
    assert!(
        !refused,
        "{label}: a publish as 'admin' by guest was confirmed"
    );
    // Two forged ones: no user id, and the publisher's own user id under another's name.
    let ch = h::confirm_channel(&conn).await;
    for (i, by, user) in [(0, "eve@guest", None), (1, "eve@admin", Some("guest"))] {
        let (p, hd, body) = forged(i, by, user);
        h::publish(&ch, "warren.archive", &p, &hd, &body).await;
    }

    let list = warren(&vhost, &home, &["archive", "list", "--json"]).await;
    assert_eq!(list.code, Some(0), "{label}: {list}");
    let lines = list.json();
    let vouched = lines
        .iter()
        .filter(|l| l["archived"]["vouched_by"] == "guest")
        .count();
    let unvouched: Vec<&str> = lines
        .iter()
        .filter(|l| l["archived"]["unvouched"].is_string())
        .filter_map(|l| l["message_id"].as_str())
        .collect();
    assert_eq!(vouched, 5, "{label}: {list}");
    assert_eq!(unvouched, ["forged-0", "forged-1"], "{label}: {list}");

    // A plain restore takes nothing, and says how many and why.
    let ran = warren(&vhost, &home, &["restore", "--yes"]).await;
    assert_eq!(ran.code, Some(1), "{label}: {ran}");
    assert!(
        ran.stderr.contains("nothing restored")
            && ran.stderr.contains("2 of the chosen archived message(s)")
            && ran.stderr.contains("--trust-unsigned"),
        "{label}: {ran}"
    );
    assert_eq!(amqp_depth(&conn, "payments").await, 0, "{label}");
    assert_eq!(amqp_depth(&conn, "dlq").await, 0, "{label}");
    // Without the forged ones (a filter on where they claim to come from), the five go back.
    let ran = warren(&vhost, &home, &["restore", "--from", "dlq", "--yes"]).await;
    assert_eq!(ran.code, Some(0), "{label}: {ran}");
    let back = read_all(&conn, "dlq", 5).await;
    assert_eq!(
        message_ids(&back).into_iter().collect::<HashSet<_>>(),
        ids("own", 5),
        "{label}"
    );
    for m in &back {
        assert_eq!(
            m.properties.user_id, None,
            "{label}: its own user id (none)"
        );
        assert!(
            !m.headers.contains_key("warren-archived-user-id"),
            "{label}"
        );
    }
    assert_eq!(amqp_depth(&conn, "payments").await, 0, "{label}");
    // Trusted explicitly, the forged ones go where they claim, and it is said.
    let ran = warren(&vhost, &home, &["restore", "--trust-unsigned", "--yes"]).await;
    assert_eq!(ran.code, Some(0), "{label}: {ran}");
    assert!(
        ran.stderr.contains("as --trust-unsigned asks"),
        "{label}: {ran}"
    );
    let pay = read_all(&conn, "payments", 2).await;
    assert_eq!(
        message_ids(&pay),
        ["forged-0", "forged-1"],
        "{label}: {ran}"
    );
    assert_eq!(amqp_depth(&conn, "dlq").await, 5, "{label}");
    vhost.cleanup().await;
}

#[tokio::test]
async fn forged_audit_entries_are_marked_unvouched_and_warrens_own_are_not() {
    for broker in TestBroker::all() {
        forged_audit_on(&broker).await;
    }
}

async fn forged_audit_on(broker: &TestBroker) {
    let label = &broker.label;
    let (vhost, alice, _conn, ch) = setup(broker, "audit-vouch", "m", 3).await;
    let ran = warren(
        &vhost,
        &alice,
        &[
            "archive",
            "dlq",
            "--create-archive",
            "--create-audit-stream",
            "--yes",
            "--json",
        ],
    )
    .await;
    assert_eq!(ran.code, Some(0), "{label}: {ran}");
    let real = ran.event("started")["run_id"]
        .as_str()
        .unwrap_or_else(|| panic!("{label}: no run id: {ran}"))
        .to_string();
    // A forged run: a start and an outcome as Warren writes them, without a user id.
    let at = jiff::Timestamp::now();
    let start = warren::store::AuditStart {
        run_id: "forged-run".into(),
        at,
        os_user: "ana".into(),
        broker_user: "guest".into(),
        context: "default".into(),
        vhost: vhost.name.clone(),
        from_queue: "payments".into(),
        targets: vec!["payments.refunds".into()],
        filter: None,
        group: None,
        requested_limit: None,
        dry_run: false,
        keep_attempts: false,
        clear_expiry: false,
        strip_failure_stamp: false,
    };
    let outcome = warren::store::AuditOutcome {
        canary: None,
        edits: Vec::new(),
        targets: Vec::new(),
        at,
        moved: 900,
        returned: 0,
        failed: 0,
        remaining: 0,
        message_ids: Vec::new(),
        duplicated: 0,
        duplicate_ids: Vec::new(),
        outcome: warren::domain::outcome::RunOutcome::Completed,
    };
    let start = warren::store::AuditEnvelope::new("replay", "start", "forged-run", at, start);
    let outcome = warren::store::AuditEnvelope::new("replay", "outcome", "forged-run", at, outcome);
    for body in [
        serde_json::to_vec(&start).unwrap(),
        serde_json::to_vec(&outcome).unwrap(),
    ] {
        h::publish(
            &ch,
            "warren.audit",
            &Properties::default(),
            &Table::new(),
            &body,
        )
        .await;
    }

    // A second Warren with a store of its own sees both runs only on the broker.
    let bob = Home::new("audit-vouch-b");
    let audit = warren(&vhost, &bob, &["audit", "--json"]).await;
    assert_eq!(audit.code, Some(0), "{label}: {audit}");
    let seen = |run: &str| {
        audit
            .json()
            .into_iter()
            .find(|r| r["run_id"] == run)
            .unwrap_or_else(|| panic!("{label}: no run {run}: {audit}"))["seen"]
            .clone()
    };
    assert_eq!(
        seen(&real)["unvouched"],
        serde_json::Value::Null,
        "{label}: {audit}"
    );
    assert_eq!(seen("forged-run")["unvouched"], true, "{label}: {audit}");
    let text = warren(&vhost, &bob, &["audit"]).await;
    let forged_line = text
        .stdout
        .lines()
        .find(|l| l.contains("payments"))
        .unwrap_or_else(|| panic!("{label}: {text}"));
    assert!(forged_line.contains("UNVOUCHED"), "{label}: {text}");
    assert_eq!(
        text.stdout.matches("UNVOUCHED").count(),
        1,
        "{label}: only the forged run: {text}"
    );
    vhost.cleanup().await;
}

/// Declares the archive stream as someone else might have, with `args` beside its type.
async fn declare_archive(ch: &lapin::Channel, args: &[(&str, lapin::types::AMQPValue)]) {
    let mut t = FieldTable::default();
    for (k, v) in args {
        t.insert((*k).into(), v.clone());
    }
    h::declare(ch, "warren.archive", QueueType::Stream, t).await;
}

async fn delete_archive(ch: &lapin::Channel) {
    ch.queue_delete("warren.archive".into(), Default::default())
        .await
        .expect("delete the archive stream");
}

/// `warren archive dlq` is refused for `why`, and the 50 are all still in the DLQ.
async fn refused(
    vhost: &TestVhost,
    home: &Home,
    conn: &lapin::Connection,
    extra: &[&str],
    why: &str,
) {
    let label = &vhost.broker.label;
    let mut args = vec!["archive", "dlq", "--yes"];
    args.extend_from_slice(extra);
    let ran = warren(vhost, home, &args).await;
    assert_eq!(ran.code, Some(1), "{label}: {ran}");
    assert!(
        ran.stderr.contains(why) && ran.stderr.contains("nothing moved"),
        "{label}: {ran}"
    );
    let held = read_all(conn, "dlq", 50).await;
    assert_eq!(
        message_ids(&held).into_iter().collect::<HashSet<_>>(),
        ids("r", 50),
        "{label}: every one still in the DLQ"
    );
}

#[tokio::test]
async fn a_stream_that_would_not_keep_the_archive_is_refused_and_a_lost_archive_is_said() {
    for broker in TestBroker::all() {
        retention_on(&broker).await;
    }
}

async fn retention_on(broker: &TestBroker) {
    use lapin::types::{AMQPValue, LongString};
    let label = &broker.label;
    let (vhost, home, conn, ch) = setup(broker, "archive-retention-real", "r", 50).await;

    // A byte limit (the 4.3 report), then a max age of 5 s (4.0), each by argument.
    declare_archive(
        &ch,
        &[("x-max-length-bytes", AMQPValue::LongLongInt(300_000))],
    )
    .await;
    refused(&vhost, &home, &conn, &[], "holds at most 300000 bytes").await;
    delete_archive(&ch).await;
    let five = AMQPValue::LongString(LongString::from("5s"));
    declare_archive(&ch, &[("x-max-age", five)]).await;
    refused(
        &vhost,
        &home,
        &conn,
        &[],
        "keeps messages only 5s (x-max-age argument)",
    )
    .await;
    delete_archive(&ch).await;
    // A policy's byte limit (3.10), on the stream Warren creates itself.
    vhost
        .policy(
            "cap",
            "^warren\\.archive$",
            "queues",
            serde_json::json!({"max-length-bytes": 1_000_000}),
        )
        .await;
    refused(
        &vhost,
        &home,
        &conn,
        &["--create-archive"],
        "holds at most 1000000 bytes",
    )
    .await;
    let path = format!("/api/policies/{}/cap", common::enc(&vhost.name));
    let r = vhost.api(reqwest::Method::DELETE, &path, None).await;
    assert!(r.status().is_success(), "{label}: {}", r.status());
    // Without it, the archive goes ahead.
    let ran = warren(&vhost, &home, &["archive", "dlq", "--yes", "--json"]).await;
    assert_eq!(ran.code, Some(0), "{label}: {ran}");
    assert_eq!(ran.summary_u64("moved"), 50, "{label}: {ran}");
    assert_eq!(amqp_depth(&conn, "dlq").await, 0, "{label}");

    // The stream is lost (deleted and declared again): what the record says it archived and
    // it no longer holds is said by the list and by the restore.
    delete_archive(&ch).await;
    fill(&conn, "dlq", "late", 3).await;
    let ran = warren(
        &vhost,
        &home,
        &["archive", "dlq", "--create-archive", "--yes", "--json"],
    )
    .await;
    assert_eq!(ran.code, Some(0), "{label}: {ran}");
    let said = "the record says 53 message(s) were archived into stream 'warren.archive'";
    let list = warren(&vhost, &home, &["archive", "list", "--json"]).await;
    assert_eq!(list.code, Some(0), "{label}: {list}");
    assert!(
        list.stderr.contains(said) && list.stderr.contains("50 of them are no longer in it"),
        "{label}: {list}"
    );
    let ran = warren(&vhost, &home, &["restore", "--yes", "--json"]).await;
    assert_eq!(ran.code, Some(0), "{label}: {ran}");
    assert!(ran.stderr.contains(said), "{label}: {ran}");
    let back = read_all(&conn, "dlq", 3).await;
    assert_eq!(
        message_ids(&back).into_iter().collect::<HashSet<_>>(),
        ids("late", 3),
        "{label}"
    );
    vhost.cleanup().await;
}
