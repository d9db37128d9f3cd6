//! Every context at once, through the real binary on real brokers: `warren queues --context '*'`
//! and `warren watch --once --context '*'` look at each context of the config file (each its
//! own listing, a context column); an unreachable context is reported and the rest shown; only
//! when every context is unreachable is it exit 3.

use crate::common;
use crate::replay_util;

use common::amqp::{self as h};
use common::{TestBroker, TestVhost};
use lapin::types::FieldTable;
use replay_util::{Home, bare_command, dead_letter, run, simple};
use warren::domain::features::QueueType;

/// A config with the context `live` (this vhost of `broker`) and, when asked, `gone` (a port
/// where nothing listens).
fn config(home: &Home, vhost: &TestVhost, live: bool, gone: bool) {
    let mut text = String::new();
    if live {
        text.push_str(&format!(
            "[contexts.live]\nmanagement_urls = [\"{}\"]\namqp_urls = [\"{}\"]\nvhost = \"{}\"\n",
            vhost.broker.mgmt_url_with_creds(),
            vhost.broker.amqp_url(&vhost.name),
            vhost.name
        ));
    }
    if gone {
        text.push_str(
            "[contexts.gone]\nmanagement_urls = [\"http://guest:guest@127.0.0.1:9\"]\namqp_urls = [\"amqp://guest:guest@127.0.0.1:9/%2f\"]\n",
        );
    }
    std::fs::write(home.dir.join("config.toml"), text).unwrap();
}

#[tokio::test]
async fn every_context_is_looked_at_and_an_unreachable_one_is_reported() {
    for broker in TestBroker::all() {
        let label = broker.label.clone();
        let vhost = TestVhost::new(&broker, "every-context").await;
        let home = Home::new("every-context");
        let conn = h::connect(&vhost).await;
        let ch = h::confirm_channel(&conn).await;
        h::declare(&ch, "dlq", QueueType::Classic, FieldTable::default()).await;
        let msgs: Vec<_> = (0..3).map(|i| simple("c", i, &[])).collect();
        dead_letter(&conn, "work", "dlq", &msgs).await;
        config(&home, &vhost, true, true);

        let args = ["queues", "--context", "*", "--json"];
        let listed = run(bare_command(&home, &args), &args).await;
        assert_eq!(listed.code, Some(0), "{label}: {listed}");
        let lines = listed.json();
        let dlq: Vec<_> = lines.iter().filter(|v| v["name"] == "dlq").collect();
        assert_eq!(dlq.len(), 1, "{label}: {listed}");
        assert_eq!(dlq[0]["context"], "live", "{label}");
        assert_eq!(dlq[0]["vhost"], vhost.name.as_str(), "{label}");
        assert_eq!(dlq[0]["depth"], 3, "{label}");
        assert!(
            lines
                .iter()
                .any(|v| v["event"] == "unreachable" && v["context"] == "gone"),
            "{label}: {listed}"
        );
        let args = ["queues", "--context", "*"];
        let text = run(bare_command(&home, &args), &args).await;
        assert_eq!(text.code, Some(0), "{label}: {text}");
        assert!(
            text.stdout
                .lines()
                .any(|l| l.starts_with("live ") && l.contains("dlq")),
            "{label}: {text}"
        );
        assert!(
            text.stderr.contains("context 'gone' not shown"),
            "{label}: {text}"
        );

        // watch --once: the alert of the reachable context, the unreachable one reported.
        let args = [
            "watch",
            "--once",
            "--context",
            "*",
            "--json",
            "--alert",
            "depth>2",
        ];
        let watched = run(bare_command(&home, &args), &args).await;
        assert_eq!(watched.code, Some(1), "{label}: {watched}");
        let lines = watched.json();
        assert!(
            lines.iter().any(|v| v["event"] == "depth"
                && v["context"] == "live"
                && v["queue"] == "dlq"
                && v["alert"] == "depth>2"),
            "{label}: {watched}"
        );
        assert!(
            lines
                .iter()
                .any(|v| v["event"] == "unreachable" && v["context"] == "gone"),
            "{label}: {watched}"
        );
        let args = ["watch", "--once", "--context", "*", "--alert", "depth>5"];
        let clear = run(bare_command(&home, &args), &args).await;
        assert_eq!(clear.code, Some(0), "{label}: {clear}");

        // Every context unreachable: exit 3, for both.
        config(&home, &vhost, false, true);
        for args in [
            &["queues", "--context", "*"][..],
            &["watch", "--once", "--context", "*"][..],
        ] {
            let r = run(bare_command(&home, args), args).await;
            assert_eq!(r.code, Some(3), "{label} {args:?}: {r}");
        }
        let _ = ch.close(200, "ok".into()).await;
        vhost.cleanup().await;
    }
}
