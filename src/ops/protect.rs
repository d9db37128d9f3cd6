//! Protect: the policy that makes a quorum DLQ free to read (its delivery limit lifted). The
//! one home of `warren protect` and the TUI's `P`.

use super::rights::{self, Act};
use super::{Front, Stop};
use crate::broker::session::Session;
use crate::domain::protect::ProtectPlan;

/// The policy that would be set, with what it replaces: a look, allowed read-only.
pub async fn look(s: &Session, queue: &str) -> Result<ProtectPlan, Stop> {
    s.protect(queue, false)
        .await
        .map_err(super::replay::stop_of)
}

/// Whether this session may set it (asked before the operator is).
pub async fn admit(s: &Session) -> Result<(), Stop> {
    rights::admit(s, Act::Protect).await.map_err(Stop::Refused)
}

/// Sets the policy and puts it on the record (locally and, with consent, on the broker): the
/// plan as set, and what the record could not keep.
pub async fn apply(
    s: &Session,
    queue: &str,
    front: &mut dyn Front,
) -> Result<(ProtectPlan, Vec<String>), Stop> {
    admit(s).await?;
    let plan = s
        .protect(queue, true)
        .await
        .map_err(super::replay::stop_of)?;
    let consent = front.audit_consent(s.target.audit.create);
    let notes = crate::broker::audit::record_protect(s, queue, &plan, consent).await;
    Ok((plan, notes))
}
