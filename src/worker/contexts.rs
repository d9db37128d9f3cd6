//! Every context at once (`:ctx *`, `warren tui --context '*'`): each context of the config file
//! reached as itself — its own URLs, credentials and read-only setting, with the sessions the
//! ordinary scope opens (`super::open`) — and listed with its own listing (`super::discover`),
//! a few at a time. The listings are merged into one, each dead-letter queue named with its
//! context; a context that cannot be reached or listed is said, with why, and the others are
//! shown. The scope is for looking: every queue's work belongs to its own context, which the UI
//! switches to, so work asked of this scope is refused here as well as in `tui::update`.

use std::sync::Arc;
use std::time::Duration;

use futures_util::StreamExt;
use futures_util::stream;

use super::ops::Ops;
use super::protocol::{ConnectionState, Failure, Overview, Reach, Report, Ticket};
use crate::broker::session::Sessions;
use crate::config::{self, Overrides};
use crate::domain::discovery::{Discovery, QueueRef};
use crate::domain::sanitize;

/// One context's listing: what it is, its dead-letter queues, what the store remembers of them.
type Listed = (Reach, Discovery, Option<Report>);
/// One context's depths, by queue.
type Depths = Vec<(QueueRef, Option<u64>)>;

/// Contexts reached (or listed) at the same time.
const AT_ONCE: usize = 8;
/// How long one context may take to answer before it is said unreached (the others do not wait
/// for it past this).
pub const CONTEXT_WAIT: Duration = Duration::from_secs(20);

/// Why work is refused in this scope.
pub const LOOK_ONLY: &str = "every context at once is for looking: open the queue (Enter) to work in its own context, where its own rights apply";

/// One context: its sessions, or why it could not be reached.
type Reached = (String, Result<Arc<Sessions>, String>);

/// Each context of the config file, in its order: its sessions, or why it could not be reached
/// (tried again with each listing: Ctrl-R, `*`).
pub struct Contexts {
    overrides: Overrides,
    each: std::sync::Mutex<Vec<Reached>>,
}

impl Contexts {
    /// Each context as it stands now (the lock is never held across an await).
    fn each(&self) -> Vec<Reached> {
        self.each.lock().map(|e| e.clone()).unwrap_or_default()
    }

    fn reached(&self) -> Vec<(String, Arc<Sessions>)> {
        self.each()
            .into_iter()
            .filter_map(|(name, r)| r.ok().map(|ss| (name, ss)))
            .collect()
    }

    /// Keeps the sessions of contexts reached since they were last tried.
    fn now_reached(&self, opened: Vec<(String, Arc<Sessions>)>) {
        if let Ok(mut each) = self.each.lock() {
            for (name, ss) in opened {
                if let Some(slot) = each.iter_mut().find(|(n, _)| *n == name) {
                    slot.1 = Ok(ss);
                }
            }
        }
    }
}

/// Reaches the context `name` within [`CONTEXT_WAIT`].
async fn open_one(name: &str, overrides: &Overrides, ops: &Ops) -> Result<Arc<Sessions>, String> {
    let mut one = overrides.clone();
    one.context = Some(name.to_string());
    let opened = match tokio::time::timeout(CONTEXT_WAIT, super::open(&one)).await {
        Ok(r) => r,
        Err(_) => Err(format!("no answer in {} s", CONTEXT_WAIT.as_secs())),
    };
    if let Ok(ss) = &opened {
        super::report_connected(ops, ss).await;
    }
    opened.map(Arc::new)
}

/// Reaches each context of the config file (with the vhost `overrides` names, else its own),
/// a few at a time, each within [`CONTEXT_WAIT`]. A context whose `password_command` has not
/// answered is not reached (the worker never runs one: it is said unreached, with how to open
/// it). Fails only when no context could be reached.
pub async fn open(overrides: &Overrides, ops: &Ops) -> Result<Contexts, String> {
    let names = config::Config::read(overrides.config_path.as_deref())
        .and_then(|c| c.every_context())
        .map_err(|e| e.to_string())?;
    let each: Vec<Reached> = stream::iter(names)
        .map(|name| async move {
            let opened = open_one(&name, overrides, ops).await;
            (name, opened)
        })
        .buffered(AT_ONCE)
        .collect()
        .await;
    if each.iter().all(|(_, r)| r.is_err()) {
        return Err(none_reached(each.iter().filter_map(|(n, r)| {
            r.as_ref().err().map(|e| (n.as_str(), e.as_str()))
        })));
    }
    Ok(Contexts {
        overrides: overrides.clone(),
        each: std::sync::Mutex::new(each),
    })
}

fn none_reached<'a>(why: impl Iterator<Item = (&'a str, &'a str)>) -> String {
    let said: Vec<String> = why
        .map(|(n, e)| {
            format!(
                "{}: {}",
                sanitize::one_line(n, 40),
                sanitize::one_line(e, 200)
            )
        })
        .collect();
    format!("no context could be reached ({})", said.join("; "))
}

/// One listing per reached context, a few at a time, merged: the dead-letter queues of every
/// context, each named with its context (ordinary queues and retry loops stay with their
/// context, seen when it is opened), with what the store remembers of them; and the overview
/// that says which contexts are listed and which not, and why.
pub async fn discover(cs: &Contexts, ticket: Ticket, ops: &Ops) -> Vec<Report> {
    // A context unreached so far is tried again first, beside the others' listings.
    let each = cs.each();
    // Each context's listing, and its sessions when it was reached just now.
    type Tried = (String, Result<Listed, String>, Option<Arc<Sessions>>);
    let listed: Vec<Tried> = stream::iter(each)
        .map(|(name, r)| async move {
            let (ss, new) = match r {
                Ok(ss) => (Ok(ss), None),
                Err(_) => match open_one(&name, &cs.overrides, ops).await {
                    Ok(ss) => (Ok(ss.clone()), Some(ss)),
                    Err(why) => (Err(why), None),
                },
            };
            let out = match ss {
                Ok(ss) => list_one(&name, &ss, ticket, ops).await,
                Err(why) => Err(why),
            };
            (name, out, new)
        })
        .buffered(AT_ONCE)
        .collect()
        .await;
    cs.now_reached(
        listed
            .iter()
            .filter_map(|(n, _, new)| new.clone().map(|ss| (n.clone(), ss)))
            .collect(),
    );
    let listed: Vec<(String, Result<Listed, String>)> =
        listed.into_iter().map(|(n, r, _)| (n, r)).collect();
    if listed.iter().all(|(_, r)| r.is_err()) {
        let why = none_reached(
            listed
                .iter()
                .filter_map(|(n, r)| r.as_ref().err().map(|e| (n.as_str(), e.as_str()))),
        );
        return vec![Report::Error(Failure::in_generation(
            why,
            ticket.generation,
        ))];
    }
    let mut contexts = Vec::new();
    let mut parts = Vec::new();
    let mut history: Option<Report> = None;
    for (name, r) in listed {
        match r {
            Ok((reach, d, h)) => {
                contexts.push(reach);
                parts.push(d);
                history = merge_history(history, h);
            }
            Err(why) => contexts.push(Reach {
                context: name,
                unreached: Some(why),
                ..Reach::default()
            }),
        }
    }
    let every_vhost = cs
        .each()
        .iter()
        .any(|(_, r)| r.as_ref().is_ok_and(|ss| ss.every()));
    let overview = Overview {
        context: config::ContextScope::EveryContext.to_string(),
        vhost: if every_vhost {
            config::VhostScope::EveryVhost.to_string()
        } else {
            String::new()
        },
        read_only: true,
        read_only_reason: LOOK_ONLY.to_string(),
        contexts,
        ..Overview::default()
    };
    let mut out = vec![Report::QueuesLoaded {
        overview,
        discovery: Discovery::merged(parts),
        ticket,
    }];
    out.extend(history);
    out
}

/// One context's listing, named with it: what it is, its dead-letter queues, what the store
/// remembers of them.
async fn list_one(name: &str, ss: &Sessions, ticket: Ticket, ops: &Ops) -> Result<Listed, String> {
    let looked =
        tokio::time::timeout(CONTEXT_WAIT, super::listing::discover(ss, ticket, ops)).await;
    match looked {
        Ok(Report::QueuesLoaded {
            overview,
            mut discovery,
            ..
        }) => {
            discovery.set_context(name);
            discovery.other_queues.clear();
            discovery.retry_loops.clear();
            let history = super::listing::depth_history(ss.main(), &discovery, ticket)
                .map(|h| in_context(h, name));
            let reach = Reach {
                context: name.to_string(),
                label: ss.main().handle.target.label.clone(),
                vhost: ss.main().vhost().to_string(),
                broker_version: overview.broker_version,
                read_only: overview.read_only,
                unreached: None,
            };
            Ok((reach, discovery, history))
        }
        Ok(Report::Error(f)) => Err(f.text),
        Ok(_) => Err("the context did not list its queues".to_string()),
        Err(_) => Err(format!("no listing in {} s", CONTEXT_WAIT.as_secs())),
    }
}

/// A context's `DepthHistory`, its queues named with the context.
fn in_context(report: Report, context: &str) -> Report {
    let name = |mut q: QueueRef| {
        q.context = context.to_string();
        q
    };
    match report {
        Report::DepthHistory {
            samples,
            heads,
            ticket,
        } => Report::DepthHistory {
            samples: samples.into_iter().map(|(q, s)| (name(q), s)).collect(),
            heads: heads.into_iter().map(|(q, h)| (name(q), h)).collect(),
            ticket,
        },
        other => other,
    }
}

fn merge_history(into: Option<Report>, more: Option<Report>) -> Option<Report> {
    match (into, more) {
        (
            Some(Report::DepthHistory {
                mut samples,
                mut heads,
                ticket,
            }),
            Some(Report::DepthHistory {
                samples: s,
                heads: h,
                ..
            }),
        ) => {
            samples.extend(s);
            heads.extend(h);
            Some(Report::DepthHistory {
                samples,
                heads,
                ticket,
            })
        }
        (None, more) => more,
        (into, _) => into,
    }
}

/// The depth refresh: each reached context's listing, a few at a time (each recorded in the
/// store under its own context). A context that does not answer keeps the depths shown (it is
/// logged); only when none answers is the scope disconnected.
pub async fn refresh(cs: &Contexts, ticket: Ticket) -> Report {
    let reached = cs.reached();
    let listed: Vec<Result<Depths, String>> = stream::iter(reached)
        .map(|(name, ss)| async move {
            let looked = tokio::time::timeout(CONTEXT_WAIT, super::listing::listing(&ss)).await;
            match looked {
                Ok(Ok(qs)) => {
                    super::listing::record_depths(ss.main(), &qs);
                    Ok(qs
                        .into_iter()
                        .map(|(vhost, q)| {
                            (QueueRef::in_context(&name, &vhost, &q.name), q.messages)
                        })
                        .collect())
                }
                Ok(Err(e)) => Err(format!("context '{name}': {e}")),
                Err(_) => Err(format!(
                    "context '{name}': no listing in {} s",
                    CONTEXT_WAIT.as_secs()
                )),
            }
        })
        .buffered(AT_ONCE)
        .collect()
        .await;
    let mut depths = Vec::new();
    let mut failed = Vec::new();
    for r in listed {
        match r {
            Ok(d) => depths.extend(d),
            Err(e) => {
                tracing::warn!("depth refresh: {e}");
                failed.push(e);
            }
        }
    }
    if depths.is_empty() && !failed.is_empty() {
        return Report::Connection(ConnectionState::Disconnected(failed.join("; ")));
    }
    Report::DepthsRefreshed { depths, ticket }
}
