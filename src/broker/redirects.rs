//! The redirects kept on the broker, where the whole rota sees them: a stream of their own
//! beside the audit stream (`warren.redirects` beside `warren.audit`), one entry per change in
//! the audit's envelope (kind `redirect`, event `add` or `remove`), appended with confirms and
//! the broker user as `user_id` by the audit stream's own writer. It has no `x-max-age`: a
//! redirect stays until it is removed, and the stream holds only changes, so it stays small and
//! is read whole for every plan. Every change is on the audit stream too (`ops::record`, the
//! one writer of every record).
//! `domain::redirect` folds the entries (vouched for only) into the redirects in force.

use jiff::Timestamp;

use super::audit::{self, AuditStream, Consent, Kept};
use super::management::ManagementError;
use super::session::Session;
use crate::domain::redirect::{self, Entry, RedirectRecord, Redirects};
use crate::domain::sanitize::one_line;
use crate::store::AuditEnvelope;

/// The audit kind of a redirect's entries.
pub const KIND: &str = "redirect";

/// The context's redirect stream: beside its audit stream (`warren.audit` → `warren.redirects`,
/// another name `NAME.redirects`); `None` when the audit stream is turned off.
pub fn stream_name(s: &Session) -> Option<String> {
    let audit = s.handle.target.audit.stream.as_deref()?;
    Some(match audit.strip_suffix(".audit") {
        Some(base) => format!("{base}.redirects"),
        None => format!("{audit}.redirects"),
    })
}

/// The redirects in force, and how many entries were not acted on (not vouched for).
#[derive(Clone, Debug, Default)]
pub struct Current {
    pub redirects: Redirects,
    pub ignored: usize,
}

/// Reads the redirect stream whole (by offset: nothing consumed) and folds it. A stream that
/// does not exist, or an audit stream turned off, holds none. `Err`: why it could not be read.
pub async fn current(s: &Session) -> Result<Current, String> {
    let Some(name) = stream_name(s) else {
        return Ok(Current::default());
    };
    let entries = audit::read_stream_signed(s, name).await?;
    let parsed = entries.into_iter().filter_map(|(body, user)| {
        let e = serde_json::from_slice::<AuditEnvelope<RedirectRecord>>(&body).ok()?;
        (e.kind == KIND).then_some(Entry {
            event: e.event,
            record: e.record,
            vouched: user,
        })
    });
    let (redirects, ignored) = redirect::fold(parsed);
    if ignored > 0 {
        tracing::warn!("{ignored} redirect entries not acted on: not vouched for by the broker");
    }
    Ok(Current { redirects, ignored })
}

/// Keeps one change on the redirect stream, creating it with `consent`: `Err` says why it was
/// not kept (nothing changed).
pub async fn keep(
    s: &Session,
    event: &str,
    rec: &RedirectRecord,
    consent: Consent<'_>,
) -> Result<(), String> {
    let Some(name) = stream_name(s) else {
        return Err(format!(
            "redirects are kept beside the broker's audit stream, which is turned off for context '{}' (audit_stream = \"\"); nothing changed",
            s.handle.target.context
        ));
    };
    let kept = Kept {
        creation: creation_text(s, &name),
        name,
        what: "redirect stream",
        max_age: None,
    };
    let stream = AuditStream::open_kept(s, kept, consent)
        .await
        .map_err(|e| format!("{e}; nothing changed"))?;
    stream
        .append(KIND, event, &audit::new_run_id(Timestamp::now()), rec)
        .await
        .map_err(|e| format!("{e}; nothing changed"))
}

/// What Warren would create to keep a redirect, in the operator's words.
fn creation_text(s: &Session, name: &str) -> String {
    format!(
        "Warren keeps redirects on the broker, so the whole rota replays through the same ones: it will create the stream '{}' in vhost '{}' (durable, no max-age: a redirect stays until it is removed; needs configure permission)",
        one_line(name, 100),
        one_line(s.vhost(), 100)
    )
}

/// The question a change must have answered first: the redirect stream is missing, so keeping
/// the change creates it. `None`: it exists, or it cannot be looked up (keeping then says why).
pub async fn creation_question(s: &Session) -> Option<String> {
    let name = stream_name(s)?;
    match s.handle.mgmt.queue(s.vhost(), &name).await {
        Err(ManagementError::NoQueue { .. }) => Some(creation_text(s, &name)),
        _ => None,
    }
}
