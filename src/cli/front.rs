//! The command line as the operations' front end (`crate::ops::Front`): it asks on the terminal
//! (or takes `--yes`, `--read-again`, `--create-audit-stream`) and prints each plan, as text on
//! stderr or as JSON lines on stdout.

use std::io::{BufRead, IsTerminal, Write};

use serde_json::json;

use super::args::ConnArgs;
use super::commands::{self, print_line};
use super::run_print;
use crate::broker::audit::Consent;
use crate::broker::session::ReplaySpec;
use crate::domain::archive;
use crate::domain::run::RunKind;
use crate::domain::sanitize::one_line;
use crate::ops::{self, Plan};

pub(crate) struct CliFront {
    /// `--yes`: no question is asked.
    pub yes: bool,
    pub json: bool,
    /// `--create-audit-stream`.
    pub create_audit: bool,
    /// `--read-again`.
    pub read_again: bool,
    /// The session's vhost and archive retention, for the archive plan's lines.
    pub vhost: String,
    pub max_age: String,
    /// The audit stream's question, lent to the record as its consent.
    ask: fn(&str) -> bool,
    /// A read's progress is on the terminal's last line (`\r`, no newline yet).
    reading_shown: bool,
}

impl CliFront {
    pub(crate) fn new(c: &ConnArgs, yes: bool, json: bool) -> CliFront {
        CliFront {
            yes,
            json,
            create_audit: c.create_audit_stream,
            read_again: c.read_again,
            vhost: String::new(),
            max_age: String::new(),
            ask: ask_to_create,
            reading_shown: false,
        }
    }

    /// With the session's vhost and archive retention (for the archive plan).
    pub(crate) fn of(mut self, s: &crate::broker::session::Session) -> CliFront {
        self.vhost = s.vhost().to_string();
        self.max_age = s.handle.target.archive.max_age.clone();
        self
    }
}

fn on_terminal() -> bool {
    std::io::stdin().is_terminal() && std::io::stderr().is_terminal()
}

/// A y/N question on the terminal.
fn ask_yes(question: &str) -> bool {
    crate::err!("{question} [y/N] ");
    let _ = std::io::stderr().flush();
    let mut line = String::new();
    std::io::stdin().lock().read_line(&mut line).is_ok() && matches!(line.trim(), "y" | "Y" | "yes")
}

/// The terminal question before Warren creates the audit stream.
fn ask_to_create(what: &str) -> bool {
    crate::errln!("{what}");
    ask_yes("Create it?")
}

impl ops::Front for CliFront {
    fn plan(&mut self, plan: Plan<'_>) {
        self.end_reading();
        match plan {
            Plan::Replay {
                preview,
                spec,
                dry_run,
                canary,
                ..
            } => {
                run_print::print_preview(preview, spec, dry_run);
                if let Some(c) = canary {
                    // Exchange and queue names are the broker's.
                    crate::errln!("{}", one_line(&c.describe(), 600));
                }
                if self.json {
                    let mut plan = run_print::preview_json(preview, spec);
                    if let Some(c) = canary {
                        plan["canary"] = run_print::canary_plan_json(c);
                    }
                    print_line(&plan);
                }
            }
            Plan::Archive(p) => print_archive_plan(p, self.json, &self.vhost, &self.max_age),
            Plan::Restore(p) => print_restore_plan(p, self.json),
        }
    }

    fn go_ahead(&mut self, count: u64, kind: RunKind, typed: bool) -> Result<bool, String> {
        let verb = kind.verb();
        if self.yes {
            return Ok(true);
        }
        if !std::io::stdin().is_terminal() {
            return Err(format!(
                "not a terminal: pass --yes to {verb} without confirmation (or --dry-run to look)"
            ));
        }
        let yes = commands::confirm_to(count, verb, typed);
        if !yes {
            crate::errln!("{}", kind.undone());
        }
        Ok(yes)
    }

    fn audit_consent(&mut self, configured: Option<bool>) -> Consent<'_> {
        match (self.create_audit, configured) {
            (true, _) | (false, Some(true)) => Consent::Create,
            (false, Some(false)) => Consent::Refuse,
            // Asked only where someone can answer: a terminal, and no --yes.
            (false, None) if !self.yes && on_terminal() => Consent::Ask(&mut self.ask),
            (false, None) => Consent::Refuse,
        }
    }

    fn create_archive(&mut self, what: &str) -> Result<bool, String> {
        if !on_terminal() {
            return Err(format!(
                "the archive does not exist yet: Warren would create {what}. Pass --create-archive (or set archive_create = true in the context) to allow it, or --local to keep the archive in a file; nothing moved"
            ));
        }
        Ok(ask_yes(&format!(
            "The archive does not exist yet. Warren will create {what}. Create it?"
        )))
    }

    fn read_again(&mut self, queue: &str, cost: &str) -> Result<bool, String> {
        if self.read_again {
            return Ok(true);
        }
        if !on_terminal() {
            return Err(format!(
                "{cost} Nothing was read: pass --read-again to accept the cost, or make the queue free to read with `warren protect {queue}`"
            ));
        }
        Ok(ask_yes(&format!("{} Read it again?", one_line(cost, 600))))
    }

    fn say(&mut self, text: &str) {
        self.end_reading();
        crate::errln!("warren: {}", one_line(text, 600));
    }

    /// `--json`: a `reading` event a page at a time; on a terminal, one line kept up to date
    /// (a script reading stderr gets no carriage returns).
    fn reading(&mut self, what: &str, read: u64) {
        if self.json {
            print_line(&json!({"event": "reading", "archive": what, "read": read}));
        } else if std::io::stderr().is_terminal() {
            crate::err!("\r  reading {}: {read} messages read ", one_line(what, 200));
            self.reading_shown = true;
        }
    }

    fn edit(&mut self, document: &str, problem: Option<&str>) -> Result<Option<String>, String> {
        crate::editor::edit(document, problem)
    }

    fn started(&mut self, run_id: &str, on_broker: bool) {
        if self.json {
            print_line(&json!({"event": "started", "run_id": run_id, "broker_record": on_broker}));
        } else if on_broker {
            crate::errln!("run {run_id} (recorded here and on the broker)");
        } else {
            crate::errln!("run {run_id}");
        }
    }
}

impl CliFront {
    /// Ends the line a read's progress is on, before anything else is printed.
    fn end_reading(&mut self) {
        if std::mem::take(&mut self.reading_shown) {
            crate::errln!();
        }
    }
}

/// A plan that stopped during its read (the archive unreadable, a broker error) is said after
/// the front end is gone: the read's line is ended first, so the error starts a line of its own.
impl Drop for CliFront {
    fn drop(&mut self) {
        self.end_reading();
    }
}

/// The archive's or the discard's plan.
fn print_archive_plan(p: &ops::archive::Planned, json: bool, vhost: &str, max_age: &str) {
    let discard = p.op == RunKind::Discard;
    let verb = match (discard, p.dry_run) {
        (true, true) => "Would discard",
        (true, false) => "Discard",
        (false, true) => "Would archive",
        (false, false) => "Archive",
    };
    let looked = if p.sel.examined < p.sel.depth {
        format!(" — matched among the first {} looked at", p.sel.examined)
    } else {
        String::new()
    };
    crate::errln!(
        "{verb} {} message(s) from {} (queue holds {}){looked}; selection: {}{}",
        p.count,
        one_line(&p.spec.queue, 80),
        p.sel.depth,
        one_line(&p.spec.selection.describe(), 200),
        if discard { " for good" } else { "" }
    );
    if discard {
        match &p.snapshot {
            Some(path) => crate::errln!(
                "  snapshot of exactly these first → {} (`warren open` reads it); only what it holds is deleted",
                path.display()
            ),
            None => crate::errln!("  ! no snapshot (--no-snapshot): they cannot be brought back"),
        }
    } else if let Some(place) = &p.place {
        crate::errln!(
            "  → {}{}",
            one_line(&place.label(), 300),
            match place {
                crate::broker::archive::Place::Stream(_) => format!(
                    " in vhost '{}' (kept {})",
                    one_line(vhost, 80),
                    one_line(max_age, 20)
                ),
                crate::broker::archive::Place::Local(_, why) =>
                    format!(" ({})", one_line(why, 200)),
            }
        );
        crate::errln!("  adds     {}", archive::HEADERS.join(", "));
        crate::errln!(
            "  body, properties and every other header (x-death included) kept as they are"
        );
        if !p.reason.is_empty() {
            crate::errln!("  reason   {}", one_line(&p.reason, 300));
        }
    }
    if !json {
        return;
    }
    let mut v = json!({
        "event": "plan",
        "operation": p.op.as_str(),
        "queue": p.spec.queue,
        "selected": p.count,
        "matched": p.sel.matched,
        "examined": p.sel.examined,
        "depth": p.sel.depth,
    });
    if discard {
        v["snapshot"] = json!(p.snapshot.as_ref().map(|p| p.display().to_string()));
    } else {
        v["archive"] = p.place.as_ref().map_or(json!(null), |pl| pl.json(max_age));
        v["reason"] = json!(p.reason);
    }
    print_line(&v);
}

/// The restore's plan: back where each came from, or the replay's preview.
fn print_restore_plan(p: &ops::restore::Planned, json: bool) {
    let plan = &p.plan;
    if p.replay {
        let Some(preview) = &plan.preview else {
            return;
        };
        let spec = ReplaySpec::all_of(
            &preview.queue,
            usize::try_from(preview.examined)
                .unwrap_or(usize::MAX)
                .max(1),
        );
        run_print::print_preview(preview, &spec, p.dry_run);
        for (why, n) in &plan.kept {
            crate::errln!("  stays in the archive: {n} × {}", one_line(why, 300));
        }
        if json {
            print_line(&json!({
                "event": "plan",
                "operation": "restore",
                "replay": true,
                "selected": preview.selected,
                "targets": preview.targets.keys().collect::<Vec<_>>(),
                "restored_before": p.restored_before,
                "more_match": p.more_match,
                "refusals": plan.refused,
            }));
        }
        return;
    }
    if plan.count() > 0 {
        crate::errln!(
            "{} {} message(s) from the archive ({}) into the queues they came from:",
            if p.dry_run {
                "Would restore"
            } else {
                "Restore"
            },
            plan.count(),
            one_line(&p.place.label(), 200)
        );
        for (q, n) in &plan.targets {
            crate::errln!("  {n:>6} → {}", one_line(q, 120));
        }
        crate::errln!(
            "  removes  {}; body, properties and every other header as archived",
            archive::HEADERS.join(", ")
        );
        for (why, n) in &plan.kept {
            crate::errln!("  ! {n} × {}", one_line(why, 300));
        }
    }
    for r in &plan.refused {
        crate::errln!("  ✗ {}", one_line(r, 400));
    }
    if json {
        print_line(&json!({
            "event": "plan",
            "operation": "restore",
            "selected": plan.count(),
            "targets": plan.targets,
            "restored_before": p.restored_before,
            "more_match": p.more_match,
            "removes": archive::HEADERS,
            "refusals": plan.refused,
        }));
    }
}
