//! The replay audit: who replayed what, from where to where, and how it ended. Append-only: a
//! replay's row is written before its first publish, its outcome is inserted once when it ends,
//! and nothing is ever updated or deleted (triggers in the schema refuse it). A replay that never
//! got an outcome (killed, crashed, lost power) reads as "interrupted".

use std::collections::{HashMap, HashSet};

use jiff::Timestamp;
use rusqlite::OptionalExtension;
use serde::{Deserialize, Serialize};

use super::{Result, Store, StoreError, to_sql_count};
use crate::domain::canary::CanaryRecord;
use crate::domain::edit::EditRecord;
use crate::domain::outcome::RunOutcome;

mod merged;

pub use merged::{Merged, merge, unvouched_runs};

/// What an audit record is of: the one run kind (`domain::run::RunKind`), under the name the
/// audit's older callers use.
pub use crate::domain::run::RunKind as Operation;
use crate::domain::run::RunKind;

/// What is known when a replay starts; written before the first message is published. Also the
/// `record` of a broker audit stream's `replay`/`start` entry (see [`AuditEnvelope`]): the field
/// names are part of that stable schema.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct AuditStart {
    /// The run's globally unique id (see `broker::audit::new_run_id`): the same in the local
    /// store, on the broker's audit stream and in each replayed message (`warren-replay-id`).
    pub run_id: String,
    pub at: Timestamp,
    /// The local account that ran warren.
    pub os_user: String,
    /// The broker user the replay published as.
    pub broker_user: String,
    pub context: String,
    pub vhost: String,
    pub from_queue: String,
    /// Where messages go (queue or exchange/routing key, as the replay plan names them).
    pub targets: Vec<String>,
    /// The filter in canonical form, when one was given.
    pub filter: Option<String>,
    /// The group (fingerprint) replayed, when one was chosen.
    pub group: Option<String>,
    /// The `--limit` asked for, when one was given.
    pub requested_limit: Option<u64>,
    pub dry_run: bool,
    pub keep_attempts: bool,
    /// `--clear-expiry`: messages past their framework deadline were replayed without it.
    #[serde(default)]
    pub clear_expiry: bool,
    /// `--strip-failure-stamp`: Symfony's `SentToFailureTransportStamp` was removed from each
    /// message, so the body published is not the one that failed.
    #[serde(default)]
    pub strip_failure_stamp: bool,
}

/// How a replay ended. Also the `record` of a stream's `replay`/`outcome` entry.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct AuditOutcome {
    pub at: Timestamp,
    /// Published, confirmed and removed from the source queue.
    pub moved: u64,
    /// Taken and put back in the source queue (not matching, or refused by the plan).
    pub returned: u64,
    /// Could not be moved (publish refused or unconfirmed); left in or returned to the source.
    pub failed: u64,
    /// Still in the source queue when the replay ended.
    pub remaining: u64,
    /// Message keys of the moved messages.
    pub message_ids: Vec<String>,
    /// Messages that may now be in both the target and the source (an upper bound: confirmed
    /// by the target, their removal from the source not provably done).
    pub duplicated: u64,
    /// Message keys of those.
    pub duplicate_ids: Vec<String>,
    /// How the run ended, kept as its words ("completed", "partial: …", "failed: …",
    /// "cancelled…", "interrupted…").
    pub outcome: RunOutcome,
    /// Where the run's messages went, as the run found its targets: a run whose targets are
    /// checked as they are first met starts with none known.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub targets: Vec<String>,
    /// What the run's canary did, when it had one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub canary: Option<CanaryRecord>,
    /// The messages the run edited before replaying them (`warren replay --edit`): what
    /// changed, and the digests of each body before and after.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub edits: Vec<EditRecord>,
}

/// The event of a broker audit stream entry that holds some of a run's moved ids: written
/// before the run's `outcome` entry when its ids do not fit one entry (see [`IdsPart`]).
pub const IDS_EVENT: &str = "outcome-ids";

/// The `record` of an [`IDS_EVENT`] entry: the `part`-th chunk (from 1) of a run's moved ids.
/// The outcome entry after them says how many there are (`id_parts`); the run's ids are the
/// parts' in order, then the outcome's own `message_ids`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct IdsPart {
    pub part: u32,
    pub message_ids: Vec<String>,
}

/// The `record` of a stream's `outcome` entry: the outcome, and how many [`IDS_EVENT`] entries
/// before it hold the moved ids that come before its own (absent when none: the shape of
/// every outcome written before ids were split).
#[derive(Serialize)]
pub struct OutcomeEntry<'a> {
    #[serde(flatten)]
    pub outcome: &'a AuditOutcome,
    #[serde(skip_serializing_if = "is_zero")]
    pub id_parts: u32,
}

fn is_zero(n: &u32) -> bool {
    *n == 0
}

/// One replay as the audit shows it (`warren audit`, `warren audit --json`).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct AuditRecord {
    /// The local store's number; `None` for a run known only from the broker's audit stream.
    pub id: Option<i64>,
    /// The globally unique run id; `None` for runs recorded before Warren had them.
    pub run_id: Option<String>,
    pub operation: RunKind,
    pub started_at: Timestamp,
    pub os_user: String,
    pub broker_user: String,
    pub context: String,
    pub vhost: String,
    pub from_queue: String,
    pub targets: Vec<String>,
    pub filter: Option<String>,
    pub group: Option<String>,
    pub requested_limit: Option<u64>,
    pub dry_run: bool,
    pub keep_attempts: bool,
    pub clear_expiry: bool,
    pub strip_failure_stamp: bool,
    /// None while running, or when the replay never finished.
    pub finished_at: Option<Timestamp>,
    pub moved: Option<u64>,
    pub returned: Option<u64>,
    pub failed: Option<u64>,
    pub remaining: Option<u64>,
    pub message_ids: Vec<String>,
    /// None while running or never finished (and for records written before it was counted).
    pub duplicated: Option<u64>,
    pub duplicate_ids: Vec<String>,
    /// The recorded outcome, or interrupted when there is none.
    pub outcome: RunOutcome,
    /// What the run's canary did, when it had one.
    pub canary: Option<CanaryRecord>,
    /// The messages the run edited before replaying them.
    pub edits: Vec<EditRecord>,
}

/// How many of the newest replays `replay_counts` looks through.
const AUDIT_LINK_WINDOW: i64 = 1000;

/// The local account name for the audit: `$USER`, `$USERNAME` (Windows) or `$LOGNAME`.
pub fn current_os_user() -> String {
    ["USER", "USERNAME", "LOGNAME"]
        .iter()
        .filter_map(|v| std::env::var(v).ok())
        .find(|v| !v.trim().is_empty())
        .unwrap_or_else(|| "unknown".to_string())
}

/// A run's moved ids on their way into `replay_moved`: each keeps its place in the run (`seq`),
/// and they are inserted a chunk at a time in key order. The index by key is a B-tree over
/// every run ever recorded, and message ids are mostly random (UUIDs): one at a time, in the
/// run's order, each lands on a page of its own, and the commit writes and checkpoints all of
/// them. Sorted, a chunk walks the index once (20,000 UUID keys after 140,000 recorded: 104 ms
/// against 177 ms, `docs/benchmarks.md`). A chunk holds at most [`MOVED_CHUNK`] ids or
/// [`MOVED_CHUNK_BYTES`] of them, so a run of a million is never held whole.
struct MovedRows<'s> {
    insert: rusqlite::CachedStatement<'s>,
    replay_id: i64,
    seq: i64,
    chunk: Vec<(String, i64)>,
    bytes: usize,
    /// The first insert that failed: the rest are not tried, and the transaction is dropped.
    failed: Option<rusqlite::Error>,
}

const MOVED_CHUNK: usize = 65_536;
const MOVED_CHUNK_BYTES: usize = 4 << 20;

impl<'s> MovedRows<'s> {
    fn new(insert: rusqlite::CachedStatement<'s>, replay_id: i64) -> MovedRows<'s> {
        MovedRows {
            insert,
            replay_id,
            seq: 0,
            chunk: Vec::new(),
            bytes: 0,
            failed: None,
        }
    }

    fn push(&mut self, key: String) {
        self.bytes += key.len();
        self.chunk.push((key, self.seq));
        self.seq += 1;
        if self.chunk.len() >= MOVED_CHUNK || self.bytes >= MOVED_CHUNK_BYTES {
            self.flush();
        }
    }

    fn flush(&mut self) {
        self.chunk.sort_unstable();
        for (key, seq) in self.chunk.drain(..) {
            if self.failed.is_none()
                && let Err(e) = self
                    .insert
                    .execute(rusqlite::params![self.replay_id, seq, key])
            {
                self.failed = Some(e);
            }
        }
        self.bytes = 0;
    }

    fn finish(mut self) -> rusqlite::Result<()> {
        self.flush();
        self.failed.map_or(Ok(()), Err)
    }
}

impl Store {
    /// Records the start of a replay and returns its audit id. Call before the first publish: a
    /// replay that cannot be audited should not start.
    pub fn begin_replay(&self, rec: &AuditStart) -> Result<i64> {
        self.begin_operation(RunKind::Replay, rec)
    }

    /// [`begin_replay`](Self::begin_replay) for any [`RunKind`]: an archive, a discard or a
    /// restore is recorded like a replay, before its first message moves.
    pub fn begin_operation(&self, op: RunKind, rec: &AuditStart) -> Result<i64> {
        let targets = serde_json::to_string(&rec.targets)
            .map_err(|e| self.corrupt(format!("targets: {e}")))?;
        let tx = self.write_tx()?;
        tx.execute(
            "INSERT INTO replays (started_ms, os_user, broker_user, context, vhost, from_queue,
                 targets_json, filter, grp, requested_limit, dry_run, keep_attempts, clear_expiry,
                 operation, run_id, strip_failure_stamp)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16)",
            rusqlite::params![
                rec.at.as_millisecond(),
                rec.os_user,
                rec.broker_user,
                rec.context,
                rec.vhost,
                rec.from_queue,
                targets,
                rec.filter,
                rec.group,
                rec.requested_limit.map(to_sql_count),
                rec.dry_run,
                rec.keep_attempts,
                rec.clear_expiry,
                op.as_str(),
                rec.run_id,
                rec.strip_failure_stamp,
            ],
        )
        .map_err(|e| self.sqlite(e))?;
        let id = tx.last_insert_rowid();
        tx.commit().map_err(|e| self.sqlite(e))?;
        Ok(id)
    }

    /// Records how replay `id` ended, with `out.message_ids` as its moved ids. Exactly once: a
    /// second call is refused with [`StoreError::AlreadyFinished`].
    pub fn finish_replay(&self, id: i64, out: &AuditOutcome) -> Result<()> {
        self.finish_replay_with(id, out, |_| {})
    }

    /// [`Store::finish_replay`] with more moved ids after `out.message_ids`: `more` is given a
    /// function to call with each, in order, and they are written one row at a time in the
    /// outcome's transaction (a run's spool, `local::spool`), never held as one list.
    pub fn finish_replay_with(
        &self,
        id: i64,
        out: &AuditOutcome,
        more: impl FnOnce(&mut dyn FnMut(String)),
    ) -> Result<()> {
        let dup_ids = serde_json::to_string(&out.duplicate_ids)
            .map_err(|e| self.corrupt(format!("duplicate ids: {e}")))?;
        let targets = serde_json::to_string(&out.targets)
            .map_err(|e| self.corrupt(format!("targets: {e}")))?;
        let canary = out
            .canary
            .as_ref()
            .map(serde_json::to_string)
            .transpose()
            .map_err(|e| self.corrupt(format!("canary: {e}")))?;
        let edits = (!out.edits.is_empty())
            .then(|| serde_json::to_string(&out.edits))
            .transpose()
            .map_err(|e| self.corrupt(format!("edits: {e}")))?;
        let tx = self.write_tx()?;
        let exists = tx
            .query_row("SELECT 1 FROM replays WHERE id = ?1", [id], |_| Ok(()))
            .optional()
            .map_err(|e| self.sqlite(e))?
            .is_some();
        if !exists {
            return Err(StoreError::NoSuchReplay(id));
        }
        let finished = tx
            .query_row(
                "SELECT 1 FROM replay_outcomes WHERE replay_id = ?1",
                [id],
                |_| Ok(()),
            )
            .optional()
            .map_err(|e| self.sqlite(e))?
            .is_some();
        if finished {
            return Err(StoreError::AlreadyFinished(id));
        }
        tx.execute(
            "INSERT INTO replay_outcomes (replay_id, finished_ms, moved, returned, failed,
                 remaining, message_ids_json, outcome, duplicated, duplicate_ids_json,
                 targets_json, canary_json, edits_json)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, '[]', ?7, ?8, ?9, ?10, ?11, ?12)",
            rusqlite::params![
                id,
                out.at.as_millisecond(),
                to_sql_count(out.moved),
                to_sql_count(out.returned),
                to_sql_count(out.failed),
                to_sql_count(out.remaining),
                out.outcome.to_string(),
                to_sql_count(out.duplicated),
                dup_ids,
                targets,
                canary,
                edits,
            ],
        )
        .map_err(|e| self.sqlite(e))?;
        {
            let insert = tx
                .prepare_cached(
                    "INSERT INTO replay_moved (replay_id, seq, message_key) VALUES (?1, ?2, ?3)",
                )
                .map_err(|e| self.sqlite(e))?;
            let mut rows = MovedRows::new(insert, id);
            for key in &out.message_ids {
                rows.push(key.clone());
            }
            more(&mut |key| rows.push(key));
            rows.finish().map_err(|e| self.sqlite(e))?;
        }
        tx.commit().map_err(|e| self.sqlite(e))
    }

    /// How many recorded replays in `context`/`vhost` moved each of `keys` (a key no replay
    /// moved is absent), from the newest `AUDIT_LINK_WINDOW` finished ones. This links a message
    /// that failed again to its replays by its key even when Warren's headers were lost on the
    /// way (dramatiq's own retry republishes without them).
    pub fn replay_counts(
        &self,
        context: &str,
        vhost: &str,
        keys: &[String],
    ) -> Result<HashMap<String, i64>> {
        let wanted: HashSet<&str> = keys.iter().map(String::as_str).collect();
        let mut out = HashMap::new();
        if wanted.is_empty() {
            return Ok(out);
        }
        let mut stmt = self
            .conn
            .prepare(
                "SELECT r.id, o.message_ids_json
                 FROM replays r JOIN replay_outcomes o ON o.replay_id = r.id
                 WHERE r.context = ?1 AND r.vhost = ?2 AND r.dry_run = 0
                   AND r.operation = 'replay'
                 ORDER BY r.id DESC LIMIT ?3",
            )
            .map_err(|e| self.sqlite(e))?;
        let rows = stmt
            .query_map((context, vhost, AUDIT_LINK_WINDOW), |r| {
                Ok((r.get::<_, i64>(0)?, r.get::<_, String>(1)?))
            })
            .map_err(|e| self.sqlite(e))?;
        let mut oldest: Option<i64> = None;
        for row in rows {
            let (id, json) = row.map_err(|e| self.sqlite(e))?;
            oldest = Some(id);
            let ids: Vec<String> = serde_json::from_str(&json)
                .map_err(|e| self.corrupt(format!("message ids: {e}")))?;
            // A key once per replay, however often that replay lists it.
            let ids: HashSet<String> = ids.into_iter().collect();
            for id in ids {
                if let Some(k) = wanted.get(id.as_str()) {
                    *out.entry((*k).to_string()).or_insert(0) += 1;
                }
            }
        }
        // Runs recorded since migration 9 list their ids one row each: the same window (the
        // finished replays from the oldest of the newest ones on), looked up by key.
        let Some(oldest) = oldest else {
            return Ok(out);
        };
        let mut by_key = self
            .conn
            .prepare_cached(
                "SELECT COUNT(DISTINCT m.replay_id) FROM replay_moved m
                 JOIN replays r ON r.id = m.replay_id
                 WHERE m.message_key = ?1 AND m.replay_id >= ?2 AND r.context = ?3
                   AND r.vhost = ?4 AND r.dry_run = 0 AND r.operation = 'replay'",
            )
            .map_err(|e| self.sqlite(e))?;
        for k in wanted {
            let n: i64 = by_key
                .query_row(rusqlite::params![k, oldest, context, vhost], |r| r.get(0))
                .map_err(|e| self.sqlite(e))?;
            if n > 0 {
                *out.entry(k.to_string()).or_insert(0) += n;
            }
        }
        Ok(out)
    }

    /// The moved ids of replay `id` recorded one row each (see migration 9), in order.
    fn moved_rows(&self, id: i64) -> Result<Vec<String>> {
        let mut stmt = self
            .conn
            .prepare_cached(
                "SELECT message_key FROM replay_moved WHERE replay_id = ?1 ORDER BY seq",
            )
            .map_err(|e| self.sqlite(e))?;
        let rows = stmt
            .query_map([id], |r| r.get::<_, String>(0))
            .map_err(|e| self.sqlite(e))?;
        rows.collect::<rusqlite::Result<Vec<_>>>()
            .map_err(|e| self.sqlite(e))
    }

    /// The most recent `limit` replays, newest first.
    pub fn list_audit(&self, limit: usize) -> Result<Vec<AuditRecord>> {
        let mut stmt = self
            .conn
            .prepare(
                "SELECT r.id, r.started_ms, r.os_user, r.broker_user, r.context, r.vhost,
                        r.from_queue, r.targets_json, r.filter, r.grp, r.requested_limit,
                        r.dry_run, r.keep_attempts,
                        o.finished_ms, o.moved, o.returned, o.failed, o.remaining,
                        o.message_ids_json, o.outcome, o.duplicated, o.duplicate_ids_json,
                        r.clear_expiry, r.operation, r.run_id, o.targets_json, o.canary_json,
                        o.edits_json, r.strip_failure_stamp
                 FROM replays r LEFT JOIN replay_outcomes o ON o.replay_id = r.id
                 ORDER BY r.id DESC LIMIT ?1",
            )
            .map_err(|e| self.sqlite(e))?;
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        let rows = stmt
            .query_map([limit], |r| {
                Ok(RawRecord {
                    id: r.get(0)?,
                    started_ms: r.get(1)?,
                    os_user: r.get(2)?,
                    broker_user: r.get(3)?,
                    context: r.get(4)?,
                    vhost: r.get(5)?,
                    from_queue: r.get(6)?,
                    targets_json: r.get(7)?,
                    filter: r.get(8)?,
                    group: r.get(9)?,
                    requested_limit: r.get(10)?,
                    dry_run: r.get(11)?,
                    keep_attempts: r.get(12)?,
                    finished_ms: r.get(13)?,
                    moved: r.get(14)?,
                    returned: r.get(15)?,
                    failed: r.get(16)?,
                    remaining: r.get(17)?,
                    message_ids_json: r.get(18)?,
                    outcome: r.get(19)?,
                    duplicated: r.get(20)?,
                    duplicate_ids_json: r.get(21)?,
                    clear_expiry: r.get(22)?,
                    operation: r.get(23)?,
                    run_id: r.get(24)?,
                    reached_json: r.get(25)?,
                    canary_json: r.get(26)?,
                    edits_json: r.get(27)?,
                    strip_failure_stamp: r.get(28)?,
                })
            })
            .map_err(|e| self.sqlite(e))?;
        let mut out = Vec::new();
        for row in rows {
            let raw = row.map_err(|e| self.sqlite(e))?;
            out.push(self.record(raw)?);
        }
        Ok(out)
    }

    fn record(&self, raw: RawRecord) -> Result<AuditRecord> {
        let id = raw.id;
        let time = |ms: i64| {
            Timestamp::from_millisecond(ms)
                .map_err(|e| self.corrupt(format!("replay #{id}: time {ms}: {e}")))
        };
        let count = |n: Option<i64>| -> Result<Option<u64>> {
            n.map(|n| {
                u64::try_from(n).map_err(|_| self.corrupt(format!("replay #{id}: count {n}")))
            })
            .transpose()
        };
        let list = |json: &str| -> Result<Vec<String>> {
            serde_json::from_str(json)
                .map_err(|e| self.corrupt(format!("replay #{id}: list {json:?}: {e}")))
        };
        let operation = RunKind::parse(&raw.operation)
            .ok_or_else(|| self.corrupt(format!("#{id}: operation {:?}", raw.operation)))?;
        Ok(AuditRecord {
            id: Some(id),
            operation,
            run_id: raw.run_id,
            started_at: time(raw.started_ms)?,
            os_user: raw.os_user,
            broker_user: raw.broker_user,
            context: raw.context,
            vhost: raw.vhost,
            from_queue: raw.from_queue,
            targets: joined_targets(
                list(&raw.targets_json)?,
                &raw.reached_json
                    .as_deref()
                    .map(list)
                    .transpose()?
                    .unwrap_or_default(),
            ),
            filter: raw.filter,
            group: raw.group,
            requested_limit: count(raw.requested_limit)?,
            dry_run: raw.dry_run,
            keep_attempts: raw.keep_attempts,
            clear_expiry: raw.clear_expiry,
            strip_failure_stamp: raw.strip_failure_stamp,
            finished_at: raw.finished_ms.map(time).transpose()?,
            moved: count(raw.moved)?,
            returned: count(raw.returned)?,
            failed: count(raw.failed)?,
            remaining: count(raw.remaining)?,
            message_ids: match raw.message_ids_json.as_deref() {
                Some(json) => {
                    let mut ids = list(json)?;
                    ids.extend(self.moved_rows(id)?);
                    ids
                }
                None => Vec::new(),
            },
            duplicated: count(raw.duplicated)?,
            duplicate_ids: match raw.duplicate_ids_json.as_deref() {
                Some(json) => list(json)?,
                None => Vec::new(),
            },
            outcome: raw
                .outcome
                .map_or_else(RunOutcome::default, |t| RunOutcome::parse(&t)),
            // A record this Warren cannot read is shown without it, never refused.
            canary: raw
                .canary_json
                .as_deref()
                .and_then(|j| serde_json::from_str(j).ok()),
            edits: raw
                .edits_json
                .as_deref()
                .and_then(|j| serde_json::from_str(j).ok())
                .unwrap_or_default(),
        })
    }
}

/// A row as SQLite returns it, before the checks that turn it into an [`AuditRecord`].
struct RawRecord {
    id: i64,
    started_ms: i64,
    os_user: String,
    broker_user: String,
    context: String,
    vhost: String,
    from_queue: String,
    targets_json: String,
    filter: Option<String>,
    group: Option<String>,
    requested_limit: Option<i64>,
    dry_run: bool,
    keep_attempts: bool,
    clear_expiry: bool,
    strip_failure_stamp: bool,
    finished_ms: Option<i64>,
    moved: Option<i64>,
    returned: Option<i64>,
    failed: Option<i64>,
    remaining: Option<i64>,
    message_ids_json: Option<String>,
    outcome: Option<String>,
    duplicated: Option<i64>,
    duplicate_ids_json: Option<String>,
    operation: String,
    run_id: Option<String>,
    /// The targets the run's outcome says it reached (migration 10).
    reached_json: Option<String>,
    canary_json: Option<String>,
    edits_json: Option<String>,
}

/// A `warren protect` that set its policy: who lifted which queue's delivery limit, and how.
/// Also the `record` of a stream's `protect`/`done` entry.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ProtectRecord {
    pub run_id: String,
    pub at: Timestamp,
    pub os_user: String,
    pub broker_user: String,
    pub context: String,
    pub vhost: String,
    pub queue: String,
    /// The policy Warren set.
    pub policy: String,
    /// The policy in force before, whose keys it carries.
    pub replaces: Option<String>,
    /// The delivery limit before and after (`None` = unlimited).
    pub limit_before: Option<u64>,
    pub limit_after: Option<u64>,
}

/// A group note set (event `set`) or removed (event `forget`, empty text): the `record` of a
/// stream's `note` entry, so the whole rota reads the same notes in `warren audit`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct NoteRecord {
    pub at: Timestamp,
    /// Who wrote it (the OS user) and as which broker user.
    pub author: String,
    pub broker_user: String,
    pub context: String,
    pub vhost: String,
    pub queue: String,
    /// The grouping (`fingerprint`, `exception`, ...) and the group's key in it.
    pub by: String,
    pub key: String,
    pub text: String,
}

/// One note entry read from the stream: `set` or `forget`, and its record.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct NoteEntry {
    pub event: String,
    pub note: NoteRecord,
}

/// The version of the broker audit stream's entry schema ([`AuditEnvelope`]). Readers skip an
/// entry with a newer one and say so.
pub const AUDIT_SCHEMA: u32 = 1;

/// One entry of the broker's audit stream, as JSON (the message body): what happened (`kind`:
/// `replay`, `protect`, and whatever later operations record; `event`: `start`, `outcome`,
/// `done`), the run it belongs to, and the operation's own record, whose type the kind names.
/// Generic so that every recorded operation is mirrored with one call
/// (`broker::audit::AuditStream::append`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct AuditEnvelope<T> {
    pub warren_audit: u32,
    pub kind: String,
    pub event: String,
    pub run_id: String,
    pub at: Timestamp,
    pub record: T,
}

impl<T> AuditEnvelope<T> {
    pub fn new(kind: &str, event: &str, run_id: &str, at: Timestamp, record: T) -> Self {
        AuditEnvelope {
            warren_audit: AUDIT_SCHEMA,
            kind: kind.to_string(),
            event: event.to_string(),
            run_id: run_id.to_string(),
            at,
            record,
        }
    }
}

/// Where a merged record was found.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Seen {
    pub local: bool,
    pub broker: bool,
    /// Only the broker's stream holds it, and some entry of it does not carry, as its
    /// `user_id`, the broker user it names (see [`unvouched_runs`]): forged, or written before
    /// Warren signed its entries. Shown as such, never as a real run.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub unvouched: bool,
}

/// The targets a run named at its start and those its outcome says it reached, once each.
fn joined_targets(mut start: Vec<String>, reached: &[String]) -> Vec<String> {
    for t in reached {
        if !start.contains(t) {
            start.push(t.clone());
        }
    }
    start
}

impl Store {
    /// Records a protect that set its policy.
    pub fn record_protect(&self, p: &ProtectRecord) -> Result<()> {
        let tx = self.write_tx()?;
        tx.execute(
            "INSERT INTO protects (run_id, at_ms, os_user, broker_user, context, vhost, queue,
                 policy, replaces, limit_before, limit_after)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11)",
            rusqlite::params![
                p.run_id,
                p.at.as_millisecond(),
                p.os_user,
                p.broker_user,
                p.context,
                p.vhost,
                p.queue,
                p.policy,
                p.replaces,
                p.limit_before.map(to_sql_count),
                p.limit_after.map(to_sql_count),
            ],
        )
        .map_err(|e| self.sqlite(e))?;
        tx.commit().map_err(|e| self.sqlite(e))
    }

    /// The most recent `limit` protects, newest first.
    pub fn list_protects(&self, limit: usize) -> Result<Vec<ProtectRecord>> {
        let mut stmt = self
            .conn
            .prepare(
                "SELECT run_id, at_ms, os_user, broker_user, context, vhost, queue, policy,
                        replaces, limit_before, limit_after
                 FROM protects ORDER BY id DESC LIMIT ?1",
            )
            .map_err(|e| self.sqlite(e))?;
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        type Row = (
            String,
            i64,
            String,
            String,
            String,
            String,
            String,
            String,
            Option<String>,
            Option<i64>,
            Option<i64>,
        );
        let rows = stmt
            .query_map([limit], |r| {
                Ok::<Row, _>((
                    r.get(0)?,
                    r.get(1)?,
                    r.get(2)?,
                    r.get(3)?,
                    r.get(4)?,
                    r.get(5)?,
                    r.get(6)?,
                    r.get(7)?,
                    r.get(8)?,
                    r.get(9)?,
                    r.get(10)?,
                ))
            })
            .map_err(|e| self.sqlite(e))?;
        let mut out = Vec::new();
        for row in rows {
            let (
                run_id,
                at_ms,
                os_user,
                broker_user,
                context,
                vhost,
                queue,
                policy,
                replaces,
                b,
                a,
            ) = row.map_err(|e| self.sqlite(e))?;
            let at = Timestamp::from_millisecond(at_ms)
                .map_err(|e| self.corrupt(format!("protect {run_id}: time {at_ms}: {e}")))?;
            out.push(ProtectRecord {
                run_id,
                at,
                os_user,
                broker_user,
                context,
                vhost,
                queue,
                policy,
                replaces,
                limit_before: b.and_then(|n| u64::try_from(n).ok()),
                limit_after: a.and_then(|n| u64::try_from(n).ok()),
            });
        }
        Ok(out)
    }

    /// The author and start of each of `run_ids` that the local audit knows (for "failed again
    /// … after replay R by alice").
    pub fn run_authors(&self, run_ids: &[String]) -> Result<HashMap<String, (String, Timestamp)>> {
        let mut out = HashMap::new();
        let mut stmt = self
            .conn
            .prepare("SELECT os_user, started_ms FROM replays WHERE run_id = ?1 LIMIT 1")
            .map_err(|e| self.sqlite(e))?;
        let wanted: HashSet<&String> = run_ids.iter().collect();
        for id in wanted {
            let row = stmt
                .query_row([id], |r| Ok((r.get::<_, String>(0)?, r.get::<_, i64>(1)?)))
                .optional()
                .map_err(|e| self.sqlite(e))?;
            if let Some((user, ms)) = row
                && let Ok(t) = Timestamp::from_millisecond(ms)
            {
                out.insert(id.clone(), (user, t));
            }
        }
        Ok(out)
    }
}

#[cfg(test)]
pub(super) mod tests;
