//! Trusting the archive, on real brokers with every id counted: a full disk never tears the
//! local archive (a failed append leaves the file as it was; a torn last line from a crash is
//! read past, said, and moved aside by the next archive); a stream whose real retention is
//! shorter than the plan says is refused; archived messages and audit entries carry the user id
//! the broker vouched for, and what does not is refused or marked.

mod common;
mod replay_util;

use std::collections::HashSet;
use std::path::{Path, PathBuf};

use common::amqp::{self as h, amqp_depth};
use common::{TestBroker, TestVhost};
use lapin::types::FieldTable;
use replay_util::{Home, Run, command, fill, message_ids, read_all, run, warren};
use warren::domain::features::QueueType;

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
    let vhost = TestVhost::new(broker, "archive-disk").await;
    let home = Home::new("archive-disk");
    // The local archive lives in `archive/` beside the store: only it is on the small disk.
    let disk = Tmpfs::mount(&home.dir.join("archive"), "2m");
    let conn = h::connect(&vhost).await;
    let ch = h::confirm_channel(&conn).await;
    h::declare(&ch, "dlq", QueueType::Classic, FieldTable::default()).await;
    fill(&conn, "dlq", "first", 500).await;
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
    assert_eq!(
        std::fs::read(&file).unwrap(),
        before,
        "{label}: the failed append left the file as it was"
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
