//! Snapshots are lossless: exporting the demo's dead letters from a real broker, reading the file
//! back and writing it again gives the same bytes, for every message of the demo (the hostile one
//! with escape sequences, bidi overrides, non-UTF-8 header bytes and a binary body included), and
//! what the file holds is exactly what a browse of the queue reads. The shipped `assets/demo`
//! snapshots read back and write the same bytes too.

use crate::common;

use std::path::Path;
use std::process::Command;

use common::{TestBroker, unique};
use warren::broker::browse::{BrowseRequest, browse};
use warren::config::{self, Config, Overrides};
use warren::demo;
use warren::domain::features::QueueType;
use warren::domain::quorum::BrowsePolicy;
use warren::domain::snapshot;

#[test]
fn shipped_demo_snapshots_read_back_and_write_the_same_bytes() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("assets/demo");
    let mut files = 0;
    let mut messages = 0;
    let mut non_utf8_header = false;
    for entry in std::fs::read_dir(&dir).expect("assets/demo exists") {
        let path = entry.expect("dir entry").path();
        if path.extension().and_then(|e| e.to_str()) != Some("jsonl") {
            continue;
        }
        let text = std::fs::read_to_string(&path).expect("readable");
        let (header, msgs) =
            snapshot::read(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        assert_eq!(
            snapshot::write(&header, &msgs),
            text,
            "{} round trip",
            path.display()
        );
        non_utf8_header |= msgs.iter().any(|m| {
            m.headers.iter().any(|(_, v)| {
                v.as_bytes()
                    .is_some_and(|b| std::str::from_utf8(b).is_err())
            })
        });
        files += 1;
        messages += msgs.len();
    }
    assert_eq!(files, 10, "one snapshot per demo DLQ");
    assert_eq!(messages, 43, "every dead letter of the demo");
    assert!(
        non_utf8_header,
        "the hostile message's non-UTF-8 header survives"
    );
}

/// Deletes the demo vhost at the end, also on panic.
struct Cleanup {
    broker: TestBroker,
    name: String,
}

impl Drop for Cleanup {
    fn drop(&mut self) {
        common::delete_vhost_blocking(&self.broker, &self.name);
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn export_then_read_then_write_gives_the_same_bytes_for_every_demo_message() {
    let b = TestBroker::default_broker();
    let vhost = unique("warren-demo-roundtrip");
    let _cleanup = Cleanup {
        broker: b.clone(),
        name: vhost.clone(),
    };
    let over = Overrides {
        amqp_url: Some(format!("amqp://guest:guest@{}:{}", b.host, b.amqp_port)),
        management_url: Some(b.mgmt_url_with_creds()),
        ..Overrides::default()
    };
    let target = config::resolve(&Config::default(), &over, &|_| None).expect("target");
    let report = demo::build(&target, &vhost).await.expect("demo builds");

    let dir = std::env::temp_dir().join(unique("warren-export"));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let conn = warren::broker::amqp::connect(&[b.amqp_url(&vhost)], &vhost, "guest", "guest", None)
        .await
        .expect("amqp");
    let mut total = 0;
    for q in report.dead_letter_queues() {
        let file = dir.join(format!("{}.jsonl", q.name));
        let out = Command::new(env!("CARGO_BIN_EXE_warren"))
            .args([
                "--amqp-url",
                &b.amqp_url(&vhost),
                "--management-url",
                &b.mgmt_url_with_creds(),
            ])
            .args(["--vhost", &vhost, "export", &q.name, "-o"])
            .arg(&file)
            .env("WARREN_STORE", dir.join("warren.db"))
            .env("WARREN_LOG_DIR", &dir)
            .output()
            .expect("run warren export");
        assert!(
            out.status.success(),
            "export {}: {}",
            q.name,
            String::from_utf8_lossy(&out.stderr)
        );

        let text = std::fs::read_to_string(&file).expect("snapshot written");
        let (header, msgs) = snapshot::read(&text).expect("snapshot reads");
        assert_eq!(header.queue, q.name);
        assert_eq!(msgs.len() as u64, q.expected, "{}", q.name);
        assert_eq!(
            snapshot::write(&header, &msgs),
            text,
            "{}: export → read → write is byte-identical",
            q.name
        );

        // What the file holds is what the queue holds: properties, typed headers, whole bodies.
        let qt = if q.name == "invoices.dlq" {
            QueueType::Quorum
        } else {
            QueueType::Classic
        };
        let mut req = BrowseRequest::new(q.name.clone(), qt, BrowsePolicy::unrestricted());
        req.limit = 1000;
        req.body_cap = usize::MAX;
        let page = browse(&conn, &req).await.expect("browse");
        assert_eq!(page.messages.len(), msgs.len());
        for (a, b) in msgs.iter().zip(&page.messages) {
            assert_eq!(a.properties, b.properties, "{}", q.name);
            // Quorum queues add their delivery counter on every read after the first: that is
            // the broker's bookkeeping, not the message.
            let strip = |t: &warren::domain::value::Table| {
                let mut t = t.clone();
                t.remove("x-delivery-count");
                t.remove("x-acquired-count");
                t
            };
            assert_eq!(strip(&a.headers), strip(&b.headers), "{}", q.name);
            assert_eq!(a.body, b.body, "{}", q.name);
            assert_eq!(
                a.body_size,
                a.body.len() as u64,
                "whole bodies are exported"
            );
        }
        total += msgs.len();
    }
    assert_eq!(total as u64, report.total_dead_letters());
    let _ = std::fs::remove_dir_all(&dir);
}
