//! `warren redirect add|list|remove`: asks `ops::redirect` and prints what it says.

use serde_json::json;

use super::args::{ConnArgs, RedirectCommand};
use super::commands::{open, stopped};
use super::front::CliFront;
use super::{Failure, exit};
use crate::domain::redirect::RedirectRecord;
use crate::domain::sanitize::one_line;
use crate::ops::redirect::{self, AddRequest, RemoveRequest};

pub(crate) async fn redirect(c: &ConnArgs, command: &RedirectCommand) -> Result<i32, Failure> {
    let s = open(c).await?;
    let mut front = CliFront::new(c, false, false);
    let changed = match command {
        RedirectCommand::List { json } => return list(&s, *json).await,
        RedirectCommand::Add { from, to, reason } => {
            let req = AddRequest {
                from: from.clone(),
                to: to.clone(),
                reason: reason.clone().unwrap_or_default(),
            };
            redirect::add(&s, &req, &mut front).await
        }
        RedirectCommand::Remove { from } => {
            let req = RemoveRequest { from: from.clone() };
            redirect::remove(&s, &req, &mut front).await
        }
    };
    let changed = match changed {
        Ok(c) => c,
        Err(stop) => return stopped(stop),
    };
    let r = &changed.record;
    if matches!(command, RedirectCommand::Remove { .. }) {
        crate::errln!(
            "removed: replays bound for {} go there again (no longer to {})",
            one_line(&r.from, 100),
            one_line(&r.to, 100)
        );
    } else {
        crate::errln!("redirected: {}", line(r));
    }
    for note in &changed.notes {
        crate::errln!("warren: {}", one_line(note, 600));
    }
    Ok(exit::OK)
}

async fn list(s: &crate::broker::session::Session, json: bool) -> Result<i32, Failure> {
    let current = match redirect::list(s).await {
        Ok(c) => c,
        Err(stop) => return stopped(stop),
    };
    for r in current.redirects.list() {
        if json {
            crate::outln!(
                "{}",
                json!({
                    "from": r.from, "to": r.to, "reason": r.reason, "at": r.at.to_string(),
                    "os_user": r.os_user, "broker_user": r.broker_user,
                    "context": r.context, "vhost": r.vhost,
                })
            );
        } else {
            crate::outln!("{}", line(r));
        }
    }
    if current.redirects.is_empty() && !json {
        crate::outln!("no redirects in vhost '{}'", one_line(s.vhost(), 80));
    }
    if current.ignored > 0 {
        crate::errln!(
            "warren: {} entries of the redirect stream were not acted on: the broker does not vouch for who wrote them",
            current.ignored
        );
    }
    Ok(exit::OK)
}

/// One redirect in words: "orders → orders.v2 (renamed)  set by ops as guest at 2026-…".
fn line(r: &RedirectRecord) -> String {
    format!(
        "{}  set by {} as {} at {}",
        r.describe(),
        one_line(&r.os_user, 40),
        one_line(&r.broker_user, 40),
        r.at.strftime("%Y-%m-%d %H:%M:%SZ")
    )
}
