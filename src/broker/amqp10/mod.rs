//! AMQP 1.0 to RabbitMQ 4 (fe2o3-amqp): the connection a replay of AMQP 1.0 messages reads and
//! publishes on, RabbitMQ's addresses, and the messages as the model sees them (`convert`).

pub(crate) mod convert;

use std::time::Duration;

use fe2o3_amqp::sasl_profile::SaslProfile;
use fe2o3_amqp::{Connection, Session};

/// Where an AMQP 1.0 run connects: the broker's AMQP listener (RabbitMQ 4 speaks both
/// protocols on it), the vhost and the user.
#[derive(Clone)]
pub struct Endpoint10 {
    /// `amqp://host:port`, no credentials.
    pub url: String,
    pub vhost: String,
    pub username: String,
    pub password: String,
}

impl std::fmt::Debug for Endpoint10 {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Endpoint10({} vhost {})", self.url, self.vhost)
    }
}

impl Endpoint10 {
    /// The endpoint of an AMQP URL (`amqp://user:pass@host:port/vhost`), with the session's
    /// user. `Err` for TLS: not carried over AMQP 1.0 yet.
    pub fn of(url: &url::Url, vhost: &str, username: &str, password: &str) -> Result<Self, String> {
        if url.scheme() != "amqp" {
            return Err(format!(
                "a replay over AMQP 1.0 connects without TLS only, and this context's AMQP URL is {}: replay with --protocol amqp091",
                url.scheme()
            ));
        }
        let host = url.host_str().unwrap_or("localhost");
        let port = url.port().unwrap_or(5672);
        Ok(Endpoint10 {
            url: format!("amqp://{host}:{port}"),
            vhost: vhost.to_string(),
            username: username.to_string(),
            password: password.to_string(),
        })
    }
}

/// An open AMQP 1.0 connection and its one session.
pub(crate) struct Link10 {
    pub(crate) conn: fe2o3_amqp::connection::ConnectionHandle<()>,
    pub(crate) session: fe2o3_amqp::session::SessionHandle<()>,
}

/// Opens a connection to `ep` and begins a session, within `limit`.
pub(crate) async fn open(ep: &Endpoint10, name: &str, limit: Duration) -> Result<Link10, String> {
    let opening = async {
        let mut conn = Connection::builder()
            .container_id(format!("warren-{name}-{}", std::process::id()))
            // RabbitMQ takes the vhost from the open frame's hostname, as `vhost:NAME`.
            .hostname(format!("vhost:{}", ep.vhost).as_str())
            .sasl_profile(SaslProfile::Plain {
                username: ep.username.clone(),
                password: ep.password.clone(),
            })
            .open(ep.url.as_str())
            .await
            .map_err(|e| format!("AMQP 1.0 connection to {} failed: {e}", ep.url))?;
        let session = Session::begin(&mut conn)
            .await
            .map_err(|e| format!("AMQP 1.0 session could not begin: {e}"))?;
        Ok(Link10 { conn, session })
    };
    tokio::time::timeout(limit, opening).await.map_err(|_| {
        format!(
            "AMQP 1.0 connection to {} did not open in {limit:?}",
            ep.url
        )
    })?
}

impl Link10 {
    /// Ends the session and closes the connection, waiting at most `limit`.
    pub(crate) async fn close(mut self, limit: Duration) {
        let _ = tokio::time::timeout(limit, async {
            let _ = self.session.end().await;
            let _ = self.conn.close().await;
        })
        .await;
    }
}

/// RabbitMQ 4's address (v2) of what a publish to `exchange` with `routing_key` reaches: the
/// queue itself for the default exchange.
pub(crate) fn address(exchange: &str, routing_key: &str) -> String {
    let enc = |s: &str| {
        percent_encoding::utf8_percent_encode(s, percent_encoding::NON_ALPHANUMERIC).to_string()
    };
    if exchange.is_empty() {
        format!("/queues/{}", enc(routing_key))
    } else if routing_key.is_empty() {
        format!("/exchanges/{}", enc(exchange))
    } else {
        format!("/exchanges/{}/{}", enc(exchange), enc(routing_key))
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn addresses_are_rabbitmqs_v2_with_names_percent_encoded() {
        assert_eq!(super::address("", "work"), "/queues/work");
        assert_eq!(super::address("", "a b/c"), "/queues/a%20b%2Fc");
        assert_eq!(super::address("ex", ""), "/exchanges/ex");
        assert_eq!(super::address("ex", "k.1"), "/exchanges/ex/k%2E1");
    }
}
