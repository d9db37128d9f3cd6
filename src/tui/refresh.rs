//! The message list's view (the rows that pass the filter, their groups, their order), made
//! again when the filter, the grouping or the rows change. A big page is done in slices
//! between key presses (`Event::Idle`, sent by the loop whenever nothing else is waiting), so
//! that typing, moving and sorting stay within a frame while a million bodies are read back
//! from the spill file: the list keeps showing the view it had, and says how far the new one
//! is, until the new one is whole. A small page is done at once.

use std::borrow::Cow;
use std::time::{Duration, Instant};

use jiff::Timestamp;

use super::state::{Browse, Group, Row, State};
use crate::domain::filter::Filter;
use crate::domain::grouping::{self, GroupBy, Partition, WaitQueues};
use crate::domain::value::Table;

/// Rows tested in one slice, at most: a few milliseconds when each body is read back from the
/// file.
const SLICE_ROWS: usize = 4_096;
/// A slice also ends once it has taken this long (checked every 256 rows), so that on a
/// loaded machine a key still waits no more than a frame.
const SLICE_TIME: Duration = Duration::from_millis(8);
/// A page of more rows than this is viewed in slices, and has its orders made ahead.
pub const SLICED_ABOVE: usize = 10_000;

/// A view being made: what it was asked with, and how far it is.
#[derive(Clone, Debug)]
pub(crate) struct ViewJob {
    now: Timestamp,
    waits: WaitQueues,
    filter: Option<Filter>,
    /// The headers the filter names: only those are decoded.
    header_names: Vec<String>,
    /// Whether a spilled message must be read back (the filter looks at more than the list).
    reads_letter: bool,
    by: GroupBy,
    next: usize,
    visible: Vec<usize>,
    groups: Partition<String>,
    /// Each group's earliest and latest time it is dated by, by its place in `groups`.
    times: Vec<(Option<Timestamp>, Option<Timestamp>)>,
}

impl ViewJob {
    fn new(state: &State) -> ViewJob {
        let filter = state.filtering.filter.clone();
        let header_names: Vec<String> = filter
            .as_ref()
            .map(|f| f.header_names().into_iter().map(str::to_owned).collect())
            .unwrap_or_default();
        let reads_letter =
            filter.as_ref().is_some_and(Filter::reads_body) || !header_names.is_empty();
        ViewJob {
            now: state.now,
            waits: state.wait_queues(),
            filter,
            header_names,
            reads_letter,
            by: state.msgs.group_by,
            next: 0,
            visible: Vec::new(),
            groups: Partition::default(),
            times: Vec::new(),
        }
    }

    /// How far it is, in percent of the page's rows.
    pub(crate) fn percent(&self, rows: usize) -> usize {
        (self.next * 100).checked_div(rows).unwrap_or(100)
    }

    /// Tests the next `n` rows and groups those that pass; says whether every row is done.
    fn run(&mut self, rows: &[Row], n: usize, budget: Option<Duration>) -> bool {
        let began = Instant::now();
        let end = self.next.saturating_add(n).min(rows.len());
        while self.next < end {
            let stop = (self.next + 256).min(end);
            for i in self.next..stop {
                self.test(rows, i);
            }
            self.next = stop;
            if budget.is_some_and(|b| began.elapsed() >= b) {
                break;
            }
        }
        self.next >= rows.len()
    }

    /// Row `i`: kept, and grouped, if it passes.
    fn test(&mut self, rows: &[Row], i: usize) {
        let Some(r) = rows.get(i) else {
            return;
        };
        if self.passes(r) {
            self.visible.push(i);
            let g = match grouping::key_of_facets(self.by, &r.brief.facets(), &self.waits) {
                Cow::Borrowed(k) => self.groups.push_borrowed(k, i),
                Cow::Owned(k) => self.groups.push(k, i),
            };
            if self.times.len() <= g {
                self.times.resize(g + 1, (None, None));
            }
            if let (Some(t), Some(span)) = (r.dead_since(), self.times.get_mut(g)) {
                span.0 = Some(span.0.map_or(t, |f| f.min(t)));
                span.1 = Some(span.1.map_or(t, |l| l.max(t)));
            }
        }
    }

    fn passes(&self, r: &Row) -> bool {
        let Some(f) = &self.filter else {
            return true;
        };
        let age = r.dead_since().map(|t| {
            u64::try_from(self.now.as_second().saturating_sub(t.as_second())).unwrap_or(0)
        });
        let letter = self.reads_letter.then(|| r.letter.packed().ok()).flatten();
        // Headers stay packed but for those the filter names.
        let named = (!self.header_names.is_empty()).then(|| {
            letter.as_ref().map(|p| {
                p.headers_named(|k| self.header_names.iter().any(|n| k.eq_ignore_ascii_case(n)))
            })
        });
        let no_headers = Table::new();
        let headers = named.flatten();
        let headers = headers.as_ref().unwrap_or(&no_headers);
        let body = letter.as_ref().map_or(&[][..], |p| p.body());
        f.matches(&r.brief.subject(headers, body, age))
    }

    /// The groups, biggest first, ties by first failure, then key.
    fn finish(self, rows: &[Row]) -> (Vec<usize>, Vec<Group>) {
        let (by, waits, times) = (self.by, self.waits, self.times);
        let mut groups: Vec<Group> = self
            .groups
            .finish()
            .into_iter()
            .zip(times)
            .filter_map(|((_, members), (first, last))| {
                let first_row = members.first().and_then(|&i| rows.get(i))?;
                let k = grouping::group_key_of(by, &first_row.brief.facets(), &waits);
                Some(Group {
                    key: k.key,
                    value: k.value,
                    summary: k.summary,
                    rows: members,
                    first,
                    last,
                })
            })
            .collect();
        groups.sort_by(|a, b| {
            b.rows
                .len()
                .cmp(&a.rows.len())
                .then(a.first.cmp(&b.first))
                .then(a.key.cmp(&b.key))
        });
        (self.visible, groups)
    }
}

impl State {
    /// Makes the view again after the rows, the filter or the grouping changed: at once for a
    /// small page, in slices (`idle_step`) for a big one.
    pub fn refresh_view(&mut self) {
        let big = self
            .msgs
            .browse
            .as_ref()
            .is_some_and(|b| b.rows.len() > SLICED_ABOVE);
        self.start_view();
        if !big {
            self.view_slice(usize::MAX, None);
        }
    }

    /// Makes the view again, whole, before returning (a page just shown has no view to keep).
    pub fn refresh_view_now(&mut self) {
        self.start_view();
        self.view_slice(usize::MAX, None);
    }

    fn start_view(&mut self) {
        self.filtering.pending = false;
        let job = ViewJob::new(self);
        if let Some(b) = self.msgs.browse.as_mut() {
            b.job = Some(job);
        }
    }

    /// Whether the list has work left for the loop's idle moments.
    pub fn has_idle_work(&self) -> bool {
        self.msgs
            .browse
            .as_ref()
            .is_some_and(|b| b.job.is_some() || (b.rows.len() > SLICED_ABOVE && b.orders.unmade()))
    }

    /// One slice of the list's work: the view being made, else an order of a big page not
    /// made yet.
    pub fn idle_step(&mut self) {
        let Some(b) = self.msgs.browse.as_mut() else {
            return;
        };
        if b.job.is_some() {
            self.view_slice(SLICE_ROWS, Some(SLICE_TIME));
        } else if b.rows.len() > SLICED_ABOVE {
            b.orders.make_some(&b.rows, SLICE_ROWS, SLICE_TIME);
        }
    }

    /// Tests `n` more rows of the view being made; once all are, shows it.
    fn view_slice(&mut self, n: usize, budget: Option<Duration>) {
        let (order, reverse) = (self.msgs.order, self.msgs.order_reverse);
        let Some(b) = self.msgs.browse.as_mut() else {
            return;
        };
        let Some(job) = b.job.as_mut() else {
            return;
        };
        let before = job.percent(b.rows.len());
        if !job.run(&b.rows, n, budget) {
            self.dirty |= job.percent(b.rows.len()) != before;
            return;
        }
        if let Some(job) = b.job.take() {
            install(b, job, order, reverse);
        }
        self.msgs.cursor = self.msgs.cursor.min(b.visible.len().saturating_sub(1));
        self.msgs.group_cursor = self.msgs.group_cursor.min(b.groups.len().saturating_sub(1));
        self.dirty = true;
    }
}

fn install(b: &mut Browse, job: ViewJob, order: super::state::MsgOrder, reverse: bool) {
    b.grouped_by = job.by;
    b.filtered_by = job.filter.clone();
    let (visible, groups) = job.finish(&b.rows);
    b.visible = visible;
    b.groups = groups;
    b.arrange(order, reverse);
}
