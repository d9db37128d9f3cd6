//! Replay: dead letters back to where they will really be consumed. The one home of
//! `warren replay` and the TUI's replay modal, on its ports (`ops::ports::ReplayPort` for the
//! broker, the memory port for Warren's store), which `Session` implements.

use tokio::sync::watch;

use super::ports::{FirstSeen, ReplayPort};
use super::record::{self, Record};
use super::rights::{self, Act};
use super::{Front, Plan, Refusal, Stop};
use crate::broker::replay::{Progress, Summary};
use crate::broker::session::{Preview, ReplaySpec, SessionError, WriteCheck};
use crate::domain::canary::{CanaryPlan, CanaryRule, Sight};
use crate::domain::sanitize::one_line;
use crate::store::{AuditStart, Operation};

/// A replay as the operator asked for it.
pub struct ReplayRequest {
    /// What to replay and how; its `run_id` is given here.
    pub spec: ReplaySpec,
    /// Look and show the plan; move nothing.
    pub dry_run: bool,
    /// Read the head first even where the target is known without it (the TUI's plan, a
    /// dry run); else a run reads nothing first where it can (`Session::preview_to_run`).
    pub look_first: bool,
    /// Keep the run off the record (`--no-audit`), with why.
    pub unaudited: Option<String>,
    /// The selection's words for the audit: the filter and the group.
    pub filter: Option<String>,
    pub group: Option<String>,
    /// Replay the first few, and the rest only once those were consumed and did not come back
    /// (`domain::canary`).
    pub canary: Option<CanaryRule>,
    /// Edit, then replay (`ops::edit`): the selection goes to the operator as a document
    /// (`Front::edit`), and only what they changed is replayed, as edited; the originals are
    /// archived as this says.
    pub edit: Option<EditArchive>,
}

/// Where an edit keeps the originals: the archive stream (`create`: created without asking
/// when missing) or the local archive file.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct EditArchive {
    pub local: bool,
    pub create: bool,
}

/// A replay on the record, ready to move its first message.
pub struct Ready<'s, B: ReplayPort> {
    s: &'s B,
    spec: ReplaySpec,
    preview: Preview,
    first_seen: FirstSeen,
    store: Option<B::Memory>,
    record: Record<B::Log>,
    canary: Option<(CanaryPlan, Option<B::Tap>)>,
    /// What an edit changed, for the record.
    edits: Vec<crate::domain::edit::EditRecord>,
}

/// Rights, plan, go-ahead and the audit's start: everything before the first message moves.
pub async fn prepare<'s, B: ReplayPort>(
    s: &'s B,
    mut req: ReplayRequest,
    front: &mut dyn Front,
) -> Result<Ready<'s, B>, Stop> {
    // Read-only is decided before anything is read for a run: no channel is ever put in
    // confirm mode or published on.
    let mut steps = crate::broker::steps::Steps::new("replay");
    // An edit is refused before any editor opens, a dry run's too: read-only edits nothing.
    if !req.dry_run || req.edit.is_some() {
        rights::admit(s, Act::Replay).await.map_err(Stop::Refused)?;
    }
    steps.done("rights");
    let audited = req.unaudited.is_none() && !req.dry_run;
    // One store for the audit and for first-seen times. The audit needs it; a dry run looks
    // and records first-seen times when it can.
    let store = match s.memory() {
        Ok(st) => Some(st),
        Err(e) if audited => {
            return Err(Stop::Refused(Refusal::Store {
                why: e.to_string(),
                undone: "nothing moved",
            }));
        }
        Err(_) => None,
    };
    steps.done("store");
    let run_id = crate::broker::audit::new_run_id(jiff::Timestamp::now());
    req.spec.run_id = Some(run_id.clone());
    let asked = match req.edit {
        Some(how) => Some(super::edit::ask(s, &mut req.spec, how, req.dry_run, front).await?),
        None => None,
    };
    let (preview, first_seen) = match plan(s, &req).await {
        // A look that would spend quorum deliveries again is the operator's to allow.
        Err(Stop::ReadCost { queue, text }) => match front.read_again(&queue, &text) {
            Ok(true) => {
                req.spec.consent = crate::broker::session::ReadConsent::ReadAgain;
                plan(s, &req).await?
            }
            Ok(false) => return Err(Stop::Refused(Refusal::NotReadAgain { queue })),
            Err(_) => return Err(Stop::ReadCost { queue, text }),
        },
        other => other?,
    };
    steps.done("plan");
    let mut canary = canary_plan(s, &req, &preview, front).await;
    let asks = super::Questions::before(Operation::Replay, preview.selected);
    front.plan(Plan::Replay {
        preview: &preview,
        spec: &req.spec,
        dry_run: req.dry_run,
        canary: canary.as_ref(),
        asks,
    });
    if !preview.refusals.is_empty() {
        return Err(Stop::Refused(Refusal::Plan {
            undone: "nothing moved",
            refusals: preview.refusals.clone(),
        }));
    }
    if req.dry_run {
        return Err(Stop::DryRun);
    }
    // Publishing needs write permission on the exchange, not on the queues it reaches.
    match s.publish_refusal(&preview.publish_targets()).await {
        WriteCheck::Allowed => {}
        WriteCheck::Refused(why) => {
            return Err(Stop::Refused(Refusal::Target {
                why,
                undone: "nothing moved",
            }));
        }
        // The engine stops at the first publish the broker refuses.
        WriteCheck::Unknown(why) => front.say(&format!(
            "write permission unknown ({}); the replay stops at the first refused publish",
            one_line(&why, 600)
        )),
    }
    steps.done("write check");
    match front.go_ahead(preview.selected, Operation::Replay, asks.typed_count) {
        Ok(true) => {}
        Ok(false) => return Err(Stop::Declined),
        Err(why) => return Err(Stop::Usage(why)),
    }
    if let Some(asked) = &asked {
        super::edit::keep_originals(s, asked, &req.spec.queue, &run_id, front).await?;
    }
    let who = s.operator();
    let start = AuditStart {
        run_id: run_id.clone(),
        at: jiff::Timestamp::now(),
        os_user: crate::store::current_os_user(),
        broker_user: who.broker_user,
        context: who.context,
        vhost: who.vhost,
        from_queue: req.spec.queue.clone(),
        targets: preview.targets.keys().cloned().collect(),
        filter: req.filter.clone(),
        group: req.group.clone(),
        requested_limit: req.spec.limit,
        dry_run: false,
        keep_attempts: req.spec.keep_attempts,
        clear_expiry: req.spec.clear_expiry,
        strip_failure_stamp: req.spec.strip_failure_stamp,
    };
    let record = match (&store, &req.unaudited) {
        (Some(st), None) => {
            let id = Record::start_local(st, Operation::Replay, &start).map_err(Stop::Refused)?;
            let consent = front.audit_consent(who.create_streams);
            Record::begin(s, id, Operation::Replay, &start, consent).await
        }
        (_, why) => Record::off(
            Operation::Replay,
            &run_id,
            why.as_deref().unwrap_or("no store"),
        ),
    };
    steps.done("audit start");
    let canary = match canary.take() {
        Some(plan) => Some(open_tap(s, &req.spec.queue, plan, front).await),
        None => None,
    };
    front.started(&run_id, record.on_broker());
    Ok(Ready {
        s,
        spec: req.spec,
        preview,
        first_seen,
        store,
        record,
        canary,
        edits: asked
            .map(|a| a.edits.messages.iter().map(|e| e.record()).collect())
            .unwrap_or_default(),
    })
}

/// The plan: a look at the head (a dry run, the TUI), else as little reading as the run needs;
/// first-seen times are remembered on the way.
async fn plan<B: ReplayPort>(s: &B, req: &ReplayRequest) -> Result<(Preview, FirstSeen), Stop> {
    // A canary needs to know where its messages rest (to see them taken and come back).
    let look = req.dry_run || req.look_first || req.canary.is_some();
    s.plan(&req.spec, look).await.map_err(stop_of)
}

/// A session error as the stop it is.
pub(crate) fn stop_of(e: SessionError) -> Stop {
    if let SessionError::NeedsConsent { queue, text } = e {
        return Stop::ReadCost { queue, text };
    }
    // A queue name that names nothing is the request's mistake.
    if matches!(
        e,
        SessionError::Management(crate::broker::management::ManagementError::NoQueue { .. })
    ) {
        return Stop::Usage(e.to_string());
    }
    match e {
        // The session's refusal, typed where it knew why (read-only, an auto-delete queue).
        SessionError::Refused(r) => Stop::Refused(r),
        e if e.is_broker() => Stop::Broker(e.to_string()),
        e => Stop::refused(e.to_string()),
    }
}

impl<B: ReplayPort> Ready<'_, B> {
    /// How many messages the run may move (never more than the operator confirmed).
    pub fn count(&self) -> u64 {
        self.preview.selected
    }

    pub fn run_id(&self) -> &str {
        self.record.run_id()
    }

    /// The run itself: the engine, stopped by `cancel`, its progress to `on_progress`; with a
    /// canary, in two stretches and a wait between them (`canary::run`).
    pub async fn run(
        &mut self,
        cancel: watch::Receiver<bool>,
        mut on_progress: impl FnMut(&Progress) + Send,
    ) -> Result<Summary, SessionError> {
        let mut steps = crate::broker::steps::Steps::new("replay run");
        let held = self.s.held_elsewhere(&self.spec.queue).await;
        steps.done("held elsewhere");
        let mut result = match self.canary.take() {
            Some((plan, tap)) => {
                let run = super::canary::Stretches {
                    s: self.s,
                    spec: &self.spec,
                    preview: &self.preview,
                    first_seen: &self.first_seen,
                };
                run.run(plan, tap, cancel, &mut on_progress).await
            }
            None => {
                self.s
                    .replay(
                        &self.spec,
                        &self.preview,
                        self.first_seen.clone(),
                        cancel,
                        on_progress,
                    )
                    .await
            }
        };
        if let Ok(sum) = &mut result {
            sum.held_elsewhere = held;
        }
        steps.done("moving");
        result
    }

    /// The audit's finish in both places; returns what could not be written, to be said once.
    pub async fn finish(mut self, result: &Result<Summary, SessionError>) -> Vec<String> {
        // A canary whose run never started still holds its watch queue's connection.
        if let Some((_, Some(tap))) = self.canary.take() {
            self.s.close_tap(tap).await;
        }
        let moved = result
            .as_ref()
            .map(|s| s.moved_ids.clone())
            .unwrap_or_default();
        let mut steps = crate::broker::steps::Steps::new("replay finish");
        let mut out = record::outcome_of(result);
        out.edits = std::mem::take(&mut self.edits);
        self.record.finish_local(self.store.as_ref(), &out, &moved);
        steps.done("local audit");
        self.record.finish_broker(out, &moved).await;
        steps.done("broker audit");
        self.record.take_notes()
    }
}

/// The canary's plan, when one was asked for and means something here (a canary as large as
/// the selection is said and dropped).
async fn canary_plan<B: ReplayPort>(
    s: &B,
    req: &ReplayRequest,
    preview: &Preview,
    front: &mut dyn Front,
) -> Option<CanaryPlan> {
    let rule = req.canary.clone()?;
    if !rule.applies(preview.selected) {
        if rule.size > 0 {
            front.say(&format!(
                "canary: not needed, the selection ({}) is no larger than the canary ({})",
                preview.selected, rule.size
            ));
        }
        return None;
    }
    Some(s.canary_plan(&req.spec.queue, preview, rule).await)
}

/// The canary's watch queue, set up before its first message moves; where it cannot be, the
/// canary estimates instead, and says so.
async fn open_tap<B: ReplayPort>(
    s: &B,
    dlq: &str,
    mut plan: CanaryPlan,
    front: &mut dyn Front,
) -> (CanaryPlan, Option<B::Tap>) {
    if !matches!(plan.sight, Sight::Exact { .. }) {
        return (plan, None);
    }
    match s.open_tap(dlq, &plan).await {
        Ok(tap) => (plan, Some(tap)),
        Err(why) => {
            let why = format!(
                "its watch queue could not be set up: {}",
                one_line(&why, 300)
            );
            front.say(&format!(
                "canary: {why}; it estimates from the DLQ's growth instead"
            ));
            plan.sight = Sight::Estimate { why };
            (plan, None)
        }
    }
}
