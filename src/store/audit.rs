//! The replay audit: who replayed what, from where to where, and how it ended. Append-only: a
//! replay's row is written before its first publish, its outcome is inserted once when it ends,
//! and nothing is ever updated or deleted (triggers in the schema refuse it). A replay that never
//! got an outcome (killed, crashed, lost power) reads as "interrupted".

use std::collections::{HashMap, HashSet};

use jiff::Timestamp;
use rusqlite::OptionalExtension;
use serde::Serialize;

use super::{Result, Store, StoreError, to_sql_count};

/// What is known when a replay starts; written before the first message is published.
#[derive(Clone, Debug, PartialEq)]
pub struct AuditStart {
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
    pub clear_expiry: bool,
}

/// How a replay ended.
#[derive(Clone, Debug, PartialEq)]
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
    /// "completed" (every selected message moved, nothing failed or was returned), "partial: …"
    /// (stopped early by its own rules, or some failed), "failed: …" (a broker or connection
    /// fault), "cancelled" (a signal; settled) or "interrupted: …" (ended without settling).
    pub outcome: String,
}

/// One replay as the audit shows it (`warren audit`, `warren audit --json`).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct AuditRecord {
    pub id: i64,
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
    /// The recorded outcome, or "interrupted" when there is none.
    pub outcome: String,
}

/// How many of the newest replays `replay_counts` looks through.
const AUDIT_LINK_WINDOW: i64 = 1000;

/// The outcome shown for a replay whose outcome was never recorded.
pub const INTERRUPTED: &str = "interrupted";

/// The local account name for the audit: `$USER`, `$USERNAME` (Windows) or `$LOGNAME`.
pub fn current_os_user() -> String {
    ["USER", "USERNAME", "LOGNAME"]
        .iter()
        .filter_map(|v| std::env::var(v).ok())
        .find(|v| !v.trim().is_empty())
        .unwrap_or_else(|| "unknown".to_string())
}

impl Store {
    /// Records the start of a replay and returns its audit id. Call before the first publish: a
    /// replay that cannot be audited should not start.
    pub fn begin_replay(&self, rec: &AuditStart) -> Result<i64> {
        let targets = serde_json::to_string(&rec.targets)
            .map_err(|e| self.corrupt(format!("targets: {e}")))?;
        let tx = self.write_tx()?;
        tx.execute(
            "INSERT INTO replays (started_ms, os_user, broker_user, context, vhost, from_queue,
                 targets_json, filter, grp, requested_limit, dry_run, keep_attempts, clear_expiry)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13)",
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
            ],
        )
        .map_err(|e| self.sqlite(e))?;
        let id = tx.last_insert_rowid();
        tx.commit().map_err(|e| self.sqlite(e))?;
        Ok(id)
    }

    /// Records how replay `id` ended. Exactly once: a second call is refused with
    /// [`StoreError::AlreadyFinished`].
    pub fn finish_replay(&self, id: i64, out: &AuditOutcome) -> Result<()> {
        let ids = serde_json::to_string(&out.message_ids)
            .map_err(|e| self.corrupt(format!("message ids: {e}")))?;
        self.finish_with(id, out, &ids)
    }

    /// [`Store::finish_replay`] that frees the moved ids once they are written out as JSON,
    /// before the row is stored: a replay of a million messages holds its ids once, not twice.
    pub fn finish_replay_taking(&self, id: i64, mut out: AuditOutcome) -> Result<()> {
        let ids = serde_json::to_string(&out.message_ids)
            .map_err(|e| self.corrupt(format!("message ids: {e}")))?;
        out.message_ids = Vec::new();
        self.finish_with(id, &out, &ids)
    }

    fn finish_with(&self, id: i64, out: &AuditOutcome, ids: &str) -> Result<()> {
        let dup_ids = serde_json::to_string(&out.duplicate_ids)
            .map_err(|e| self.corrupt(format!("duplicate ids: {e}")))?;
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
                 remaining, message_ids_json, outcome, duplicated, duplicate_ids_json)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)",
            rusqlite::params![
                id,
                out.at.as_millisecond(),
                to_sql_count(out.moved),
                to_sql_count(out.returned),
                to_sql_count(out.failed),
                to_sql_count(out.remaining),
                ids,
                out.outcome,
                to_sql_count(out.duplicated),
                dup_ids,
            ],
        )
        .map_err(|e| self.sqlite(e))?;
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
                "SELECT o.message_ids_json
                 FROM replays r JOIN replay_outcomes o ON o.replay_id = r.id
                 WHERE r.context = ?1 AND r.vhost = ?2 AND r.dry_run = 0
                 ORDER BY r.id DESC LIMIT ?3",
            )
            .map_err(|e| self.sqlite(e))?;
        let rows = stmt
            .query_map((context, vhost, AUDIT_LINK_WINDOW), |r| {
                r.get::<_, String>(0)
            })
            .map_err(|e| self.sqlite(e))?;
        for row in rows {
            let json = row.map_err(|e| self.sqlite(e))?;
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
        Ok(out)
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
                        r.clear_expiry
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
        Ok(AuditRecord {
            id,
            started_at: time(raw.started_ms)?,
            os_user: raw.os_user,
            broker_user: raw.broker_user,
            context: raw.context,
            vhost: raw.vhost,
            from_queue: raw.from_queue,
            targets: list(&raw.targets_json)?,
            filter: raw.filter,
            group: raw.group,
            requested_limit: count(raw.requested_limit)?,
            dry_run: raw.dry_run,
            keep_attempts: raw.keep_attempts,
            clear_expiry: raw.clear_expiry,
            finished_at: raw.finished_ms.map(time).transpose()?,
            moved: count(raw.moved)?,
            returned: count(raw.returned)?,
            failed: count(raw.failed)?,
            remaining: count(raw.remaining)?,
            message_ids: match raw.message_ids_json.as_deref() {
                Some(json) => list(json)?,
                None => Vec::new(),
            },
            duplicated: count(raw.duplicated)?,
            duplicate_ids: match raw.duplicate_ids_json.as_deref() {
                Some(json) => list(json)?,
                None => Vec::new(),
            },
            outcome: raw.outcome.unwrap_or_else(|| INTERRUPTED.to_string()),
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
    finished_ms: Option<i64>,
    moved: Option<i64>,
    returned: Option<i64>,
    failed: Option<i64>,
    remaining: Option<i64>,
    message_ids_json: Option<String>,
    outcome: Option<String>,
    duplicated: Option<i64>,
    duplicate_ids_json: Option<String>,
}
