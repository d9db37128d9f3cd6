//! A finished run in words: the one summary `warren replay`, `archive` and `discard` print,
//! and the TUI prints on its way out when the operator quit during a run.

use super::Summary;
use crate::domain::outcome::RunOutcome;
use crate::domain::sanitize::one_line;

impl Summary {
    /// The summary's lines, each sanitised and bounded. "Remaining" is the run's count of
    /// selected messages it did not do, never more than the broker says the DLQ holds now.
    pub fn lines(&self) -> Vec<String> {
        let p = &self.progress;
        let mut out = vec![format!(
            "moved {}, returned {}, failed {}, remaining {}{}",
            p.moved,
            p.returned,
            p.failed,
            p.remaining,
            self.left_in_dlq
                .map_or(String::new(), |n| format!(" (the DLQ holds {n} now)"))
        )];
        for (t, n) in &self.counts.targets {
            out.push(format!("  {n:>6} → {}", one_line(t, 120)));
        }
        for (why, n) in &self.counts.problems {
            out.push(format!("  ! {n} × {}", one_line(why, 300)));
        }
        for (why, n) in &self.counts.kept {
            out.push(format!("  kept {n} × {}", one_line(why, 300)));
        }
        if self.replayed_before > 0 {
            out.push(format!(
                "  ! {} of them were replayed before and failed again",
                self.replayed_before
            ));
        }
        self.duplicate_lines(&mut out);
        for why in &self.reconnected {
            out.push(format!(
                "  ! reconnected to the next node after: {}",
                one_line(why, 300)
            ));
        }
        if let Some(why) = &self.counts.forced {
            out.push(format!(
                "  ! {}: unacknowledged messages go back to the dead-letter queue when the connection closes",
                one_line(why, 300)
            ));
        }
        if let Some(c) = &self.canary {
            out.push(one_line(&c.words(), 600));
        }
        out.push(one_line(&self.stop.to_string(), 600));
        let outcome = self.outcome();
        if !RunOutcome::parse(&outcome).is_completed() {
            out.push(one_line(&outcome, 600));
        }
        out
    }

    fn duplicate_lines(&self, out: &mut Vec<String>) {
        let c = &self.counts;
        if c.duplicated == 0 {
            return;
        }
        out.push(if c.duplicated == c.duplicated_certain {
            format!(
                "  ! {} message(s) reached their target but were not acknowledged in the DLQ: they are in both places now",
                c.duplicated
            )
        } else {
            format!(
                "  ! up to {} message(s) may be in both the target and the DLQ ({} certainly): they reached the target or may have, and their removal from the DLQ was not confirmed",
                c.duplicated, c.duplicated_certain
            )
        });
    }
}
