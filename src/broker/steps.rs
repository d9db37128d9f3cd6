//! Where an operation's time goes before and after it moves anything, at debug level
//! (`WARREN_LOG=debug`): each step against the live broker costs round trips, and a start
//! that feels slow is read off the log instead of guessed.

use std::time::Instant;

/// An operation's steps, timed one after the other.
pub(crate) struct Steps {
    op: &'static str,
    began: Instant,
    last: Instant,
}

impl Steps {
    pub(crate) fn new(op: &'static str) -> Steps {
        let now = Instant::now();
        Steps {
            op,
            began: now,
            last: now,
        }
    }

    /// `step` has just ended: logs how long it took, and the time since the first.
    pub(crate) fn done(&mut self, step: &str) {
        let now = Instant::now();
        tracing::debug!(
            op = self.op,
            step,
            us = (now - self.last).as_micros() as u64,
            since_start_us = (now - self.began).as_micros() as u64,
            "step done"
        );
        self.last = now;
    }
}
