//! `warren audit`: this machine's records and the broker stream's, merged and printed.

use serde_json::{Value, json};

use super::args::ConnArgs;
use super::commands::{consent, open, print_line};
use super::{Failure, exit};
use crate::broker::audit;
use crate::domain::comeback::CameBack;
use crate::domain::sanitize::one_line;
use crate::store::{self, Store};

/// `warren audit`: this machine's records and the broker stream's, merged (one line per run),
/// with what came back after each replay; says which records it could not reach.
pub(crate) async fn audit(
    c: &ConnArgs,
    json: bool,
    local_only: bool,
    limit: usize,
) -> Result<i32, Failure> {
    if local_only && let Err(e) = Store::open_default() {
        return Err(Failure::failed(e.to_string()));
    }
    let session = if local_only {
        Err("not asked (--local)".to_string())
    } else {
        open(c).await.map_err(|f| f.message)
    };
    let (merged, mut unreached) = audit::load(session.as_ref().map_err(Clone::clone), limit).await;
    if local_only {
        unreached.retain(|u| !u.starts_with("broker audit stream unreachable"));
    }
    let came_back = match &session {
        Ok(s) => {
            let (m, why) = audit::came_back(s, &merged.replays, consent(c)).await;
            unreached.extend(why);
            Some(m)
        }
        Err(_) => None,
    };

    for (r, seen) in &merged.replays {
        // Only runs of the vhost that was looked at have a count.
        let back = match (&session, &came_back) {
            (Ok(s), Some(m)) if audit::is_here(s, r) => r
                .run_id
                .as_ref()
                .map(|id| m.get(id).cloned().unwrap_or_default()),
            _ => None,
        };
        print_run(r, *seen, back.as_ref(), json);
    }
    print_protects(&merged.protects, json);
    print_notes(&merged.notes, json);
    print_redirects(&merged.redirects, json);
    print_others(&merged.other, json);
    if merged.replays.is_empty()
        && merged.protects.is_empty()
        && merged.notes.is_empty()
        && merged.redirects.is_empty()
        && merged.other.is_empty()
        && !json
    {
        crate::outln!("nothing recorded");
    }
    for why in &unreached {
        crate::errln!("warren: {}", one_line(why, 600));
        if json {
            print_line(&json!({"kind": "unreached", "text": why}));
        }
    }
    Ok(exit::OK)
}

/// What a replay changed in the messages it published besides Warren's headers, as the audit
/// line says it.
fn run_flags(r: &store::AuditRecord) -> String {
    let mut out = String::new();
    if r.clear_expiry {
        out.push_str("  (--clear-expiry: passed deadlines removed)");
    }
    if r.strip_failure_stamp {
        out.push_str("  (--strip-failure-stamp: Symfony's failure stamp removed)");
    }
    out
}

/// One run of `warren audit`, with what came back after it where that was counted.
fn print_run(r: &store::AuditRecord, seen: store::Seen, back: Option<&CameBack>, json: bool) {
    if json {
        let mut v = serde_json::to_value(r).unwrap_or(Value::Null);
        v["kind"] = json!(r.operation.as_str());
        v["seen"] = json!(seen);
        v["came_back"] = json!(back.as_ref().map(|b| b.came_back));
        v["top_failure"] = json!(back.as_ref().and_then(|b| b.top_failure.clone()));
        v["top_failure_count"] = json!(back.as_ref().map(|b| b.top_failure_count));
        print_line(&v);
    } else {
        crate::outln!(
            "{} {} {} {}@{} {} {} → {}  moved {} returned {} failed {}  {}{}{}  [{}]",
            r.id.map_or("-".to_string(), |n| format!("#{n}")),
            r.operation.as_str(),
            r.started_at,
            one_line(&r.os_user, 30),
            one_line(&r.broker_user, 30),
            one_line(&r.vhost, 30),
            one_line(&r.from_queue, 60),
            one_line(&r.targets.join(", "), 80),
            r.moved.map_or("-".into(), |n| n.to_string()),
            r.returned.map_or("-".into(), |n| n.to_string()),
            r.failed.map_or("-".into(), |n| n.to_string()),
            one_line(&r.outcome.to_string(), 80),
            run_flags(r),
            match back {
                Some(b) if b.came_back > 0 => format!(
                    "  came back {}{}",
                    b.came_back,
                    b.top_failure.as_ref().map_or(String::new(), |t| format!(
                        " (most: {} ×{})",
                        one_line(t, 80),
                        b.top_failure_count
                    ))
                ),
                Some(_) => "  came back 0".to_string(),
                None => String::new(),
            },
            seen_text(seen),
        );
        if let Some(id) = &r.run_id {
            crate::outln!("    run {}", one_line(id, 64));
        }
    }
}

/// The delivery-limit policies `warren protect` set.
fn print_protects(protects: &[(store::ProtectRecord, store::Seen)], json: bool) {
    for (p, seen) in protects {
        if json {
            let mut v = serde_json::to_value(p).unwrap_or(Value::Null);
            v["kind"] = json!("protect");
            v["seen"] = json!(seen);
            print_line(&v);
        } else {
            crate::outln!(
                "protect {} {}@{} {} {}  policy {}  delivery limit {} → {}  [{}]",
                p.at,
                one_line(&p.os_user, 30),
                one_line(&p.broker_user, 30),
                one_line(&p.vhost, 30),
                one_line(&p.queue, 60),
                one_line(&p.policy, 80),
                p.limit_before.map_or("none".into(), |l| l.to_string()),
                p.limit_after.map_or("unlimited".into(), |l| l.to_string()),
                seen_text(*seen),
            );
        }
    }
}

/// The group notes the broker's audit stream holds.
fn print_notes(notes: &[store::NoteEntry], json: bool) {
    for n in notes {
        let note = &n.note;
        if json {
            print_line(&from_broker(note, "note", &n.event));
        } else {
            crate::outln!(
                "note {} {} {}@{} {} {}  {} {}: {}  [broker]",
                n.event,
                note.at,
                one_line(&note.author, 30),
                one_line(&note.broker_user, 30),
                one_line(&note.vhost, 30),
                one_line(&note.queue, 60),
                one_line(&note.by, 20),
                one_line(&note.key, 80),
                if note.text.is_empty() {
                    "(removed)".to_string()
                } else {
                    one_line(&note.text, 200)
                },
            );
        }
    }
}

/// Redirects set and removed (`warren redirect`), from the broker's stream.
fn print_redirects(redirects: &[(String, crate::domain::redirect::RedirectRecord)], json: bool) {
    for (event, r) in redirects {
        if json {
            print_line(&from_broker(r, "redirect", event));
        } else {
            crate::outln!(
                "redirect {} {} {}@{} {} {}  [broker]",
                one_line(event, 10),
                r.at,
                one_line(&r.os_user, 30),
                one_line(&r.broker_user, 30),
                one_line(&r.vhost, 30),
                r.describe(),
            );
        }
    }
}

/// A record only the broker's stream holds, as `--json` prints it: with its kind and event.
fn from_broker(record: &impl serde::Serialize, kind: &str, event: &str) -> Value {
    let mut v = serde_json::to_value(record).unwrap_or(Value::Null);
    v["kind"] = json!(kind);
    v["event"] = json!(event);
    v["seen"] = json!({"local": false, "broker": true});
    v
}

/// Records of operations this warren does not know, as they are.
fn print_others(other: &[Value], json: bool) {
    for v in other {
        if json {
            let mut v = v.clone();
            v["seen"] = json!({"local": false, "broker": true});
            print_line(&v);
        } else {
            crate::outln!(
                "{} {} {} (an operation this warren does not know)",
                one_line(v["kind"].as_str().unwrap_or("?"), 30),
                one_line(v["at"].as_str().unwrap_or("?"), 40),
                one_line(v["run_id"].as_str().unwrap_or("?"), 64),
            );
        }
    }
}

fn seen_text(seen: store::Seen) -> &'static str {
    match (seen.local, seen.broker, seen.unvouched) {
        (false, _, true) => "broker, UNVOUCHED: not signed by the broker user it names",
        (true, true, _) => "local+broker",
        (true, false, _) => "local",
        (false, true, _) => "broker",
        (false, false, _) => "?",
    }
}
