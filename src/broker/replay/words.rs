//! A finished run in words: the one summary `warren replay`, `archive` and `discard` print,
//! and the TUI prints on its way out when the operator quit during a run.

use super::{StopReason, Summary};
use crate::domain::sanitize::one_line;
use crate::store::Operation;

/// Most targets a headline names; the rest are counted.
const HEADLINE_TARGETS: usize = 3;

impl Summary {
    /// The one line a run ends with: what happened, in the operation's own verb, and where
    /// things went ("archived 5 to warren.archive", "discarded 1 (snapshot …)", "replayed 3 to
    /// orders.process"), then what was not done. `place` is where an archive or a discard put
    /// them (the archive, the snapshot); a replay names its targets from the counts. The CLI
    /// prints it first, the TUI leaves it on its notice line.
    pub fn headline(&self, op: Operation, place: Option<&str>) -> String {
        let p = &self.progress;
        let verb = match op {
            Operation::Replay => "replayed",
            Operation::Archive => "archived",
            Operation::Discard => "discarded",
            Operation::Restore => "restored",
        };
        let mut line = format!("{verb} {}", p.moved);
        match (op, place) {
            (Operation::Discard, Some(place)) => {
                line.push_str(&format!(" ({})", one_line(place, 200)))
            }
            (_, Some(place)) => line.push_str(&format!(" to {}", one_line(place, 200))),
            (_, None) => line.push_str(&self.targets_text()),
        }
        let mut not_done = Vec::new();
        if p.failed > 0 {
            not_done.push(format!("{} failed", p.failed));
        }
        if p.returned > 0 {
            not_done.push(format!("{} returned to the DLQ", p.returned));
        }
        if p.remaining > 0 {
            not_done.push(format!("{} not done", p.remaining));
        }
        if !not_done.is_empty() {
            line.push_str(&format!("; {}", not_done.join(", ")));
        }
        if self.stop == StopReason::Cancelled {
            line = format!("stopped: {line}");
        }
        line
    }

    /// " to orders.process", or ": 3 to a, 2 to b", at most [`HEADLINE_TARGETS`] named.
    fn targets_text(&self) -> String {
        let targets: Vec<(&String, &u64)> = self
            .counts
            .targets
            .iter()
            .filter(|(t, n)| !t.is_empty() && **n > 0)
            .collect();
        match targets.as_slice() {
            [] => String::new(),
            [(t, _)] => format!(" to {}", one_line(t, 120)),
            many => {
                let mut named: Vec<String> = many
                    .iter()
                    .take(HEADLINE_TARGETS)
                    .map(|(t, n)| format!("{n} to {}", one_line(t, 80)))
                    .collect();
                if many.len() > HEADLINE_TARGETS {
                    named.push(format!("{} more targets", many.len() - HEADLINE_TARGETS));
                }
                format!(": {}", named.join(", "))
            }
        }
    }

    /// The summary's lines, each sanitised and bounded, after the [`headline`](Self::headline)
    /// of `op` (to `place`). "Remaining" is the run's count of selected messages it did not do,
    /// never more than the broker says the DLQ holds now.
    pub fn lines(&self, op: Operation, place: Option<&str>) -> Vec<String> {
        let p = &self.progress;
        let mut out = vec![
            self.headline(op, place),
            format!(
                "moved {}, returned {}, failed {}, remaining {}{}",
                p.moved,
                p.returned,
                p.failed,
                p.remaining,
                self.left_in_dlq
                    .map_or(String::new(), |n| format!(" (the DLQ holds {n} now)"))
            ),
        ];
        for (t, n) in &self.counts.targets {
            out.push(format!("  {n:>6} → {}", one_line(t, 120)));
        }
        if self.carrier == crate::domain::amqp10::carrier::Carrier::Amqp10 {
            out.push(
                "  read and published over AMQP 1.0: each message reached its queue as its producer sent it".into(),
            );
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
        if !outcome.is_completed() {
            out.push(one_line(&outcome.to_string(), 600));
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
