//! The management API against real brokers: version → features, who we are, permissions, and
//! errors in the user's words (wrong password, unreachable nodes, no access to a vhost), plus
//! cluster failover and closing a connection.

use crate::common;

use std::time::Duration;

use common::{TestBroker, TestVhost, enc};
use reqwest::Method;
use serde_json::json;
use warren::broker::management::{Management, ManagementError, PermissionState};
use warren::config::{self, Config, Overrides, Target};

fn no_env(_: &str) -> Option<String> {
    None
}

fn target_for(url: &str, vhost: &str) -> Target {
    let over = Overrides {
        management_url: Some(url.to_string()),
        vhost: Some(vhost.to_string()),
        ..Default::default()
    };
    config::resolve(&Config::default(), &over, &no_env).expect("target resolves")
}

/// A target with a context listing several management URLs (cluster nodes).
fn cluster_target(urls: &[String]) -> Target {
    let list = urls
        .iter()
        .map(|u| format!("\"{u}\""))
        .collect::<Vec<_>>()
        .join(", ");
    let text = format!("[contexts.c]\nmanagement_urls = [{list}]\nusername = \"guest\"\n");
    let c = Config::parse(&text, std::path::Path::new("/tmp/cluster.toml")).expect("parses");
    let over = Overrides {
        context: Some("c".into()),
        ..Default::default()
    };
    config::resolve(&c, &over, &no_env).expect("resolves")
}

#[tokio::test]
async fn overview_whoami_and_permissions() {
    for broker in TestBroker::all() {
        let vh = TestVhost::new(&broker, "mgmt").await;
        let mgmt = Management::new(&target_for(&broker.mgmt_url_with_creds(), &vh.name)).unwrap();
        let ov = mgmt.overview().await.expect("overview");
        println!("RabbitMQ {} reports {}", broker.label, ov.rabbitmq_version);
        assert!(
            ov.rabbitmq_version.starts_with(&broker.label),
            "{} vs {}",
            ov.rabbitmq_version,
            broker.label
        );
        let f = &ov.features;
        match broker.label.as_str() {
            "3.10" => {
                assert!(!f.has_last_death);
                assert_eq!(f.default_quorum_delivery_limit, None);
            }
            "4.0" => {
                assert!(f.has_last_death && f.explicit_nack_counts);
                assert_eq!(f.default_quorum_delivery_limit, Some(20));
            }
            "4.3" => {
                assert!(f.has_last_death && !f.explicit_nack_counts);
                assert_eq!(f.default_quorum_delivery_limit, Some(20));
            }
            other => panic!("unexpected broker {other}"),
        }
        let me = mgmt.whoami().await.expect("whoami");
        assert_eq!(me.name, "guest");
        assert!(
            me.tags.iter().any(|t| t == "administrator"),
            "{:?}",
            me.tags
        );
        match mgmt.permissions(&vh.name).await.expect("permissions") {
            PermissionState::Known(p) => assert_eq!(p.read, ".*"),
            other => panic!("guest is an administrator, expected known permissions: {other:?}"),
        }
        // The default vhost `/` is percent-encoded on the way.
        mgmt.queues("/").await.expect("queues of /");
        vh.cleanup().await;
    }
}

#[tokio::test]
async fn wrong_password_names_user_and_url() {
    for broker in TestBroker::all() {
        let url = format!("http://guest:Xyzzy-not-it@127.0.0.1:{}", broker.mgmt_port);
        let mgmt = Management::new(&target_for(&url, "/")).unwrap();
        let err = mgmt.overview().await.expect_err("wrong password");
        assert!(
            matches!(err, ManagementError::WrongCredentials { .. }),
            "{err:?}"
        );
        assert_eq!(
            err.to_string(),
            format!(
                "RabbitMQ at http://127.0.0.1:{} refused user 'guest': wrong username or password",
                broker.mgmt_port
            )
        );
        assert!(!format!("{err} {err:?} {mgmt:?}").contains("Xyzzy"));
    }
}

#[tokio::test]
async fn unreachable_nodes_are_listed_and_failover_remembers_the_live_one() {
    let t = cluster_target(&[
        "http://127.0.0.1:1".to_string(),
        "http://127.0.0.1:9".to_string(),
    ]);
    let mgmt = Management::new(&t).unwrap();
    let err = mgmt.whoami().await.expect_err("nothing listens there");
    assert_eq!(
        err.to_string(),
        "could not reach the management API: tried http://127.0.0.1:1 (connection refused), http://127.0.0.1:9 (connection refused)"
    );

    let broker = TestBroker::default_broker();
    let t = cluster_target(&["http://127.0.0.1:1".to_string(), broker.mgmt_base()]);
    let mgmt = Management::new(&t).unwrap();
    assert_eq!(mgmt.active_url().as_str(), "http://127.0.0.1:1/");
    mgmt.whoami().await.expect("second node answers");
    assert_eq!(
        mgmt.active_url().as_str(),
        format!("{}/", broker.mgmt_base())
    );
    // A clone shares the remembered node.
    assert_eq!(mgmt.clone().active_url(), mgmt.active_url());
}

#[tokio::test]
async fn user_without_vhost_access_is_told_what_to_ask_for() {
    for broker in TestBroker::all() {
        let vh = TestVhost::new(&broker, "noperm").await;
        let user = common::unique("warren-noperm");
        let r = vh
            .api(
                Method::PUT,
                &format!("/api/users/{}", enc(&user)),
                Some(json!({"password": "pw-Quux", "tags": "management"})),
            )
            .await;
        assert!(r.status().is_success(), "create user: {}", r.status());

        let url = format!(
            "http://{}:pw-Quux@127.0.0.1:{}",
            enc(&user),
            broker.mgmt_port
        );
        let mgmt = Management::new(&target_for(&url, &vh.name)).unwrap();
        let me = mgmt
            .whoami()
            .await
            .expect("whoami works without vhost access");
        assert_eq!(me.tags, vec!["management"]);
        let err = mgmt.queues(&vh.name).await.expect_err("no access");
        println!("RabbitMQ {}: {err}", broker.label);
        assert!(
            matches!(
                err,
                ManagementError::NoVhostAccess { .. } | ManagementError::VhostNotFound { .. }
            ),
            "{err:?}"
        );
        let text = err.to_string();
        assert!(
            text.contains(&format!(
                "user '{user}' has no access to vhost '{}'",
                vh.name
            )),
            "{text}"
        );
        assert!(text.contains("ask for read permission"), "{text}");
        assert!(!text.contains("pw-Quux"));
        // Reading one's own permissions needs the administrator tag: unknown, not an error.
        assert_eq!(
            mgmt.permissions(&vh.name).await.expect("falls back"),
            PermissionState::Unknown
        );

        let r = vh
            .api(Method::DELETE, &format!("/api/users/{}", enc(&user)), None)
            .await;
        assert!(r.status().is_success(), "delete user: {}", r.status());
        vh.cleanup().await;
    }
}

#[tokio::test]
async fn missing_queue_and_missing_vhost_are_told_apart() {
    let broker = TestBroker::default_broker();
    let vh = TestVhost::new(&broker, "missing").await;
    let mgmt = Management::new(&target_for(&broker.mgmt_url_with_creds(), &vh.name)).unwrap();
    let err = mgmt
        .queue(&vh.name, "no-such-queue")
        .await
        .expect_err("no queue");
    assert!(matches!(err, ManagementError::NoQueue { .. }), "{err:?}");
    assert!(
        err.to_string()
            .contains("no queue 'no-such-queue' in vhost")
            && err.to_string().contains("`warren queues` lists them"),
        "{err}"
    );
    let err = mgmt
        .queues("warren-no-such-vhost")
        .await
        .expect_err("no vhost");
    assert!(
        matches!(err, ManagementError::VhostNotFound { .. }),
        "{err:?}"
    );
    vh.cleanup().await;
}

#[tokio::test]
async fn connections_are_listed_and_closed() {
    TestBroker::each(|broker| async move {
        let vh = TestVhost::new(&broker, "conn").await;
        let mgmt = Management::new(&target_for(&broker.mgmt_url_with_creds(), &vh.name)).unwrap();
        let props =
            lapin::ConnectionProperties::default().with_connection_name("warren-conn-test".into());
        let conn = lapin::Connection::connect(&vh.amqp_url(), props)
            .await
            .expect("amqp connect");
        // Connections appear in the API after the broker's next stats tick.
        let found = common::wait::until_ok(
            "our connection to be listed",
            Duration::from_secs(10),
            || async {
                let list = mgmt.connections(Some(&vh.name)).await.expect("connections");
                list.into_iter()
                    .find(|c| c.client_name.as_deref() == Some("warren-conn-test"))
                    .ok_or("not listed")
            },
        )
        .await;
        assert_eq!(found.vhost.as_deref(), Some(vh.name.as_str()));
        mgmt.close_connection(&found.name, "warren test")
            .await
            .expect("close");
        let closed = common::wait::holds(Duration::from_secs(5), || async {
            !conn.status().connected()
        })
        .await;
        assert!(closed, "the broker closed our connection");
        vh.cleanup().await;
    })
    .await;
}

/// A management URL that is not the API: one ending in `/api` (Warren adds it) names the
/// address to give instead; another web server is said to be one, not "version not found".
#[tokio::test]
async fn a_url_that_is_not_the_management_api_says_what_it_is() {
    let broker = TestBroker::default_broker();
    let url = format!(
        "http://guest:Xyzzy-it-is@127.0.0.1:{}/api",
        broker.mgmt_port
    );
    let err = Management::new(&target_for(&url, "/"))
        .unwrap()
        .overview()
        .await
        .expect_err("not the API");
    assert!(
        matches!(err, ManagementError::NotManagementApi { .. }),
        "{err:?}"
    );
    let text = err.to_string();
    assert!(
        text.contains(&format!(
            "Warren adds /api itself: give the plugin's address without it, http://127.0.0.1:{}/",
            broker.mgmt_port
        )),
        "{text}"
    );
    assert!(!format!("{err:?}").contains("Xyzzy"), "{err:?}");

    // Another web server: it answers every request with a 404 page.
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("a port");
    let port = listener.local_addr().expect("addr").port();
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            use std::io::{Read, Write};
            let mut stream = stream;
            let mut buf = [0u8; 4096];
            let _ = stream.read(&mut buf);
            let page = "<html>nothing here</html>";
            let _ = write!(
                stream,
                "HTTP/1.1 404 Not Found\r\nContent-Type: text/html\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{page}",
                page.len()
            );
        }
    });
    let err = Management::new(&target_for(&format!("http://127.0.0.1:{port}/"), "/"))
        .unwrap()
        .overview()
        .await
        .expect_err("not RabbitMQ");
    let text = err.to_string();
    assert!(
        text.contains("is not RabbitMQ's management API")
            && text.contains("not another web server"),
        "{text}"
    );
}
