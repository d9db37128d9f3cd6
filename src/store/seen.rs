//! First-seen times: when Warren first saw each message in a queue, kept across runs so that
//! "dead since" survives restarts. A time is written once and never overwritten.

use std::collections::HashMap;

use jiff::Timestamp;

use super::{Result, Store};

impl Store {
    /// Records `now` as the first-seen time of every key in `keys` not seen before in this
    /// queue, and returns the first-seen time of every key. One transaction, so a browse of
    /// 100,000 messages costs one disk sync.
    ///
    /// `vhost_key` names the broker context and vhost together (the same queue name on two
    /// brokers is two queues).
    pub fn record_seen(
        &self,
        vhost_key: &str,
        queue: &str,
        keys: &[String],
        now: Timestamp,
    ) -> Result<HashMap<String, Timestamp>> {
        let now_ms = now.as_millisecond();
        let mut out = HashMap::with_capacity(keys.len());
        let tx = self.write_tx()?;
        {
            let mut insert = tx
                .prepare(
                    "INSERT OR IGNORE INTO first_seen (vhost_key, queue, message_key, first_seen_ms)
                     VALUES (?1, ?2, ?3, ?4)",
                )
                .map_err(|e| self.sqlite(e))?;
            let mut select = tx
                .prepare(
                    "SELECT first_seen_ms FROM first_seen
                     WHERE vhost_key = ?1 AND queue = ?2 AND message_key = ?3",
                )
                .map_err(|e| self.sqlite(e))?;
            for key in keys {
                if out.contains_key(key) {
                    continue;
                }
                let inserted = insert
                    .execute((vhost_key, queue, key, now_ms))
                    .map_err(|e| self.sqlite(e))?;
                let ms = if inserted == 1 {
                    now_ms
                } else {
                    select
                        .query_row((vhost_key, queue, key), |r| r.get::<_, i64>(0))
                        .map_err(|e| self.sqlite(e))?
                };
                let at = Timestamp::from_millisecond(ms)
                    .map_err(|e| self.corrupt(format!("first-seen time {ms}: {e}")))?;
                out.insert(key.clone(), at);
            }
        }
        tx.commit().map_err(|e| self.sqlite(e))?;
        Ok(out)
    }
}
