//! What was restored from an archive. A stream cannot forget a message, so Warren remembers
//! which archived messages it put back, by archive and message reference (stream offset and
//! content digest, or the local file's line and digest), and `warren restore` refuses to put
//! the same one back twice unless told (`--again`).

use std::collections::HashSet;

use jiff::Timestamp;

use super::{Result, Store};

impl Store {
    /// Records that the messages `refs` of `archive` were restored (by the audit record
    /// `audit_id`, when there is one).
    pub fn record_restored(
        &self,
        archive: &str,
        refs: &[String],
        audit_id: Option<i64>,
        at: Timestamp,
    ) -> Result<()> {
        let tx = self.write_tx()?;
        {
            let mut stmt = tx
                .prepare(
                    "INSERT INTO restored (archive_key, message_ref, audit_id, restored_ms)
                     VALUES (?1, ?2, ?3, ?4)",
                )
                .map_err(|e| self.sqlite(e))?;
            for r in refs {
                stmt.execute(rusqlite::params![archive, r, audit_id, at.as_millisecond()])
                    .map_err(|e| self.sqlite(e))?;
            }
        }
        tx.commit().map_err(|e| self.sqlite(e))
    }

    /// Which of `refs` were restored from `archive` before.
    pub fn restored_among(&self, archive: &str, refs: &[String]) -> Result<HashSet<String>> {
        let mut out = HashSet::new();
        let mut stmt = self
            .conn
            .prepare("SELECT 1 FROM restored WHERE archive_key = ?1 AND message_ref = ?2 LIMIT 1")
            .map_err(|e| self.sqlite(e))?;
        for r in refs {
            let found = stmt
                .exists(rusqlite::params![archive, r])
                .map_err(|e| self.sqlite(e))?;
            if found {
                out.insert(r.clone());
            }
        }
        Ok(out)
    }
}

/// Remembers restored messages (by their references) in `st` under the archive's `key`, by the
/// audit record `audit_id`: what a restore's publishing (`broker::restore::publish`) calls as
/// the engine acknowledges them. `st` is a store or a reference to one (the worker's task owns
/// its store).
pub fn remember_restored<S: std::borrow::Borrow<Store>>(
    st: S,
    key: String,
    audit_id: Option<i64>,
) -> impl FnMut(&[String]) -> std::result::Result<(), String> {
    move |refs: &[String]| {
        st.borrow()
            .record_restored(&key, refs, audit_id, Timestamp::now())
            .map_err(|e| e.to_string())
    }
}
