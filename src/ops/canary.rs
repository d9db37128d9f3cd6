//! A replay with a canary, in two stretches: the first few selected messages, a wait for them
//! to be consumed or to come back (`broker::canary`, decided by `domain::canary`), and the rest
//! only when the canary went ahead. Both stretches are the same replay (one run id, one plan,
//! one record); what stayed is untouched, in place and in order.

use std::time::Instant;

use tokio::sync::watch;

use super::ports::{FirstSeen, ReplayPort};
use crate::broker::canary::Canary;
use crate::broker::replay::{Progress, StopReason, Summary, add_progress, merge};
use crate::broker::session::{Preview, ReplaySpec, SessionError};
use crate::domain::canary::{CanaryDecision, CanaryPlan, Watch};

/// What the two stretches share.
pub(super) struct Stretches<'a, B: ReplayPort> {
    pub s: &'a B,
    pub spec: &'a ReplaySpec,
    pub preview: &'a Preview,
    pub first_seen: &'a FirstSeen,
}

impl<B: ReplayPort> Stretches<'_, B> {
    pub async fn run(
        &self,
        plan: CanaryPlan,
        mut tap: Option<B::Tap>,
        mut cancel: watch::Receiver<bool>,
        on_progress: &mut (impl FnMut(&Progress) + Send),
    ) -> Result<Summary, SessionError> {
        let selected = self.preview.selected;
        let total = self.spec.limit.map_or(selected, |l| l.min(selected));
        let first = self.stretch(plan.rule.size.min(total), cancel.clone(), &mut *on_progress);
        let mut one = match first.await {
            Ok(sum) => sum,
            Err(e) => {
                self.close(tap).await;
                return Err(e);
            }
        };
        let moved = one.progress.moved;
        let left = total.saturating_sub(moved);
        let (decision, seen) = if went_through(&one) {
            let base = one.progress.clone();
            let run_id = self.spec.run_id.clone().unwrap_or_default();
            self.s
                .canary_wait(
                    &Canary {
                        dlq: &self.spec.queue,
                        plan: &plan,
                        run_id: &run_id,
                        moved,
                        dlq_base: one.depth_at_start.saturating_sub(moved),
                    },
                    tap.as_mut(),
                    &mut cancel,
                    |w| {
                        on_progress(&Progress {
                            canary: Some(w.clone()),
                            ..base.clone()
                        })
                    },
                )
                .await
        } else {
            let w = Watch::new(&plan, moved, Instant::now());
            (CanaryDecision::RunStopped, w)
        };
        self.close(tap).await;
        let record = seen.record(&self.spec.queue, Instant::now(), decision, left);
        if !decision.went_ahead() {
            if decision == CanaryDecision::Cancelled {
                one.stop = StopReason::Cancelled;
            }
            // The run ends now, with what came back in the DLQ again.
            one.left_in_dlq = self.s.left_in(&self.spec.queue).await.or(one.left_in_dlq);
            one.progress.remaining = left;
            one.canary = Some(record);
            return Ok(one);
        }
        let base = one.progress.clone();
        let second = self.stretch(left, cancel, |p| on_progress(&add_progress(&base, p)));
        match second.await {
            Ok(two) => {
                let mut sum = merge(one, two);
                sum.canary = Some(record);
                Ok(sum)
            }
            // The canary's own messages moved and are on the record with the rest's failure.
            Err(e) => {
                one.stop = StopReason::ConnectionLost(format!(
                    "the canary went ahead, but the rest could not start: {e}"
                ));
                one.progress.remaining = left;
                one.canary = Some(record);
                Ok(one)
            }
        }
    }

    /// One stretch of the replay: at most `limit` messages.
    async fn stretch(
        &self,
        limit: u64,
        cancel: watch::Receiver<bool>,
        on_progress: impl FnMut(&Progress) + Send,
    ) -> Result<Summary, SessionError> {
        let mut spec = self.spec.clone();
        spec.limit = Some(limit);
        self.s
            .replay(
                &spec,
                self.preview,
                self.first_seen.clone(),
                cancel,
                on_progress,
            )
            .await
    }
}

/// The canary's own stretch moved what it was asked to, and nothing failed: only then is
/// there something to wait for.
fn went_through(one: &Summary) -> bool {
    one.stop.is_finished()
        && one.progress.moved > 0
        && one.progress.failed == 0
        && one.progress.returned == 0
        && one.counts.duplicated == 0
        && one.counts.forced.is_none()
}

impl<B: ReplayPort> Stretches<'_, B> {
    async fn close(&self, tap: Option<B::Tap>) {
        if let Some(t) = tap {
            self.s.close_tap(t).await;
        }
    }
}
