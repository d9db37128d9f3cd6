//! `:redirect add|remove` and `:redirects` through their one home (`crate::ops::redirect`):
//! the worker asks and turns the answer into a notice or an error.

use super::front::TuiFront;
use super::ops::Ops;
use super::protocol::{Command, Failure, OperationKind, RedirectChange, Report, Ticket};
use super::runs::stop_text;
use crate::broker::session::Session;
use crate::domain::sanitize::one_line;
use crate::ops::Stop;
use crate::ops::redirect::{self, AddRequest, RemoveRequest};

pub(super) async fn run(
    s: &Session,
    (change, create_stream): (RedirectChange, Option<bool>),
    ticket: Ticket,
    ops: &Ops,
) -> Vec<Report> {
    let mut front = TuiFront {
        create_audit: create_stream,
        ..TuiFront::default()
    };
    let vhost = one_line(s.vhost(), 60);
    let asked = change.clone();
    let done = match change {
        RedirectChange::List => {
            return match redirect::list(s).await {
                Ok(c) => vec![
                    Report::Notice(listing(&c, &vhost)),
                    Report::Redirects {
                        vhost: s.vhost().to_string(),
                        redirects: c.redirects,
                        ticket,
                    },
                ],
                Err(stop) => vec![error(stop_text(stop), &ticket)],
            };
        }
        RedirectChange::Add { from, to, reason } => {
            let req = AddRequest { from, to, reason };
            redirect::add(s, &req, &mut front).await
        }
        RedirectChange::Remove { from } => {
            redirect::remove(s, &RemoveRequest { from }, &mut front).await
        }
    };
    let changed = match done {
        Ok(c) => c,
        // Asked in the UI, then tried again with the answer.
        Err(Stop::Unanswered(text)) => {
            let yes = Command::Redirect {
                vhost: s.vhost().to_string(),
                change: asked,
                create_stream: Some(true),
            };
            return vec![Report::Question {
                text,
                yes: Box::new(yes),
                ticket,
            }];
        }
        Err(stop) => return vec![error(stop_text(stop), &ticket)],
    };
    let r = &changed.record;
    let (from, to) = (one_line(&r.from, 80), one_line(&r.to, 80));
    let mut text = if changed.event == crate::domain::redirect::REMOVE {
        format!("redirect removed: replays bound for {from} go there again (no longer to {to})")
    } else {
        format!("redirected: replays bound for {from} go to {to}")
    };
    ops.report(
        OperationKind::Redirect,
        format!("kept on the redirect stream of vhost '{vhost}': {text}"),
    )
    .await;
    for n in &changed.notes {
        text.push_str("; ");
        text.push_str(&one_line(n, 300));
    }
    let mut out = vec![Report::Notice(text)];
    out.extend(in_force(s, ticket).await);
    out
}

/// The redirects in force in `s`'s vhost, for the UI (`None` when they could not be read: the
/// replay's own plan says so, and refuses).
pub(super) async fn in_force(s: &Session, ticket: Ticket) -> Option<Report> {
    let current = crate::broker::redirects::current(s).await.ok()?;
    Some(Report::Redirects {
        vhost: s.vhost().to_string(),
        redirects: current.redirects,
        ticket,
    })
}

fn error(text: String, ticket: &Ticket) -> Report {
    Report::Error(Failure::in_generation(text, ticket.generation))
}

/// The redirects in force, on one line.
fn listing(c: &crate::broker::redirects::Current, vhost: &str) -> String {
    if c.redirects.is_empty() {
        return format!("no redirects in vhost '{vhost}'");
    }
    let each: Vec<String> = c
        .redirects
        .list()
        .map(|r| format!("{} by {}", r.describe(), one_line(&r.os_user, 30)))
        .collect();
    format!("redirects in vhost '{vhost}': {}", each.join("; "))
}
