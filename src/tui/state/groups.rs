//! The groups `State` is made of: each holds the fields that change for one reason, so that a
//! reader (and `update`) finds what belongs together in one place. `State` still owns them all.

use std::collections::{HashMap, HashSet};

use jiff::Timestamp;
use ratatui_textarea::TextArea;

use super::{
    Arriving, Browse, DEFAULT_BROWSE_LIMIT, DEFAULT_RATE, FilterInput, Group, ListMode, MsgOrder,
    NoteInput, Row,
};
use crate::domain::convention::Conventions;
use crate::domain::discovery::{Discovery, QueueRef};
use crate::domain::filter::Filter;
use crate::domain::grouping::{GroupBy, GroupNote};
use crate::domain::urgency::{Figures, History, ReadHead, Sample, SortBy};
use crate::tui::custom::{self, CustomCommand};
use crate::tui::detail::Rendered;
use crate::tui::picker::ContextChoice;
use crate::tui::theme::Theme;

/// What the command line and the configuration file decided at startup. Nothing but `:limit`
/// (`browse_limit`) changes them while Warren runs, whichever context is open.
#[derive(Clone, Debug)]
pub struct Settings {
    /// `--read-only` (or a snapshot): read-only wherever Warren goes.
    pub read_only_flag: bool,
    pub theme: Theme,
    /// Messages read per queue (`browse.page_size`, `:limit`).
    pub browse_limit: usize,
    /// `[conventions]` from the config file: how a team's own ladder is read.
    pub conventions: Conventions,
    /// The rate the replay modal starts at (`replay.rate`, else [`DEFAULT_RATE`]).
    pub replay_rate: u32,
    /// The replay modal starts with a canary of `canary_size` above `canary_above` messages
    /// (0: never), waiting `canary_wait` (`[replay]`).
    pub canary_above: u64,
    pub canary_size: u64,
    pub canary_wait: std::time::Duration,
    /// `[[commands]]` from the config, checked against the key table at startup.
    pub custom_commands: Vec<CustomCommand>,
    /// The contexts of the config file, for the picker and Tab (empty without a config).
    pub contexts: Vec<ContextChoice>,
}

impl Settings {
    /// The defaults, for a session started with `--read-only` or not, in `theme`.
    pub fn new(read_only_flag: bool, theme: Theme) -> Settings {
        Settings {
            read_only_flag,
            theme,
            browse_limit: DEFAULT_BROWSE_LIMIT,
            conventions: Conventions::default(),
            replay_rate: DEFAULT_RATE,
            canary_above: crate::domain::canary::DEFAULT_ABOVE,
            canary_size: crate::domain::canary::DEFAULT_SIZE,
            canary_wait: crate::domain::canary::DEFAULT_WAIT,
            custom_commands: Vec::new(),
            contexts: Vec::new(),
        }
    }
}

/// The queue list: what the worker discovered, the figures and history behind its urgency,
/// its order, its cursor and its filter.
#[derive(Clone, Debug, Default)]
pub struct QueueList {
    pub discovery: Discovery,
    /// The first listing arrived (for the place shown).
    pub loaded: bool,
    pub depths_at: Option<Timestamp>,
    pub show_ordinary: bool,
    /// Each dead-letter queue's depth over the session (and the store's last hour), by vhost
    /// and name (FNV: a refresh of 10,000 queues hashes each key twice).
    pub histories: fnv::FnvHashMap<QueueRef, History>,
    /// What the last read of each queue found (its oldest and newest dead letter), by vhost
    /// and name.
    pub heads: fnv::FnvHashMap<QueueRef, ReadHead>,
    /// The urgency figures of `discovery.dead_letter_queues`, aligned with it (see
    /// `State::refresh_urgency`).
    pub figures: Vec<Figures>,
    /// The list's order (number keys), and whether it is reversed.
    pub sort: SortBy,
    pub sort_reverse: bool,
    /// Indices into `discovery.dead_letter_queues` in the order shown.
    pub order: Vec<usize>,
    pub cursor: usize,
    /// The list's filter (`/` on the list): the rows whose place and name hold every word of
    /// it, case-insensitively. Empty: every row.
    pub filter: String,
    /// The cursor moved: the queue under it is read once it rests (`update::GLANCE_SETTLE`,
    /// the first screen answering without a key press).
    pub glance_pending: bool,
}

impl QueueList {
    /// The ordinary queues the list shows behind `o`: every queue that is neither a DLQ nor
    /// one holding stuck dead letters (listed as such).
    pub fn ordinary_count(&self) -> usize {
        let d = &self.discovery;
        d.other_queues
            .iter()
            .filter(|q| !self.is_stuck(&q.vhost, &q.name))
            .count()
    }

    /// Whether the listing names `vhost`'s `queue` as holding stuck dead letters.
    pub(crate) fn is_stuck(&self, vhost: &str, queue: &str) -> bool {
        self.discovery
            .stuck
            .iter()
            .any(|s| s.queue == queue && s.vhost == vhost)
    }

    /// The urgency figures of the dead-letter queue `id`.
    pub fn figures_of(&self, id: &QueueRef) -> Option<&Figures> {
        let i = self
            .discovery
            .dead_letter_queues
            .iter()
            .position(|d| d.is(id))?;
        self.figures.get(i)
    }

    /// Adds the depths the discovery reports, as of `now`, to each queue's history.
    pub fn sample_depths(&mut self, now: Timestamp) {
        let mut key = QueueRef::default();
        for d in &self.discovery.dead_letter_queues {
            if let Some(depth) = d.depth {
                let sample = Sample { at: now, depth };
                // A key is built only for a queue seen the first time.
                match self.histories.get_mut(key.set_to(d)) {
                    Some(h) => h.record(sample),
                    None => self.histories.entry(d.id()).or_default().record(sample),
                }
            }
        }
    }

    /// Merges samples kept in the store into the histories.
    pub fn merge_history(&mut self, stored: HashMap<QueueRef, Vec<Sample>>) {
        for (queue, mut samples) in stored {
            let h = self.histories.entry(queue).or_default();
            samples.extend(h.points());
            *h = History::from_samples(samples);
        }
    }
}

/// The open queue's messages as the message and detail panes show them: the page, where the
/// cursors are, the order, the groups, the picked messages and the rendered detail.
#[derive(Clone, Debug, Default)]
pub struct MessageView {
    /// The queue being browsed right now.
    pub loading: Option<QueueRef>,
    pub browse: Option<Browse>,
    /// A page still arriving (see [`Arriving`]).
    pub arriving: Option<Arriving>,
    pub list_mode: ListMode,
    pub cursor: usize,
    /// The list's order, and whether it is reversed.
    pub order: MsgOrder,
    pub order_reverse: bool,
    pub group_cursor: usize,
    /// What makes a group in the group view (`b` cycles).
    pub group_by: GroupBy,
    /// The notes on the open queue's groups, every grouping, as the worker read them from the
    /// store (see `Report::GroupNotes`).
    pub group_notes: Vec<GroupNote>,
    /// Picked messages, by key.
    pub selected: HashSet<String>,
    /// Where `V` extends a range from: the position in view of the last toggle.
    pub anchor: Option<usize>,
    /// The detail pane's lines for the message under the cursor, rendered by `update` when the
    /// message or what its lines depend on changes (see `State::refresh_detail`), so that
    /// neither a scroll key nor a frame parses and pretty-prints its body again.
    pub detail: Option<Rendered>,
    pub detail_scroll: u16,
    pub trace_open: bool,
    /// Bumped whenever the rows or the discovery are replaced: the detail cache's notion of
    /// "the same content".
    pub(crate) content_serial: u64,
}

impl MessageView {
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
    pub(super) fn current_index(&self) -> Option<usize> {
        let b = self.browse.as_ref()?;
        match self.list_mode {
            ListMode::Messages => b.visible.get(self.cursor).copied(),
            ListMode::Groups => b
                .groups
                .get(self.group_cursor)
                .and_then(|g| g.rows.first())
                .copied(),
        }
    }

    pub fn current_group(&self) -> Option<&Group> {
        self.browse.as_ref()?.groups.get(self.group_cursor)
    }

    /// The note on group `g` of the open queue under the grouping shown (`group_notes` holds
    /// the open queue's only, of its vhost).
    pub fn note_for(&self, g: &Group) -> Option<&GroupNote> {
        let b = self.browse.as_ref()?;
        self.group_notes
            .iter()
            .find(|n| n.by == b.grouped_by && n.key == g.key && n.queue == b.queue)
    }

    /// The grouping of the groups on screen (`Browse::grouped_by`), else the one chosen.
    pub fn shown_grouping(&self) -> GroupBy {
        self.browse.as_ref().map_or(self.group_by, |b| b.grouped_by)
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
                .filter(|r| self.selected.contains(r.key.as_str()))
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
}

/// The message filter: the one in force on the open queue, and the ones put away with theirs.
#[derive(Clone, Debug, Default)]
pub struct Filtering {
    pub text: String,
    pub filter: Option<Filter>,
    pub error: Option<String>,
    /// The filter changed but a large list has not been narrowed yet (see `FILTER_SETTLE`).
    pub pending: bool,
    /// The filters typed on other queues, by queue: a filter belongs to the queue it was typed
    /// on, is put away when another queue opens and comes back with its queue.
    pub saved: HashMap<QueueRef, (String, Filter)>,
}

/// What waits for the operator's next key, or for a switch to land, before it happens.
#[derive(Clone, Debug, Default)]
pub struct Pending {
    /// A quorum queue whose browse would spend deliveries: a second Enter confirms.
    pub browse: Option<QueueRef>,
    /// A queue whose read would spend deliveries again: the same key again confirms.
    pub reread: Option<QueueRef>,
    /// A queue the operator asked to protect: the same key again confirms.
    pub protect: Option<QueueRef>,
    /// A queue opened from every context at once (Enter): once the switch to its context has
    /// landed, it is opened there (its vhost and name, in that context's terms).
    pub open_after_switch: Option<QueueRef>,
}

impl Pending {
    /// A question stands in the banner until its key comes (or Esc).
    pub fn asking(&self) -> bool {
        self.browse.is_some() || self.reread.is_some() || self.protect.is_some()
    }
}

/// The operator's answers to questions asked once per context, kept for the session.
#[derive(Clone, Debug, Default)]
pub struct Answers {
    /// Per context, whether to create its missing audit stream.
    pub audit: HashMap<String, bool>,
    /// Per context, where an archive goes while the archive stream is missing (asked in the
    /// archive modal).
    pub archive: HashMap<String, crate::worker::protocol::ArchivePlace>,
}

/// The input lines open for typing (at most one takes keys at a time).
#[derive(Clone, Debug, Default)]
pub struct Inputs {
    pub filter: Option<FilterInput>,
    pub command: Option<TextArea<'static>>,
    /// A note being written (`n`).
    pub note: Option<NoteInput>,
    /// The queue filter's line while it is open; Esc restores `QueueList::filter`'s text from
    /// before.
    pub queue_filter: Option<(TextArea<'static>, String)>,
}

/// The help overlay: where it is scrolled and what it is searched for.
#[derive(Clone, Debug, Default)]
pub struct HelpView {
    /// The first line in view.
    pub scroll: u16,
    /// The search (`/` in help): only the bindings matching it are listed; `typing` while its
    /// line takes keys.
    pub query: String,
    pub typing: bool,
}

/// The banner: an error or a notice, and since when it shows (`update::banner`: it goes by
/// itself).
#[derive(Clone, Debug, Default)]
pub struct Banner {
    pub error: Option<String>,
    pub notice: Option<String>,
    /// The banner shown and since when.
    pub since: Option<(String, Timestamp)>,
    /// The banner shows its whole text (`w`), not only its first lines.
    pub whole: bool,
}

/// What `update` decided the terminal loop carries out, since only the loop holds the terminal
/// and the frame: each is taken by the loop once done.
#[derive(Clone, Debug, Default)]
pub struct Handover {
    /// A custom command to run: the loop hands the terminal over, runs it and takes the
    /// terminal back.
    pub custom: Option<custom::Run>,
    /// The document to hand to `$EDITOR` (`Ctrl-E` in Warren's editor): the result comes back
    /// as `Event::Edited`.
    pub editor: Option<String>,
    /// A save (`Ctrl-S`, `S`): the loop, which has the frame, performs it.
    pub save: Option<crate::tui::save::Save>,
    /// Text `y`/`Y` copied: the loop writes it to the terminal as OSC 52, which puts it on the
    /// clipboard of the terminal the operator sits at, over SSH and tmux too.
    pub clipboard: Option<String>,
}
