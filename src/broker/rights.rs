//! What the broker lets this session's user do in its vhost: publish at all, or only read.
//!
//! RabbitMQ lets a user with read permission consume and acknowledge: only a publish is refused.
//! So a viewer (`monitoring` tag, write `^$`) could take messages off a queue (a discard, an
//! archive to a local file) though the broker would refuse every publish. Warren asks once per
//! session whether the user may publish at all, and the operations' one home (`crate::ops`)
//! refuses every operation that takes a message off a queue when it may not.

use crate::broker::handle::Handle;
use crate::broker::management::PermissionState;
use crate::broker::session::{Trial, trial_publish};
use crate::domain::sanitize::one_line;

/// The broker's word on publishing in the session's vhost.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Publishing {
    /// The user may publish to some exchange (each run still checks its own targets).
    Allowed,
    /// The user may read but not publish: why, in words.
    Refused(String),
    /// Warren could not tell; each run checks its targets and stops at the first refusal.
    Unknown(String),
}

impl Handle {
    /// Whether this user may publish in the vhost, asked once per handle: the management
    /// API's permissions where it shows them (administrators), else a trial publish to the
    /// default exchange inside a transaction that is rolled back (nothing stays, no queue is
    /// read, no quorum delivery is spent).
    pub async fn publishing(&self) -> &Publishing {
        self.publishing.get_or_init(|| probe(self)).await
    }
}

async fn probe(s: &Handle) -> Publishing {
    let user = one_line(&s.whoami.name, 100);
    let vhost = one_line(s.vhost(), 100);
    let unknown_why = match s.mgmt.permissions(s.vhost()).await {
        Ok(PermissionState::NoneGranted) => {
            return Publishing::Refused(format!(
                "broker user '{user}' has no permissions on vhost '{vhost}'"
            ));
        }
        // An empty write pattern and `^$` both match no exchange name.
        Ok(PermissionState::Known(p)) if p.write.is_empty() || p.write == "^$" => {
            return Publishing::Refused(format!(
                "broker user '{user}' may read but may not publish in vhost '{vhost}' (write permission '{}')",
                one_line(&p.write, 100)
            ));
        }
        Ok(PermissionState::Known(_)) => return Publishing::Allowed,
        Ok(PermissionState::Unknown) => {
            "the management API shows permissions only to administrators".to_string()
        }
        Err(e) => format!("the permissions could not be read: {e}"),
    };
    let conn = match s.connect_amqp("warren-rights-check").await {
        Ok(c) => c,
        Err(e) => {
            return Publishing::Unknown(format!(
                "{unknown_why}, and AMQP could not be reached to try: {e}"
            ));
        }
    };
    // The default exchange with an empty routing key routes nowhere, and the transaction is
    // rolled back: nothing is published either way.
    let trial = trial_publish(&conn, "", "").await;
    let _ = conn.close(200, "publish permission checked".into()).await;
    match trial {
        Trial::Accepted => Publishing::Allowed,
        Trial::Refused(text) => Publishing::Refused(format!(
            "broker user '{user}' may read but may not publish in vhost '{vhost}' (it refused a trial publish to the default exchange: {})",
            one_line(&text, 300)
        )),
        Trial::Failed(why) => Publishing::Unknown(format!(
            "{unknown_why}, and a trial publish failed: {}",
            one_line(&why, 300)
        )),
    }
}
