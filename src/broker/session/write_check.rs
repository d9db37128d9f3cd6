//! Whether this session may publish a replay's messages: permissions as the management API
//! shows them, else a trial publish inside a rolled-back transaction.

use crate::broker::handle::Handle;
use std::collections::BTreeSet;

use regex::Regex;

use crate::broker::amqp;
use crate::broker::management::PermissionState;
use crate::domain::sanitize;

impl Handle {
    /// Whether this session may publish a replay's messages, and if not, why — in the words the
    /// user sees. `targets` are the (exchange, routing key) pairs a replay publishes to (`""` is
    /// the default exchange): the broker checks write permission on the exchange of a publish
    /// (and topic permissions on its routing key), not on the queues it reaches.
    ///
    /// Reading permissions through the management API needs the administrator tag. Without it,
    /// each target is tried over AMQP inside a transaction that is rolled back: the broker
    /// checks permission when the publish arrives and refuses it with 403 (closing that
    /// channel), while a permitted message waits for a commit that never comes and is dropped
    /// by the rollback. Nothing is delivered either way.
    pub async fn write_refusal(&self, targets: &[(String, String)]) -> WriteCheck {
        if let Some(why) = self.configured_refusal(crate::domain::rights::Act::Replay) {
            return WriteCheck::Refused(why);
        }
        let user = sanitize::one_line(&self.whoami.name, 100);
        let vhost = sanitize::one_line(self.vhost(), 100);
        // The default exchange's resource name is `amq.default`.
        let resource = |x: &str| {
            if x.is_empty() {
                "amq.default".to_string()
            } else {
                x.to_string()
            }
        };
        let listed = |names: &[String]| {
            names
                .iter()
                .map(|t| format!("'{}'", sanitize::one_line(t, 100)))
                .collect::<Vec<_>>()
                .join(", ")
        };
        let why_unreadable = match self.mgmt.permissions(self.vhost()).await {
            Ok(PermissionState::NoneGranted) => {
                return WriteCheck::Refused(format!(
                    "read-only: broker user '{user}' has no permissions on vhost '{vhost}'"
                ));
            }
            Ok(PermissionState::Known(p)) => {
                // RabbitMQ matches permission regexes unanchored, and an empty one means '^$'
                // (nothing). An unparsable one blocks: the broker would decide, Warren refuses.
                let write = (!p.write.is_empty())
                    .then(|| Regex::new(&p.write).ok())
                    .flatten();
                let mut blocked: Vec<String> = targets
                    .iter()
                    .map(|(x, _)| resource(x))
                    .filter(|t| !write.as_ref().is_some_and(|re| re.is_match(t)))
                    .collect();
                blocked.sort();
                blocked.dedup();
                if blocked.is_empty() {
                    return WriteCheck::Allowed;
                }
                return WriteCheck::Refused(format!(
                    "read-only: broker user '{user}' may not publish to exchange {} on vhost '{vhost}' (write permission '{}')",
                    listed(&blocked),
                    sanitize::one_line(&p.write, 100)
                ));
            }
            Ok(PermissionState::Unknown) => {
                "the management API shows permissions only to administrators".to_string()
            }
            Err(e) => format!("the permissions could not be read: {e}"),
        };

        // Ask the broker itself, target by target, on a connection of its own: lapin may give up
        // a connection on which the broker closed a channel, and the replay needs its own.
        let conn = match self.connect_amqp("warren-permission-check").await {
            Ok(c) => c,
            Err(e) => {
                return WriteCheck::Unknown(format!(
                    "{why_unreadable}, and AMQP could not be reached to try: {e}"
                ));
            }
        };
        let mut tried: BTreeSet<(String, String)> = BTreeSet::new();
        let mut blocked: Vec<String> = Vec::new();
        let mut broker_says = String::new();
        let mut unknown: Option<String> = None;
        for (x, rk) in targets {
            if !tried.insert((x.clone(), rk.clone())) {
                continue;
            }
            let shown = sanitize::one_line(&resource(x), 100);
            match trial_publish(&conn, x, rk).await {
                Trial::Accepted => {}
                Trial::Refused(text) => {
                    blocked.push(resource(x));
                    broker_says = sanitize::one_line(&text, 300);
                }
                Trial::Failed(why) => {
                    unknown = Some(format!(
                        "{why_unreadable}, and a trial publish to exchange '{shown}' inside a rolled-back transaction failed: {}",
                        sanitize::one_line(&why, 300)
                    ));
                    break;
                }
            }
        }
        let _ = conn.close(200, "write permission checked".into()).await;
        if let Some(why) = unknown.filter(|_| blocked.is_empty()) {
            return WriteCheck::Unknown(why);
        }
        if blocked.is_empty() {
            return WriteCheck::Allowed;
        }
        blocked.sort();
        blocked.dedup();
        WriteCheck::Refused(format!(
            "read-only: broker user '{user}' may not publish to exchange {} on vhost '{vhost}' (the broker refused a trial publish: {broker_says})",
            listed(&blocked),
        ))
    }
}

/// What [`Session::write_refusal`] found out.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum WriteCheck {
    /// Every target may be published to.
    Allowed,
    /// Publishing is refused: nothing may move. The text says why, for the user.
    Refused(String),
    /// Warren could not tell (the text says why). A replay may start, but must stop at the
    /// first publish the broker refuses and report that, not carry on.
    Unknown(String),
}

impl WriteCheck {
    /// The refusal, when there is one.
    pub fn refusal(&self) -> Option<&str> {
        match self {
            WriteCheck::Refused(why) => Some(why),
            _ => None,
        }
    }
}

/// What the broker did with one trial publish.
pub(crate) enum Trial {
    /// Accepted (and dropped by the rollback).
    Accepted,
    /// Refused: the broker closed the channel over it. The broker's words when Warren saw them.
    Refused(String),
    /// Something else went wrong; nothing can be said about permissions.
    Failed(String),
}

/// Publishes an empty message to `exchange` with `routing_key` inside a transaction and rolls
/// it back. The broker checks write (and topic) permission when the publish arrives and closes
/// the channel with 403 if it is not allowed; a permitted message waits for a commit that never
/// comes and is dropped. The rollback's answer therefore tells: `tx.rollback-ok` means the
/// publish was accepted. When the broker's close arrives before the rollback is sent, lapin
/// fails the rollback locally, without the reason: that is tried again, and if it keeps
/// happening on a live connection, the publish was refused all the same.
pub(crate) async fn trial_publish(
    conn: &lapin::Connection,
    exchange: &str,
    routing_key: &str,
) -> Trial {
    for _ in 0..3 {
        let ch = match conn.create_channel().await {
            Ok(ch) => ch,
            Err(e) => return Trial::Failed(e.to_string()),
        };
        if let Err(e) = ch.tx_select().await {
            return Trial::Failed(e.to_string());
        }
        let result = async {
            ch.basic_publish(
                exchange.into(),
                routing_key.into(),
                lapin::options::BasicPublishOptions::default(),
                b"",
                lapin::BasicProperties::default(),
            )
            .await?;
            ch.tx_rollback().await
        }
        .await;
        match result {
            Ok(()) => {
                let _ = ch.close(200, "write permission checked".into()).await;
                return Trial::Accepted;
            }
            Err(e) => match amqp::soft_error_code(&e) {
                Some((403, text)) => return Trial::Refused(text),
                Some((code, text)) => return Trial::Failed(format!("{text} ({code})")),
                // Closed by the broker before the rollback went out: try again for its words.
                None if conn.status().connected() && !ch.status().connected() => {}
                None => return Trial::Failed(e.to_string()),
            },
        }
    }
    Trial::Refused(
        "the broker closed the channel over the trial publish, without Warren seeing its reason"
            .to_string(),
    )
}
