//! Whether the AMQP URL and the management URL reach the same RabbitMQ cluster. Two URLs given
//! (or derived) separately can point at two brokers; then every answer would be about the wrong
//! one. The AMQP side says who it is in `connection.start`, before any login: its
//! `server_properties` carry `cluster_name` and `version`. The management overview carries the
//! same two. [`check`] compares them; [`probe`] reads them off a plain `amqp://` URL.

use std::time::Duration;

use lapin::protocol::{AMQPClass, connection::AMQPMethod};
use lapin::types::AMQPValue;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use url::Url;

use crate::broker::management::Overview;
use crate::domain::sanitize::one_line;

/// Who answers on the AMQP port, from `connection.start`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ServerIdentity {
    pub cluster_name: Option<String>,
    pub version: Option<String>,
    pub product: Option<String>,
}

const PROBE_TIMEOUT: Duration = Duration::from_secs(5);
/// `connection.start` is a few hundred bytes; anything much larger is not RabbitMQ.
const MAX_START_FRAME: usize = 64 * 1024;

/// Reads the server properties of the broker at a plain `amqp://` URL: sends the protocol
/// header, reads `connection.start`, and closes without logging in (nothing is authenticated,
/// nothing is opened). `Ok(None)` for `amqps://` (not probed: the TLS handshake is lapin's).
pub async fn probe(url: &Url) -> Result<Option<ServerIdentity>, String> {
    if url.scheme() != "amqp" {
        return Ok(None);
    }
    let host = url.host_str().unwrap_or("localhost");
    let host = host.trim_start_matches('[').trim_end_matches(']');
    let port = url.port().unwrap_or(5672);
    let work = async {
        let mut stream = tokio::net::TcpStream::connect((host, port))
            .await
            .map_err(|e| format!("cannot connect: {e}"))?;
        stream
            .write_all(b"AMQP\x00\x00\x09\x01")
            .await
            .map_err(|e| format!("cannot send the protocol header: {e}"))?;
        let mut header = [0u8; 7];
        stream
            .read_exact(&mut header)
            .await
            .map_err(|e| format!("no connection.start: {e}"))?;
        let [kind, _, _, s0, s1, s2, s3] = header;
        let size = u32::from_be_bytes([s0, s1, s2, s3]) as usize;
        if kind != 1 || size > MAX_START_FRAME {
            return Err("the server did not answer like an AMQP 0-9-1 broker".to_string());
        }
        let mut payload = vec![0u8; size + 1];
        stream
            .read_exact(&mut payload)
            .await
            .map_err(|e| format!("connection.start cut short: {e}"))?;
        let _ = stream.shutdown().await;
        payload.truncate(size);
        identity_from_start(&payload)
    };
    match tokio::time::timeout(PROBE_TIMEOUT, work).await {
        Ok(r) => r.map(Some),
        Err(_) => Err(format!(
            "no connection.start within {} s",
            PROBE_TIMEOUT.as_secs()
        )),
    }
}

/// The identity in a `connection.start` method frame's payload.
pub fn identity_from_start(payload: &[u8]) -> Result<ServerIdentity, String> {
    let parsed = lapin::protocol::parse_class(payload)
        .map_err(|_| "connection.start could not be read".to_string())?;
    let AMQPClass::Connection(AMQPMethod::Start(start)) = parsed.1 else {
        return Err("the server's first frame is not connection.start".to_string());
    };
    let get = |key: &str| {
        start
            .server_properties
            .inner()
            .iter()
            .find(|(k, _)| k.as_str() == key)
            .and_then(|(_, v)| match v {
                AMQPValue::LongString(s) => {
                    Some(String::from_utf8_lossy(s.as_bytes()).into_owned())
                }
                AMQPValue::ShortString(s) => Some(s.as_str().to_string()),
                _ => None,
            })
            .filter(|s| !s.is_empty())
    };
    Ok(ServerIdentity {
        cluster_name: get("cluster_name"),
        version: get("version"),
        product: get("product"),
    })
}

/// Refuses a pair of URLs that reach different clusters. Cluster names decide when both sides
/// have one (a rolling upgrade mixes versions inside one cluster); without them, the versions.
/// Nothing to compare on a side means no verdict, and `Ok`.
pub fn check(
    amqp: &ServerIdentity,
    amqp_url: &str,
    mgmt: &Overview,
    mgmt_url: &str,
) -> Result<(), String> {
    let mgmt_version = Some(mgmt.rabbitmq_version.as_str()).filter(|v| !v.is_empty());
    let different = match (amqp.cluster_name.as_deref(), mgmt.cluster_name.as_deref()) {
        (Some(a), Some(m)) => a != m,
        _ => matches!((amqp.version.as_deref(), mgmt_version), (Some(a), Some(m)) if a != m),
    };
    if !different {
        return Ok(());
    }
    let describe = |cluster: Option<&str>, version: Option<&str>| {
        let cluster = cluster.map_or("(no cluster name)".to_string(), |c| {
            format!("cluster '{}'", one_line(c, 100))
        });
        let version = version.map_or("version unknown".to_string(), |v| {
            format!("RabbitMQ {}", one_line(v, 40))
        });
        format!("{cluster} ({version})")
    };
    Err(format!(
        "the AMQP URL {} reaches {} but the management URL {} reaches {}: they are different brokers. Give the management URL of the broker the AMQP URL reaches (--management-url, or management_urls in the context), or the matching --amqp-url",
        one_line(amqp_url, 200),
        describe(amqp.cluster_name.as_deref(), amqp.version.as_deref()),
        one_line(mgmt_url, 200),
        describe(mgmt.cluster_name.as_deref(), mgmt_version),
    ))
}

/// Probes the AMQP URLs in order and checks the first that answers against the management
/// overview. AMQP that does not answer is no verdict here (the AMQP connection itself reports
/// that, when a command needs it).
pub async fn verify(amqp_urls: &[Url], mgmt: &Overview, mgmt_url: &Url) -> Result<(), String> {
    for url in amqp_urls {
        match probe(url).await {
            Ok(Some(identity)) => return check(&identity, url.as_str(), mgmt, mgmt_url.as_str()),
            Ok(None) => return Ok(()),
            Err(e) => tracing::debug!("cluster probe of {url}: {e}"),
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::discovery::BrokerFeatures;

    fn overview(cluster: Option<&str>, version: &str) -> Overview {
        Overview {
            rabbitmq_version: version.into(),
            product_name: Some("RabbitMQ".into()),
            cluster_name: cluster.map(str::to_string),
            features: BrokerFeatures::from_version(version),
        }
    }

    fn id(cluster: Option<&str>, version: Option<&str>) -> ServerIdentity {
        ServerIdentity {
            cluster_name: cluster.map(str::to_string),
            version: version.map(str::to_string),
            product: Some("RabbitMQ".into()),
        }
    }

    #[test]
    fn same_cluster_passes_even_across_versions() {
        let m = overview(Some("prod@a"), "4.0.5");
        assert!(
            check(
                &id(Some("prod@a"), Some("4.0.5")),
                "amqp://a",
                &m,
                "http://a"
            )
            .is_ok()
        );
        // A rolling upgrade: one cluster, two versions.
        assert!(
            check(
                &id(Some("prod@a"), Some("4.1.0")),
                "amqp://a",
                &m,
                "http://a"
            )
            .is_ok()
        );
    }

    #[test]
    fn different_clusters_are_refused_with_both_names() {
        let m = overview(Some("rabbit@vm"), "3.10.8");
        let e = check(
            &id(Some("warren43@vm"), Some("4.3.6")),
            "amqp://h:5674",
            &m,
            "http://h:15672/",
        )
        .unwrap_err();
        assert!(e.contains("cluster 'warren43@vm' (RabbitMQ 4.3.6)"), "{e}");
        assert!(e.contains("cluster 'rabbit@vm' (RabbitMQ 3.10.8)"), "{e}");
        assert!(e.contains("--management-url"), "{e}");
    }

    #[test]
    fn without_cluster_names_versions_decide() {
        let m = overview(None, "3.10.8");
        assert!(check(&id(None, Some("4.3.6")), "amqp://h", &m, "http://h").is_err());
        assert!(check(&id(None, Some("3.10.8")), "amqp://h", &m, "http://h").is_ok());
        assert!(check(&id(None, None), "amqp://h", &m, "http://h").is_ok());
    }

    #[test]
    fn broker_text_in_the_error_is_sanitised() {
        let m = overview(Some("a\u{1b}]0;pwned\u{7}"), "1");
        let e = check(&id(Some("b\u{202e}"), None), "amqp://h", &m, "http://h").unwrap_err();
        assert!(!e.contains('\u{1b}') && !e.contains('\u{7}') && !e.contains('\u{202e}'));
    }

    #[test]
    fn garbage_is_not_an_identity() {
        assert!(identity_from_start(b"").is_err());
        assert!(identity_from_start(&[0, 10, 0, 11, 1, 2, 3]).is_err());
        assert!(identity_from_start(&[0xff; 40]).is_err());
    }
}
