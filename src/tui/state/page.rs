//! The open queue's page: its rows, kept small, and the order, filter and groups in view.

use std::collections::HashMap;

use jiff::Timestamp;

use crate::domain::brief::{Brief, Interner, Seconds};
use crate::domain::convention::Conventions;
use crate::domain::discovery::QueueRef;
use crate::domain::explain::{self, Explanation};
use crate::domain::filter::Filter;
use crate::domain::grouping::GroupBy;
use crate::domain::identity;
use crate::domain::message::DeadLetter;
use crate::domain::packed::Packed;
use crate::local::spill::Letter;
use crate::tui::event::Ticket;

/// One browsed message, kept small: with a million browsed the list must fit in little memory
/// (see `examples/bench_big_dlq.rs`). It holds what the list, the filter and the groups need
/// (the [`Brief`], the key) and the message itself packed, in memory or, for a page read from
/// a broker in chunks, in the page's spill file (`local::spill`); [`Row::open`] reads and
/// explains the whole message again when the detail, the pager, a save or a custom command
/// needs it.
#[derive(Clone, Debug)]
pub struct Row {
    pub letter: Letter,
    pub brief: Brief,
    /// `identity::message_key`: what selection and replay use to name it. Inline up to 24
    /// bytes (an id such as `id:order-00000001`, a content hash), so that a page of a million
    /// holds no million small allocations.
    pub key: compact_str::CompactString,
    first_seen: Seconds,
    /// How many times Warren's audit says it replayed the message (see `explain::explain_with`).
    pub audited_replays: i64,
}

/// One message of the list opened: the whole message and what the domain says about it.
#[derive(Clone, Debug)]
pub struct Opened {
    pub msg: DeadLetter,
    pub exp: Explanation,
    pub key: String,
    pub first_seen: Option<Timestamp>,
}

impl Row {
    pub fn new(msg: DeadLetter, first_seen: Option<Timestamp>, own: &Conventions) -> Row {
        Row::with_replays(msg.into(), first_seen, own, 0, &mut Interner::default())
    }

    /// A row for a message Warren's audit says it replayed `audited_replays` times (see
    /// `explain::explain_with`); what it shares with other rows comes from `strings`. The
    /// packed message moves into the row as it is.
    pub fn with_replays(
        letter: Packed,
        first_seen: Option<Timestamp>,
        own: &Conventions,
        audited_replays: i64,
        strings: &mut Interner,
    ) -> Row {
        let msg = letter.unpack();
        let exp = explain::explain_with(&msg, own, audited_replays);
        Row {
            brief: Brief::new(&msg, &exp, strings),
            key: identity::message_key(&msg).into(),
            letter: letter.into(),
            first_seen: Seconds::new(first_seen),
            audited_replays,
        }
    }

    /// The row of a message the worker listed as it arrived (explained there, once).
    pub fn listed(l: crate::worker::protocol::Listed) -> Row {
        Row {
            letter: l.letter,
            brief: l.brief,
            key: l.key,
            first_seen: Seconds::new(l.first_seen),
            audited_replays: l.replays,
        }
    }

    /// The whole message, explained as it was when the row was made (`own` is the session's
    /// `[conventions]`, which the row was explained with).
    pub fn open(&self, own: &Conventions) -> Opened {
        let msg = self.letter.unpack();
        let exp = explain::explain_with(&msg, own, self.audited_replays);
        Opened {
            msg,
            exp,
            key: self.key.to_string(),
            first_seen: self.first_seen(),
        }
    }

    /// When Warren first saw it (from its store), to the second.
    pub fn first_seen(&self) -> Option<Timestamp> {
        self.first_seen.get()
    }

    /// When it first failed: the earliest death, else the framework's failure time.
    pub fn failed_at(&self) -> Option<Timestamp> {
        self.brief.failed_at()
    }

    /// When it reached its DLQ, by the one rule (`domain::arrival`).
    pub fn arrival(&self) -> crate::domain::arrival::Arrival {
        self.brief.arrival(self.first_seen())
    }

    /// The time it is dated by: the list's age, the sort and the filter language's `age`.
    pub fn dead_since(&self) -> Option<Timestamp> {
        self.arrival().since()
    }

    /// Attempts: the convention's retry counter, else the number of deaths recorded.
    pub fn attempts(&self) -> i64 {
        self.brief.attempts()
    }

    /// The id a person knows it by (`identity::shown_id`), not sanitised.
    pub fn shown_id(&self) -> Option<&str> {
        identity::shown_id_in_key(&self.key)
    }
}

/// The message list's order (`1`–`4` in the message list; the same key again reverses it).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum MsgOrder {
    /// As the queue holds them, head first.
    #[default]
    Queue,
    /// Longest in the dead-letter queue first (by the one rule: `domain::arrival`).
    Age,
    /// Most attempts first.
    Tries,
    /// By the reason shown (the exception, else the verdict), A to Z.
    Reason,
}

impl MsgOrder {
    /// How the pane title says it.
    pub fn words(self) -> &'static str {
        match self {
            MsgOrder::Queue => "queue order",
            MsgOrder::Age => "oldest first",
            MsgOrder::Tries => "most tries first",
            MsgOrder::Reason => "by reason",
        }
    }
}

/// One group: the messages in view that share a key under the grouping shown (by default their
/// fingerprint; see `domain::grouping`).
#[derive(Clone, Debug, PartialEq)]
pub struct Group {
    pub key: String,
    /// The aspect as recorded, which `--group` also accepts.
    pub value: String,
    pub summary: String,
    /// Indices into `Browse::rows`.
    pub rows: Vec<usize>,
    pub first: Option<Timestamp>,
    pub last: Option<Timestamp>,
}

/// The messages of the open queue.
#[derive(Clone, Debug)]
pub struct Browse {
    /// The queue's vhost and name: with every vhost listed, the name alone is not the queue.
    pub vhost: String,
    pub queue: String,
    pub rows: Vec<Row>,
    pub stop: String,
    /// Indices into `rows` that pass the filter, in the order shown (`MessageView::order`).
    pub visible: Vec<usize>,
    pub groups: Vec<Group>,
    /// The request this page answered: an older page never replaces it.
    pub ticket: Ticket,
    /// Some rows share a key (the same message id): a selection, which is of keys, takes
    /// every one of them.
    pub shared_keys: bool,
    /// Who ran each run the page's messages came back from, by run id (see
    /// `domain::comeback`).
    pub authors: HashMap<String, String>,
    /// What the groups shown were made by, and the filter the rows shown passed: while a new
    /// view is being made, these (not `MessageView::group_by` and `Filtering::filter`, already
    /// the new ones) are what a pick of a group or a note on one means.
    pub grouped_by: GroupBy,
    pub filtered_by: Option<Filter>,
    /// The page's other orders (`tui::orders`).
    pub(crate) orders: crate::tui::orders::Orders,
    /// The view being made, for a big page (`tui::refresh`); `visible` and `groups` are the
    /// last whole one until it is done.
    pub(crate) job: Option<crate::tui::refresh::ViewJob>,
}

impl Browse {
    /// Puts the rows in `visible` in `order`: the order's permutation (`tui::orders`) is
    /// walked, keeping the rows `visible` holds; rows are never moved, and neither the filter
    /// nor the groups are computed again.
    pub(crate) fn arrange(&mut self, order: MsgOrder, reverse: bool) {
        let perm = self.orders.of(&self.rows, order);
        let n = self.rows.len();
        let all = (0..n).map(|i| i as u32);
        let base: Box<dyn Iterator<Item = u32> + '_> = match perm {
            Some(p) => Box::new(p.iter().copied()),
            None => Box::new(all),
        };
        self.visible = if self.visible.len() == n {
            base.map(|i| i as usize).collect()
        } else {
            let mut passes = vec![false; n];
            for &i in &self.visible {
                if let Some(p) = passes.get_mut(i) {
                    *p = true;
                }
            }
            base.map(|i| i as usize)
                .filter(|&i| passes.get(i).copied().unwrap_or(false))
                .collect()
        };
        if reverse {
            self.visible.reverse();
        }
    }

    /// How far the view being made is, in percent; `None` when the view shown is the whole
    /// one (`tui::refresh`).
    pub fn updating(&self) -> Option<usize> {
        self.job.as_ref().map(|j| j.percent(self.rows.len()))
    }

    /// The open queue's identity.
    pub fn id(&self) -> QueueRef {
        QueueRef::new(&self.vhost, &self.queue)
    }

    /// Whether this is the page of `queue` in `vhost`.
    pub fn is(&self, vhost: &str, queue: &str) -> bool {
        self.queue == queue && self.vhost == vhost
    }
}

/// A page arriving in chunks from the worker (`Report::MessagesChunk`), shown once its last
/// part came (`Report::MessagesLoaded`).
#[derive(Clone, Debug)]
pub struct Arriving {
    pub vhost: String,
    pub queue: String,
    pub ticket: Ticket,
    pub rows: Vec<Row>,
}
