//! The one owner of UI state. Background tasks never hold any of it; `update` changes it and
//! `view` reads it. Derived data (the filtered view, the failure groups) is recomputed here when
//! its inputs change, so `view` only draws.

use std::borrow::Cow;
use std::collections::{BTreeMap, HashMap, HashSet};

use jiff::Timestamp;
use ratatui::text::Line;
use ratatui_textarea::TextArea;

use super::custom::{self, CustomCommand};
use super::detail::{self, DetailKey, Rendered};
use super::event::{
    ConnectionState, Overview, ReplayOutcome, ReplayPreview, ReplayProgress, Ticket,
};
use super::oplog::OpLog;
use super::pager::Pager;
use super::theme::Theme;
use crate::domain::convention::Conventions;
use crate::domain::discovery::{Discovery, DlqInfo, QueueSummary};
use crate::domain::explain::{self, Explanation};
use crate::domain::filter::Filter;
use crate::domain::identity;
use crate::domain::message::DeadLetter;
use crate::domain::selection;

/// Above this many messages the operator types the count to confirm a replay.
pub const TYPED_CONFIRM_ABOVE: u64 = 100;
/// Rates offered by `+`/`-` (messages per second).
pub const RATE_STEPS: &[u32] = &[1, 2, 5, 10, 20, 50, 100, 200, 500, 1000];
/// The replay modal's starting rate when `replay.rate` is not configured.
pub const DEFAULT_RATE: u32 = 50;
/// Messages read per queue when `browse.page_size` is not configured.
pub const DEFAULT_BROWSE_LIMIT: usize = crate::broker::config::DEFAULT_PAGE_SIZE;
/// Why replay is off when Warren was started read-only, before the worker said more.
pub const FLAG_READ_ONLY_REASON: &str = "replay is disabled: Warren runs read-only (--read-only)";
/// Depths older than this are marked stale in the status bar.
pub const STALE_AFTER_SECS: i64 = 30;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Focus {
    Queues,
    Messages,
    Detail,
}

/// What the message pane lists.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ListMode {
    Messages,
    Groups,
}

/// One browsed message with what the domain says about it, computed once on arrival.
#[derive(Clone, Debug)]
pub struct Row {
    pub msg: DeadLetter,
    pub exp: Explanation,
    /// `identity::message_key`: what selection and replay use to name it.
    pub key: String,
    pub first_seen: Option<Timestamp>,
}

impl Row {
    pub fn new(msg: DeadLetter, first_seen: Option<Timestamp>, own: &Conventions) -> Row {
        Row::with_replays(msg, first_seen, own, 0)
    }

    /// A row for a message Warren's audit says it replayed `audited_replays` times (see
    /// `explain::explain_with`).
    pub fn with_replays(
        msg: DeadLetter,
        first_seen: Option<Timestamp>,
        own: &Conventions,
        audited_replays: i64,
    ) -> Row {
        let exp = explain::explain_with(&msg, own, audited_replays);
        let key = identity::message_key(&msg);
        Row {
            msg,
            exp,
            key,
            first_seen,
        }
    }

    /// When it first failed: the earliest death, else the framework's failure time.
    pub fn failed_at(&self) -> Option<Timestamp> {
        self.exp
            .deaths
            .entries
            .iter()
            .filter_map(|d| d.time)
            .min()
            .or(self.exp.failed_at)
    }

    /// Since when it has been dead as far as Warren knows: first seen, else first failure
    /// (the filter language's `age`).
    pub fn dead_since(&self) -> Option<Timestamp> {
        self.first_seen.or_else(|| self.failed_at())
    }

    /// Attempts: the convention's retry counter, else the number of deaths recorded.
    pub fn attempts(&self) -> i64 {
        self.exp.retries.unwrap_or_else(|| {
            self.exp
                .deaths
                .entries
                .iter()
                .map(|d| d.times())
                .sum::<i64>()
                .max(1)
        })
    }
}

/// One failure group: the messages in view that share a fingerprint.
#[derive(Clone, Debug, PartialEq)]
pub struct Group {
    pub key: String,
    pub summary: String,
    /// Indices into `Browse::rows`.
    pub rows: Vec<usize>,
    pub first: Option<Timestamp>,
    pub last: Option<Timestamp>,
}

/// The messages of the open queue.
#[derive(Clone, Debug)]
pub struct Browse {
    pub queue: String,
    pub rows: Vec<Row>,
    pub stop: String,
    /// Indices into `rows` that pass the filter, in queue order.
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
}

#[derive(Clone, Debug)]
pub struct FilterInput {
    pub input: TextArea<'static>,
    /// The filter that was in force when the input opened, restored by Esc.
    pub before: Option<(String, Filter)>,
}

/// Which field of the replay modal takes typed digits.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ModalField {
    Count,
    Rate,
}

#[derive(Clone, Debug)]
pub struct ReplayModal {
    pub queue: String,
    pub selection: selection::Selection,
    /// What the operator picked, in words ("2 selected messages", "group …").
    pub what: String,
    /// The worker's plan; accept is impossible until it arrived.
    pub preview: Option<ReplayPreview>,
    pub rate: u32,
    pub rate_text: String,
    pub keep_attempts: bool,
    pub dry_run: bool,
    /// The count typed by the operator (required above `TYPED_CONFIRM_ABOVE`).
    pub typed: String,
    pub field: ModalField,
}

impl ReplayModal {
    pub fn count(&self) -> Option<u64> {
        self.preview.as_ref().map(|p| p.count)
    }

    pub fn needs_typed_count(&self) -> bool {
        !self.dry_run && self.count().is_some_and(|c| c > TYPED_CONFIRM_ABOVE)
    }

    /// What Enter does now, in the one word the modal and the footer both show: in the rate
    /// field it only leaves the field, so a typed rate never starts the run.
    pub fn enter_does(&self) -> &'static str {
        match (self.field, self.dry_run) {
            (ModalField::Rate, _) => "set rate",
            (ModalField::Count, true) => "dry run",
            (ModalField::Count, false) => "replay",
        }
    }

    /// Why Enter does nothing yet, if it does nothing.
    pub fn blocked(&self) -> Option<String> {
        let Some(count) = self.count() else {
            return Some("waiting for the replay plan…".into());
        };
        if count == 0 {
            return Some("nothing to replay: the selection is empty".into());
        }
        if self.rate == 0 {
            return Some("set a rate of at least 1 msg/s".into());
        }
        if self.needs_typed_count() && self.typed != count.to_string() {
            return Some(format!("type {count} to confirm"));
        }
        None
    }
}

#[derive(Clone, Debug)]
pub struct ReplayRun {
    pub queue: String,
    pub dry_run: bool,
    pub rate: u32,
    pub progress: ReplayProgress,
    pub cancelling: bool,
    pub outcome: Option<ReplayOutcome>,
}

/// A `:ctx` or `:vhost` the worker is trying: until it answers, the screen shows the old place.
#[derive(Clone, Debug, PartialEq)]
pub struct Switching {
    /// The generation the new place's answers will carry.
    pub generation: u64,
    /// Where to, in words: "context staging", "vhost /billing".
    pub to: String,
}

#[derive(Clone, Debug)]
pub enum Overlay {
    None,
    Help,
    /// The command log (`@`), scrolled this many entries from the newest.
    Log(u16),
    /// The Replays view (`R`), scrolled this many runs from the newest.
    Replays(u16),
    Replay(Box<ReplayModal>),
    Progress(Box<ReplayRun>),
    /// The full-screen pager on a body or a stack trace.
    Pager(Box<Pager>),
}

#[derive(Clone, Debug)]
pub struct State {
    /// The clock as of the last event: ages are computed from it, never from the system clock.
    pub now: Timestamp,
    /// No replay in the place shown: the command line's `--read-only`, or what the worker says
    /// of this place (`Overview::read_only`). Decided again for each place, never carried over.
    pub read_only: bool,
    /// Why replay is off, in words (shown in the banner when a replay key is pressed).
    pub read_only_reason: String,
    /// `--read-only` (or a snapshot): read-only wherever Warren goes.
    pub read_only_flag: bool,
    pub theme: Theme,
    pub overview: Overview,
    /// The session generation shown: a switch's, once it succeeded; answers from an older one
    /// are dropped (see `event::Ticket`).
    pub generation: u64,
    /// The highest generation handed out (a failed switch's is not used again).
    pub(crate) last_generation: u64,
    /// A switch under way (see [`Switching`]).
    pub switching: Option<Switching>,
    pub connection: ConnectionState,
    pub discovery: Discovery,
    pub queues_loaded: bool,
    pub depths_at: Option<Timestamp>,
    pub show_ordinary: bool,
    pub queue_cursor: usize,
    pub focus: Focus,
    pub list_mode: ListMode,
    pub browse_limit: usize,
    /// `[conventions]` from the config file: how a team's own ladder is read.
    pub conventions: Conventions,
    /// The rate the replay modal starts at (`replay.rate`, else [`DEFAULT_RATE`]).
    pub replay_rate: u32,
    /// The queue being browsed right now.
    pub loading: Option<String>,
    /// A quorum queue whose browse would spend deliveries: a second Enter confirms.
    pub pending_browse: Option<String>,
    /// A queue whose read would spend deliveries again: the same key again confirms.
    pub pending_reread: Option<String>,
    /// A queue the operator asked to protect: the same key again confirms.
    pub pending_protect: Option<String>,
    pub browse: Option<Browse>,
    pub msg_cursor: usize,
    pub group_cursor: usize,
    /// Picked messages, by key.
    pub selected: HashSet<String>,
    /// Where `V` extends a range from: the position in view of the last toggle.
    pub anchor: Option<usize>,
    pub filter_text: String,
    pub filter: Option<Filter>,
    pub filter_error: Option<String>,
    /// The filter changed but a large list has not been narrowed yet (see `FILTER_SETTLE`).
    pub filter_pending: bool,
    pub filter_input: Option<FilterInput>,
    pub command_input: Option<TextArea<'static>>,
    pub detail_scroll: u16,
    pub trace_open: bool,
    /// The detail pane's lines for the message under the cursor, rendered by `update` when the
    /// message or what its lines depend on changes (see `refresh_detail`), so that neither a
    /// scroll key nor a frame parses and pretty-prints its body again.
    pub detail: Option<Rendered>,
    /// Bumped whenever the rows or the discovery are replaced: the detail cache's notion of
    /// "the same content".
    pub(crate) content_serial: u64,
    pub overlay: Overlay,
    /// Every broker operation of this session (the last `oplog::CAP`).
    pub oplog: OpLog,
    /// The Replays view's runs and what could not be reached; `None` while loading.
    pub replay_runs: Option<(Vec<crate::worker::protocol::RunSummary>, Vec<String>)>,
    /// `[[commands]]` from the config, checked against the key table at startup.
    pub custom_commands: Vec<CustomCommand>,
    /// A custom command `update` decided to run: the loop takes it, hands the terminal over,
    /// runs it and takes the terminal back.
    pub handover: Option<custom::Run>,
    /// A save `update` decided on (`Ctrl-S`, `S`): the loop, which has the frame, performs it.
    pub save: Option<super::save::Save>,
    /// The first line of the help overlay in view.
    pub help_scroll: u16,
    /// The terminal's size (columns, rows) as last reported (80×24 until it is): the pager lays
    /// its text out for it, the help scrolls within it.
    pub screen: (u16, u16),
    /// The banner shows its whole text (`w`), not only its first lines.
    pub banner_whole: bool,
    pub error: Option<String>,
    pub notice: Option<String>,
    pub quit: bool,
    pub(crate) dirty: bool,
}

impl State {
    pub fn new(now: Timestamp, read_only: bool, theme: Theme) -> State {
        State {
            now,
            read_only,
            read_only_reason: if read_only {
                FLAG_READ_ONLY_REASON.into()
            } else {
                String::new()
            },
            read_only_flag: read_only,
            theme,
            overview: Overview::default(),
            generation: 0,
            last_generation: 0,
            switching: None,
            connection: ConnectionState::Connecting,
            discovery: Discovery::default(),
            queues_loaded: false,
            depths_at: None,
            show_ordinary: false,
            queue_cursor: 0,
            focus: Focus::Queues,
            list_mode: ListMode::Messages,
            browse_limit: DEFAULT_BROWSE_LIMIT,
            conventions: Conventions::default(),
            replay_rate: DEFAULT_RATE,
            loading: None,
            pending_browse: None,
            pending_reread: None,
            pending_protect: None,
            browse: None,
            msg_cursor: 0,
            group_cursor: 0,
            selected: HashSet::new(),
            anchor: None,
            filter_text: String::new(),
            filter: None,
            filter_error: None,
            filter_pending: false,
            filter_input: None,
            command_input: None,
            detail_scroll: 0,
            trace_open: false,
            detail: None,
            content_serial: 0,
            overlay: Overlay::None,
            oplog: OpLog::default(),
            replay_runs: None,
            custom_commands: Vec::new(),
            handover: None,
            save: None,
            help_scroll: 0,
            screen: (80, 24),
            banner_whole: false,
            error: None,
            notice: None,
            quit: false,
            dirty: true,
        }
    }

    /// True once after anything visible changed; the loop draws only then.
    pub fn take_dirty(&mut self) -> bool {
        std::mem::take(&mut self.dirty)
    }

    /// The rows of the queue list: dead-letter queues first, ordinary queues when toggled on.
    pub fn queue_rows(&self) -> Vec<QueueRow<'_>> {
        let mut rows: Vec<QueueRow<'_>> = self
            .discovery
            .dead_letter_queues
            .iter()
            .map(QueueRow::Dlq)
            .collect();
        if self.show_ordinary {
            rows.extend(self.discovery.other_queues.iter().map(QueueRow::Other));
        }
        rows
    }

    pub fn queue_name_at_cursor(&self) -> Option<String> {
        self.queue_rows()
            .get(self.queue_cursor)
            .map(|r| r.name().to_string())
    }

    pub fn dlq(&self, name: &str) -> Option<&DlqInfo> {
        self.discovery.dlq(name)
    }

    /// The rows in view, in order.
    pub fn visible_rows(&self) -> Vec<&Row> {
        match &self.browse {
            Some(b) => b.visible.iter().filter_map(|&i| b.rows.get(i)).collect(),
            None => Vec::new(),
        }
    }

    /// The message under the cursor (in group mode: the first message of the group).
    pub fn current_row(&self) -> Option<&Row> {
        let b = self.browse.as_ref()?;
        self.current_index().and_then(|i| b.rows.get(i))
    }

    /// Where the message under the cursor is in `Browse::rows`.
    fn current_index(&self) -> Option<usize> {
        let b = self.browse.as_ref()?;
        match self.list_mode {
            ListMode::Messages => b.visible.get(self.msg_cursor).copied(),
            ListMode::Groups => b
                .groups
                .get(self.group_cursor)
                .and_then(|g| g.rows.first())
                .copied(),
        }
    }

    /// What the detail of the message under the cursor depends on, when there is one.
    fn detail_key(&self) -> Option<DetailKey> {
        let row = self.current_index()?;
        self.browse.as_ref()?.rows.get(row)?;
        Some(DetailKey {
            content: self.content_serial,
            row,
            trace_open: self.trace_open,
            day: self.now.as_second().div_euclid(86_400),
            theme: self.theme,
        })
    }

    /// Renders the detail of the message under the cursor unless what is cached is it already.
    /// Called by `update` after every event; cheap when nothing it depends on changed.
    pub fn refresh_detail(&mut self) {
        let Some(key) = self.detail_key() else {
            self.detail = None;
            return;
        };
        if self.detail.as_ref().is_some_and(|d| d.key == key) {
            return;
        }
        let lines = self.current_row().map(|r| detail::lines(self, r));
        self.detail = lines.map(|lines| Rendered { key, lines });
    }

    /// The detail pane's lines: what `update` rendered, or, for a state changed without it (a
    /// test setting the theme), rendered now so the pane is never out of date.
    pub fn detail_lines(&self) -> Option<Cow<'_, [Line<'static>]>> {
        let key = self.detail_key()?;
        match &self.detail {
            Some(d) if d.key == key => Some(Cow::Borrowed(&d.lines)),
            _ => self
                .current_row()
                .map(|r| Cow::Owned(detail::lines(self, r))),
        }
    }

    pub fn current_group(&self) -> Option<&Group> {
        self.browse.as_ref()?.groups.get(self.group_cursor)
    }

    /// Length of the list the message pane shows.
    pub fn list_len(&self) -> usize {
        match (&self.browse, self.list_mode) {
            (None, _) => 0,
            (Some(b), ListMode::Messages) => b.visible.len(),
            (Some(b), ListMode::Groups) => b.groups.len(),
        }
    }

    /// How many messages the selection takes: one per picked key, unless messages share a key
    /// (the same message id), when a replay takes each of them, so each counts.
    pub fn selected_messages(&self) -> usize {
        match &self.browse {
            Some(b) if b.shared_keys => b
                .rows
                .iter()
                .filter(|r| self.selected.contains(&r.key))
                .count(),
            _ => self.selected.len(),
        }
    }

    /// Messages of the page with `key` (more than one when they share a message id).
    pub fn messages_with_key(&self, key: &str) -> usize {
        match &self.browse {
            Some(b) if b.shared_keys => b.rows.iter().filter(|r| r.key == key).count(),
            _ => 1,
        }
    }

    pub fn replay_running(&self) -> bool {
        matches!(&self.overlay, Overlay::Progress(run) if run.outcome.is_none())
    }

    /// How long ago `t` was, in whole seconds (never negative).
    pub fn secs_since(&self, t: Timestamp) -> u64 {
        u64::try_from(self.now.as_second().saturating_sub(t.as_second())).unwrap_or(0)
    }

    /// Recomputes the filtered view and the groups after the rows or the filter changed, and
    /// keeps the cursors in range.
    pub fn refresh_view(&mut self) {
        self.filter_pending = false;
        let now = self.now;
        let Some(b) = self.browse.as_mut() else {
            return;
        };
        b.visible = b
            .rows
            .iter()
            .enumerate()
            .filter(|(_, r)| match &self.filter {
                None => true,
                Some(f) => {
                    let age = r.dead_since().map(|t| {
                        u64::try_from(now.as_second().saturating_sub(t.as_second())).unwrap_or(0)
                    });
                    f.matches(&selection::subject(&r.msg, &r.exp, age))
                }
            })
            .map(|(i, _)| i)
            .collect();
        b.groups = group_rows(&b.rows, &b.visible);
        self.msg_cursor = self.msg_cursor.min(b.visible.len().saturating_sub(1));
        self.group_cursor = self.group_cursor.min(b.groups.len().saturating_sub(1));
    }
}

/// Groups `visible` rows by fingerprint, biggest group first, ties by first failure.
fn group_rows(rows: &[Row], visible: &[usize]) -> Vec<Group> {
    let mut by_key: BTreeMap<&str, Group> = BTreeMap::new();
    for &i in visible {
        let Some(r) = rows.get(i) else { continue };
        let g = by_key
            .entry(r.exp.fingerprint.key.as_str())
            .or_insert_with(|| Group {
                key: r.exp.fingerprint.key.clone(),
                summary: r.exp.fingerprint.summary.clone(),
                rows: Vec::new(),
                first: None,
                last: None,
            });
        g.rows.push(i);
        if let Some(t) = r.dead_since() {
            g.first = Some(g.first.map_or(t, |f| f.min(t)));
            g.last = Some(g.last.map_or(t, |l| l.max(t)));
        }
    }
    let mut groups: Vec<Group> = by_key.into_values().collect();
    groups.sort_by(|a, b| {
        b.rows
            .len()
            .cmp(&a.rows.len())
            .then(a.first.cmp(&b.first))
            .then(a.key.cmp(&b.key))
    });
    groups
}

/// A line of the queue list.
#[derive(Clone, Copy, Debug)]
pub enum QueueRow<'a> {
    Dlq(&'a DlqInfo),
    Other(&'a QueueSummary),
}

impl QueueRow<'_> {
    pub fn name(&self) -> &str {
        match self {
            QueueRow::Dlq(d) => &d.name,
            QueueRow::Other(q) => &q.name,
        }
    }

    pub fn depth(&self) -> Option<u64> {
        match self {
            QueueRow::Dlq(d) => d.depth,
            QueueRow::Other(q) => q.depth,
        }
    }
}
