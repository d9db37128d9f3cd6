//! Where `warren archive` keeps messages, and how `warren restore` puts them back: the archive
//! stream on the broker (declared with the user's consent), or a snapshot file in Warren's data
//! directory where a stream cannot be used. Moving messages *into* the archive is the replay
//! engine's job (`replay::Action::Archive`); this module declares, appends, reads and publishes.

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
/// after this returned.
pub fn append_snapshot(
    path: &Path,
    header: &SnapshotHeader,
    messages: &[DeadLetter],
) -> std::io::Result<()> {
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir)?;
    }
    let fresh = std::fs::metadata(path)
        .map(|m| m.len() == 0)
        .unwrap_or(true);
    let mut text = String::new();
    if fresh {
        text.push_str(&snapshot::header_line(header));
        text.push('\n');
    }
    for m in messages {
        text.push_str(&snapshot::message_line(m));
        text.push('\n');
    }
    let mut f = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)?;
    f.write_all(text.as_bytes())?;
    f.sync_all()?;
    // The directory entry of a new file is durable only once the directory is synced.
    if fresh && let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        let _ = std::fs::File::open(dir).and_then(|d| d.sync_all());
    }
    Ok(())
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
pub enum Published {
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
/// time, and says how each ended, in order: to `on_batch` as each batch is settled (with the
/// counts so far), so the caller can record what arrived before the next batch goes. A `basic.return` comes with some confirm of its
/// batch, not necessarily its own (see `replay::Shell::settle_returns`): it is matched to its
/// publish by content. After a failure of the channel or a missing confirm nothing more is
/// published; the rest are reported as not sent.
pub async fn publish_confirmed(
    conn: &lapin::Connection,
    messages: Vec<Publish>,
    mut on_batch: impl FnMut(&[(String, Published)], u64, u64),
) -> Result<Vec<(String, Published)>, String> {
    let ch = conn
        .create_channel()
        .await
        .map_err(|e| format!("cannot open a channel: {e}"))?;
    ch.confirm_select(ConfirmSelectOptions::default())
        .await
        .map_err(|e| format!("confirm mode: {e}"))?;
    let mut out = Vec::with_capacity(messages.len());
    let (mut done, mut failed) = (0u64, 0u64);
    let mut broken: Option<String> = None;
    let mut rest = messages.into_iter().peekable();
    while rest.peek().is_some() {
        let batch: Vec<Publish> = rest.by_ref().take(BATCH).collect();
        let first = out.len();
        if let Some(why) = &broken {
            for p in batch {
                out.push((
                    p.reference,
                    Published::Failed {
                        why: format!("not sent: {why}"),
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
            if outcome == Published::Confirmed {
                done += 1;
            } else {
                failed += 1;
            }
            out.push((p.reference, outcome));
        }
        on_batch(&out[first..], done, failed);
    }
    if ch.status().connected() {
        let _ = tokio::time::timeout(Duration::from_secs(2), ch.close(200, "restore done".into()))
            .await;
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

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
            Place::Stream(name) => format!("stream:{}:{}:{name}", s.target.context, s.vhost()),
            Place::Local(path, _) => format!("file:{}", path.display()),
        }
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
        local_path(&store, &s.target.context, s.vhost()),
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
        replays: Default::default(),
        ages: sel.ages.clone(),
        planned_unread: false,
        check_as_met: false,
        bytes: 0,
    };
    match place {
        Place::Stream(name) => {
            work.action = Action::Archive {
                stream: name.clone(),
                stamp,
            };
            work.allowed_targets.insert((String::new(), name.clone()));
        }
        Place::Local(path, _) => {
            let now = jiff::Timestamp::now();
            let stamped: Vec<DeadLetter> = sel
                .messages
                .iter()
                .map(|e| {
                    let mut m = e.message.clone();
                    stamp.apply(&mut m.headers, now);
                    m
                })
                .collect();
            append_snapshot(path, &s.snapshot_header("warren archive (local)"), &stamped).map_err(
                |e| {
                    format!(
                        "cannot write the archive {}: {e}; nothing moved",
                        path.display()
                    )
                },
            )?;
            work.action = only_these(sel.messages.iter().map(|e| &e.message));
        }
    }
    Ok(work)
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
        append_snapshot(p, &s.snapshot_header(queue), &originals).map_err(|e| {
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
        replays: Default::default(),
        ages: sel.ages.clone(),
        planned_unread: false,
        check_as_met: false,
        bytes: 0,
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
