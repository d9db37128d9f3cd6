//! `--max-backlog`: publishing waits while the target holds more ready messages than the cap.
//!
//! The decision is pure: the engine asks how many messages are ready in the queues the run's
//! targets rest in ([`super::Effect::AskBacklog`]) and gets the counts back
//! ([`super::Event::Backlog`]). It does not ask before every publish: between answers it
//! estimates the fullest queue as its last count plus what was published since (the target's
//! consumer only takes away, so the estimate is never below the truth, unless another publisher
//! adds to the queue), and asks again, at most every `poll`, only once the estimate is within
//! half of the cap.

use std::time::{Duration, Instant};

use super::{Effect, Engine, Phase, StopReason};

/// Why a replay waits: `queue`, the fullest of the queues its targets rest in, holds `ready`
/// messages as far as the run knows (its last count plus what was published since), and one
/// more would pass the cap (`max`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct BacklogWait {
    pub queue: String,
    pub ready: u64,
    pub max: u64,
}

/// The last count: the fullest watched queue and its ready messages, when the answer came.
#[derive(Clone, Debug)]
struct Count {
    queue: String,
    ready: u64,
    at: Instant,
}

/// The cap and what is known of the target's backlog (see the module documentation).
#[derive(Clone, Debug)]
pub(crate) struct Backlog {
    max: u64,
    last: Option<Count>,
    /// Publishes since the last count, and those in flight when it was taken: each may add a
    /// ready message the count did not see.
    since: u64,
    asking: bool,
    /// Since when the waiting message waits for the backlog (`None`: not waiting).
    waiting_since: Option<Instant>,
    /// When the wait began or a count last showed the fullest queue going down.
    drained_at: Option<Instant>,
}

impl Backlog {
    pub(crate) fn new(max: u64) -> Backlog {
        Backlog {
            max,
            last: None,
            since: 0,
            asking: false,
            waiting_since: None,
            drained_at: None,
        }
    }

    /// The fullest queue's ready messages as far as the run knows: the last count plus what
    /// went out since. `None` before the first count.
    fn estimate(&self) -> Option<u64> {
        self.last
            .as_ref()
            .map(|c| c.ready.saturating_add(self.since))
    }

    /// One more publish keeps the target within the cap (as estimated). Nothing goes before the
    /// first count.
    pub(crate) fn allows(&self) -> bool {
        self.estimate().is_some_and(|e| e < self.max)
    }

    /// Whether to ask for a count now: none asked yet, or the estimate is within half of the
    /// cap and the last count is at least `poll` old.
    pub(crate) fn ask_due(&self, now: Instant, poll: Duration) -> bool {
        !self.asking
            && match (&self.last, self.estimate()) {
                (Some(c), Some(e)) => e >= self.max.div_ceil(2) && now >= c.at + poll,
                _ => true,
            }
    }

    /// When the next count is due while the run waits for one (`None`: asking, or not due).
    pub(crate) fn next_ask(&self, poll: Duration) -> Option<Instant> {
        match &self.last {
            Some(c) if !self.asking => Some(c.at + poll),
            _ => None,
        }
    }

    pub(crate) fn asked(&mut self) {
        self.asking = true;
    }

    /// A publish went out: it may add one ready message to the target. Returns whether it had
    /// waited for the backlog.
    pub(crate) fn published(&mut self) -> bool {
        self.since += 1;
        self.drained_at = None;
        self.waiting_since.take().is_some()
    }

    /// The counts came: the fullest queue is what the estimate starts from again, plus the
    /// publishes still `in_flight` (not confirmed, so perhaps not counted yet).
    pub(crate) fn counted(&mut self, now: Instant, counts: &[(String, u64)], in_flight: u64) {
        self.asking = false;
        let (queue, ready) = counts
            .iter()
            .max_by(|a, b| a.1.cmp(&b.1).then_with(|| b.0.cmp(&a.0)))
            .cloned()
            .unwrap_or_default();
        if self.waiting_since.is_some() && self.last.as_ref().is_some_and(|c| ready < c.ready) {
            self.drained_at = Some(now);
        }
        self.last = Some(Count {
            queue,
            ready,
            at: now,
        });
        self.since = in_flight;
    }

    /// An ask came back without counts (the run stops over it).
    pub(crate) fn unanswered(&mut self) {
        self.asking = false;
    }

    /// The waiting message cannot go yet: the wait starts now, if it had not.
    pub(crate) fn wait(&mut self, now: Instant) {
        if self.waiting_since.is_none() {
            self.waiting_since = Some(now);
            self.drained_at = Some(now);
        }
    }

    /// Why the run waits, once a count said so (not while the first count is asked): the
    /// fullest queue's ready messages as estimated (its last count plus what went out since),
    /// which is what holds the run back.
    pub(crate) fn waiting(&self) -> Option<BacklogWait> {
        self.waiting_since?;
        let c = self.last.as_ref()?;
        Some(BacklogWait {
            queue: c.queue.clone(),
            ready: self.estimate().unwrap_or(c.ready),
            max: self.max,
        })
    }

    /// When a wait with the fullest queue not going down ends the run (`stall` after the wait
    /// began or the queue last went down).
    pub(crate) fn stall_at(&self, stall: Duration) -> Option<Instant> {
        self.waiting_since?;
        self.drained_at.map(|d| d + stall)
    }

    /// How long the fullest queue has not gone down while the run waited.
    pub(crate) fn stalled_for(&self, now: Instant) -> Duration {
        self.drained_at
            .map_or(Duration::ZERO, |d| now.saturating_duration_since(d))
    }
}

/// The engine's side of the cap: when to ask, what an answer means, when a wait ends the run.
impl Engine {
    /// No cap, or the cap lets the waiting message go.
    pub(super) fn backlog_allows(&self) -> bool {
        self.backlog.as_ref().is_none_or(Backlog::allows)
    }

    /// Why the run waits for the target's backlog, while it does (for the progress).
    pub(crate) fn backlog_wait(&self) -> Option<BacklogWait> {
        if !self.wants().backlog {
            return None;
        }
        self.backlog.as_ref()?.waiting()
    }

    /// While a message waits for the backlog: the next count, and when the wait gives up.
    pub(super) fn backlog_deadline(&self) -> Option<Instant> {
        if !self.wants().backlog {
            return None;
        }
        let b = self.backlog.as_ref()?;
        let l = &self.cfg.limits;
        [b.next_ask(l.backlog_poll), b.stall_at(l.backlog_stall)]
            .into_iter()
            .flatten()
            .min()
    }

    /// A publish went out. After a wait for the backlog the consumer's silence counts from
    /// now: the run took nothing meanwhile, so that silence says nothing of the DLQ.
    pub(super) fn backlog_published(&mut self, now: Instant) {
        if self.backlog.as_mut().is_some_and(Backlog::published) {
            self.last_delivery = self.last_delivery.max(now);
            self.last_depth_check = None;
        }
    }

    /// The counts came (or did not: the cap cannot be kept, so the run stops).
    pub(super) fn backlog_counted(
        &mut self,
        now: Instant,
        answer: Result<Vec<(String, u64)>, String>,
    ) {
        let in_flight = self.inflight.len() as u64;
        let Some(b) = self.backlog.as_mut() else {
            return;
        };
        match answer {
            Ok(counts) => b.counted(now, &counts, in_flight),
            Err(e) => {
                b.unanswered();
                if self.phase == Phase::Running {
                    self.stop_with(
                        now,
                        StopReason::NoAnswer(format!(
                            "counting the ready messages of the replay's target failed: {e}"
                        )),
                    );
                }
            }
        }
    }

    /// A message waits to be published: the wait starts when the cap holds it back, and a
    /// count is asked when one is due.
    pub(super) fn backlog_ask(&mut self, now: Instant, fx: &mut Vec<Effect>) {
        if self.phase != Phase::Running || self.waiting.is_none() || self.blocked_since.is_some() {
            return;
        }
        let poll = self.cfg.limits.backlog_poll;
        let Some(b) = self.backlog.as_mut() else {
            return;
        };
        if !b.allows() {
            b.wait(now);
        }
        if b.ask_due(now, poll) {
            b.asked();
            fx.push(Effect::AskBacklog);
        }
    }

    /// A wait for the backlog in which the target never went down for `backlog_stall` ends the
    /// run; the waiting message goes back to the DLQ untouched.
    pub(super) fn backlog_stall(&mut self, now: Instant) {
        if !self.wants().backlog {
            return;
        }
        let Some(b) = &self.backlog else {
            return;
        };
        if b.stall_at(self.cfg.limits.backlog_stall)
            .is_some_and(|t| now >= t)
        {
            let w = b.waiting().unwrap_or_default();
            let secs = b.stalled_for(now).as_secs();
            self.hold_waiting();
            self.stop_with(
                now,
                StopReason::BacklogStalled {
                    queue: w.queue,
                    ready: w.ready,
                    max: w.max,
                    secs,
                },
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const POLL: Duration = Duration::from_millis(50);

    #[test]
    fn nothing_goes_before_the_first_count_then_the_estimate_decides() {
        let t0 = Instant::now();
        let mut b = Backlog::new(3);
        assert!(!b.allows());
        assert!(b.ask_due(t0, POLL));
        b.asked();
        assert!(!b.ask_due(t0, POLL), "one ask at a time");
        b.counted(t0, &[("work".into(), 0), ("other".into(), 1)], 0);
        assert!(b.allows(), "1 < 3");
        b.published();
        assert!(b.allows(), "2 < 3");
        assert!(
            b.ask_due(t0 + POLL, POLL),
            "estimated 2: within half of the cap"
        );
        b.published();
        assert!(!b.allows(), "estimated 3: at the cap");
        assert!(!b.ask_due(t0, POLL), "not before `poll`");
        assert!(b.ask_due(t0 + POLL, POLL));
        assert_eq!(b.next_ask(POLL), Some(t0 + POLL));
    }

    #[test]
    fn far_below_the_cap_no_count_is_asked() {
        let t0 = Instant::now();
        let mut b = Backlog::new(100);
        b.counted(t0, &[("work".into(), 10)], 0);
        for _ in 0..39 {
            b.published();
        }
        assert!(!b.ask_due(t0 + Duration::from_secs(5), POLL), "49 < 50");
        b.published();
        assert!(b.ask_due(t0 + Duration::from_secs(5), POLL), "near: 50");
    }

    #[test]
    fn the_wait_says_the_fullest_queue_and_its_stall_clock_runs_until_it_drains() {
        let t0 = Instant::now();
        let mut b = Backlog::new(20);
        b.counted(t0, &[("a".into(), 340), ("b".into(), 3)], 0);
        assert_eq!(b.waiting(), None, "not waiting yet");
        b.wait(t0);
        assert_eq!(
            b.waiting(),
            Some(BacklogWait {
                queue: "a".into(),
                ready: 340,
                max: 20
            })
        );
        let stall = Duration::from_secs(60);
        assert_eq!(b.stall_at(stall), Some(t0 + stall));
        let t1 = t0 + Duration::from_secs(30);
        b.counted(t1, &[("a".into(), 340)], 0);
        assert_eq!(
            b.stall_at(stall),
            Some(t0 + stall),
            "no drain: the clock runs"
        );
        let t2 = t0 + Duration::from_secs(40);
        b.counted(t2, &[("a".into(), 300)], 0);
        assert_eq!(b.stall_at(stall), Some(t2 + stall), "drained: starts again");
        assert_eq!(
            b.stalled_for(t2 + Duration::from_secs(1)),
            Duration::from_secs(1)
        );
        b.counted(t2, &[("a".into(), 10)], 2);
        assert!(b.allows(), "10 + 2 in flight < 20");
        b.published();
        assert_eq!(b.waiting(), None);
        assert_eq!(b.stall_at(stall), None);
    }
}
