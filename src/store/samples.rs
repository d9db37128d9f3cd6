//! Depth samples of dead-letter queues and what the last read of each found (its oldest and
//! newest dead letter), kept so that the queue list's growth, age and sparkline survive a
//! restart. Samples are thinned ([`urgency::SAMPLE_GAP_SECS`] apart) and pruned past
//! [`urgency::KEEP_SECS`].

use std::collections::HashMap;

use jiff::Timestamp;

use super::{Result, Store, to_sql_count};
use crate::domain::urgency::{self, ReadHead, Sample};

impl Store {
    /// Records each queue's depth at `now`, unless a sample of it newer than the gap is kept
    /// already, and forgets samples older than the keep horizon. One transaction.
    pub fn record_depths(
        &self,
        vhost_key: &str,
        depths: &[(String, u64)],
        now: Timestamp,
    ) -> Result<()> {
        let now_ms = now.as_millisecond();
        let gap_ms = urgency::SAMPLE_GAP_SECS * 1_000;
        let tx = self.write_tx()?;
        {
            let mut insert = tx
                .prepare(
                    "INSERT OR IGNORE INTO depth_samples (vhost_key, queue, at_ms, depth)
                     SELECT ?1, ?2, ?3, ?4
                     WHERE NOT EXISTS (SELECT 1 FROM depth_samples
                                       WHERE vhost_key = ?1 AND queue = ?2 AND at_ms > ?5)",
                )
                .map_err(|e| self.sqlite(e))?;
            for (queue, depth) in depths {
                insert
                    .execute((
                        vhost_key,
                        queue,
                        now_ms,
                        to_sql_count(*depth),
                        now_ms - gap_ms,
                    ))
                    .map_err(|e| self.sqlite(e))?;
            }
            tx.execute(
                "DELETE FROM depth_samples WHERE at_ms < ?1",
                [now_ms - urgency::KEEP_SECS * 1_000],
            )
            .map_err(|e| self.sqlite(e))?;
        }
        tx.commit().map_err(|e| self.sqlite(e))
    }

    /// The kept samples of every queue of `vhost_key` since `since`, oldest first.
    pub fn depth_samples(
        &self,
        vhost_key: &str,
        since: Timestamp,
    ) -> Result<HashMap<String, Vec<Sample>>> {
        let mut st = self
            .conn
            .prepare(
                "SELECT queue, at_ms, depth FROM depth_samples
                 WHERE vhost_key = ?1 AND at_ms >= ?2 ORDER BY queue, at_ms",
            )
            .map_err(|e| self.sqlite(e))?;
        let rows = st
            .query_map((vhost_key, since.as_millisecond()), |r| {
                Ok((
                    r.get::<_, String>(0)?,
                    r.get::<_, i64>(1)?,
                    r.get::<_, i64>(2)?,
                ))
            })
            .map_err(|e| self.sqlite(e))?;
        let mut out: HashMap<String, Vec<Sample>> = HashMap::new();
        for row in rows {
            let (queue, at_ms, depth) = row.map_err(|e| self.sqlite(e))?;
            let at = Timestamp::from_millisecond(at_ms)
                .map_err(|e| self.corrupt(format!("sample time {at_ms}: {e}")))?;
            out.entry(queue).or_default().push(Sample {
                at,
                depth: u64::try_from(depth).unwrap_or(0),
            });
        }
        Ok(out)
    }

    /// The last hour of samples of `vhost_key`'s queues (as they were before this call), then
    /// `depths` recorded at `now`: what a listing does with the store.
    pub fn depth_history(
        &self,
        vhost_key: &str,
        depths: &[(String, u64)],
        now: Timestamp,
    ) -> Result<HashMap<String, Vec<Sample>>> {
        let since = Timestamp::from_second(now.as_second() - urgency::KEEP_SECS).unwrap_or(now);
        let before = self.depth_samples(vhost_key, since)?;
        self.record_depths(vhost_key, depths, now)?;
        Ok(before)
    }

    /// Remembers what a read of `queue` found.
    pub fn record_read_head(&self, vhost_key: &str, queue: &str, head: &ReadHead) -> Result<()> {
        self.conn
            .execute(
                "INSERT OR REPLACE INTO read_heads (vhost_key, queue, read_ms, oldest_ms, newest_ms,
                     oldest_exact)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
                (
                    vhost_key,
                    queue,
                    head.at.as_millisecond(),
                    head.oldest.map(|t| t.as_millisecond()),
                    head.newest.map(|t| t.as_millisecond()),
                    head.oldest_exact,
                ),
            )
            .map_err(|e| self.sqlite(e))?;
        Ok(())
    }

    /// What the last read of each queue of `vhost_key` found.
    pub fn read_heads(&self, vhost_key: &str) -> Result<HashMap<String, ReadHead>> {
        let mut st = self
            .conn
            .prepare(
                "SELECT queue, read_ms, oldest_ms, newest_ms, oldest_exact FROM read_heads
                 WHERE vhost_key = ?1",
            )
            .map_err(|e| self.sqlite(e))?;
        let rows = st
            .query_map([vhost_key], |r| {
                Ok((
                    r.get::<_, String>(0)?,
                    r.get::<_, i64>(1)?,
                    r.get::<_, Option<i64>>(2)?,
                    r.get::<_, Option<i64>>(3)?,
                    // Heads recorded before migration 11 dated by first seen: a bound.
                    r.get::<_, Option<bool>>(4)?.unwrap_or(false),
                ))
            })
            .map_err(|e| self.sqlite(e))?;
        let time = |ms: i64| {
            Timestamp::from_millisecond(ms)
                .map_err(|e| self.corrupt(format!("read time {ms}: {e}")))
        };
        let mut out = HashMap::new();
        for row in rows {
            let (queue, read_ms, oldest, newest, oldest_exact) = row.map_err(|e| self.sqlite(e))?;
            out.insert(
                queue,
                ReadHead {
                    at: time(read_ms)?,
                    oldest_exact,
                    oldest: oldest.map(time).transpose()?,
                    newest: newest.map(time).transpose()?,
                },
            );
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(s: i64) -> Timestamp {
        Timestamp::from_second(1_800_000_000 + s).unwrap()
    }

    #[test]
    fn samples_are_thinned_pruned_and_read_back() {
        let dir = std::env::temp_dir().join(format!("warren-samples-{}", std::process::id()));
        let path = dir.join("w.db");
        let _ = std::fs::remove_file(&path);
        let st = Store::open(&path).unwrap();
        let q = |d: u64| vec![("dlq".to_string(), d)];
        st.record_depths("c/", &q(1), at(0)).unwrap();
        st.record_depths("c/", &q(2), at(5)).unwrap(); // within the gap: not kept
        st.record_depths("c/", &q(3), at(30)).unwrap();
        st.record_depths("other/", &q(9), at(30)).unwrap();
        let got = st.depth_samples("c/", at(-10)).unwrap();
        let depths: Vec<u64> = got["dlq"].iter().map(|s| s.depth).collect();
        assert_eq!(depths, [1, 3]);
        // An hour and more later the old ones are gone.
        st.record_depths("c/", &q(4), at(30 + urgency::KEEP_SECS + 1))
            .unwrap();
        let got = st.depth_samples("c/", at(-10)).unwrap();
        assert_eq!(got["dlq"].len(), 1);
        let head = ReadHead {
            at: at(40),
            oldest_exact: false,
            oldest: Some(at(-100)),
            newest: None,
        };
        st.record_read_head("c/", "dlq", &head).unwrap();
        assert_eq!(st.read_heads("c/").unwrap()["dlq"], head);
        assert!(st.read_heads("other/").unwrap().is_empty());
        let _ = std::fs::remove_dir_all(&dir);
    }
}
