//! The message list's orders other than the queue's (`2`–`4`): each is a permutation of the
//! page's row indices, computed once per page and order, then only walked by the filter and a
//! reverse. A big page has all three computed between key presses once it is shown
//! (`tui::refresh`), so that the first press of an order walks one instead of sorting a
//! million rows; a small one computes an order when it is first asked for.

use super::detail;
use super::state::{MsgOrder, Row};

/// The page's permutations, 4 bytes a row each.
#[derive(Clone, Debug, Default)]
pub(crate) struct Orders {
    age: Option<Vec<u32>>,
    tries: Option<Vec<u32>>,
    reason: Option<Vec<u32>>,
}

impl Orders {
    fn slot(&mut self, order: MsgOrder) -> Option<&mut Option<Vec<u32>>> {
        match order {
            MsgOrder::Queue => None,
            MsgOrder::Age => Some(&mut self.age),
            MsgOrder::Tries => Some(&mut self.tries),
            MsgOrder::Reason => Some(&mut self.reason),
        }
    }

    /// `order`'s permutation of `rows`, computed now if it was not yet; `None` for the queue's
    /// own order (the rows as they are).
    pub(crate) fn of(&mut self, rows: &[Row], order: MsgOrder) -> Option<&[u32]> {
        let slot = self.slot(order)?;
        Some(slot.get_or_insert_with(|| permutation(rows, order)))
    }

    /// An order not computed yet, if any.
    pub(crate) fn missing(&self) -> Option<MsgOrder> {
        [
            (MsgOrder::Age, &self.age),
            (MsgOrder::Tries, &self.tries),
            (MsgOrder::Reason, &self.reason),
        ]
        .into_iter()
        .find_map(|(o, p)| p.is_none().then_some(o))
    }
}

/// Every row's index, in `order` (ties in queue order). A radix sort by a 4-byte key: a
/// million rows in a few milliseconds, where a comparison sort of 8-byte keys took 44–104 ms.
fn permutation(rows: &[Row], order: MsgOrder) -> Vec<u32> {
    let keys: Vec<u32> = match order {
        MsgOrder::Queue => return (0..rows.len() as u32).collect(),
        MsgOrder::Age => age_keys(rows),
        // Most attempts first.
        MsgOrder::Tries => rows
            .iter()
            .map(|r| u32::MAX - u32::try_from(r.attempts().max(0)).unwrap_or(u32::MAX))
            .collect(),
        MsgOrder::Reason => reason_ranks(rows),
    };
    // Key and index in one word: the sort moves 8 bytes a row, and reads no row.
    let mut keyed: Vec<u64> = keys
        .into_iter()
        .enumerate()
        .map(|(i, k)| (u64::from(k) << 32) | i as u64)
        .collect();
    // Stable, and the rows go in in queue order: ties keep it.
    radsort::sort_by_key(&mut keyed, |k| (k >> 32) as u32);
    keyed.into_iter().map(|k| k as u32).collect()
}

/// Oldest first: seconds after the page's earliest time it is dated by (the one rule,
/// `domain::arrival`); undated last.
fn age_keys(rows: &[Row]) -> Vec<u32> {
    let secs: Vec<Option<i64>> = rows
        .iter()
        .map(|r| r.dead_since().map(|t| t.as_second()))
        .collect();
    let min = secs.iter().flatten().min().copied().unwrap_or(0);
    secs.into_iter()
        .map(|s| match s {
            Some(s) => u32::try_from(s.saturating_sub(min))
                .unwrap_or(u32::MAX - 1)
                .min(u32::MAX - 1),
            None => u32::MAX,
        })
        .collect()
}

/// Each row's reason as a rank among the page's reasons (A to Z). Rows that failed alike share
/// their strings (`domain::brief`), so the distinct reasons are named and ranked once each.
fn reason_ranks(rows: &[Row]) -> Vec<u32> {
    type Id = (usize, usize);
    let id = |r: &Row| -> Id {
        (
            std::sync::Arc::as_ptr(&r.brief.common) as usize,
            r.brief
                .exception_message
                .as_ref()
                .map_or(0, |m| std::sync::Arc::as_ptr(m) as *const u8 as usize),
        )
    };
    let mut first: fnv::FnvHashMap<Id, usize> = Default::default();
    for (i, r) in rows.iter().enumerate() {
        first.entry(id(r)).or_insert(i);
    }
    let mut named: Vec<(String, Id)> = first
        .into_iter()
        .filter_map(|(k, i)| rows.get(i).map(|r| (detail::headline(r), k)))
        .collect();
    named.sort_unstable();
    // One rank per reason text: rows that share it keep their queue order.
    let mut rank: fnv::FnvHashMap<Id, u32> = Default::default();
    let mut n = 0u32;
    for (i, (text, k)) in named.iter().enumerate() {
        if i > 0 && named.get(i - 1).is_some_and(|(t, _)| t != text) {
            n += 1;
        }
        rank.insert(*k, n);
    }
    rows.iter()
        .map(|r| rank.get(&id(r)).copied().unwrap_or(u32::MAX))
        .collect()
}
