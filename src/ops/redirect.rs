//! Redirects: "replays that would go to queue A go to queue B". The one home of
//! `warren redirect add|remove|list` and the TUI's `:redirect`: the rights (read-only refuses a
//! change), the checks (the new queue exists and is not a wait queue; no chains), the consent
//! for creating the redirect stream, keeping the change on the broker, then the audit record.
//! Replays apply the redirects in force where their plan decides each message's target
//! (`domain::replay::plan_with`, fed by `Session`'s plans).

use super::ports::{Author, RedirectPort};
use super::rights::{self, Act};
use super::{Front, Refusal, Stop};
use crate::broker::audit::Consent;
use crate::broker::redirects::Current;
use crate::domain::redirect::{self, RedirectRecord};
use crate::domain::sanitize::one_line;

/// `warren redirect add FROM TO [--reason TEXT]`.
#[derive(Clone, Debug, Default)]
pub struct AddRequest {
    pub from: String,
    pub to: String,
    pub reason: String,
}

/// `warren redirect remove FROM`.
#[derive(Clone, Debug, Default)]
pub struct RemoveRequest {
    pub from: String,
}

/// A change kept, and what its record could not keep (said once by the front end).
#[derive(Clone, Debug)]
pub struct Changed {
    /// `domain::redirect::ADD` or `REMOVE`.
    pub event: &'static str,
    pub record: RedirectRecord,
    pub notes: Vec<String>,
}

/// The redirects in force (a look, allowed read-only), oldest `from` first, with how many
/// entries were not acted on because the broker does not vouch for them.
pub async fn list<B: RedirectPort>(b: &B) -> Result<Current, Stop> {
    b.redirects().await.map_err(|e| {
        Stop::Broker(format!(
            "the redirects could not be read: {}",
            one_line(&e, 300)
        ))
    })
}

/// Sets a redirect (replacing one of the same queue), on the record.
pub async fn add<B: RedirectPort>(
    b: &B,
    req: &AddRequest,
    front: &mut dyn Front,
) -> Result<Changed, Stop> {
    rights::admit(b, Act::Redirect)
        .await
        .map_err(Stop::Refused)?;
    let current = list(b).await?;
    let dest = b.destination(&req.to).await?;
    redirect::check_add(&current.redirects, &req.from, &req.to, &dest)
        .map_err(|e| Stop::Refused(Refusal::Redirect(e.to_string())))?;
    let rec = record_of(&b.author(), &req.from, &req.to, &req.reason);
    change(b, redirect::ADD, rec, front).await
}

/// Removes the redirect of `req.from`: its replays go to their plain target again.
pub async fn remove<B: RedirectPort>(
    b: &B,
    req: &RemoveRequest,
    front: &mut dyn Front,
) -> Result<Changed, Stop> {
    rights::admit(b, Act::Redirect)
        .await
        .map_err(Stop::Refused)?;
    let current = list(b).await?;
    let Some(old) = current.redirects.get(&req.from) else {
        return Err(Stop::Refused(Refusal::NotRedirected {
            from: req.from.clone(),
        }));
    };
    // The removal names what it removes, for the record.
    let rec = record_of(&b.author(), &req.from, &old.to, "");
    change(b, redirect::REMOVE, rec, front).await
}

/// Keeps the change on the redirect stream (creating it with consent), then on the audit.
async fn change<B: RedirectPort>(
    b: &B,
    event: &'static str,
    rec: RedirectRecord,
    front: &mut dyn Front,
) -> Result<Changed, Stop> {
    let configured = b.author().create_streams;
    let consent = front.audit_consent(configured);
    // Nobody could be asked here (the TUI's worker, or no terminal): the question, with every
    // stream the change would create (the redirect stream, the audit stream for its record),
    // goes back to the front end before anything is created or kept.
    if matches!(consent, Consent::Refuse) && configured.is_none() {
        let questions = b.streams_to_create().await;
        if !questions.is_empty() {
            return Err(Stop::Unanswered(questions.join("; and ")));
        }
    }
    b.keep(event, &rec, consent).await.map_err(Stop::refused)?;
    let consent = front.audit_consent(configured);
    let notes = super::record::redirect(b, event, &rec, consent).await;
    Ok(Changed {
        event,
        record: rec,
        notes,
    })
}

fn record_of(who: &Author, from: &str, to: &str, reason: &str) -> RedirectRecord {
    RedirectRecord {
        at: jiff::Timestamp::now(),
        from: from.to_string(),
        to: to.to_string(),
        reason: reason.trim().to_string(),
        os_user: crate::store::current_os_user(),
        broker_user: who.broker_user.clone(),
        context: who.context.clone(),
        vhost: who.vhost.clone(),
    }
}
