//! Notes on failure groups ("carrier outage, replay after 10:00"): one per group of a queue and
//! grouping mode, in a context and vhost. A note is replaced by the next one, removed by an empty
//! one, and forgotten once a look at the whole queue finds its group gone
//! (`domain::grouping::notes_gone` decides; this only keeps them).

use jiff::Timestamp;

use super::{Result, Store};
use crate::domain::grouping::{GroupBy, GroupNote};

impl Store {
    /// Keeps `note` as the note of its group in `vhost_key` (context and vhost, as for
    /// first-seen times), replacing any earlier one; an empty text removes it. Returns whether a
    /// note is now kept.
    pub fn set_group_note(&self, vhost_key: &str, note: &GroupNote) -> Result<bool> {
        let tx = self.write_tx()?;
        tx.execute(
            "DELETE FROM group_notes WHERE vhost_key = ?1 AND queue = ?2 AND grouping = ?3 AND group_key = ?4",
            (vhost_key, &note.queue, note.by.as_str(), &note.key),
        )
        .map_err(|e| self.sqlite(e))?;
        let kept = !note.text.is_empty();
        if kept {
            tx.execute(
                "INSERT INTO group_notes (vhost_key, queue, grouping, group_key, text, author, set_ms)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
                (
                    vhost_key,
                    &note.queue,
                    note.by.as_str(),
                    &note.key,
                    &note.text,
                    &note.author,
                    note.at.as_millisecond(),
                ),
            )
            .map_err(|e| self.sqlite(e))?;
        }
        tx.commit().map_err(|e| self.sqlite(e))?;
        Ok(kept)
    }

    /// The notes on `queue`'s groups, every grouping mode, oldest first. A row whose mode this
    /// Warren does not know (a newer one wrote it) is skipped, not an error.
    pub fn group_notes(&self, vhost_key: &str, queue: &str) -> Result<Vec<GroupNote>> {
        let mut stmt = self
            .conn
            .prepare(
                "SELECT grouping, group_key, text, author, set_ms FROM group_notes
                 WHERE vhost_key = ?1 AND queue = ?2 ORDER BY set_ms, grouping, group_key",
            )
            .map_err(|e| self.sqlite(e))?;
        let rows = stmt
            .query_map((vhost_key, queue), |r| {
                Ok((
                    r.get::<_, String>(0)?,
                    r.get::<_, String>(1)?,
                    r.get::<_, String>(2)?,
                    r.get::<_, String>(3)?,
                    r.get::<_, i64>(4)?,
                ))
            })
            .map_err(|e| self.sqlite(e))?;
        let mut out = Vec::new();
        for row in rows {
            let (by, key, text, author, ms) = row.map_err(|e| self.sqlite(e))?;
            let Some(by) = GroupBy::parse(&by) else {
                continue;
            };
            let at = Timestamp::from_millisecond(ms)
                .map_err(|e| self.corrupt(format!("note time {ms}: {e}")))?;
            out.push(GroupNote {
                queue: queue.to_string(),
                by,
                key,
                text,
                author,
                at,
            });
        }
        Ok(out)
    }

    /// Forgets the notes of groups that are gone. Returns how many were removed.
    pub fn forget_group_notes(&self, vhost_key: &str, gone: &[&GroupNote]) -> Result<usize> {
        let tx = self.write_tx()?;
        let mut n = 0;
        for note in gone {
            n += tx
                .execute(
                    "DELETE FROM group_notes WHERE vhost_key = ?1 AND queue = ?2 AND grouping = ?3 AND group_key = ?4",
                    (vhost_key, &note.queue, note.by.as_str(), &note.key),
                )
                .map_err(|e| self.sqlite(e))?;
        }
        tx.commit().map_err(|e| self.sqlite(e))?;
        Ok(n)
    }
}
