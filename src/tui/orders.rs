//! The message list's orders other than the queue's (`2`–`4`): each is a permutation of the
//! page's row indices, computed once per page and order, then only walked by the filter and a
//! reverse. A big page has all three computed between key presses once it is shown
//! (`tui::refresh`), so that the first press of an order walks one instead of sorting a
//! million rows; a small one computes an order when it is first asked for.

use super::detail;
use super::state::{MsgOrder, Row};

/// The page's permutations, 4 bytes a row each, and the one being made.
#[derive(Clone, Debug, Default)]
pub(crate) struct Orders {
    age: Option<Vec<u32>>,
    tries: Option<Vec<u32>>,
    reason: Option<Vec<u32>>,
    making: Option<Making>,
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

    /// `order`'s permutation of `rows`, made now if it was not yet; `None` for the queue's
    /// own order (the rows as they are).
    pub(crate) fn of(&mut self, rows: &[Row], order: MsgOrder) -> Option<&[u32]> {
        let made = self.slot(order)?.is_some();
        if !made {
            // Asked for before the idle moments made it: made whole now, from what they made.
            let mut m = match self.making.take() {
                Some(m) if m.order == order => m,
                other => {
                    self.making = other;
                    Making::new(order)
                }
            };
            m.keys_of(rows, usize::MAX, None);
            let perm = m.sorted();
            *self.slot(order)? = Some(perm);
        }
        self.slot(order)?.as_deref()
    }

    /// Whether an order is still to be made.
    pub(crate) fn unmade(&self) -> bool {
        self.age.is_none() || self.tries.is_none() || self.reason.is_none()
    }

    /// A step of making the orders not made yet: the keys of `n` more rows (at most
    /// `budget` long), or, once every row's are known, the sort.
    pub(crate) fn make_some(&mut self, rows: &[Row], n: usize, budget: std::time::Duration) {
        let m = match self.making.take() {
            Some(m) => m,
            None => match [MsgOrder::Age, MsgOrder::Tries, MsgOrder::Reason]
                .into_iter()
                .find(|&o| self.slot(o).is_some_and(|s| s.is_none()))
            {
                Some(o) => Making::new(o),
                None => return,
            },
        };
        let mut m = m;
        if m.next < rows.len() {
            m.keys_of(rows, n, Some(budget));
            self.making = Some(m);
            return;
        }
        // Then the sort, in three steps of a few milliseconds each at a million.
        match m.keyed.take() {
            None => m.keyed = Some((m.pack(), false)),
            Some((mut keyed, false)) => {
                sort(&mut keyed);
                m.keyed = Some((keyed, true));
            }
            Some((keyed, true)) => {
                if let Some(slot) = self.slot(m.order) {
                    *slot = Some(unpack(keyed));
                }
                return;
            }
        }
        self.making = Some(m);
    }
}

/// An order being made: each row's 4-byte key, a slice at a time, then the radix sort in three
/// steps (pack, sort, unpack).
#[derive(Clone, Debug)]
struct Making {
    order: MsgOrder,
    next: usize,
    keys: Vec<u32>,
    /// The keys packed with their rows' indices, and whether they are sorted yet.
    keyed: Option<(Vec<u64>, bool)>,
    /// Age: the seconds keys count from (the first dated row's, less 2^31).
    base: Option<i64>,
    /// Reason: each distinct reason's number in first appearance, named and ranked at the sort.
    reasons: fnv::FnvHashMap<(usize, usize), u32>,
    named: Vec<String>,
}

impl Making {
    fn new(order: MsgOrder) -> Making {
        Making {
            order,
            next: 0,
            keys: Vec::new(),
            keyed: None,
            base: None,
            reasons: Default::default(),
            named: Vec::new(),
        }
    }

    /// The keys of up to `n` more rows, stopping early once `budget` is spent.
    fn keys_of(&mut self, rows: &[Row], n: usize, budget: Option<std::time::Duration>) {
        let began = std::time::Instant::now();
        let end = self.next.saturating_add(n).min(rows.len());
        self.keys.reserve(end - self.next);
        let mut i = self.next;
        while i < end {
            let stop = (i + 256).min(end);
            for r in rows.get(i..stop).unwrap_or_default() {
                let k = self.key(r);
                self.keys.push(k);
            }
            i = stop;
            if budget.is_some_and(|b| began.elapsed() >= b) {
                break;
            }
        }
        self.next = i;
    }

    fn key(&mut self, r: &Row) -> u32 {
        match self.order {
            MsgOrder::Queue => 0,
            // Oldest first; undated last.
            MsgOrder::Age => match r.dead_since() {
                Some(t) => {
                    let base = *self.base.get_or_insert(t.as_second() - (1 << 31));
                    u32::try_from(t.as_second().saturating_sub(base).max(0))
                        .unwrap_or(u32::MAX - 1)
                        .min(u32::MAX - 1)
                }
                None => u32::MAX,
            },
            // Most attempts first.
            MsgOrder::Tries => u32::MAX - u32::try_from(r.attempts().max(0)).unwrap_or(u32::MAX),
            MsgOrder::Reason => {
                let id = reason_id(r);
                let n = self.named.len() as u32;
                *self.reasons.entry(id).or_insert_with(|| {
                    self.named.push(detail::headline(r));
                    n
                })
            }
        }
    }

    /// The permutation, made at once.
    fn sorted(mut self) -> Vec<u32> {
        let (mut keyed, done) = match self.keyed.take() {
            Some(k) => k,
            None => (self.pack(), false),
        };
        if !done {
            sort(&mut keyed);
        }
        unpack(keyed)
    }

    /// Each row's key and index in one word (the sort then moves 8 bytes a row and reads no
    /// row); a reason's number becomes its rank.
    fn pack(&mut self) -> Vec<u64> {
        let rank = ranks(&self.named);
        let reason = self.order == MsgOrder::Reason;
        std::mem::take(&mut self.keys)
            .into_iter()
            .enumerate()
            .map(|(i, k)| {
                let k = if reason {
                    rank.get(k as usize).copied().unwrap_or(u32::MAX)
                } else {
                    k
                };
                (u64::from(k) << 32) | i as u64
            })
            .collect()
    }
}

/// By key, stable: the rows went in in queue order, so ties keep it.
fn sort(keyed: &mut [u64]) {
    radsort::sort_by_key(keyed, |k| (k >> 32) as u32);
}

fn unpack(keyed: Vec<u64>) -> Vec<u32> {
    keyed.into_iter().map(|k| k as u32).collect()
}

/// Rows that failed alike share their strings (`domain::brief`): a reason is known by them.
fn reason_id(r: &Row) -> (usize, usize) {
    (
        std::sync::Arc::as_ptr(&r.brief.common) as usize,
        r.brief
            .exception_message
            .as_ref()
            .map_or(0, |m| std::sync::Arc::as_ptr(m) as *const u8 as usize),
    )
}

/// Each reason's rank among `named` (A to Z), by its number; the same text, the same rank.
fn ranks(named: &[String]) -> Vec<u32> {
    let mut by_text: Vec<u32> = (0..named.len() as u32).collect();
    by_text.sort_by(|&a, &b| named.get(a as usize).cmp(&named.get(b as usize)));
    let mut rank = vec![0u32; named.len()];
    let mut n = 0u32;
    for (j, w) in by_text.iter().enumerate() {
        if j > 0 && named.get(by_text[j - 1] as usize) != named.get(*w as usize) {
            n += 1;
        }
        if let Some(r) = rank.get_mut(*w as usize) {
            *r = n;
        }
    }
    rank
}
