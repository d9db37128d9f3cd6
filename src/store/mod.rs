//! Warren's local memory, one SQLite file (`warren.db` in the data directory): when Warren first
//! saw each dead letter ("dead since", which x-death cannot tell), the append-only audit of
//! every replay, the read ledger and the notes on failure groups. Opened once per process; WAL
//! and a busy timeout let a TUI and a CLI run share it.

mod audit;
mod ledger;
mod notes;
mod outcome;
mod pending;
mod restored;
mod samples;
mod seen;

use std::path::{Path, PathBuf};
use std::time::Duration;

use rusqlite::{Connection, Transaction, TransactionBehavior};

pub use audit::{
    AUDIT_SCHEMA, AuditEnvelope, AuditOutcome, AuditRecord, AuditStart, IDS_EVENT, IdsPart, Merged,
    NoteEntry, NoteRecord, Operation, OutcomeEntry, ProtectRecord, Seen, current_os_user, merge,
    unvouched_runs,
};
pub use outcome::record_outcome;
pub use pending::{keep_pending, pending_dir};
pub use restored::remember_restored;

/// Environment variable naming the store file instead of the default location (tests and
/// scripted runs use it to keep their history apart).
pub const STORE_ENV: &str = "WARREN_STORE";

/// How long a write waits for another Warren process holding the database.
const BUSY_TIMEOUT: Duration = Duration::from_secs(5);

#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("cannot open Warren's store at {path}: {reason}; replay needs --no-audit without it")]
    Open { path: PathBuf, reason: String },
    #[error(
        "cannot find a data directory for Warren's store (is HOME set?); set {STORE_ENV} to a \
         file path, or replay with --no-audit"
    )]
    NoDataDir,
    #[error(
        "Warren's store at {path} has schema version {found}, newer than this warren understands \
         ({supported}); upgrade warren, or point {STORE_ENV} at another file"
    )]
    TooNew {
        path: PathBuf,
        found: i64,
        supported: i64,
    },
    #[error("replay #{0} is not in the audit")]
    NoSuchReplay(i64),
    #[error("replay #{0} already has an outcome; the audit is append-only")]
    AlreadyFinished(i64),
    #[error(
        "Warren's store at {path} holds a value it cannot read ({detail}); the file may be damaged"
    )]
    Corrupt { path: PathBuf, detail: String },
    #[error("Warren's store at {path}: {source}")]
    Sqlite {
        path: PathBuf,
        #[source]
        source: rusqlite::Error,
    },
}

pub type Result<T, E = StoreError> = std::result::Result<T, E>;

/// An open store. Not `Sync`: one owner (the CLI, or the TUI's worker) uses it at a time.
pub struct Store {
    conn: Connection,
    path: PathBuf,
}

/// Schema migrations, applied in order; the index + 1 is the version each one brings.
const MIGRATIONS: &[&str] = &[
    // 1: first-seen times and the replay audit.
    r#"
    CREATE TABLE first_seen (
        vhost_key   TEXT NOT NULL,
        queue       TEXT NOT NULL,
        message_key TEXT NOT NULL,
        first_seen_ms INTEGER NOT NULL,
        PRIMARY KEY (vhost_key, queue, message_key)
    ) WITHOUT ROWID;

    CREATE TABLE replays (
        id              INTEGER PRIMARY KEY AUTOINCREMENT,
        started_ms      INTEGER NOT NULL,
        os_user         TEXT NOT NULL,
        broker_user     TEXT NOT NULL,
        context         TEXT NOT NULL,
        vhost           TEXT NOT NULL,
        from_queue      TEXT NOT NULL,
        targets_json    TEXT NOT NULL,
        filter          TEXT,
        grp             TEXT,
        requested_limit INTEGER,
        dry_run         INTEGER NOT NULL,
        keep_attempts   INTEGER NOT NULL
    );

    -- The outcome lives in its own table and is inserted exactly once per replay, so that no
    -- audit row is ever updated.
    CREATE TABLE replay_outcomes (
        replay_id   INTEGER PRIMARY KEY REFERENCES replays(id),
        finished_ms INTEGER NOT NULL,
        moved       INTEGER NOT NULL,
        returned    INTEGER NOT NULL,
        failed      INTEGER NOT NULL,
        remaining   INTEGER NOT NULL,
        message_ids_json TEXT NOT NULL,
        outcome     TEXT NOT NULL
    );

    CREATE TRIGGER replays_no_update BEFORE UPDATE ON replays
        BEGIN SELECT RAISE(ABORT, 'the replay audit is append-only'); END;
    CREATE TRIGGER replays_no_delete BEFORE DELETE ON replays
        BEGIN SELECT RAISE(ABORT, 'the replay audit is append-only'); END;
    CREATE TRIGGER replay_outcomes_no_update BEFORE UPDATE ON replay_outcomes
        BEGIN SELECT RAISE(ABORT, 'the replay audit is append-only'); END;
    CREATE TRIGGER replay_outcomes_no_delete BEFORE DELETE ON replay_outcomes
        BEGIN SELECT RAISE(ABORT, 'the replay audit is append-only'); END;
    "#,
    // 2: how many messages a replay may have left in both places, and which.
    r#"
    ALTER TABLE replay_outcomes ADD COLUMN duplicated INTEGER;
    ALTER TABLE replay_outcomes ADD COLUMN duplicate_ids_json TEXT;
    "#,
    // 3: the read ledger: what reading a queue whose reads cost deliveries has cost so far.
    r#"
    CREATE TABLE read_ledger (
        vhost_key   TEXT NOT NULL,
        queue       TEXT NOT NULL,
        record_json TEXT NOT NULL,
        PRIMARY KEY (vhost_key, queue)
    ) WITHOUT ROWID;
    "#,
    // 4: whether a replay removed framework deadlines that had passed (`--clear-expiry`).
    r#"
    ALTER TABLE replays ADD COLUMN clear_expiry INTEGER NOT NULL DEFAULT 0;
    "#,
    // 5: notes on failure groups, one per group of a queue and grouping mode, until the group
    // is gone.
    r#"
    CREATE TABLE group_notes (
        vhost_key   TEXT NOT NULL,
        queue       TEXT NOT NULL,
        grouping    TEXT NOT NULL,
        group_key   TEXT NOT NULL,
        text        TEXT NOT NULL,
        author      TEXT NOT NULL,
        set_ms      INTEGER NOT NULL,
        PRIMARY KEY (vhost_key, queue, grouping, group_key)
    ) WITHOUT ROWID;
    "#,
    // 6: depth samples of dead-letter queues (the queue list's growth and sparkline survive a
    // restart; pruned past `urgency::KEEP_SECS`), and the oldest and newest dead letter of the
    // last read of each queue.
    r#"
    CREATE TABLE depth_samples (
        vhost_key TEXT NOT NULL,
        queue     TEXT NOT NULL,
        at_ms     INTEGER NOT NULL,
        depth     INTEGER NOT NULL,
        PRIMARY KEY (vhost_key, queue, at_ms)
    ) WITHOUT ROWID;
    CREATE INDEX depth_samples_at ON depth_samples (at_ms);

    CREATE TABLE read_heads (
        vhost_key TEXT NOT NULL,
        queue     TEXT NOT NULL,
        read_ms   INTEGER NOT NULL,
        oldest_ms INTEGER,
        newest_ms INTEGER,
        PRIMARY KEY (vhost_key, queue)
    ) WITHOUT ROWID;
    "#,
    // 7: the other ways out of a DLQ share the audit (`operation`: replay, archive, discard,
    // restore), and what was restored from an archive, which a stream cannot forget.
    r#"
    ALTER TABLE replays ADD COLUMN operation TEXT NOT NULL DEFAULT 'replay';

    CREATE TABLE restored (
        archive_key TEXT NOT NULL,
        message_ref TEXT NOT NULL,
        audit_id    INTEGER,
        restored_ms INTEGER NOT NULL
    );
    CREATE INDEX restored_by_ref ON restored (archive_key, message_ref);
    "#,
    // 8: the run's globally unique id (also on the broker's audit stream and in each replayed
    // message as `warren-replay-id`), and the protect record.
    r#"
    ALTER TABLE replays ADD COLUMN run_id TEXT;
    CREATE INDEX replays_run_id ON replays(run_id);

    CREATE TABLE protects (
        id          INTEGER PRIMARY KEY AUTOINCREMENT,
        run_id      TEXT NOT NULL,
        at_ms       INTEGER NOT NULL,
        os_user     TEXT NOT NULL,
        broker_user TEXT NOT NULL,
        context     TEXT NOT NULL,
        vhost       TEXT NOT NULL,
        queue       TEXT NOT NULL,
        policy      TEXT NOT NULL,
        replaces    TEXT,
        limit_before INTEGER,
        limit_after INTEGER
    );
    CREATE TRIGGER protects_no_update BEFORE UPDATE ON protects
        BEGIN SELECT RAISE(ABORT, 'the audit is append-only'); END;
    CREATE TRIGGER protects_no_delete BEFORE DELETE ON protects
        BEGIN SELECT RAISE(ABORT, 'the audit is append-only'); END;
    "#,
    // 9: a run's moved ids one row each, written from the run's spool with its outcome, not as
    // one JSON text held in memory (a million ids are tens of MiB). `message_ids_json` stays
    // for the runs recorded before; a new outcome writes `[]` there.
    r#"
    CREATE TABLE replay_moved (
        replay_id   INTEGER NOT NULL REFERENCES replays(id),
        seq         INTEGER NOT NULL,
        message_key TEXT NOT NULL,
        PRIMARY KEY (replay_id, seq)
    ) WITHOUT ROWID;
    CREATE INDEX replay_moved_by_key ON replay_moved (message_key);
    CREATE TRIGGER replay_moved_no_update BEFORE UPDATE ON replay_moved
        BEGIN SELECT RAISE(ABORT, 'the replay audit is append-only'); END;
    CREATE TRIGGER replay_moved_no_delete BEFORE DELETE ON replay_moved
        BEGIN SELECT RAISE(ABORT, 'the replay audit is append-only'); END;
    "#,
    // 10: the targets a run reached, as its outcome says: a run whose targets are checked as
    // they are first met starts with none known.
    r#"
    ALTER TABLE replay_outcomes ADD COLUMN targets_json TEXT;
    "#,
    // 11: whether a read's oldest dead letter is dated exactly (`domain::arrival`).
    r#"
    ALTER TABLE read_heads ADD COLUMN oldest_exact INTEGER;
    "#,
    // 12: what a replay's canary did (`domain::canary::CanaryRecord` as JSON).
    r#"
    ALTER TABLE replay_outcomes ADD COLUMN canary_json TEXT;
    "#,
    // 13: the messages a replay edited first (`domain::edit::EditRecord`s as JSON).
    r#"
    ALTER TABLE replay_outcomes ADD COLUMN edits_json TEXT;
    "#,
    // 14: `--strip-failure-stamp`: the replay published each message without Symfony's
    // failure stamp.
    r#"
    ALTER TABLE replays ADD COLUMN strip_failure_stamp INTEGER NOT NULL DEFAULT 0;
    "#,
];

impl Store {
    /// Where the store lives unless told otherwise: `$WARREN_STORE`, else `warren.db` in the
    /// platform data directory (e.g. `~/.local/share/warren/`). None when neither is known.
    pub fn default_path() -> Option<PathBuf> {
        if let Some(p) = std::env::var_os(STORE_ENV).filter(|p| !p.is_empty()) {
            return Some(PathBuf::from(p));
        }
        directories::ProjectDirs::from("", "", "warren").map(|d| d.data_dir().join("warren.db"))
    }

    /// Opens (creating if needed) the store at the default path.
    pub fn open_default() -> Result<Store> {
        let path = Store::default_path().ok_or(StoreError::NoDataDir)?;
        Store::open(&path)
    }

    /// Opens (creating the file and its directory if needed) the store at `path` and brings its
    /// schema up to date.
    pub fn open(path: &Path) -> Result<Store> {
        let open_err = |reason: String| StoreError::Open {
            path: path.to_path_buf(),
            reason,
        };
        if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
            std::fs::create_dir_all(parent)
                .map_err(|e| open_err(format!("cannot create {}: {e}", parent.display())))?;
        }
        let conn = Connection::open(path).map_err(|e| open_err(e.to_string()))?;
        // SQLite opens lazily: an unwritable or non-database file shows up at the first statement,
        // so everything up to the end of the migrations counts as opening.
        let setup = || -> rusqlite::Result<()> {
            conn.busy_timeout(BUSY_TIMEOUT)?;
            let _mode: String =
                conn.pragma_update_and_check(None, "journal_mode", "WAL", |row| row.get(0))?;
            conn.pragma_update(None, "synchronous", "NORMAL")?;
            conn.pragma_update(None, "foreign_keys", "ON")?;
            Ok(())
        };
        setup().map_err(|e| open_err(e.to_string()))?;
        let store = Store {
            conn,
            path: path.to_path_buf(),
        };
        store.migrate().map_err(|e| match e {
            StoreError::Sqlite { source, .. } => open_err(source.to_string()),
            other => other,
        })?;
        // Outcomes a locked or full store could not take when their run ended.
        for note in store.complete_pending() {
            tracing::warn!("{note}");
        }
        Ok(store)
    }

    /// The file this store reads and writes.
    pub fn path(&self) -> &Path {
        &self.path
    }

    fn migrate(&self) -> Result<()> {
        let tx = self.write_tx()?;
        tx.execute_batch("CREATE TABLE IF NOT EXISTS schema_version (version INTEGER NOT NULL);")
            .map_err(|e| self.sqlite(e))?;
        let current: Option<i64> = tx
            .query_row("SELECT max(version) FROM schema_version", [], |r| r.get(0))
            .map_err(|e| self.sqlite(e))?;
        let current = current.unwrap_or(0);
        let supported = MIGRATIONS.len() as i64;
        if current > supported {
            return Err(StoreError::TooNew {
                path: self.path.clone(),
                found: current,
                supported,
            });
        }
        for (version, sql) in (1_i64..).zip(MIGRATIONS) {
            if version > current {
                tx.execute_batch(sql).map_err(|e| self.sqlite(e))?;
            }
        }
        if current < supported {
            tx.execute("DELETE FROM schema_version", [])
                .map_err(|e| self.sqlite(e))?;
            tx.execute(
                "INSERT INTO schema_version (version) VALUES (?1)",
                [supported],
            )
            .map_err(|e| self.sqlite(e))?;
        }
        tx.commit().map_err(|e| self.sqlite(e))
    }

    /// A write transaction taken up front: a deferred one that later needs to write can fail
    /// with "database is locked" without waiting, an immediate one waits for the busy timeout.
    fn write_tx(&self) -> Result<Transaction<'_>> {
        Transaction::new_unchecked(&self.conn, TransactionBehavior::Immediate)
            .map_err(|e| self.sqlite(e))
    }

    fn sqlite(&self, source: rusqlite::Error) -> StoreError {
        StoreError::Sqlite {
            path: self.path.clone(),
            source,
        }
    }

    fn corrupt(&self, detail: impl Into<String>) -> StoreError {
        StoreError::Corrupt {
            path: self.path.clone(),
            detail: detail.into(),
        }
    }
}

/// Counts are u64 in Warren and i64 in SQLite; nothing real reaches 2^63.
fn to_sql_count(n: u64) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}
