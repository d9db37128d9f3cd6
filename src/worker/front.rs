//! The TUI's worker as the operations' front end (`crate::ops::Front`): the operator already
//! answered in a modal, so it asks nothing new. The go-ahead holds a run to the count the
//! operator confirmed; what a step says, and the plans, are kept for the reports the worker
//! sends.

use tokio::sync::mpsc;

use super::protocol::{OperationKind, ReplayPreview, Report, RestoreHow, RestorePreview, Ticket};
use crate::broker::audit::Consent;
use crate::domain::run::RunKind;
use crate::domain::sanitize;
use crate::ops::{self, Plan};

#[derive(Default)]
pub(super) struct TuiFront {
    /// The count the operator confirmed (`None`: a plan, nothing runs).
    pub(super) expected: Option<u64>,
    /// The operator typed that count in the modal.
    pub(super) typed: bool,
    /// The request a plan answers, for its report.
    pub(super) ticket: Ticket,
    pub(super) how: RestoreHow,
    /// Lines for the command log, in order.
    pub(super) oplog: Vec<(OperationKind, String)>,
    /// What a step said, for the notice line.
    pub(super) notices: Vec<String>,
    /// The replay's plan for the modal, and a dry run's words.
    pub(super) replay_preview: Option<ReplayPreview>,
    pub(super) dry_summary: Vec<String>,
    /// The restore's plan for the modal.
    pub(super) restore_preview: Option<RestorePreview>,
    /// The operator's answer in the modal to creating the missing audit stream.
    pub(super) create_audit: Option<bool>,
    /// Edit, then replay: the document as the operator saved it in Warren's editor.
    pub(super) edited: Option<String>,
    /// Where a restore plan's read of the archive is told as it goes.
    pub(super) reading: Option<ReadingTo>,
}

/// The UI's channel, and the archive a restore plan reads.
pub(super) struct ReadingTo {
    pub(super) events: mpsc::Sender<Report>,
    pub(super) vhost: String,
    pub(super) queue: String,
}

impl TuiFront {
    /// For a run the operator confirmed for `expected` messages (`typed`: by typing the count).
    pub(super) fn run(expected: u64, typed: bool) -> TuiFront {
        TuiFront {
            expected: Some(expected),
            typed,
            ..TuiFront::default()
        }
    }

    /// For a plan that answers `ticket`.
    pub(super) fn plan(ticket: Ticket, how: RestoreHow) -> TuiFront {
        TuiFront {
            ticket,
            how,
            ..TuiFront::default()
        }
    }
}

impl ops::Front for TuiFront {
    fn plan(&mut self, plan: Plan<'_>) {
        match plan {
            Plan::Replay {
                preview,
                spec,
                dry_run,
                canary,
                asks,
            } => {
                if let Some(c) = canary {
                    self.notices.push(c.describe());
                }
                self.oplog
                    .push((OperationKind::Read, replay_read_text(preview)));
                if dry_run {
                    self.dry_summary = preview.describe(spec, true);
                }
                self.replay_preview = Some(replay_preview(preview, spec, self.ticket, asks));
            }
            Plan::Archive(p) => {
                let verb = if p.op == RunKind::Discard {
                    "discard"
                } else {
                    "archive"
                };
                self.oplog.push((
                    OperationKind::Read,
                    format!(
                        "read {} messages of {} for the {verb}, all left in place; {} selected",
                        p.sel.examined,
                        p.spec.queue,
                        p.sel.messages.len()
                    ),
                ));
            }
            Plan::Restore(p) => {
                self.oplog.push((
                    OperationKind::Read,
                    format!(
                        "read the archive {} for a restore plan, nothing taken: {} to restore, {} restored before{}",
                        p.place.label(),
                        p.plan.count(),
                        p.restored_before,
                        if p.again { " (taken again)" } else { " (left out)" }
                    ),
                ));
                self.restore_preview =
                    Some(restore_preview(p, self.ticket, self.how, &self.notices));
            }
        }
    }

    /// The modal confirmed `expected`: a selection that grew since is refused, never moved.
    fn go_ahead(&mut self, count: u64, kind: RunKind, typed: bool) -> Result<bool, String> {
        let verb = kind.verb();
        match self.expected {
            Some(e) if count > e => Err(format!(
                "the selection now holds {count} messages, {e} were confirmed: nothing moved; open the {verb} again"
            )),
            // The home asks for the count typed; a modal that did not ask for it is not a yes.
            Some(_) if typed && !self.typed => Err(format!(
                "to {verb} {count} message(s) the count is typed in the modal: nothing moved; open the {verb} again"
            )),
            Some(_) => Ok(true),
            None => Err("a plan moves nothing".into()),
        }
    }

    /// The TUI cannot stop to ask: the stream is created only where the context says so.
    fn audit_consent(&mut self, configured: Option<bool>) -> Consent<'_> {
        match (configured, self.create_audit) {
            (Some(true), _) | (None, Some(true)) => Consent::Create,
            (None, Some(false)) => Consent::Declined,
            _ => Consent::Refuse,
        }
    }

    fn create_archive(&mut self, _what: &str) -> Result<bool, String> {
        Err(
            "the archive stream does not exist yet: create it once with `warren archive QUEUE --create-archive --limit 1`, or set archive_create = true (or archive_local = true) in the context; nothing moved"
                .into(),
        )
    }

    fn read_again(&mut self, _queue: &str, cost: &str) -> Result<bool, String> {
        Err(format!(
            "{cost}; nothing moved (open the queue and accept the read first)"
        ))
    }

    fn say(&mut self, text: &str) {
        self.notices.push(sanitize::one_line(text, 600));
    }

    /// Sent as it goes, never awaited: a full channel drops this count, and the next page
    /// sends a larger one.
    fn reading(&mut self, _what: &str, read: u64) {
        if let Some(to) = &self.reading {
            let _ = to.events.try_send(Report::RestoreReading {
                vhost: to.vhost.clone(),
                queue: to.queue.clone(),
                how: self.how,
                read,
                ticket: self.ticket,
            });
        }
    }

    fn started(&mut self, _run_id: &str, _on_broker: bool) {}

    /// The operator edited in Warren's editor, which checked the document as it was typed: a
    /// document that does not read here (the message changed since) is refused, not edited again.
    fn edit(&mut self, _document: &str, problem: Option<&str>) -> Result<Option<String>, String> {
        match (problem, &self.edited) {
            (None, Some(text)) => Ok(Some(text.clone())),
            (Some(p), _) => Err(format!("the edited message could not be read again: {p}")),
            (None, None) => Err("nothing was edited".into()),
        }
    }
}

/// A replay plan's read, for the command log.
fn replay_read_text(p: &crate::broker::session::Preview) -> String {
    let read = if p.reused {
        format!(
            "looked at the {} messages read earlier this session (no read: reading this queue again costs deliveries)",
            p.examined
        )
    } else {
        format!(
            "read {} messages, all left in place; {}",
            p.examined,
            p.cost.as_deref().unwrap_or("cost no deliveries")
        )
    };
    format!(
        "planned a replay from {}: {read}; {} selected",
        p.queue, p.selected
    )
}

/// Whether some message of the plan carries Symfony's failure stamp as a header: the plan warns
/// it may be stripped, or strips it.
fn failure_stamp_strippable(p: &crate::broker::session::Preview) -> bool {
    use crate::domain::replay::ReplayWarning;
    let offer = ReplayWarning::SymfonyDropsOnFailure { strippable: true }.to_string();
    p.warnings.contains_key(&offer)
        || p.removed
            .iter()
            .any(|h| h == crate::domain::convention::symfony::FAILURE_HEADER)
}

fn replay_preview(
    p: &crate::broker::session::Preview,
    spec: &crate::broker::session::ReplaySpec,
    ticket: Ticket,
    asks: ops::Questions,
) -> ReplayPreview {
    let mut warnings: Vec<String> = p.refusals.iter().map(|r| format!("refused: {r}")).collect();
    warnings.extend(p.warnings.iter().map(|(w, n)| format!("{n} × {w}")));
    warnings.extend(p.notices.iter().cloned());
    ReplayPreview {
        vhost: String::new(),
        queue: spec.queue.clone(),
        count: p.selected,
        targets: p
            .targets
            .iter()
            .map(|(label, t)| {
                // "orders.v2 (redirected from orders: renamed) (exchange '', …) × 3"
                let redirected = t
                    .redirected
                    .as_ref()
                    .map_or(String::new(), |r| format!(" ({})", r.describe()));
                format!(
                    "{label}{redirected} (exchange '{}', routing key '{}') × {}",
                    t.exchange, t.routing_key, t.count
                )
            })
            .collect(),
        reaches: p
            .targets
            .values()
            .flat_map(|t| t.reaches.iter().cloned())
            .collect(),
        removes: p.removed.iter().cloned().collect(),
        adds: p.added.iter().cloned().collect(),
        replayed_before: p.replayed_before,
        keep_attempts: spec.keep_attempts,
        strip_failure_stamp: spec.strip_failure_stamp,
        failure_stamp_strippable: failure_stamp_strippable(p),
        warnings,
        typed_count: asks.typed_count,
        create_audit: None,
        ticket,
    }
}

fn restore_preview(
    p: &ops::restore::Planned,
    ticket: Ticket,
    how: RestoreHow,
    notes: &[String],
) -> RestorePreview {
    let plan = &p.plan;
    let mut removes: Vec<String> = crate::domain::archive::HEADERS
        .iter()
        .map(|h| h.to_string())
        .collect();
    let mut adds = Vec::new();
    let mut warnings: Vec<String> = plan
        .kept
        .iter()
        .map(|(why, n)| format!("{n} × stays in the archive: {why}"))
        .collect();
    warnings.extend(notes.iter().cloned());
    if let Some(pv) = &plan.preview {
        removes.extend(pv.removed.iter().cloned());
        adds.extend(pv.added.iter().cloned());
        warnings.extend(pv.warnings.iter().map(|(w, n)| format!("{n} × {w}")));
        warnings.extend(pv.notices.iter().cloned());
    }
    RestorePreview {
        vhost: String::new(),
        queue: String::new(),
        how,
        count: plan.count(),
        targets: plan.target_lines(),
        restored_before: p.restored_before,
        removes,
        adds,
        refusals: plan.refused.clone(),
        warnings,
        typed_count: p.asks.typed_count,
        ticket,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ops::Front;

    #[test]
    fn the_go_ahead_needs_the_count_typed_where_the_home_asks_for_it() {
        let mut untyped = TuiFront::run(2, false);
        let r = untyped.go_ahead(2, RunKind::Discard, true);
        assert!(r.as_ref().is_err_and(|e| e.contains("typed")), "{r:?}");
        assert_eq!(untyped.go_ahead(2, RunKind::Archive, false), Ok(true));
        let mut typed = TuiFront::run(2, true);
        assert_eq!(typed.go_ahead(2, RunKind::Discard, true), Ok(true));
        // Never more than the operator confirmed, typed or not.
        assert!(typed.go_ahead(3, RunKind::Discard, true).is_err());
    }
}
