//! Where `warren archive` keeps messages, and how `warren restore` puts them back: the archive
//! stream on the broker (declared with the user's consent), or a snapshot file in Warren's data
//! directory where a stream cannot be used. Moving messages *into* the archive is the replay
//! engine's job (`replay::Action::Archive`); this module declares, appends, reads and publishes.

use std::collections::HashMap;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::time::Duration;

use futures_util::StreamExt;
use futures_util::stream::FuturesOrdered;
use lapin::Confirmation;
use lapin::options::{BasicPublishOptions, ConfirmSelectOptions};

use crate::broker::amqp;
use crate::broker::replay::content_hash;
use crate::domain::message::DeadLetter;
use crate::domain::snapshot::{self, SnapshotHeader};

/// What is in the vhost under the archive stream's name.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum StreamState {
    /// A stream: the archive.
    Stream,
    /// Nothing yet: it must be created (with consent) before the first archive.
    Missing,
    /// A queue of another type holds the name: Warren will not use it.
    NotAStream(String),
}

pub use super::amqp::{DeclareError, declare_stream};

/// The local archive of a context's vhost: a snapshot file under the data directory that holds
/// Warren's store (`archive/<context>/<vhost>.jsonl`), names made file-safe.
pub fn local_path(store_path: &Path, context: &str, vhost: &str) -> PathBuf {
    let safe = |s: &str| -> String {
        let t = crate::domain::sanitize::file_safe(s, 100);
        // "/" is the default vhost.
        if t.trim_matches('_').is_empty() {
            format!("default{t}")
        } else {
            t
        }
    };
    let dir = store_path.parent().unwrap_or(Path::new("."));
    dir.join("archive")
        .join(safe(context))
        .join(format!("{}.jsonl", safe(vhost)))
}

/// Appends `messages` to the snapshot file at `path` (creating it, with its header line, when
/// it is new) and syncs it to disk before returning: a message is deleted from the DLQ only
/// after this returned. A write that fails (a full disk) is undone: the file is cut back to the
/// length it had, so it stays as it was. A torn last line left by an earlier write that did not
/// finish (a crash) is first moved aside into `<file>.torn`: its messages were never taken off
/// their queue, and an append after it would bury it mid-file.
pub fn append_snapshot(
    path: &Path,
    header: &SnapshotHeader,
    messages: &[DeadLetter],
) -> std::io::Result<()> {
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir)?;
    }
    let mut f = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .read(true)
        .write(true)
        .open(path)?;
    let (len, newline) = mend_tail(path, &mut f)?;
    let fresh = len == 0;
    let mut text = if newline {
        "\n".to_string()
    } else {
        String::new()
    };
    text.push_str(&snapshot_text(fresh.then_some(header), messages));
    let written = (|| {
        use std::io::Seek as _;
        f.seek(std::io::SeekFrom::Start(len))?;
        f.write_all(text.as_bytes())?;
        f.sync_all()
    })();
    if let Err(e) = written {
        // Undone: what was written of this append goes, whatever the disk said.
        let _ = f.set_len(len).and_then(|()| f.sync_all());
        return Err(e);
    }
    // The directory entry of a new file is durable only once the directory is synced.
    if fresh && let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        let _ = std::fs::File::open(dir).and_then(|d| d.sync_all());
    }
    Ok(())
}

/// Where an append to the open archive `f` starts, and whether it must begin with a newline (a
/// whole last line without one). A torn last line is copied into `<file>.torn` (synced) and cut
/// off the archive first; if that copy cannot be written, nothing is cut and the append fails.
fn mend_tail(path: &Path, f: &mut std::fs::File) -> std::io::Result<(u64, bool)> {
    use std::io::{Read as _, Seek as _};
    let len = f.metadata()?.len();
    if len == 0 {
        return Ok((0, false));
    }
    let mut last = [0u8; 1];
    f.seek(std::io::SeekFrom::Start(len - 1))?;
    f.read_exact(&mut last)?;
    if last[0] == b'\n' {
        return Ok((len, false));
    }
    let mut bytes = Vec::new();
    f.seek(std::io::SeekFrom::Start(0))?;
    f.read_to_end(&mut bytes)?;
    let text = String::from_utf8_lossy(&bytes);
    let (_, torn) = crate::domain::archive::torn_tail(&text);
    let Some(torn) = torn else {
        return Ok((len, true));
    };
    // The byte offset in the file: the text is lossy only where the file is not UTF-8.
    let at = bytes.iter().rposition(|b| *b == b'\n').map_or(0, |i| i + 1);
    let mut aside = path.as_os_str().to_owned();
    aside.push(".torn");
    let mut t = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(Path::new(&aside))?;
    t.write_all(&bytes[at..])?;
    t.write_all(b"\n")?;
    t.sync_all()?;
    f.set_len(at as u64)?;
    f.sync_all()?;
    tracing::warn!(
        "local archive {}: its torn last line {} ({} bytes, a write that did not finish) was moved aside into {}",
        path.display(),
        torn.line,
        torn.bytes,
        Path::new(&aside).display()
    );
    Ok((at as u64, false))
}

/// A snapshot's lines: the header line first when `header` is given, then one per message.
fn snapshot_text(header: Option<&SnapshotHeader>, messages: &[DeadLetter]) -> String {
    let mut text = String::new();
    if let Some(header) = header {
        text.push_str(&snapshot::header_line(header));
        text.push('\n');
    }
    for m in messages {
        text.push_str(&snapshot::message_line(m));
        text.push('\n');
    }
    text
}

/// Writes a new snapshot file at `path` whole or not at all: into a temporary file beside it,
/// synced, then put in place without ever replacing an existing file. The temporary file is
/// removed whatever happens, so a full disk leaves no partial snapshot behind (and the caller,
/// told so, deletes nothing).
pub fn write_snapshot_whole(
    path: &Path,
    header: &SnapshotHeader,
    messages: &[DeadLetter],
) -> std::io::Result<()> {
    let dir = path
        .parent()
        .filter(|d| !d.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    std::fs::create_dir_all(dir)?;
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let tmp = dir.join(format!(".{name}.{}.partial", std::process::id()));
    let written = (|| {
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&tmp)?;
        f.write_all(snapshot_text(Some(header), messages).as_bytes())?;
        f.sync_all()?;
        put_in_place(&tmp, path)
    })();
    let _ = std::fs::remove_file(&tmp);
    written?;
    // The new directory entry is durable only once the directory is synced.
    let _ = std::fs::File::open(dir).and_then(|d| d.sync_all());
    Ok(())
}

/// Gives the finished `tmp` the name `path`, failing if `path` exists: a hard link does that
/// atomically; where links are not supported, a rename after a check.
fn put_in_place(tmp: &Path, path: &Path) -> std::io::Result<()> {
    match std::fs::hard_link(tmp, path) {
        Err(e) if e.kind() != std::io::ErrorKind::AlreadyExists => {
            if path.exists() {
                return Err(std::io::ErrorKind::AlreadyExists.into());
            }
            std::fs::rename(tmp, path)
        }
        done => done,
    }
}

/// The local archive's lock, held while it is appended to or rewritten: a rewrite for
/// retention must not lose an entry another Warren appends meanwhile. A file of its own beside
/// the archive (`<vhost>.jsonl.lock`), since a rewrite replaces the archive's file.
fn lock_local(path: &Path) -> Result<std::fs::File, String> {
    let mut name = path.as_os_str().to_owned();
    name.push(".lock");
    let lock = Path::new(&name);
    if let Some(dir) = lock.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir)
            .map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    }
    let f = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(lock)
        .map_err(|e| format!("cannot open the archive's lock {}: {e}", lock.display()))?;
    f.lock()
        .map_err(|e| format!("cannot lock the archive {}: {e}", path.display()))?;
    Ok(f)
}

/// Applies the archive's retention (`archive_max_age`, as the stream's `x-max-age`) to the local
/// archive at `path`: entries archived longer ago than `max_age` are dropped, the header line and
/// every younger entry kept byte for byte. The file is rewritten atomically (a temporary file in
/// the same directory, synced, renamed over it, the directory synced), under the archive's
/// lock, and only when something expired. Returns how many were dropped.
pub fn expire_local(path: &Path, max_age: &str) -> Result<u64, String> {
    let Some(secs) = crate::domain::archive::max_age_secs(max_age) else {
        return Err(format!(
            "archive_max_age '{}' is not a retention (e.g. \"30D\"); the local archive was left as it is",
            crate::domain::sanitize::one_line(max_age, 20)
        ));
    };
    if !path.exists() {
        return Ok(0);
    }
    let _lock = lock_local(path)?;
    expire_locked(path, secs, jiff::Timestamp::now()).map_err(|e| {
        format!(
            "cannot apply retention to the archive {}: {e}",
            path.display()
        )
    })
}

/// The text of a local archive: UTF-8 up to its last newline; after it, a torn write may have
/// cut a character in two, so that part is read as best it can be (it is read past anyway).
fn read_text(path: &Path) -> std::io::Result<String> {
    let bytes = std::fs::read(path)?;
    let at = bytes.iter().rposition(|b| *b == b'\n').map_or(0, |i| i + 1);
    let head = std::str::from_utf8(&bytes[..at])
        .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidData, e))?;
    Ok(format!("{head}{}", String::from_utf8_lossy(&bytes[at..])))
}

fn expire_locked(path: &Path, secs: u64, now: jiff::Timestamp) -> Result<u64, String> {
    let text = match read_text(path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(0),
        Err(e) => return Err(e.to_string()),
    };
    if text.trim().is_empty() {
        return Ok(0);
    }
    let (kept, dropped) = crate::domain::archive::retain(&text, now, secs)
        .map_err(|e| format!("not a readable Warren snapshot ({e}); nothing dropped"))?;
    if dropped == 0 {
        return Ok(0);
    }
    let dir = path
        .parent()
        .filter(|d| !d.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let tmp = dir.join(format!(".{name}.{}.tmp", std::process::id()));
    let written = (|| -> std::io::Result<()> {
        let mut f = std::fs::File::create(&tmp)?;
        f.write_all(kept.as_bytes())?;
        f.sync_all()?;
        std::fs::rename(&tmp, path)?;
        std::fs::File::open(dir)?.sync_all()
    })();
    if let Err(e) = written {
        let _ = std::fs::remove_file(&tmp);
        return Err(format!("{e}; nothing dropped"));
    }
    Ok(dropped)
}

/// The local archive as its readers see it.
#[derive(Debug, Default)]
pub struct LocalRead {
    /// Entries that had expired and were dropped first.
    pub expired: u64,
    /// Its messages in file order, each numbered by its place in the file.
    pub messages: Vec<DeadLetter>,
    /// A torn last line read past, in words (see [`read_local`]).
    pub torn: Option<String>,
}

/// The local archive at `path` as its readers see it: its retention applied first (how many
/// entries expired and were dropped), then its messages in file order, each numbered by its
/// place in the file, and a torn last line said.
pub fn read_local_all(path: &Path, max_age: &str) -> Result<LocalRead, String> {
    let expired = expire_local(path, max_age)?;
    let (mut messages, torn) = read_local_torn(path)?;
    for (i, m) in messages.iter_mut().enumerate() {
        m.position = i as u64;
    }
    Ok(LocalRead {
        expired,
        messages,
        torn,
    })
}

/// The messages of the local archive at `path` (none when it does not exist yet). A torn last
/// line (a write that did not finish) is read past.
pub fn read_local(path: &Path) -> Result<Vec<DeadLetter>, String> {
    read_local_torn(path).map(|(m, _)| m)
}

fn read_local_torn(path: &Path) -> Result<(Vec<DeadLetter>, Option<String>), String> {
    let text = match read_text(path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok((Vec::new(), None)),
        Err(e) => return Err(format!("cannot read the archive {}: {e}", path.display())),
    };
    let (whole, torn) = crate::domain::archive::torn_tail(&text);
    let torn = torn.map(|t| {
        format!(
            "line {} of the local archive {} is torn ({} bytes: a write that did not finish, a full disk or a crash) and was read past: what it held was never taken off its queue; the next archive moves it aside into {}.torn",
            t.line,
            path.display(),
            t.bytes,
            path.display()
        )
    });
    if whole.trim().is_empty() {
        return Ok((Vec::new(), torn));
    }
    snapshot::read(whole)
        .map(|(_, m)| (m, torn))
        .map_err(|e| format!("{} is not a readable Warren snapshot: {e}", path.display()))
}

/// How many messages the local archive at `path` holds (`None`: no file, or none in it), for
/// the queue list. Counted once per change of the file (its length and time), as the list is
/// refreshed every few seconds and the file can hold tens of MiB.
pub fn local_entries(path: &Path) -> Option<u64> {
    type Seen = HashMap<PathBuf, (u64, std::time::SystemTime, u64)>;
    static SEEN: std::sync::OnceLock<std::sync::Mutex<Seen>> = std::sync::OnceLock::new();
    let meta = std::fs::metadata(path).ok()?;
    let stamp = (meta.len(), meta.modified().ok()?);
    let seen = SEEN.get_or_init(Default::default);
    if let Some((len, at, n)) = seen.lock().ok()?.get(path)
        && (*len, *at) == stamp
    {
        return (*n > 0).then_some(*n);
    }
    let bytes = std::fs::read(path).ok()?;
    // The first line is the snapshot's header; each line after it one message. Warren ends
    // every line it writes with a newline: what follows the last one is a torn write.
    let whole = bytes
        .iter()
        .rposition(|b| *b == b'\n')
        .map_or(&bytes[..0], |i| &bytes[..i]);
    let lines = whole
        .split(|b| *b == b'\n')
        .filter(|l| !l.iter().all(u8::is_ascii_whitespace))
        .count() as u64;
    let n = lines.saturating_sub(1);
    seen.lock()
        .ok()?
        .insert(path.to_path_buf(), (stamp.0, stamp.1, n));
    (n > 0).then_some(n)
}

/// One message to publish with a confirm, and how the caller names it.
#[derive(Clone, Debug)]
pub struct Publish {
    pub reference: String,
    pub exchange: String,
    pub routing_key: String,
    pub props: lapin::BasicProperties,
    pub body: Vec<u8>,
}

/// How one publish ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Published {
    /// Confirmed and routed.
    Confirmed,
    /// Refused, returned unroutable, or unanswered: why. An unanswered one may have arrived.
    Failed { why: String, maybe_arrived: bool },
}

/// One publish of a batch, from its frames to its confirm.
type PendingConfirm =
    std::pin::Pin<Box<dyn std::future::Future<Output = Result<Confirmation, String>> + Send>>;

/// How many publishes are in flight at once, awaited together.
const BATCH: usize = 256;
/// How long a batch's confirms may take.
const CONFIRM_WAIT: Duration = Duration::from_secs(30);

/// Publishes each message with `mandatory` on a confirm-mode channel of its own, a batch at a
/// time, and says how each ended, in order (the copies `keep_copies` keeps; a restore goes
/// through the replay engine instead). A `basic.return` comes with some confirm of its batch,
/// not necessarily its own (see `replay::Confirms::settle_returns`): it is matched to its
/// publish by content. After a failure of the channel or a missing confirm nothing more is
/// published; the rest are reported as not sent.
pub(crate) async fn publish_confirmed(
    conn: &lapin::Connection,
    messages: Vec<Publish>,
) -> Result<Vec<(String, Published)>, String> {
    let ch = conn
        .create_channel()
        .await
        .map_err(|e| format!("cannot open a channel: {e}"))?;
    ch.confirm_select(ConfirmSelectOptions::default())
        .await
        .map_err(|e| format!("confirm mode: {e}"))?;
    let mut out = Vec::with_capacity(messages.len());
    let mut broken: Option<String> = None;
    let mut rest = messages.into_iter().peekable();
    while rest.peek().is_some() {
        let batch: Vec<Publish> = rest.by_ref().take(BATCH).collect();
        if let Some(why) = &broken {
            for p in batch {
                let why = format!("not sent: {why}");
                out.push((
                    p.reference,
                    Published::Failed {
                        why,
                        maybe_arrived: false,
                    },
                ));
            }
            continue;
        }
        let mut pending = FuturesOrdered::new();
        let mut hashes = Vec::with_capacity(batch.len());
        for p in &batch {
            let (exchange, routing_key) = match (
                amqp::short("the exchange name", &p.exchange),
                amqp::short("the routing key", &p.routing_key),
            ) {
                (Ok(x), Ok(k)) => (x, k),
                (Err(e), _) | (_, Err(e)) => {
                    hashes.push(None);
                    let why = e.to_string();
                    pending.push_back(Box::pin(async move { Err(why) }) as PendingConfirm);
                    continue;
                }
            };
            hashes.push(Some(content_hash(
                &exchange,
                &routing_key,
                &p.props,
                &p.body,
            )));
            let ch = ch.clone();
            let (props, body) = (p.props.clone(), p.body.clone());
            pending.push_back(Box::pin(async move {
                let c = ch
                    .basic_publish(
                        exchange,
                        routing_key,
                        BasicPublishOptions {
                            mandatory: true,
                            ..Default::default()
                        },
                        &body,
                        props,
                    )
                    .await
                    .map_err(|e| e.to_string())?;
                c.await.map_err(|e| e.to_string())
            }));
        }
        let results: Vec<Result<Confirmation, String>> =
            match tokio::time::timeout(CONFIRM_WAIT, pending.collect::<Vec<_>>()).await {
                Ok(r) => r,
                Err(_) => {
                    let why = format!("no confirm within {}s", CONFIRM_WAIT.as_secs());
                    broken = Some(why.clone());
                    batch.iter().map(|_| Err(why.clone())).collect()
                }
            };
        // Returns, by content: each claims the first publish of the batch with that content.
        let mut returned: Vec<Option<String>> = vec![None; batch.len()];
        for r in &results {
            if let Ok(Confirmation::Ack(Some(ret)) | Confirmation::Nack(Some(ret))) = r {
                let d = &ret.delivery;
                let h = content_hash(&d.exchange, &d.routing_key, &d.properties, &d.data);
                if let Some(i) =
                    (0..batch.len()).find(|&i| hashes[i] == Some(h) && returned[i].is_none())
                {
                    returned[i] = Some(format!("{} {}", ret.reply_code, ret.reply_text));
                }
            }
        }
        for ((p, r), ret) in batch.into_iter().zip(results).zip(returned) {
            let outcome = match (r, ret) {
                (_, Some(why)) => Published::Failed {
                    why: format!("returned by the broker: {why}"),
                    maybe_arrived: false,
                },
                (Ok(Confirmation::Ack(_)), None) => Published::Confirmed,
                (Ok(Confirmation::Nack(_)), None) => Published::Failed {
                    why: "the broker refused the publish (nack)".into(),
                    maybe_arrived: false,
                },
                (Ok(Confirmation::NotRequested), None) => Published::Failed {
                    why: "no publisher confirm".into(),
                    maybe_arrived: true,
                },
                (Err(why), None) => {
                    broken.get_or_insert(why.clone());
                    Published::Failed {
                        why,
                        maybe_arrived: true,
                    }
                }
            };
            out.push((p.reference, outcome));
        }
    }
    if ch.status().connected() {
        let _ =
            tokio::time::timeout(Duration::from_secs(2), ch.close(200, "copies kept".into())).await;
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(body: &str, at: jiff::Timestamp) -> DeadLetter {
        let mut m = DeadLetter {
            queue: "warren archive (local)".into(),
            body: body.as_bytes().to_vec(),
            body_size: body.len() as u64,
            ..Default::default()
        };
        crate::domain::archive::Stamp {
            from: "orders.dlq".into(),
            by: "ana@ops".into(),
            reason: String::new(),
        }
        .apply(&mut m.headers, at);
        m
    }

    #[test]
    fn a_discard_snapshot_is_written_whole_and_never_over_another() {
        let dir = std::env::temp_dir().join(format!(
            "warren-whole-{}-{}",
            std::process::id(),
            jiff::Timestamp::now().as_nanosecond()
        ));
        let path = dir.join("discarded").join("q-1.jsonl");
        let header = SnapshotHeader {
            queue: "q".into(),
            vhost: "/".into(),
            exported_at: "2026-01-01T00:00:00Z".into(),
            source: "RabbitMQ 3.10.8".into(),
        };
        let now = jiff::Timestamp::now();
        write_snapshot_whole(&path, &header, &[entry("a", now), entry("b", now)]).unwrap();
        let first = std::fs::read_to_string(&path).unwrap();
        assert_eq!(first.lines().count(), 3, "the header and two messages");
        let again = write_snapshot_whole(&path, &header, &[entry("c", now)]).unwrap_err();
        assert_eq!(again.kind(), std::io::ErrorKind::AlreadyExists);
        assert_eq!(std::fs::read_to_string(&path).unwrap(), first, "untouched");
        let names: Vec<String> = std::fs::read_dir(path.parent().unwrap())
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        assert_eq!(names, ["q-1.jsonl"], "no temporary file left");
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn retention_rewrites_the_local_archive_without_its_old_entries() {
        let dir = std::env::temp_dir().join(format!(
            "warren-retention-{}-{}",
            std::process::id(),
            jiff::Timestamp::now().as_nanosecond()
        ));
        let path = dir.join("archive").join("default_.jsonl");
        let header = SnapshotHeader {
            queue: "warren archive (local)".into(),
            vhost: "/".into(),
            exported_at: "2026-01-01T00:00:00Z".into(),
            source: "RabbitMQ 3.10.8".into(),
        };
        let now = jiff::Timestamp::now();
        let days = |n: i64| jiff::SignedDuration::from_hours(24 * n);
        let old = [
            entry("old-1", now - days(40)),
            entry("old-2", now - days(31)),
        ];
        let young = [entry("young-1", now - days(29)), entry("young-2", now)];
        append_snapshot(&path, &header, &[old[0].clone(), young[0].clone()]).unwrap();
        append_snapshot(&path, &header, &[old[1].clone(), young[1].clone()]).unwrap();
        let before = std::fs::read_to_string(&path).unwrap();
        assert_eq!(expire_local(&path, "30D").unwrap(), 2);
        let after = std::fs::read_to_string(&path).unwrap();
        let lines: Vec<&str> = before.lines().collect();
        // The header and the young entries, byte for byte, in their order.
        assert_eq!(after, format!("{}\n{}\n{}\n", lines[0], lines[2], lines[4]));
        let bodies: Vec<Vec<u8>> = read_local(&path)
            .unwrap()
            .into_iter()
            .map(|m| m.body)
            .collect();
        assert_eq!(bodies, [b"young-1".to_vec(), b"young-2".to_vec()]);
        assert_eq!(expire_local(&path, "30D").unwrap(), 0, "nothing older left");
        let leftovers: Vec<String> = std::fs::read_dir(path.parent().unwrap())
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .filter(|n| n.ends_with(".tmp"))
            .collect();
        assert!(leftovers.is_empty(), "{leftovers:?}");
        assert!(expire_local(&path, "a month").is_err());
        assert_eq!(expire_local(&dir.join("none.jsonl"), "30D").unwrap(), 0);
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn the_local_archive_lives_beside_the_store_with_safe_names() {
        let p = local_path(Path::new("/d/warren.db"), "prod/eu", "/");
        assert_eq!(p, PathBuf::from("/d/archive/prod_eu/default_.jsonl"));
        let p = local_path(Path::new("/d/warren.db"), "local", "../../etc");
        assert_eq!(p, PathBuf::from("/d/archive/local/.._.._etc.jsonl"));
    }
}

/// Where an archive goes (or is read from) for a context and vhost.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Place {
    Stream(String),
    /// A snapshot file, and why it is not the stream.
    Local(PathBuf, String),
}

impl Place {
    /// Where an archive went, in its headline (`Summary::headline`): the stream's name, or
    /// the local file.
    pub fn where_to(&self) -> String {
        match self {
            Place::Stream(name) => name.clone(),
            Place::Local(path, _) => format!("the local file {}", path.display()),
        }
    }

    pub fn label(&self) -> String {
        match self {
            Place::Stream(name) => format!("stream '{name}'"),
            Place::Local(path, _) => format!("local file {}", path.display()),
        }
    }

    pub fn json(&self, max_age: &str) -> serde_json::Value {
        match self {
            Place::Stream(name) => {
                serde_json::json!({"kind": "stream", "name": name, "max_age": max_age})
            }
            Place::Local(path, why) => {
                serde_json::json!({"kind": "local", "path": path.display().to_string(), "why": why})
            }
        }
    }

    /// The key restored messages are remembered under.
    pub fn key(&self, s: &crate::broker::session::Session) -> String {
        match self {
            Place::Stream(name) => {
                format!("stream:{}:{}:{name}", s.handle.target.context, s.vhost())
            }
            Place::Local(path, _) => format!("file:{}", path.display()),
        }
    }
}

/// Whether the archive at `place` keeps what is archived into it as long as the plan says
/// (the context's `archive_max_age`): for the stream, its retention as the broker applies it
/// (arguments and the policy in force, read again each time: a policy can change any day), see
/// `domain::archive::retention_refusal`. `Err` is the refusal in words. A local file keeps
/// what Warren's own retention keeps.
pub async fn retention_refusal(
    s: &crate::broker::session::Session,
    place: &Place,
) -> Result<(), String> {
    let Place::Stream(name) = place else {
        return Ok(());
    };
    let unread = |e: crate::broker::management::ManagementError| {
        format!(
            "cannot read the retention of the archive stream '{}': {e}; nothing moved",
            crate::domain::sanitize::one_line(name, 100)
        )
    };
    let q = match s.handle.mgmt.queue(s.vhost(), name).await {
        Ok(q) => q,
        // A dry run's stream that is not created yet: Warren would declare it as promised.
        Err(crate::broker::management::ManagementError::NoQueue { .. }) => return Ok(()),
        Err(e) => return Err(unread(e)),
    };
    let policies = match q.effective_policy {
        Some(_) => Vec::new(),
        // Not reported yet (a stream just declared): matched by pattern, as the broker does.
        None => s.handle.mgmt.policies(s.vhost()).await.map_err(unread)?,
    };
    let policy = crate::domain::discovery::policy_definition(&q, &policies);
    match crate::domain::archive::retention_refusal(
        name,
        &q,
        policy,
        &s.handle.target.archive.max_age,
    ) {
        Some(why) => Err(why),
        None => Ok(()),
    }
}

/// The local archive file of the session's context and vhost, and why it is used.
pub fn local_place(s: &crate::broker::session::Session, why: &str) -> Result<Place, String> {
    let store = crate::store::Store::default_path().ok_or_else(|| {
        format!(
            "the archive would be a local file, but Warren has no data directory: set {}",
            crate::store::STORE_ENV
        )
    })?;
    Ok(Place::Local(
        local_path(&store, &s.handle.target.context, s.vhost()),
        why.to_string(),
    ))
}

/// The engine's work for an archive of `sel` (`count` confirmed) to `place`: into the stream
/// (acked after the confirm), or for a local archive the file first, synced, and then only what
/// it holds leaves the queue.
pub fn archive_work(
    s: &crate::broker::session::Session,
    place: &Place,
    stamp: crate::domain::archive::Stamp,
    sel: &crate::broker::session::Selected,
    count: u64,
) -> Result<crate::broker::session::Work, String> {
    use crate::broker::replay::Action;
    let mut work = crate::broker::session::Work {
        action: Action::Replay,
        limit: count,
        allowed_targets: Default::default(),
        redirects: Default::default(),
        endpoint_redirects: Default::default(),
        replays: Default::default(),
        first_seen: sel.first_seen.clone(),
        planned_unread: false,
        check_as_met: false,
        bytes: 0,
        rest_queues: Vec::new(),
        carrier: Default::default(),
        carrier_by_head: false,
    };
    match place {
        Place::Stream(name) => {
            work.action = Action::Archive {
                stream: name.clone(),
                stamp,
                user_id: s.handle.target.credentials.username.clone(),
            };
            work.allowed_targets.insert((String::new(), name.clone()));
        }
        Place::Local(path, _) => {
            append_local(s, path, &stamp, sel.messages.iter().map(|e| &e.message))?;
            work.action = only_these(sel.messages.iter().map(|e| &e.message));
        }
    }
    Ok(work)
}

/// `messages`, stamped, appended to the local archive at `path` (synced): its retention
/// first, under the same lock as the append.
fn append_local<'m>(
    s: &crate::broker::session::Session,
    path: &Path,
    stamp: &crate::domain::archive::Stamp,
    messages: impl Iterator<Item = &'m DeadLetter>,
) -> Result<(), String> {
    let _lock = lock_local(path)?;
    let now = jiff::Timestamp::now();
    if let Some(secs) = crate::domain::archive::max_age_secs(&s.handle.target.archive.max_age) {
        let dropped = expire_locked(path, secs, now).map_err(|e| {
            format!(
                "cannot apply retention to the archive {}: {e}; nothing moved",
                path.display()
            )
        })?;
        if dropped > 0 {
            tracing::info!(
                "local archive {}: {dropped} expired entries dropped",
                path.display()
            );
        }
    }
    let stamped: Vec<DeadLetter> = messages
        .map(|m| {
            let mut m = m.clone();
            stamp.apply(&mut m.headers, now);
            m
        })
        .collect();
    append_snapshot(
        path,
        &s.handle.snapshot_header("warren archive (local)"),
        &stamped,
    )
    .map_err(|e| {
        format!(
            "cannot write the archive {}: {e}; nothing moved",
            path.display()
        )
    })
}

/// Copies of `messages`, stamped, kept in the archive at `place` while the messages stay
/// where they are (an edit's originals, kept before their edited copies are published): in
/// the stream, each confirmed, or in the local file, synced. `Err`: not all are kept.
pub async fn keep_copies(
    s: &crate::broker::session::Session,
    place: &Place,
    stamp: &crate::domain::archive::Stamp,
    messages: &[DeadLetter],
) -> Result<(), String> {
    let stream = match place {
        Place::Local(path, _) => return append_local(s, path, stamp, messages.iter()),
        Place::Stream(name) => name,
    };
    let user = s.handle.target.credentials.username.clone();
    let mut copies = Vec::with_capacity(messages.len());
    for m in messages {
        let props = crate::broker::amqp::properties_to_amqp(&m.properties, &m.headers)
            .map_err(|e| format!("a message cannot be archived: {e}"))?;
        copies.push(Publish {
            reference: crate::domain::identity::message_key(m),
            exchange: String::new(),
            routing_key: stream.clone(),
            props: crate::broker::replay::archive_properties(props, stamp, &user),
            body: m.body.clone(),
        });
    }
    let conn = s.handle.amqp().await.map_err(|e| e.to_string())?;
    let kept = publish_confirmed(conn, copies).await?;
    match kept.iter().find(|(_, p)| *p != Published::Confirmed) {
        Some((key, Published::Failed { why, .. })) => Err(format!(
            "the archive did not confirm {}: {why}",
            crate::domain::sanitize::one_line(key, 120)
        )),
        _ => Ok(()),
    }
}

/// The engine's work for a discard of `sel`: the snapshot (when one is wanted) is written
/// first, and only what it holds may go, each once.
pub fn discard_work(
    s: &crate::broker::session::Session,
    queue: &str,
    snapshot: Option<&Path>,
    sel: &crate::broker::session::Selected,
) -> Result<crate::broker::session::Work, String> {
    let originals: Vec<DeadLetter> = sel.messages.iter().map(|e| e.message.clone()).collect();
    if let Some(p) = snapshot {
        if p.exists() {
            return Err(format!(
                "{} exists: Warren never overwrites a snapshot; nothing deleted",
                p.display()
            ));
        }
        write_snapshot_whole(p, &s.handle.snapshot_header(queue), &originals).map_err(|e| {
            format!(
                "cannot write the snapshot {}: {e}; nothing deleted",
                p.display()
            )
        })?;
    }
    Ok(crate::broker::session::Work {
        action: only_these(&originals),
        limit: originals.len() as u64,
        allowed_targets: Default::default(),
        redirects: Default::default(),
        endpoint_redirects: Default::default(),
        replays: Default::default(),
        first_seen: sel.first_seen.clone(),
        planned_unread: false,
        check_as_met: false,
        bytes: 0,
        rest_queues: Vec::new(),
        carrier: Default::default(),
        carrier_by_head: false,
    })
}

fn only_these<'a>(
    messages: impl IntoIterator<Item = &'a DeadLetter>,
) -> crate::broker::replay::Action {
    crate::broker::replay::Action::Discard {
        only: Some(std::sync::Arc::new(std::sync::Mutex::new(
            crate::domain::archive::ContentSet::new(messages),
        ))),
    }
}

/// `discarded/<queue>-<time>.jsonl` beside Warren's store.
pub fn discard_path(queue: &str) -> Result<PathBuf, String> {
    let store = crate::store::Store::default_path().ok_or_else(|| {
        format!(
            "Warren has no data directory for the snapshot: set {} or pass -o FILE",
            crate::store::STORE_ENV
        )
    })?;
    let safe = crate::domain::sanitize::file_safe(queue, 100);
    let at = jiff::Timestamp::now()
        .strftime("%Y%m%dT%H%M%S%.3fZ")
        .to_string();
    Ok(store
        .parent()
        .unwrap_or(Path::new("."))
        .join("discarded")
        .join(format!("{safe}-{at}.jsonl")))
}
