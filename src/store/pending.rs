//! Outcomes the store could not take when their run ended (locked by another process past the
//! wait, or the disk full): kept in a file of their own beside the store, `<store>.pending/<id>
//! .jsonl`, and written into the store the next time it is opened. A run that moved messages
//! must not read "interrupted, no ids" because the store was busy at its last moment.
//!
//! The file: a first line with the audit id, the run id and the outcome, then each further
//! moved id as a JSON string on a line of its own (a run's ids can be millions).

use std::io::{BufRead, Write};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::{AuditOutcome, Store, StoreError};

#[derive(Serialize, Deserialize)]
struct Head {
    audit_id: i64,
    run_id: Option<String>,
    outcome: AuditOutcome,
}

impl StoreError {
    /// Whether a failed write may succeed later unchanged: the database locked by another
    /// process past the busy timeout, or the disk full or failing.
    pub fn may_pass(&self) -> bool {
        use rusqlite::ffi::ErrorCode as C;
        matches!(self, StoreError::Sqlite { source, .. } if matches!(
            source.sqlite_error_code(),
            Some(C::DatabaseBusy | C::DatabaseLocked | C::DiskFull | C::SystemIoFailure)
        ))
    }
}

/// Where the store at `store` keeps outcomes waiting to be written.
pub fn pending_dir(store: &Path) -> PathBuf {
    let mut name = store.file_name().unwrap_or_default().to_os_string();
    name.push(".pending");
    store.with_file_name(name)
}

/// Keeps run `audit_id`'s outcome (`out.message_ids`, then those `more` gives) in the pending
/// directory of the store at `store`, written whole (a temporary file, synced, renamed) or not
/// at all. Returns the file.
pub fn keep_pending(
    store: &Path,
    audit_id: i64,
    run_id: Option<String>,
    out: &AuditOutcome,
    more: impl FnOnce(&mut dyn FnMut(String)),
) -> std::io::Result<PathBuf> {
    let dir = pending_dir(store);
    std::fs::create_dir_all(&dir)?;
    let path = dir.join(format!("{audit_id}.jsonl"));
    let tmp = dir.join(format!(".{audit_id}.{}.partial", std::process::id()));
    let written = (|| {
        let mut f = std::io::BufWriter::new(std::fs::File::create(&tmp)?);
        let head = Head {
            audit_id,
            run_id,
            outcome: out.clone(),
        };
        serde_json::to_writer(&mut f, &head)?;
        f.write_all(b"\n")?;
        let mut failed = None;
        more(&mut |id: String| {
            if failed.is_none()
                && let Err(e) = serde_json::to_writer(&mut f, &id)
                    .map_err(std::io::Error::from)
                    .and_then(|()| f.write_all(b"\n"))
            {
                failed = Some(e);
            }
        });
        if let Some(e) = failed {
            return Err(e);
        }
        f.into_inner().map_err(|e| e.into_error())?.sync_all()?;
        std::fs::rename(&tmp, &path)
    })();
    if written.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    written.map(|()| path)
}

impl Store {
    /// Writes every outcome left pending beside this store into it, removing each file once
    /// its outcome is in (or the record already had one). Returns what to tell: each record
    /// completed, or why a file was left.
    pub fn complete_pending(&self) -> Vec<String> {
        let Ok(entries) = std::fs::read_dir(pending_dir(&self.path)) else {
            return Vec::new();
        };
        let mut notes = Vec::new();
        for path in entries.filter_map(|e| e.ok().map(|e| e.path())) {
            if path.extension().is_some_and(|x| x == "jsonl") {
                notes.push(match self.complete_one(&path) {
                    Ok(id) => {
                        let _ = std::fs::remove_file(&path);
                        format!("completed the audit record #{id} from {}", path.display())
                    }
                    Err(why) => format!("{} left pending: {why}", path.display()),
                });
            }
        }
        notes
    }

    fn complete_one(&self, path: &Path) -> Result<i64, String> {
        let file = std::fs::File::open(path).map_err(|e| e.to_string())?;
        let mut lines = std::io::BufReader::new(file).lines();
        let first = lines
            .next()
            .ok_or("the file is empty")?
            .map_err(|e| e.to_string())?;
        let head: Head = serde_json::from_str(&first).map_err(|e| e.to_string())?;
        let id = head.audit_id;
        if let Some(run) = &head.run_id
            && self.run_id_of(id).as_ref() != Some(run)
        {
            return Err(format!(
                "record #{id} of this store is not run {run} (another store's file?)"
            ));
        }
        let mut unreadable = None;
        let written = self.finish_replay_with(id, &head.outcome, |put| {
            for line in lines {
                match line
                    .map_err(|e| e.to_string())
                    .and_then(|l| serde_json::from_str::<String>(&l).map_err(|e| e.to_string()))
                {
                    Ok(key) => put(key),
                    Err(e) => {
                        unreadable = Some(e);
                        break;
                    }
                }
            }
        });
        match written {
            Ok(()) | Err(StoreError::AlreadyFinished(_)) => Ok(id),
            Err(e) => Err(e.to_string()),
        }
        .inspect(|id| {
            if let Some(e) = &unreadable {
                tracing::warn!("record #{id}: some moved ids of its pending file unreadable: {e}");
            }
        })
    }

    /// The run id of audit record `id`, when it has one.
    pub fn run_id_of(&self, id: i64) -> Option<String> {
        self.conn
            .query_row("SELECT run_id FROM replays WHERE id = ?1", [id], |r| {
                r.get::<_, Option<String>>(0)
            })
            .ok()
            .flatten()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn outcome() -> AuditOutcome {
        crate::store::audit::tests::completed(3, &["id:a"])
    }

    #[test]
    fn locked_and_full_may_pass_the_rest_does_not() {
        let sqlite = |code| StoreError::Sqlite {
            path: PathBuf::from("w.db"),
            source: rusqlite::Error::SqliteFailure(rusqlite::ffi::Error::new(code), None),
        };
        for code in [
            rusqlite::ffi::SQLITE_BUSY,
            rusqlite::ffi::SQLITE_LOCKED,
            rusqlite::ffi::SQLITE_FULL,
            rusqlite::ffi::SQLITE_IOERR,
        ] {
            assert!(sqlite(code).may_pass(), "{code}");
        }
        assert!(!sqlite(rusqlite::ffi::SQLITE_CONSTRAINT).may_pass());
        assert!(!StoreError::AlreadyFinished(1).may_pass());
    }

    #[test]
    fn a_pending_outcome_is_written_when_the_store_opens_next() {
        let dir = std::env::temp_dir().join(format!(
            "warren-pending-{}-{}",
            std::process::id(),
            jiff::Timestamp::now().as_nanosecond()
        ));
        let path = dir.join("warren.db");
        let store = Store::open(&path).unwrap();
        let start = crate::store::audit::tests::start("r1", 100);
        let id = store.begin_replay(&start).unwrap();
        let kept = keep_pending(&path, id, store.run_id_of(id), &outcome(), |put| {
            put("id:b".into());
            put("id:c".into());
        })
        .unwrap();
        assert!(kept.exists());
        assert_eq!(
            store.list_audit(10).unwrap()[0].outcome,
            crate::domain::outcome::RunOutcome::Interrupted(None)
        );
        drop(store);
        let store = Store::open(&path).unwrap();
        let r = &store.list_audit(10).unwrap()[0];
        assert_eq!(r.outcome, crate::domain::outcome::RunOutcome::Completed);
        assert_eq!(r.message_ids, ["id:a", "id:b", "id:c"]);
        assert!(!kept.exists(), "the file goes once its outcome is in");
        // Another store's file (its record is another run) is left alone and said.
        let other = keep_pending(&path, id, Some("r9".into()), &outcome(), |_| {}).unwrap();
        let notes = store.complete_pending();
        assert!(notes[0].contains("not run r9"), "{notes:?}");
        assert!(other.exists());
        let _ = std::fs::remove_dir_all(&dir);
    }
}
