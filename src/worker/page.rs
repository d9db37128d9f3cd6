//! A page read from a live broker, listed as it arrives: each message is decoded once, explained
//! once (what the list, the filter and the groups need: `domain::brief`), written packed to the
//! page's spill file (`local::spill`) and sent to the UI in chunks of [`CHUNK`] over the
//! bounded report channel, so that neither the broker layer nor the worker holds the page. The
//! last part of a page (fewer than [`CHUNK`]) comes whole in `Report::MessagesLoaded`, which
//! ends the page; a page no longer than one chunk is only that.

use std::collections::BTreeSet;

use tokio::sync::mpsc;

use crate::broker::session::Session;
use crate::domain::brief::{Brief, Interner};
use crate::domain::explain;
use crate::domain::identity;
use crate::domain::message::DeadLetter;
use crate::local::spill::{Letter, SpillWriter};
use crate::store::Store;

use super::protocol::{Listed, Report, Ticket};

/// Messages per chunk: small enough that a chunk in flight weighs little (about 2 MiB of 1 KiB
/// dead letters before packing), large enough that the UI takes a million in a thousand reports.
pub(crate) const CHUNK: usize = 1024;

/// What listing a page left for its last report.
pub(super) struct Listing {
    /// The messages after the last full chunk, with what the store remembers of them.
    pub tail: Vec<DeadLetter>,
    pub first_seen: Vec<Option<jiff::Timestamp>>,
    pub replays: Vec<i64>,
    /// The run ids the page's messages came back from (for their authors).
    pub runs: Vec<String>,
    /// Whether any chunk was sent before the tail.
    pub chunked: bool,
    /// Why the spill file could not be used, if it could not (the page is then kept in memory).
    pub problem: Option<String>,
}

/// Lists what arrives on `from` until the read drops its sender.
pub(super) async fn list(
    s: &Session,
    (vhost, queue): (&str, &str),
    ticket: Ticket,
    events: &mpsc::Sender<Report>,
    mut from: mpsc::Receiver<DeadLetter>,
) -> Listing {
    let mut l = Lister {
        s,
        queue,
        spill: None,
        problem: None,
        strings: Interner::default(),
        store: None,
        runs: BTreeSet::new(),
    };
    let mut pending: Vec<DeadLetter> = Vec::with_capacity(CHUNK);
    let mut chunked = false;
    while let Some(dl) = from.recv().await {
        if let Some(id) = crate::domain::comeback::run_id_of(&dl) {
            l.runs.insert(id);
        }
        pending.push(dl);
        if pending.len() == CHUNK {
            let rows = l.chunk(std::mem::take(&mut pending));
            pending.reserve(CHUNK);
            chunked = true;
            let report = Report::MessagesChunk {
                vhost: vhost.to_string(),
                queue: queue.to_string(),
                rows,
                ticket,
            };
            // A UI that is gone wants nothing more; the read still hands every message back.
            let _ = events.send(report).await;
        }
    }
    let keys: Vec<String> = pending.iter().map(identity::message_key).collect();
    let memory = l.remember(&keys);
    Listing {
        first_seen: keys
            .iter()
            .map(|k| memory.first_seen.get(k).copied())
            .collect(),
        replays: keys.iter().map(|k| memory.replays_of(k)).collect(),
        tail: pending,
        runs: l.runs.into_iter().collect(),
        chunked,
        problem: l.problem,
    }
}

struct Lister<'a> {
    s: &'a Session,
    queue: &'a str,
    spill: Option<SpillWriter>,
    problem: Option<String>,
    strings: Interner,
    /// Opened once for the page: a million first-seen times are recorded a chunk at a time.
    store: Option<Result<Store, String>>,
    runs: BTreeSet<String>,
}

impl Lister<'_> {
    /// One chunk's rows: remembered, explained, spilled.
    fn chunk(&mut self, messages: Vec<DeadLetter>) -> Vec<Listed> {
        let keys: Vec<String> = messages.iter().map(identity::message_key).collect();
        let memory = self.remember(&keys);
        let own = &self.s.handle.target.settings.conventions;
        let mut rows = Vec::with_capacity(messages.len());
        for (dl, key) in messages.into_iter().zip(keys) {
            let replays = memory.replays_of(&key);
            let exp = explain::explain_with(&dl, own, replays);
            let brief = Brief::new(&dl, &exp, &mut self.strings);
            rows.push(Listed {
                letter: self.keep(dl),
                brief,
                first_seen: memory.first_seen.get(&key).copied(),
                key: key.into(),
                replays,
            });
        }
        if let Some(w) = &mut self.spill
            && let Err(e) = w.flush()
        {
            // Written but not readable: these rows cannot be opened. Said once; the rest of
            // the page is kept in memory.
            self.problem = Some(format!("writing the page's spill file failed: {e}"));
            self.spill = None;
        }
        rows
    }

    /// The message packed, in the spill file where it can be (else in memory).
    fn keep(&mut self, dl: DeadLetter) -> Letter {
        let packed = crate::domain::packed::Packed::pack(dl);
        if self.spill.is_none() && self.problem.is_none() {
            match SpillWriter::create() {
                Ok(w) => self.spill = Some(w),
                Err(e) => {
                    self.problem = Some(format!(
                        "no spill file in {} ({e}): the page is kept in memory",
                        crate::local::spill::dir().display()
                    ))
                }
            }
        }
        let Some(w) = &mut self.spill else {
            return Letter::Held(Box::new(packed));
        };
        match w.append(&packed) {
            Ok(at) => Letter::Spilled(at),
            Err(e) => {
                self.problem = Some(format!("writing the page's spill file failed: {e}"));
                self.spill = None;
                Letter::Held(Box::new(packed))
            }
        }
    }

    /// Records first-seen times and reads earlier replays (see `ops::remember`), on the store
    /// opened once for the page.
    fn remember(&mut self, keys: &[String]) -> crate::broker::session::Remembered {
        if keys.is_empty() {
            return Default::default();
        }
        let store = self
            .store
            .get_or_insert_with(|| Store::open_default().map_err(|e| e.to_string()));
        crate::ops::remember_in(self.s, store.as_ref(), self.queue, keys)
    }
}
