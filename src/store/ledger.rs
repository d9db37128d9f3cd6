//! The read ledger (see `domain::ledger`): one record per queue whose reads cost deliveries.
//! Unlike the audit it is overwritten, since only the latest picture of a queue matters.

use rusqlite::OptionalExtension;
use serde_json::{Value, json};

use super::{Result, Store};
use crate::domain::ledger::ReadRecord;

impl Store {
    /// The queue's record, if Warren has read it before.
    pub fn read_record(&self, vhost_key: &str, queue: &str) -> Result<Option<ReadRecord>> {
        let text: Option<String> = self
            .conn
            .query_row(
                "SELECT record_json FROM read_ledger WHERE vhost_key = ?1 AND queue = ?2",
                (vhost_key, queue),
                |r| r.get(0),
            )
            .optional()
            .map_err(|e| self.sqlite(e))?;
        let Some(text) = text else { return Ok(None) };
        let v: Value = serde_json::from_str(&text)
            .map_err(|e| self.corrupt(format!("read ledger for '{queue}': {e}")))?;
        Ok(Some(from_json(&v)))
    }

    /// Replaces the queue's record (`None` forgets it).
    pub fn put_read_record(
        &self,
        vhost_key: &str,
        queue: &str,
        record: Option<&ReadRecord>,
    ) -> Result<()> {
        let tx = self.write_tx()?;
        match record {
            Some(r) => tx.execute(
                "INSERT OR REPLACE INTO read_ledger (vhost_key, queue, record_json) VALUES (?1, ?2, ?3)",
                (vhost_key, queue, to_json(r).to_string()),
            ),
            None => tx.execute(
                "DELETE FROM read_ledger WHERE vhost_key = ?1 AND queue = ?2",
                (vhost_key, queue),
            ),
        }
        .map_err(|e| self.sqlite(e))?;
        tx.commit().map_err(|e| self.sqlite(e))
    }
}

fn to_json(r: &ReadRecord) -> Value {
    json!({
        "version": r.version,
        "limit": r.limit,
        "cost": r.cost,
        "next_count": r.next_count,
        "acquired": r.acquired,
        "reads": r.reads,
        "unfinished": r.unfinished,
        "before_read": r.before_read,
        "at_ms": r.at_ms,
        "stopped": r.stopped,
    })
}

/// Lenient: a field this version does not know, or one missing, takes its cautious default
/// (an unreadable count is treated as an unfinished read, so the next read asks first).
fn from_json(v: &Value) -> ReadRecord {
    let u = |k: &str| v.get(k).and_then(Value::as_u64);
    let unfinished = v.get("unfinished").and_then(Value::as_bool).unwrap_or(true);
    let mut next_count = u("next_count");
    let mut before_read = u("before_read");
    // Written before unsettled reads were charged up front: charge the one delivery now.
    if unfinished && v.get("before_read").is_none() {
        before_read = next_count;
        next_count = Some(next_count.unwrap_or(0).saturating_add(1));
    }
    ReadRecord {
        version: v
            .get("version")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string(),
        limit: u("limit"),
        cost: u("cost").and_then(|c| u32::try_from(c).ok()).unwrap_or(1),
        next_count,
        acquired: u("acquired"),
        reads: u("reads").unwrap_or(1),
        unfinished,
        before_read,
        at_ms: v.get("at_ms").and_then(Value::as_i64).unwrap_or(0),
        stopped: v.get("stopped").and_then(Value::as_str).map(str::to_string),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_round_trip_and_can_be_forgotten() {
        let dir = std::env::temp_dir().join(format!("warren-ledger-{}", std::process::id()));
        let path = dir.join("w.db");
        let st = Store::open(&path).expect("store opens");
        assert_eq!(st.read_record("c/", "q").ok().flatten(), None);
        let r = ReadRecord {
            version: "4.0.5".into(),
            limit: Some(20),
            cost: 1,
            next_count: Some(7),
            acquired: None,
            reads: 7,
            unfinished: false,
            before_read: None,
            at_ms: 12,
            stopped: Some("near".into()),
        };
        st.put_read_record("c/", "q", Some(&r)).expect("written");
        assert_eq!(st.read_record("c/", "q").ok().flatten(), Some(r.clone()));
        assert_eq!(st.read_record("c/", "other").ok().flatten(), None);
        st.put_read_record("c/", "q", None).expect("forgotten");
        assert_eq!(st.read_record("c/", "q").ok().flatten(), None);
        let _ = std::fs::remove_dir_all(dir);
    }
}
