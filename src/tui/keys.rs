//! The key table. The handler looks keys up here, and the help screen and the footer are
//! generated from the same rows, so a key cannot work without being documented or the reverse.
//! Keys follow k9s and vim habits.

use ratatui::crossterm::event::{KeyCode, KeyEvent, KeyModifiers};

/// Where a binding applies.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Scope {
    /// Every pane (not inside a modal or an input line).
    Global,
    Queues,
    Messages,
    Groups,
    Detail,
    /// The replay confirmation.
    Modal,
    /// The restore confirmation (`r` in the archive).
    Restore,
    /// A running or finished replay.
    Progress,
    /// The full-screen pager (a body, a stack trace).
    Pager,
    /// The command log overlay.
    Log,
    /// The Replays view: what came back after each replay.
    Replays,
}

impl Scope {
    pub fn title(self) -> &'static str {
        match self {
            Scope::Global => "Everywhere",
            Scope::Queues => "Queue list",
            Scope::Messages => "Messages",
            Scope::Groups => "Groups",
            Scope::Detail => "Message detail",
            Scope::Modal => "Replay confirmation",
            Scope::Restore => "Restore confirmation (r in the archive)",
            Scope::Progress => "Replay in progress",
            Scope::Pager => "Pager (v, T)",
            Scope::Log => "Command log",
            Scope::Replays => "Replays view",
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Action {
    Quit,
    ForceQuit,
    Help,
    CommandLog,
    ReplaysView,
    CommandLine,
    Filter,
    /// Narrow the queue list by name (`/` on the list).
    QueueFilter,
    NextPane,
    PrevPane,
    Up,
    Down,
    Top,
    Bottom,
    PageUp,
    PageDown,
    Open,
    Back,
    /// Every context of the config file at once (`:ctx *`); from a queue opened there, back.
    EveryContext,
    Reload,
    ToggleOrdinary,
    /// Order the queue list (the same order again: reversed).
    Sort(crate::domain::urgency::SortBy),
    /// Order the message list (the same order again: reversed).
    OrderMessages(crate::tui::state::MsgOrder),
    ToggleGroups,
    /// The group view: the next grouping (fingerprint, exception, type, …).
    CycleGrouping,
    /// The group view: write (or change, or clear) the note on the group under the cursor.
    GroupNote,
    ToggleSelect,
    SelectRange,
    SelectAll,
    InvertSelection,
    Replay,
    /// Warren's editor on the message under the cursor: edit, then replay.
    Edit,
    /// Open the archive modal on the selection, the message or the group.
    Archive,
    /// Open the discard modal (deleted for good, a snapshot first).
    Discard,
    Protect,
    ToggleTrace,
    /// The pager on the body / on the stack trace.
    PageBody,
    PageTrace,
    /// Copy the message id / its body to the clipboard, through the terminal (OSC 52).
    CopyId,
    CopyBody,
    /// Save what is on screen as text / the picked messages as a snapshot file.
    SaveScreen,
    SaveSnapshot,
    // Inside the pager.
    Search,
    NextMatch,
    PrevMatch,
    WholeText,
    // Inside the replay modal.
    Accept,
    Cancel,
    ToggleKeep,
    ToggleFailureStamp,
    ToggleDryRun,
    CycleCanary,
    SharedRecord,
    LocalRecord,
    RateUp,
    RateDown,
    SwitchField,
    // Inside the restore modal.
    /// Replay straight to where they failed, or back into their dead-letter queues.
    ToggleOrigin,
    /// Take again what was restored before.
    ToggleAgain,
}

/// One key as written in the table.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Key {
    Char(char),
    Code(KeyCode),
    Ctrl(char),
}

impl Key {
    pub(crate) fn matches(self, ev: &KeyEvent) -> bool {
        let ctrl = ev.modifiers.contains(KeyModifiers::CONTROL);
        match self {
            Key::Ctrl(c) => ctrl && ev.code == KeyCode::Char(c),
            // Shifted letters arrive as the upper-case char (with or without SHIFT set).
            Key::Char(c) => !ctrl && ev.code == KeyCode::Char(c),
            Key::Code(code) => !ctrl && ev.code == code,
        }
    }
}

pub struct Binding {
    pub keys: &'static [Key],
    /// How the keys are written for people.
    pub label: &'static str,
    pub action: Action,
    pub help: &'static str,
    /// The word in the footer, when the binding earns a place there.
    pub footer: Option<&'static str>,
    pub scopes: &'static [Scope],
}

use crate::domain::urgency::SortBy;
use crate::tui::state::MsgOrder;
use Action as A;
use Key::{Char, Code, Ctrl};
use Scope as S;

const PANES: &[Scope] = &[S::Queues, S::Messages, S::Groups, S::Detail];
const LISTS: &[Scope] = &[S::Queues, S::Messages, S::Groups];
const MSGS: &[Scope] = &[S::Messages, S::Groups, S::Detail];

pub static BINDINGS: &[Binding] = &[
    Binding {
        keys: &[Char('k'), Code(KeyCode::Up)],
        label: "↑/k",
        action: A::Up,
        help: "up (detail: scroll)",
        footer: None,
        scopes: PANES,
    },
    Binding {
        keys: &[Char('j'), Code(KeyCode::Down)],
        label: "↓/j",
        action: A::Down,
        help: "down (detail: scroll)",
        footer: Some("move"),
        scopes: PANES,
    },
    Binding {
        keys: &[Char('g'), Code(KeyCode::Home)],
        label: "g",
        action: A::Top,
        help: "first row / top",
        footer: None,
        scopes: PANES,
    },
    Binding {
        keys: &[Char('G'), Code(KeyCode::End)],
        label: "G",
        action: A::Bottom,
        help: "last row / bottom",
        footer: None,
        scopes: PANES,
    },
    Binding {
        keys: &[Code(KeyCode::PageUp), Ctrl('u')],
        label: "PgUp/^u",
        action: A::PageUp,
        help: "page up",
        footer: None,
        scopes: PANES,
    },
    Binding {
        keys: &[Code(KeyCode::PageDown), Ctrl('d')],
        label: "PgDn/^d",
        action: A::PageDown,
        help: "page down",
        footer: None,
        scopes: PANES,
    },
    Binding {
        keys: &[Code(KeyCode::Tab)],
        label: "Tab",
        action: A::NextPane,
        help: "next pane",
        footer: Some("pane"),
        scopes: PANES,
    },
    Binding {
        keys: &[Code(KeyCode::BackTab)],
        label: "S-Tab",
        action: A::PrevPane,
        help: "previous pane",
        footer: None,
        scopes: PANES,
    },
    Binding {
        keys: &[Code(KeyCode::Enter), Char('l'), Code(KeyCode::Right)],
        label: "Enter",
        action: A::Open,
        help: "browse queue / open message",
        footer: Some("open"),
        scopes: LISTS,
    },
    Binding {
        keys: &[Code(KeyCode::Esc), Char('h'), Code(KeyCode::Left)],
        label: "Esc",
        action: A::Back,
        help: "back; dismiss the banner",
        footer: Some("back"),
        scopes: PANES,
    },
    Binding {
        keys: &[Char('P')],
        label: "P",
        action: A::Protect,
        help: "protect: lift delivery limit",
        footer: None,
        scopes: &[S::Queues],
    },
    Binding {
        keys: &[Char('*')],
        label: "*",
        action: A::EveryContext,
        help: "every context at once, one list (:ctx *)",
        footer: None,
        scopes: &[S::Queues],
    },
    Binding {
        keys: &[Char('o')],
        label: "o",
        action: A::ToggleOrdinary,
        help: "show ordinary queues too",
        footer: Some("all queues"),
        scopes: &[S::Queues],
    },
    Binding {
        keys: &[Char('1')],
        label: "1",
        action: A::Sort(SortBy::Urgency),
        help: "sort by urgency: growing first, then depth (again: reverse)",
        footer: Some("sort"),
        scopes: &[S::Queues],
    },
    Binding {
        keys: &[Char('2')],
        label: "2",
        action: A::Sort(SortBy::Depth),
        help: "sort by depth (again: reverse)",
        footer: None,
        scopes: &[S::Queues],
    },
    Binding {
        keys: &[Char('3')],
        label: "3",
        action: A::Sort(SortBy::Growth),
        help: "sort by growth, dead letters per minute (again: reverse)",
        footer: None,
        scopes: &[S::Queues],
    },
    Binding {
        keys: &[Char('4')],
        label: "4",
        action: A::Sort(SortBy::Age),
        help: "sort by the age of the oldest dead letter (again: reverse)",
        footer: None,
        scopes: &[S::Queues],
    },
    Binding {
        keys: &[Char('5')],
        label: "5",
        action: A::Sort(SortBy::LastArrival),
        help: "sort by the last arrival (again: reverse)",
        footer: None,
        scopes: &[S::Queues],
    },
    Binding {
        keys: &[Char('6')],
        label: "6",
        action: A::Sort(SortBy::Name),
        help: "sort by name (again: reverse)",
        footer: None,
        scopes: &[S::Queues],
    },
    Binding {
        keys: &[Char('1')],
        label: "1",
        action: A::OrderMessages(MsgOrder::Queue),
        help: "queue order, head first (again: reverse)",
        footer: None,
        scopes: &[S::Messages],
    },
    Binding {
        keys: &[Char('2')],
        label: "2",
        action: A::OrderMessages(MsgOrder::Age),
        help: "sort by age, oldest first (again: reverse)",
        footer: None,
        scopes: &[S::Messages],
    },
    Binding {
        keys: &[Char('3')],
        label: "3",
        action: A::OrderMessages(MsgOrder::Tries),
        help: "sort by tries, most first (again: reverse)",
        footer: None,
        scopes: &[S::Messages],
    },
    Binding {
        keys: &[Char('4')],
        label: "4",
        action: A::OrderMessages(MsgOrder::Reason),
        help: "sort by reason, A to Z (again: reverse)",
        footer: None,
        scopes: &[S::Messages],
    },
    Binding {
        keys: &[Ctrl('r')],
        label: "^r",
        action: A::Reload,
        help: "reload queues and messages",
        footer: None,
        scopes: PANES,
    },
    Binding {
        keys: &[Char('/')],
        label: "/",
        action: A::QueueFilter,
        help: "filter the queue list by name (every word)",
        footer: Some("filter"),
        scopes: &[S::Queues],
    },
    Binding {
        keys: &[Char('/')],
        label: "/",
        action: A::Filter,
        help: "filter (as replay --filter)",
        footer: Some("filter"),
        scopes: MSGS,
    },
    Binding {
        keys: &[Char('f')],
        label: "f",
        action: A::ToggleGroups,
        help: "failure groups / messages",
        footer: Some("groups"),
        scopes: MSGS,
    },
    Binding {
        keys: &[Char('b')],
        label: "b",
        action: A::CycleGrouping,
        help: "next grouping: exception, type, origin, …",
        footer: Some("group by"),
        scopes: &[S::Groups],
    },
    Binding {
        keys: &[Char('n')],
        label: "n",
        action: A::GroupNote,
        help: "note on the group (kept until it is gone)",
        footer: Some("note"),
        scopes: &[S::Groups],
    },
    Binding {
        keys: &[Char(' ')],
        label: "space",
        action: A::ToggleSelect,
        help: "select / unselect",
        footer: Some("select"),
        scopes: &[S::Messages, S::Detail],
    },
    Binding {
        keys: &[Char('V')],
        label: "V",
        action: A::SelectRange,
        help: "select range to last toggle",
        footer: None,
        scopes: &[S::Messages, S::Detail],
    },
    Binding {
        keys: &[Char('a')],
        label: "a",
        action: A::SelectAll,
        help: "select all in view",
        footer: None,
        scopes: &[S::Messages, S::Detail],
    },
    Binding {
        keys: &[Char('*')],
        label: "*",
        action: A::InvertSelection,
        help: "invert selection in view",
        footer: None,
        scopes: &[S::Messages, S::Detail],
    },
    Binding {
        keys: &[Char('e')],
        label: "e",
        action: A::ToggleTrace,
        help: "fold / unfold stack trace",
        footer: Some("trace"),
        scopes: &[S::Messages, S::Detail],
    },
    Binding {
        keys: &[Char('v')],
        label: "v",
        action: A::PageBody,
        help: "read the body full-screen",
        footer: Some("body"),
        scopes: MSGS,
    },
    Binding {
        keys: &[Char('T')],
        label: "T",
        action: A::PageTrace,
        help: "read the stack trace full-screen",
        footer: None,
        scopes: MSGS,
    },
    Binding {
        keys: &[Char('y')],
        label: "y",
        action: A::CopyId,
        help: "copy the message id (OSC 52: works over SSH)",
        footer: None,
        scopes: MSGS,
    },
    Binding {
        keys: &[Char('Y')],
        label: "Y",
        action: A::CopyBody,
        help: "copy the body, decoded (OSC 52)",
        footer: None,
        scopes: MSGS,
    },
    Binding {
        keys: &[Char('S')],
        label: "S",
        action: A::SaveSnapshot,
        help: "save selected (or this) to a snapshot",
        footer: None,
        scopes: MSGS,
    },
    Binding {
        keys: &[Char('r')],
        label: "r",
        action: A::Replay,
        help: "replay selection/message/group; archive: restore",
        footer: Some("replay"),
        scopes: MSGS,
    },
    Binding {
        keys: &[Char('E')],
        label: "E",
        action: A::Edit,
        help: "edit the message, then replay it (original archived)",
        footer: None,
        scopes: &[S::Messages, S::Detail],
    },
    Binding {
        keys: &[Char('A')],
        label: "A",
        action: A::Archive,
        help: "archive selection/message/group (restorable)",
        footer: None,
        scopes: MSGS,
    },
    Binding {
        keys: &[Char('X')],
        label: "X",
        action: A::Discard,
        help: "discard selection/message/group for good (snapshot first)",
        footer: None,
        scopes: MSGS,
    },
    Binding {
        keys: &[Char('?')],
        label: "?",
        action: A::Help,
        help: "this help",
        footer: Some("help"),
        scopes: &[S::Global],
    },
    Binding {
        keys: &[Char('@')],
        label: "@",
        action: A::CommandLog,
        help: "command log (broker operations)",
        footer: None,
        scopes: &[S::Global],
    },
    Binding {
        keys: &[Char('R')],
        label: "R",
        action: A::ReplaysView,
        help: "replays: moved, came back, the new failure",
        footer: None,
        scopes: &[S::Global],
    },
    Binding {
        keys: &[Code(KeyCode::Esc), Char('q'), Char('R')],
        label: "Esc/R",
        action: A::Cancel,
        help: "close; ↑↓ PgUp PgDn g G scroll",
        footer: Some("close"),
        scopes: &[S::Replays],
    },
    Binding {
        keys: &[Code(KeyCode::Esc), Char('q'), Char('@')],
        label: "Esc/@",
        action: A::Cancel,
        help: "close; ↑↓ PgUp PgDn g G scroll",
        footer: Some("close"),
        scopes: &[S::Log],
    },
    Binding {
        keys: &[Char(':')],
        label: ":",
        action: A::CommandLine,
        help: ":ctx/:vhost N (* every one), :limit N, :q",
        footer: Some("command"),
        scopes: &[S::Global],
    },
    Binding {
        keys: &[Ctrl('s')],
        label: "^s",
        action: A::SaveScreen,
        help: "save the screen as text",
        footer: None,
        scopes: &[S::Global],
    },
    Binding {
        keys: &[Char('w')],
        label: "w",
        action: A::WholeText,
        help: "whole text of a cut error / notice",
        footer: None,
        scopes: &[S::Global],
    },
    Binding {
        keys: &[Char('q')],
        label: "q",
        action: A::Quit,
        help: "quit",
        footer: Some("quit"),
        scopes: &[S::Global],
    },
    Binding {
        keys: &[Ctrl('c')],
        label: "^c",
        action: A::ForceQuit,
        help: "quit (stops a replay first)",
        footer: None,
        scopes: &[S::Global, S::Modal, S::Restore, S::Progress],
    },
    Binding {
        keys: &[Code(KeyCode::Enter)],
        label: "Enter",
        action: A::Accept,
        help: "replay / dry run (rate: set)",
        // Says what Enter does now instead (`ReplayModal::enter_does`).
        footer: Some("replay"),
        scopes: &[S::Modal],
    },
    Binding {
        keys: &[Code(KeyCode::Esc)],
        label: "Esc",
        action: A::Cancel,
        help: "cancel, nothing is sent",
        footer: Some("cancel"),
        scopes: &[S::Modal],
    },
    Binding {
        // Not `k`: that is "up" everywhere else.
        keys: &[Char('t')],
        label: "t",
        action: A::ToggleKeep,
        help: "keep retry counters",
        footer: Some("keep attempts"),
        scopes: &[S::Modal],
    },
    Binding {
        keys: &[Char('F')],
        label: "F",
        action: A::ToggleFailureStamp,
        help: "Symfony: strip the failure-transport stamp",
        footer: None,
        scopes: &[S::Modal],
    },
    Binding {
        keys: &[Char('d')],
        label: "d",
        action: A::ToggleDryRun,
        help: "dry run: publish nothing",
        footer: Some("dry run"),
        scopes: &[S::Modal],
    },
    Binding {
        keys: &[Char('s')],
        label: "s",
        action: A::SharedRecord,
        help: "create the missing shared audit record (asked once per context)",
        footer: None,
        scopes: &[S::Modal],
    },
    Binding {
        keys: &[Char('l')],
        label: "l",
        action: A::LocalRecord,
        help: "keep runs on this machine's record only (asked once per context)",
        footer: None,
        scopes: &[S::Modal],
    },
    Binding {
        keys: &[Char('c')],
        label: "c",
        action: A::CycleCanary,
        help: "canary: off, 5, 10, 25, 50, 100 first",
        footer: Some("canary"),
        scopes: &[S::Modal],
    },
    Binding {
        keys: &[Char('+'), Char('=')],
        label: "+",
        action: A::RateUp,
        help: "raise the rate",
        footer: Some("faster"),
        scopes: &[S::Modal],
    },
    Binding {
        keys: &[Char('-')],
        label: "-",
        action: A::RateDown,
        help: "lower the rate",
        footer: Some("slower"),
        scopes: &[S::Modal],
    },
    Binding {
        keys: &[Code(KeyCode::Tab)],
        label: "Tab",
        action: A::SwitchField,
        help: "type the rate / the backlog cap / the count",
        footer: Some("field"),
        scopes: &[S::Modal],
    },
    Binding {
        keys: &[Code(KeyCode::Enter)],
        label: "Enter",
        action: A::Accept,
        help: "restore",
        footer: Some("restore"),
        scopes: &[S::Restore],
    },
    Binding {
        keys: &[Code(KeyCode::Esc)],
        label: "Esc",
        action: A::Cancel,
        help: "cancel, nothing is sent",
        footer: Some("cancel"),
        scopes: &[S::Restore],
    },
    Binding {
        keys: &[Char('o')],
        label: "o",
        action: A::ToggleOrigin,
        help: "replay to where they failed / back to their DLQ",
        footer: Some("to origin"),
        scopes: &[S::Restore],
    },
    Binding {
        keys: &[Char('a')],
        label: "a",
        action: A::ToggleAgain,
        help: "also what was restored before (again)",
        footer: Some("again"),
        scopes: &[S::Restore],
    },
    Binding {
        keys: &[Code(KeyCode::Esc)],
        label: "Esc",
        action: A::Cancel,
        help: "stop safely; close when done",
        footer: Some("stop / close"),
        scopes: &[S::Progress],
    },
    Binding {
        keys: &[Code(KeyCode::Enter)],
        label: "Enter",
        action: A::Accept,
        help: "close when finished",
        footer: None,
        scopes: &[S::Progress],
    },
    Binding {
        keys: &[Char('j'), Code(KeyCode::Down), Code(KeyCode::Enter)],
        label: "↓/j",
        action: A::Down,
        help: "line down",
        footer: None,
        scopes: &[S::Pager],
    },
    Binding {
        keys: &[Char('k'), Code(KeyCode::Up)],
        label: "↑/k",
        action: A::Up,
        help: "line up",
        footer: None,
        scopes: &[S::Pager],
    },
    Binding {
        keys: &[Code(KeyCode::PageDown), Char(' '), Ctrl('d'), Ctrl('f')],
        label: "PgDn",
        action: A::PageDown,
        help: "page down (also space, ^d)",
        footer: Some("page"),
        scopes: &[S::Pager],
    },
    Binding {
        keys: &[Code(KeyCode::PageUp), Char('b'), Ctrl('u'), Ctrl('b')],
        label: "PgUp",
        action: A::PageUp,
        help: "page up (also b, ^u)",
        footer: None,
        scopes: &[S::Pager],
    },
    Binding {
        keys: &[Char('g'), Code(KeyCode::Home)],
        label: "g",
        action: A::Top,
        help: "top",
        footer: None,
        scopes: &[S::Pager],
    },
    Binding {
        keys: &[Char('G'), Code(KeyCode::End)],
        label: "G",
        action: A::Bottom,
        help: "bottom",
        footer: None,
        scopes: &[S::Pager],
    },
    Binding {
        keys: &[Char('/')],
        label: "/",
        action: A::Search,
        help: "search (a capital letter matches case)",
        footer: Some("search"),
        scopes: &[S::Pager],
    },
    Binding {
        keys: &[Char('n')],
        label: "n",
        action: A::NextMatch,
        help: "next match",
        footer: Some("next"),
        scopes: &[S::Pager],
    },
    Binding {
        keys: &[Char('N')],
        label: "N",
        action: A::PrevMatch,
        help: "previous match",
        footer: Some("prev"),
        scopes: &[S::Pager],
    },
    Binding {
        keys: &[Char('q'), Code(KeyCode::Esc)],
        label: "q/Esc",
        action: A::Back,
        help: "back to the message",
        footer: Some("back"),
        scopes: &[S::Pager],
    },
];

/// The action `ev` triggers in `scope`: the scope's own bindings first, then the global ones
/// (pane scopes only: a modal does not let `q` through).
pub fn lookup(scope: Scope, ev: &KeyEvent) -> Option<Action> {
    let find = |s: Scope| {
        BINDINGS
            .iter()
            .find(|b| b.scopes.contains(&s) && b.keys.iter().any(|k| k.matches(ev)))
            .map(|b| b.action)
    };
    find(scope).or_else(|| {
        if PANES.contains(&scope) {
            find(S::Global)
        } else {
            None
        }
    })
}

/// How `action`'s keys are written in `scope` (for hints drawn next to what they change).
pub fn label(scope: Scope, action: Action) -> Option<&'static str> {
    BINDINGS
        .iter()
        .find(|b| b.action == action && b.scopes.contains(&scope))
        .map(|b| b.label)
}

/// The bindings shown in `scope`'s footer, most important first (a narrow terminal shows only
/// the start): what the pane is for, then leaving it, then navigation everyone knows.
pub fn footer(scope: Scope) -> Vec<&'static Binding> {
    let mut list: Vec<&'static Binding> = BINDINGS
        .iter()
        .filter(|b| {
            b.footer.is_some()
                && (b.scopes.contains(&scope)
                    || (PANES.contains(&scope) && b.scopes.contains(&S::Global)))
        })
        .collect();
    list.sort_by_key(|b| footer_rank(b.action, scope));
    list
}

fn footer_rank(a: Action, scope: Scope) -> u8 {
    match a {
        // In the detail pane selecting is a convenience; the ways out come first there.
        A::ToggleSelect if scope == S::Detail => 9,
        A::Replay | A::Accept | A::Search => 0,
        A::Cancel | A::Open | A::NextMatch => 1,
        A::Filter | A::ToggleKeep | A::PrevMatch | A::ToggleOrigin => 2,
        A::ToggleSelect | A::ToggleDryRun | A::ToggleOrdinary | A::ToggleAgain => 3,
        A::ToggleFailureStamp => 4,
        A::CycleCanary => 4,
        A::ToggleGroups | A::RateUp | A::RateDown | A::CycleGrouping | A::GroupNote => 4,
        A::ToggleTrace | A::SwitchField => 5,
        A::Back => 6,
        A::Help => 7,
        // After help: the pager is in the footer only where there is room.
        A::Quit | A::PageBody => 8,
        A::CommandLine => 9,
        A::NextPane => 10,
        _ => 11,
    }
}

/// The help screen's sections: every binding once, under the first scope it applies to, with
/// the bindings of every pane under "Everywhere".
pub fn help_sections() -> Vec<(&'static str, Vec<&'static Binding>)> {
    let mut sections: Vec<(&'static str, Vec<&'static Binding>)> = Vec::new();
    for b in BINDINGS {
        let title = if b.scopes == PANES || b.scopes.first() == Some(&S::Global) {
            S::Global.title()
        } else {
            b.scopes.first().map_or(S::Global.title(), |s| s.title())
        };
        match sections.iter_mut().find(|(t, _)| *t == title) {
            Some((_, list)) => list.push(b),
            None => sections.push((title, vec![b])),
        }
    }
    sections
}
