//! The modals' state: the replay, archive and restore forms and a run's progress, owned by
//! `State::overlay` (moved out of `state.rs`, which holds the rest of the UI state).

use ratatui_textarea::TextArea;

use super::event::{
    JobKind, ReplayOutcome, ReplayPreview, ReplayProgress, RestoreHow, RestorePreview,
};
use crate::domain::run::RunKind;
use crate::domain::selection;

/// Which field of the replay modal takes typed digits.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ModalField {
    Count,
    Rate,
    /// The backlog cap: publishing waits while the target holds this many ready messages.
    Backlog,
}

#[derive(Clone, Debug)]
pub struct ReplayModal {
    pub vhost: String,
    pub queue: String,
    pub selection: selection::Selection,
    /// What the operator picked, in words ("2 selected messages", "group …").
    pub what: String,
    /// The worker's plan; accept is impossible until it arrived.
    pub preview: Option<ReplayPreview>,
    pub rate: u32,
    pub rate_text: String,
    /// The backlog cap (`--max-backlog`); 0: none.
    pub max_backlog: u64,
    pub backlog_text: String,
    pub keep_attempts: bool,
    /// Symfony's `SentToFailureTransportStamp` removed (offered when the plan has it as a header).
    pub strip_failure_stamp: bool,
    pub dry_run: bool,
    /// The count typed by the operator (where the plan asks for it).
    pub typed: String,
    pub field: ModalField,
    /// The canary's size, or off; set from the plan's count until the operator changes it.
    pub canary: Option<u64>,
    pub canary_touched: bool,
    /// The answer to creating the missing audit stream (the plan's `create_audit`): asked
    /// once per context, remembered in `Answers::audit`.
    pub create_audit: Option<bool>,
    /// Edit, then replay: the edited copy this modal replays.
    pub edited: Option<super::edit::EditedCopy>,
}

impl ReplayModal {
    /// The modal on `selection` of (vhost, queue), waiting for its plan.
    pub fn new(
        (vhost, queue): (String, String),
        selection: selection::Selection,
        what: String,
        rate: u32,
    ) -> ReplayModal {
        ReplayModal {
            vhost,
            queue,
            selection,
            what,
            preview: None,
            rate,
            rate_text: rate.to_string(),
            max_backlog: 0,
            backlog_text: "0".into(),
            keep_attempts: false,
            strip_failure_stamp: false,
            dry_run: false,
            typed: String::new(),
            field: ModalField::Count,
            canary: None,
            canary_touched: false,
            create_audit: None,
            edited: None,
        }
    }

    pub fn count(&self) -> Option<u64> {
        self.preview.as_ref().map(|p| p.count)
    }

    /// The plan asks for the count typed, and this run moves messages.
    pub fn needs_typed_count(&self) -> bool {
        !self.dry_run && self.preview.as_ref().is_some_and(|p| p.typed_count)
    }

    /// What Enter does now, in the one word the modal and the footer both show: in the rate
    /// field it only leaves the field, so a typed rate never starts the run.
    pub fn enter_does(&self) -> &'static str {
        match (self.field, self.dry_run) {
            (ModalField::Rate, _) => "set rate",
            (ModalField::Backlog, _) => "set backlog cap",
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
            return Some(type_to_confirm(count, &self.typed));
        }
        None
    }

    /// What Warren would create for the shared record, while nobody answered for it.
    pub fn audit_question(&self) -> Option<&str> {
        let p = self.preview.as_ref()?;
        p.create_audit
            .as_deref()
            .filter(|_| self.create_audit.is_none())
    }
}

/// The other ways out of a dead-letter queue, as their modal asks for them: the two run kinds
/// (`domain::run::RunKind`) this modal can start, so its code never meets a replay or a restore.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ArchiveKind {
    /// Into the vhost's archive, restorable.
    Archive,
    /// Deleted for good, after a snapshot of exactly what goes.
    Discard,
}

impl ArchiveKind {
    /// The run it starts.
    pub fn run(self) -> RunKind {
        match self {
            ArchiveKind::Archive => RunKind::Archive,
            ArchiveKind::Discard => RunKind::Discard,
        }
    }
}

/// The longest archive reason kept (the archive's header holds it).
pub const MAX_REASON_CHARS: usize = 300;

/// The archive (or discard) modal: what goes, where, why; the count typed where it must be.
#[derive(Clone, Debug)]
pub struct ArchiveModal {
    pub kind: ArchiveKind,
    pub vhost: String,
    pub queue: String,
    pub selection: selection::Selection,
    /// What the operator picked, in words ("2 selected messages", "group …").
    pub what: String,
    /// How many messages the selection holds as read; the run never moves more.
    pub count: u64,
    /// Why (an archive's `warren-archive-reason`); one line.
    pub reason: TextArea<'static>,
    /// The count typed by the operator, where `asks` says.
    pub typed: String,
    /// What the home asks before this run (`ops::Questions::before`): no plan comes for an
    /// archive, whose count is the selection's as read.
    pub asks: crate::ops::Questions,
    /// The archive stream is missing and must be asked about first (`Overview::archive_question`,
    /// asked once per context): `s` creates it, `l` keeps the archive in the local file.
    pub question: Option<String>,
    pub place: crate::worker::protocol::ArchivePlace,
}

impl ArchiveModal {
    pub fn needs_typed_count(&self) -> bool {
        self.asks.typed_count
    }

    pub fn verb(&self) -> &'static str {
        self.kind.run().as_str()
    }

    /// The reason as typed, on one line, bounded.
    pub fn reason_text(&self) -> String {
        let text = self.reason.lines().join(" ");
        text.trim().chars().take(MAX_REASON_CHARS).collect()
    }

    /// Why Enter does nothing yet, if it does nothing.
    pub fn blocked(&self) -> Option<String> {
        if self.count == 0 {
            return Some(format!(
                "nothing to {}: the selection is empty",
                self.verb()
            ));
        }
        if self.question.is_some() {
            return Some(
                "s creates the archive stream, l keeps the archive in a local file".into(),
            );
        }
        if self.needs_typed_count() && self.typed != self.count.to_string() {
            return Some(type_to_confirm(self.count, &self.typed));
        }
        None
    }

    /// The run the worker is asked for.
    pub fn job(&self) -> JobKind {
        match self.kind {
            ArchiveKind::Archive => JobKind::Archive {
                reason: self.reason_text(),
                place: self.place,
            },
            ArchiveKind::Discard => JobKind::Discard,
        }
    }
}

/// The restore modal (`r` in the archive): how many, where they go (back into the DLQ each came
/// from, or replayed to where it failed), what was restored before and is left out; the count
/// typed where it must be. The worker's plan comes for the toggles in force.
#[derive(Clone, Debug)]
pub struct RestoreModal {
    /// The archive stream, and its vhost.
    pub vhost: String,
    pub queue: String,
    pub selection: selection::Selection,
    /// What the operator picked, in words ("2 selected messages", "group …").
    pub what: String,
    pub how: RestoreHow,
    /// The worker's plan for `how`; Enter waits for it.
    pub preview: Option<RestorePreview>,
    /// How many archived messages the plan for `how` has read so far, while it reads.
    pub read: Option<u64>,
    /// The count typed by the operator (where the plan asks for it).
    pub typed: String,
}

impl RestoreModal {
    pub fn count(&self) -> Option<u64> {
        self.preview.as_ref().map(|p| p.count)
    }

    pub fn needs_typed_count(&self) -> bool {
        self.preview.as_ref().is_some_and(|p| p.typed_count)
    }

    /// Why Enter does nothing yet, if it does nothing.
    pub fn blocked(&self) -> Option<String> {
        let Some(p) = &self.preview else {
            return Some(match self.read {
                Some(n) => format!("waiting for the restore plan… {n} archived messages read"),
                None => "waiting for the restore plan…".into(),
            });
        };
        if let Some(why) = p.refusals.first() {
            return Some(format!("refused: {why}"));
        }
        if p.count == 0 {
            return Some("nothing to restore".into());
        }
        if self.needs_typed_count() && self.typed != p.count.to_string() {
            return Some(type_to_confirm(p.count, &self.typed));
        }
        None
    }

    /// What the run is.
    pub fn job(&self) -> JobKind {
        JobKind::Restore(self.how)
    }
}

#[derive(Clone, Debug)]
pub struct ReplayRun {
    /// A replay, an archive or a discard: the progress says which.
    pub job: JobKind,
    pub vhost: String,
    pub queue: String,
    pub dry_run: bool,
    pub rate: u32,
    pub progress: ReplayProgress,
    pub cancelling: bool,
    pub outcome: Option<ReplayOutcome>,
    /// Notes the worker sent during the run, put in the command log (`@`) rather than on the
    /// notice line: the outcome's line says they are there.
    pub notes: usize,
}

/// Why Enter waits for a typed count, with what was typed so far: on a short screen, where the
/// count's own field may be hidden, the refusal (never cut) still shows it.
fn type_to_confirm(count: u64, typed: &str) -> String {
    if typed.is_empty() {
        format!("type {count} to confirm")
    } else {
        format!("type {count} to confirm; typed {typed}")
    }
}
