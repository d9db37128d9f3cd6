//! The one owner of UI state. Background tasks never hold any of it; `update` changes it and
//! `view` reads it. Derived data (the filtered view, the failure groups) is recomputed here when
//! its inputs change, so `view` only draws.

use std::borrow::Cow;
use std::collections::HashMap;

use jiff::Timestamp;
use ratatui::text::Line;
use ratatui_textarea::TextArea;

pub use super::queue_row::QueueRow;

mod groups;
mod page;
pub use groups::{
    Answers, Banner, Filtering, Handover, HelpView, Inputs, MessageView, Pending, QueueList,
    Settings,
};
pub use page::{Arriving, Browse, Group, MsgOrder, Opened, Row};

pub use super::modal::{
    ArchiveKind, ArchiveModal, MAX_REASON_CHARS, ModalField, ReplayModal, ReplayRun, RestoreModal,
};

use super::detail::{self, DetailKey, Rendered};
use super::event::{ConnectionState, Overview};
use super::oplog::OpLog;
use super::pager::Pager;
use super::theme::Theme;
use crate::domain::discovery::{DlqInfo, QueueRef};
use crate::domain::filter::Filter;
use crate::domain::grouping::{GroupBy, WaitQueues};
use crate::domain::urgency::{self, Figures};

/// Rates offered by `+`/`-` (messages per second).
pub const RATE_STEPS: &[u32] = &[1, 2, 5, 10, 20, 50, 100, 200, 500, 1000];
/// The replay modal's starting rate when `replay.rate` is not configured.
pub const DEFAULT_RATE: u32 = 50;
/// Messages read per queue when `browse.page_size` is not configured.
pub const DEFAULT_BROWSE_LIMIT: usize = crate::config::DEFAULT_PAGE_SIZE;
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
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum ListMode {
    #[default]
    Messages,
    Groups,
}

/// The queue filter's words, lower-cased.
pub fn queue_filter_words(text: &str) -> Vec<String> {
    text.split_whitespace().map(str::to_lowercase).collect()
}

/// The note being written on a group (`n` in the group view).
#[derive(Clone, Debug)]
pub struct NoteInput {
    pub input: TextArea<'static>,
    pub vhost: String,
    pub queue: String,
    pub by: GroupBy,
    pub key: String,
    /// The group, for the input's title.
    pub summary: String,
}

#[derive(Clone, Debug)]
pub struct FilterInput {
    pub input: TextArea<'static>,
    /// The filter that was in force when the input opened, restored by Esc.
    pub before: Option<(String, Filter)>,
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
    /// The archive or discard modal (`A`, `X`).
    Archive(Box<ArchiveModal>),
    /// The restore modal (`r` in the archive).
    Restore(Box<RestoreModal>),
    Progress(Box<ReplayRun>),
    /// The full-screen pager on a body or a stack trace.
    Pager(Box<Pager>),
    /// Warren's editor on the message under the cursor (`E`): edit, then replay.
    Edit(Box<super::edit::EditModal>),
    /// The context picker (`:ctx` with no name).
    Contexts(super::picker::ContextPicker),
    /// A question an operation sent back before changing anything (`Report::Question`).
    Question(Box<Question>),
}

/// A question from an operation's home (creating the redirect stream): Enter or `y` sends
/// `yes`, Esc or `n` leaves everything as it was.
#[derive(Clone, Debug)]
pub struct Question {
    pub text: String,
    pub yes: crate::worker::protocol::Command,
}

/// The UI state, grouped by what each part is for (see `groups`); `update` is the only
/// writer, `view` the reader.
#[derive(Clone, Debug)]
pub struct State {
    /// The clock as of the last event: ages are computed from it, never from the system clock.
    pub now: Timestamp,
    /// The command line's and the configuration file's settings.
    pub settings: Settings,
    /// No replay in the place shown: the command line's `--read-only`, or what the worker says
    /// of this place (`Overview::read_only`). Decided again for each place, never carried over.
    pub read_only: bool,
    /// Why replay is off, in words (shown in the banner when a replay key is pressed).
    pub read_only_reason: String,
    pub overview: Overview,
    /// The session generation shown: a switch's, once it succeeded; answers from an older one
    /// are dropped (see `event::Ticket`).
    pub generation: u64,
    /// The highest generation handed out (a failed switch's is not used again).
    pub(crate) last_generation: u64,
    /// A switch under way (see [`Switching`]).
    pub switching: Option<Switching>,
    pub connection: ConnectionState,
    /// The place shown was reached from every context at once: `*` goes back, and the footer
    /// says so.
    pub from_every_context: bool,
    /// The redirects in force, by vhost, as the worker last read them (`Report::Redirects`):
    /// the detail pane's "a replay would" applies them as the replay's plan does.
    pub redirects: HashMap<String, crate::domain::redirect::Redirects>,
    pub focus: Focus,
    pub queues: QueueList,
    pub msgs: MessageView,
    pub filtering: Filtering,
    pub pending: Pending,
    pub answers: Answers,
    pub inputs: Inputs,
    pub help: HelpView,
    pub banner: Banner,
    pub overlay: Overlay,
    /// Every broker operation of this session (the last `oplog::CAP`).
    pub oplog: OpLog,
    /// The Replays view's runs and what could not be reached; `None` while loading.
    pub replay_runs: Option<(Vec<crate::worker::protocol::RunSummary>, Vec<String>)>,
    pub handover: Handover,
    /// The terminal's size (columns, rows) as last reported (80×24 until it is): the pager lays
    /// its text out for it, the help scrolls within it.
    pub screen: (u16, u16),
    pub quit: bool,
    pub(crate) dirty: bool,
}

impl State {
    pub fn new(now: Timestamp, read_only: bool, theme: Theme) -> State {
        State {
            now,
            settings: Settings::new(read_only, theme),
            read_only,
            read_only_reason: if read_only {
                FLAG_READ_ONLY_REASON.into()
            } else {
                String::new()
            },
            overview: Overview::default(),
            generation: 0,
            last_generation: 0,
            switching: None,
            connection: ConnectionState::Connecting,
            from_every_context: false,
            redirects: HashMap::new(),
            focus: Focus::Queues,
            queues: QueueList::default(),
            msgs: MessageView::default(),
            filtering: Filtering::default(),
            pending: Pending::default(),
            answers: Answers::default(),
            inputs: Inputs::default(),
            help: HelpView::default(),
            banner: Banner::default(),
            overlay: Overlay::None,
            oplog: OpLog::default(),
            replay_runs: None,
            handover: Handover::default(),
            screen: (80, 24),
            quit: false,
            dirty: true,
        }
    }

    /// True once after anything visible changed; the loop draws only then.
    pub fn take_dirty(&mut self) -> bool {
        std::mem::take(&mut self.dirty)
    }

    /// The rows of the queue list: dead-letter queues first, then queues holding stuck dead
    /// letters, ordinary queues when toggled on.
    pub fn queue_rows(&self) -> Vec<QueueRow<'_>> {
        self.rows_and_figures()
            .into_iter()
            .map(|(r, _)| r)
            .collect()
    }

    /// The urgency figures of each row of [`State::queue_rows`] (`None` for ordinary queues).
    pub fn row_figures(&self) -> Vec<Option<&Figures>> {
        self.rows_and_figures()
            .into_iter()
            .map(|(_, f)| f)
            .collect()
    }

    /// The queue list in its order, each row with its figures, narrowed by the queue filter
    /// (`/` on the list): one place, so rows and figures never disagree.
    fn rows_and_figures(&self) -> Vec<(QueueRow<'_>, Option<&Figures>)> {
        let dlqs = &self.queues.discovery.dead_letter_queues;
        let order: Vec<usize> = if self.queues.order.len() == dlqs.len() {
            self.queues.order.clone()
        } else {
            (0..dlqs.len()).collect()
        };
        let mut rows: Vec<(QueueRow<'_>, Option<&Figures>)> = order
            .into_iter()
            .filter_map(|i| {
                dlqs.get(i)
                    .map(|d| (QueueRow::Dlq(d), self.queues.figures.get(i)))
            })
            .collect();
        // Queues holding stuck dead letters after the DLQs, whatever the sort (as `warren
        // queues`); not again among the ordinary queues.
        rows.extend(
            self.queues
                .discovery
                .stuck
                .iter()
                .map(|q| (QueueRow::Stuck(q), None)),
        );
        if self.queues.show_ordinary {
            rows.extend(
                self.queues
                    .discovery
                    .other_queues
                    .iter()
                    .filter(|q| !self.queues.is_stuck(&q.vhost, &q.name))
                    .map(|q| (QueueRow::Other(q), None)),
            );
        }
        if !self.queues.filter.is_empty() {
            let words = queue_filter_words(&self.queues.filter);
            // What the row shows: its name, after its context or vhost where the list holds
            // several (a vhost named like its queues would otherwise match every row).
            rows.retain(|(r, _)| {
                let shown = if self.every_context() {
                    format!("{}/{}", self.place_of(r.context(), r.vhost()), r.name())
                } else if self.every_vhost() {
                    format!("{}/{}", r.vhost(), r.name())
                } else {
                    r.name().to_string()
                };
                let shown = shown.to_lowercase();
                words.iter().all(|w| shown.contains(w.as_str()))
            });
        }
        rows
    }

    pub fn queue_name_at_cursor(&self) -> Option<String> {
        self.queue_rows()
            .get(self.queues.cursor)
            .map(|r| r.name().to_string())
    }

    /// The queue under the cursor: its vhost and name.
    pub fn queue_at_cursor(&self) -> Option<QueueRef> {
        self.queue_rows().get(self.queues.cursor).map(QueueRow::id)
    }

    /// The version of the broker a queue of `context` lives on: with every context listed,
    /// that context's (each is its own broker); else the session's.
    pub fn version_of(&self, context: &str) -> Option<crate::domain::features::BrokerVersion> {
        let text = if self.every_context() {
            self.overview
                .contexts
                .iter()
                .find(|r| r.context == context)
                .map_or("", |r| r.broker_version.as_str())
        } else {
            self.overview.broker_version.as_str()
        };
        crate::domain::features::BrokerVersion::parse(text)
    }

    /// Every vhost of the context is listed (`:vhost *`): each queue shows its vhost. (Every
    /// context at once labels its queues its own way: see [`State::place_of`].)
    pub fn every_vhost(&self) -> bool {
        self.overview.vhost_scope().is_every() && !self.every_context()
    }

    /// Every context of the config file is listed at once (`:ctx *`): each queue shows its
    /// context, and the scope is for looking (Enter opens a queue in its own context).
    pub fn every_context(&self) -> bool {
        self.overview.context_scope().is_every()
    }

    /// With every context listed: where a queue lives, as its row shows it before its name —
    /// its context (by its label, where it has one), and its vhost too where that is not the
    /// context's own ("staging/billing").
    /// Empty in any other scope (or for a queue of no context).
    pub fn place_of(&self, context: &str, vhost: &str) -> String {
        if !self.every_context() || context.is_empty() {
            return String::new();
        }
        let reach = self.overview.contexts.iter().find(|r| r.context == context);
        // The context's label where it has one: chosen by its people to be told apart at a
        // glance, and usually shorter than its name.
        let name = reach.and_then(|r| r.label.as_deref()).unwrap_or(context);
        if reach.map(|r| r.vhost.as_str()) == Some(vhost) {
            name.to_string()
        } else {
            format!("{name}/{vhost}")
        }
    }

    /// The dead-letter queue `name` of the place shown (with every vhost listed, the first of
    /// that name: use [`State::dlq_of`] where the vhost is known).
    pub fn dlq(&self, name: &str) -> Option<&DlqInfo> {
        self.queues.discovery.dlq(name)
    }

    /// Whether `id` is the archive stream, as the worker marked it in the listing.
    pub fn is_archive(&self, id: &QueueRef) -> bool {
        self.dlq_of(id)
            .is_some_and(|d| d.kind == crate::domain::discovery::DlqKind::Archive)
    }

    /// Whether the open queue is the archive (where `r` restores).
    pub fn archive_open(&self) -> bool {
        self.msgs
            .browse
            .as_ref()
            .is_some_and(|b| self.is_archive(&b.id()))
    }

    pub fn dlq_of(&self, id: &QueueRef) -> Option<&DlqInfo> {
        self.queues.discovery.dlq_of(id)
    }

    /// Recomputes the figures and the order of the queue list, keeping the cursor on the queue
    /// `keep` (the one under it before) when it is still listed. One pass and one sort.
    pub fn refresh_urgency(&mut self, keep: Option<QueueRef>) {
        let (histories, heads) = (&self.queues.histories, &self.queues.heads);
        // One key, refilled for each lookup: no allocation per queue.
        let mut key = QueueRef::default();
        self.queues.figures = urgency::dlq_figures_by(
            &self.queues.discovery,
            |q| {
                let k = key.set_to(q);
                (histories.get(k), heads.get(k))
            },
            self.now,
        );
        let keyed: Vec<(&str, Figures)> = self
            .queues
            .discovery
            .dead_letter_queues
            .iter()
            .zip(self.queues.figures.iter().copied())
            .map(|(d, f)| (d.name.as_str(), f))
            .collect();
        self.queues.order = urgency::order(&keyed, self.queues.sort, self.queues.sort_reverse);
        let found = keep.and_then(|id| self.queue_rows().iter().position(|r| r.is(&id)));
        self.queues.cursor = found
            .unwrap_or(self.queues.cursor)
            .min(self.queue_rows().len().saturating_sub(1));
    }

    /// Narrows the queue list to `text` (see `rows_and_figures`), the cursor staying on its
    /// queue while that is still listed, else on the first row.
    pub fn set_queue_filter(&mut self, text: String) {
        let keep = self.queue_at_cursor();
        self.queues.filter = text;
        let rows = self.queue_rows();
        let found = keep.and_then(|id| rows.iter().position(|r| r.is(&id)));
        self.queues.cursor = found.unwrap_or(0).min(rows.len().saturating_sub(1));
        self.dirty = true;
    }

    /// The message under the cursor, opened (see [`Row::open`]).
    pub fn current_opened(&self) -> Option<Opened> {
        self.msgs
            .current_row()
            .map(|r| r.open(&self.settings.conventions))
    }

    /// What the detail of the message under the cursor depends on, when there is one.
    fn detail_key(&self) -> Option<DetailKey> {
        let row = self.msgs.current_index()?;
        self.msgs.browse.as_ref()?.rows.get(row)?;
        Some(DetailKey {
            content: self.msgs.content_serial,
            row,
            trace_open: self.msgs.trace_open,
            day: self.now.as_second().div_euclid(86_400),
            theme: self.settings.theme,
        })
    }

    /// Renders the detail of the message under the cursor unless what is cached is it already.
    /// Called by `update` after every event; cheap when nothing it depends on changed.
    pub fn refresh_detail(&mut self) {
        let Some(key) = self.detail_key() else {
            self.msgs.detail = None;
            return;
        };
        if self.msgs.detail.as_ref().is_some_and(|d| d.key == key) {
            return;
        }
        let lines = self.current_opened().map(|r| detail::lines(self, &r));
        self.msgs.detail = lines.map(|lines| Rendered { key, lines });
    }

    /// The detail pane's lines: what `update` rendered, or, for a state changed without it (a
    /// test setting the theme), rendered now so the pane is never out of date.
    pub fn detail_lines(&self) -> Option<Cow<'_, [Line<'static>]>> {
        let key = self.detail_key()?;
        match &self.msgs.detail {
            Some(d) if d.key == key => Some(Cow::Borrowed(&d.lines)),
            _ => self
                .current_opened()
                .map(|r| Cow::Owned(detail::lines(self, &r))),
        }
    }

    /// Where a replay goes on to past a wait queue, from the vhost's retry loops (the endpoint
    /// grouping).
    pub fn wait_queues(&self) -> WaitQueues {
        match &self.msgs.browse {
            // The open queue's vhost's loops: with every vhost listed, another vhost's wait
            // queue of the same name is not this one's.
            Some(b) => WaitQueues::of_vhost(&self.queues.discovery, &b.vhost),
            None => WaitQueues::from_discovery(&self.queues.discovery),
        }
    }

    pub fn replay_running(&self) -> bool {
        matches!(&self.overlay, Overlay::Progress(run) if run.outcome.is_none())
    }

    /// How long ago `t` was, in whole seconds (never negative).
    pub fn secs_since(&self, t: Timestamp) -> u64 {
        u64::try_from(self.now.as_second().saturating_sub(t.as_second())).unwrap_or(0)
    }
}
