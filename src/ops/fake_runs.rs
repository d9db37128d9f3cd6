//! The in-memory broker (`ops::fake::FakeBroker`) behind the replay's and the restore's ports:
//! a plan it is told to return, a canary that goes ahead or stops as told, a run and a restore
//! that end as told (completed, cancelled with N moved and M left, failed). Every call goes to
//! the fake's one ordered log.

use std::collections::{BTreeMap, HashMap};
use std::time::Instant;

use tokio::sync::watch;

use super::fake::{FakeBroker, FakeMemory, summary};
use super::ports::{FirstSeen, Publishing, ReplayPort, RestorePort};
use crate::broker::archive::{Place, Publish};
use crate::broker::canary::Canary;
use crate::broker::replay::{Progress, StopReason, Summary};
use crate::broker::restore::{self, Ask, Chosen, ChosenRead, Outcome, ReplayWay};
use crate::broker::session::{
    Explained, Preview, ReadConsent, ReplaySpec, SessionError, TargetPreview, WriteCheck,
};
use crate::domain::archive::Stamp;
use crate::domain::canary::{CanaryDecision, CanaryPlan, CanaryRule, CanaryWait, Sight, Watch};
use crate::domain::message::DeadLetter;
use crate::domain::outcome::RunOutcome;
use crate::store::AuditOutcome;

/// The target every fake replay goes to.
pub(crate) const TARGET: &str = "orders";

/// What replay and restore meet, beside the DLQ (`Dlq`: the heads, the read cost, how an
/// engine run ends).
#[derive(Default)]
pub(crate) struct Runs {
    /// The plan a replay gets ([`FakeBroker::replayable`] sets one).
    pub(crate) preview: Preview,
    /// The publish check refuses: why.
    pub(crate) publish_refused: Option<String>,
    /// How the canary's wait ends (`None`: it goes ahead).
    pub(crate) canary: Option<CanaryDecision>,
    /// The canary's watch queue cannot be set up: why.
    pub(crate) tap_refused: Option<String>,
    /// The edit's originals cannot be archived: why.
    pub(crate) keep_refused: Option<String>,
    /// Restore: the archived messages that match.
    pub(crate) archived: u64,
    /// Restore: the target has no room: why.
    pub(crate) no_room: Option<String>,
    /// Restore: how the publishing ends (`None`: every message restored).
    pub(crate) restored: Option<Restored>,
}

/// How a restore's publishing ends.
#[derive(Clone, Debug)]
pub(crate) enum Restored {
    /// Stopped by the operator after `n` were restored.
    Cancelled(u64),
    /// Could not start, or broke off: why.
    Failed(String),
}

/// The canary's watch queue.
pub(crate) struct FakeTap;

impl FakeBroker {
    /// A broker whose `queue` holds `n` dead letters, all planned to go back to [`TARGET`].
    pub(crate) fn replayable(queue: &str, n: u64) -> FakeBroker {
        let mut b = FakeBroker::dlq(queue, n);
        let target = TargetPreview {
            routing_key: TARGET.into(),
            count: n,
            reaches: vec![TARGET.into()],
            exact: true,
            ..Default::default()
        };
        b.runs.preview = Preview {
            queue: queue.into(),
            selected: n,
            matched: n,
            examined: n,
            targets: [(format!("default exchange → {TARGET}"), target)].into(),
            allowed: [(String::new(), TARGET.to_string())].into(),
            ..Default::default()
        };
        b
    }

    /// An archive of `n` messages archived from `queue`.
    pub(crate) fn archived(n: u64) -> FakeBroker {
        let mut b = FakeBroker::default();
        b.runs.archived = n;
        b
    }
}

impl Publishing for FakeBroker {
    async fn publish_refusal(&self, targets: &[(String, String)]) -> WriteCheck {
        self.call(&format!("publish_check {}", targets.len()));
        match &self.runs.publish_refused {
            Some(why) => WriteCheck::Refused(why.clone()),
            None => WriteCheck::Allowed,
        }
    }
}

impl ReplayPort for FakeBroker {
    type Tap = FakeTap;

    async fn plan(
        &self,
        spec: &ReplaySpec,
        look: bool,
    ) -> Result<(Preview, FirstSeen), SessionError> {
        self.call(&format!(
            "plan {} look={look} {:?}",
            spec.queue, spec.consent
        ));
        if self.dlq.read_costs && spec.consent != ReadConsent::ReadAgain {
            return Err(SessionError::NeedsConsent {
                queue: spec.queue.clone(),
                text: "reading again spends a delivery of each message".into(),
            });
        }
        Ok((self.runs.preview.clone(), HashMap::new()))
    }

    async fn canary_plan(&self, _dlq: &str, _preview: &Preview, rule: CanaryRule) -> CanaryPlan {
        self.call(&format!("canary_plan {}", rule.size));
        CanaryPlan {
            rule,
            sight: Sight::Exact {
                exchanges: vec!["dlx".into()],
            },
            targets: vec![TARGET.into()],
            through_wait_queues: false,
        }
    }

    async fn open_tap(&self, _dlq: &str, _plan: &CanaryPlan) -> Result<FakeTap, String> {
        self.call("open_tap");
        self.runs.tap_refused.clone().map_or(Ok(FakeTap), Err)
    }

    async fn close_tap(&self, _tap: FakeTap) {
        self.call("close_tap");
    }

    async fn canary_wait(
        &self,
        c: &Canary<'_>,
        tap: Option<&mut FakeTap>,
        _cancel: &mut watch::Receiver<bool>,
        _on_wait: impl FnMut(&CanaryWait) + Send,
    ) -> (CanaryDecision, Watch) {
        self.call(&format!(
            "canary_wait moved={} tap={}",
            c.moved,
            tap.is_some()
        ));
        let decision = self.runs.canary.unwrap_or(CanaryDecision::WentAhead);
        (decision, Watch::new(c.plan, c.moved, Instant::now()))
    }

    async fn left_in(&self, queue: &str) -> Option<u64> {
        self.call(&format!("left_in {queue}"));
        self.dlq.heads.get(queue).copied()
    }

    async fn held_elsewhere(&self, queue: &str) -> u64 {
        self.call(&format!("held_elsewhere {queue}"));
        0
    }

    async fn replay(
        &self,
        spec: &ReplaySpec,
        preview: &Preview,
        _first_seen: FirstSeen,
        _cancel: watch::Receiver<bool>,
        mut on_progress: impl FnMut(&Progress) + Send,
    ) -> Result<Summary, SessionError> {
        self.call(&format!("run {} limit={:?}", spec.queue, spec.limit));
        if let Some(why) = &self.dlq.run_error {
            return Err(SessionError::Broker(why.clone()));
        }
        let may = spec
            .limit
            .map_or(preview.selected, |l| l.min(preview.selected));
        let sum = self
            .dlq
            .ending
            .clone()
            .unwrap_or_else(|| summary(StopReason::ReachedStartDepth, may));
        on_progress(&sum.progress);
        Ok(sum)
    }

    async fn keep_copies(
        &self,
        place: &Place,
        _stamp: &Stamp,
        messages: &[DeadLetter],
    ) -> Result<(), String> {
        self.call(&format!("keep_copies {} {}", place.label(), messages.len()));
        self.runs.keep_refused.clone().map_or(Ok(()), Err)
    }
}

/// The archived message `i`, archived from `queue`.
fn archived(queue: &str, i: u64) -> (String, Explained) {
    let mut message = DeadLetter {
        queue: queue.into(),
        ..Default::default()
    };
    message.properties.message_id = Some(format!("a{i}"));
    let e = Explained {
        explanation: crate::domain::explain::explain(&message),
        key: crate::domain::identity::message_key(&message),
        message,
        first_seen: None,
    };
    (format!("r{i}"), e)
}

/// A restore's plan of `chosen`, each to `to` (or back where it came from).
fn plan_of(chosen: &[(String, Explained)], to: Option<&str>) -> restore::Plan {
    let mut plan = restore::Plan::default();
    for (r, e) in chosen {
        let queue = to.unwrap_or(&e.message.queue).to_string();
        plan.items.push(Publish {
            reference: r.clone(),
            exchange: String::new(),
            routing_key: queue.clone(),
            props: Default::default(),
            body: Vec::new(),
        });
        *plan.targets.entry(queue.clone()).or_insert(0) += 1;
        plan.keys_of.insert(r.clone(), e.key.clone());
        if !plan.publish_targets.iter().any(|(_, k)| k == &queue) {
            plan.publish_targets.push((String::new(), queue));
        }
    }
    plan
}

impl RestorePort for FakeBroker {
    fn archive_key(&self, place: &Place) -> String {
        format!("fake:{}", place.label())
    }

    fn window(&self) -> usize {
        500
    }

    async fn read_archive(
        &self,
        _memory: &mut FakeMemory,
        key: &str,
        _place: &Place,
        ask: &Ask,
        cap: usize,
        on_page: &mut (dyn FnMut(u64) + Send),
    ) -> Result<ChosenRead, String> {
        self.call(&format!("read_archive {key}"));
        let n = self.runs.archived;
        // Read a page of 1,000 at a time, as the archive's stream is.
        for page in 1..=n.div_ceil(1_000) {
            on_page((page * 1_000).min(n));
        }
        let take = ask.limit.unwrap_or(n).min(n).min(cap as u64);
        Ok(ChosenRead {
            chosen: Chosen {
                messages: (0..take).map(|i| archived("orders.dlq", i)).collect(),
                restored_before: 0,
            },
            capped: take < n,
            scanned: n,
            ..Default::default()
        })
    }

    async fn plan_back(&self, chosen: &[(String, Explained)]) -> Result<restore::Plan, String> {
        self.call(&format!("plan_back {}", chosen.len()));
        Ok(plan_of(chosen, None))
    }

    async fn plan_replay(
        &self,
        _place: &Place,
        chosen: Vec<(String, Explained)>,
        _way: &ReplayWay,
    ) -> Result<restore::Plan, String> {
        self.call(&format!("plan_replay {}", chosen.len()));
        let mut plan = plan_of(&chosen, Some(TARGET));
        plan.preview = Some(self.runs.preview.clone());
        Ok(plan)
    }

    async fn room_in(
        &self,
        queue: &str,
        count: u64,
        _bytes: u64,
    ) -> Result<Option<Result<String, String>>, SessionError> {
        self.call(&format!("room {queue} {count}"));
        Ok(self.runs.no_room.clone().map(Err))
    }

    async fn publish(
        &self,
        plan: restore::Plan,
        _cancel: &watch::Receiver<bool>,
        _memory: FakeMemory,
        key: String,
        audit_id: Option<i64>,
        mut on_batch: impl FnMut(u64, u64, u64) + Send,
    ) -> Outcome {
        let total = plan.count();
        self.call(&format!("publish {total}"));
        let targets: Vec<String> = plan.targets.keys().cloned().collect();
        let (restored, outcome, error) = match self.runs.restored.clone() {
            None => (total, RunOutcome::Completed, None),
            Some(Restored::Cancelled(n)) => {
                let why = format!("{n} restored, {} not sent", total - n);
                (n, RunOutcome::Cancelled(Some(why)), None)
            }
            Some(Restored::Failed(why)) => (0, RunOutcome::Failed(why.clone()), Some(why)),
        };
        if restored > 0 {
            on_batch(restored, 0, total);
            self.call(&format!("memory restored {restored} {key} #{audit_id:?}"));
        }
        Outcome {
            audit: AuditOutcome {
                at: jiff::Timestamp::now(),
                moved: restored,
                remaining: total - restored,
                targets: if restored > 0 { targets } else { Vec::new() },
                outcome,
                ..Default::default()
            },
            problems: BTreeMap::new(),
            unrecorded: None,
            cancelled: matches!(self.runs.restored, Some(Restored::Cancelled(_))),
            error,
        }
    }
}
