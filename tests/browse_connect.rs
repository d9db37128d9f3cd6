//! Connecting: cluster URLs tried in order, failures explained per node in the user's words,
//! passwords never shown.

use crate::common;

use common::{TestBroker, TestVhost};
use warren::broker::amqp::{AmqpError, connect};

#[tokio::test]
async fn connect_tries_each_node_and_explains_failures() {
    let broker = TestBroker::default_broker();
    let vhost = TestVhost::new(&broker, "connect").await;
    let good = format!("amqp://{}:{}", broker.host, broker.amqp_port);
    // Port 1 on loopback: nothing listens there.
    let dead = format!("amqp://ops:hunter2@{}:1", broker.host);

    // The dead node first: the second one answers.
    let conn = connect(
        &[dead.clone(), good.clone()],
        &vhost.name,
        "guest",
        "guest",
        None,
    )
    .await
    .expect("second node answers");
    assert!(conn.status().connected());
    drop(conn);

    // Wrong password on the live node, connection refused on the dead one: both explained.
    let err = connect(
        &[dead.clone(), good.clone()],
        &vhost.name,
        "guest",
        "wrong-pw-123",
        None,
    )
    .await
    .expect_err("bad password");
    let text = err.to_string();
    eprintln!("{text}");
    let AmqpError::Unreachable(attempts) = &err else {
        panic!("{err:?}")
    };
    assert_eq!(attempts.len(), 2);
    assert!(attempts[0].failure.contains("connection refused"), "{text}");
    assert!(
        attempts[1].failure.contains("refused user 'guest'")
            && attempts[1].failure.contains("ACCESS_REFUSED"),
        "{text}"
    );
    assert!(
        !text.contains("hunter2") && !text.contains("wrong-pw-123"),
        "{text}"
    );

    // A vhost that does not exist.
    let err = connect(
        std::slice::from_ref(&good),
        "no-such-vhost-warren",
        "guest",
        "guest",
        None,
    )
    .await
    .expect_err("no vhost");
    let text = err.to_string();
    eprintln!("{text}");
    assert!(text.contains("vhost 'no-such-vhost-warren'"), "{text}");

    // Credentials from the URL are used when none are given, and never shown.
    let with_creds = format!(
        "amqp://guest:guest@{}:{}/ignored",
        broker.host, broker.amqp_port
    );
    let conn = connect(&[with_creds], &vhost.name, "", "", None)
        .await
        .expect("URL creds");
    drop(conn);
    vhost.cleanup().await;
}
