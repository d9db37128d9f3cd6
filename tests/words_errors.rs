//! Errors that spoke a library's words or pointed nowhere (issue 41): each says what is wrong
//! and what to type instead, with a non-zero exit. Through the real binary (and the TUI in tmux)
//! against the real broker on this machine.

use crate::common;
use crate::replay_util;
use crate::tmux_util;

use std::time::Duration;

use common::TestBroker;
use replay_util::{Home, bare_command, run};

#[tokio::test]
async fn a_management_url_on_the_amqp_port_says_which_port_to_use() {
    let b = TestBroker::default_broker();
    let home = Home::new("words-port");
    let url = format!("http://{}:{}", b.host, b.amqp_port);
    let args = ["--management-url", url.as_str(), "queues"];
    let r = run(bare_command(&home, &args), &args).await;
    assert_eq!(r.code, Some(3), "{r}");
    assert!(
        r.stderr.contains("this port answers AMQP, not HTTP")
            && r.stderr.contains("--management-url http://HOST:15672"),
        "{r}"
    );
    assert!(!r.stderr.contains("invalid HTTP version"), "{r}");
}

#[tokio::test]
async fn a_url_without_a_scheme_says_how_to_write_it() {
    let b = TestBroker::default_broker();
    let home = Home::new("words-scheme");
    let url = format!("{}:{}", b.host, b.mgmt_port);
    let args = ["--management-url", url.as_str(), "queues"];
    let r = run(bare_command(&home, &args), &args).await;
    assert_eq!(r.code, Some(2), "{r}");
    assert!(
        r.stderr
            .contains(&format!("it has no scheme: write it as http://{url}")),
        "{r}"
    );
    assert!(!r.stderr.contains("relative URL"), "{r}");
}

#[tokio::test]
async fn an_empty_filter_points_to_where_the_language_is() {
    let home = Home::new("words-filter");
    let args = ["replay", "orders.dlq", "--filter", ""];
    let r = run(bare_command(&home, &args), &args).await;
    assert_eq!(r.code, Some(2), "{r}");
    assert!(r.stderr.contains("FILTER LANGUAGE in `warren man`"), "{r}");
    assert!(!r.stderr.contains("warren help filter"), "{r}");
    // And the man page has that section.
    let man = ["man"];
    let page = run(bare_command(&home, &man), &man).await;
    assert!(page.stdout.contains("FILTER LANGUAGE"), "{page}");
}

/// The TUI with a wrong password: the banner says so, and quitting says it again on the
/// terminal and exits 3, as `warren queues` does.
#[tokio::test(flavor = "multi_thread")]
async fn the_tui_with_a_wrong_password_says_so_and_exits_3() {
    let b = TestBroker::default_broker();
    let home = Home::new("words-password");
    let dir = home.dir.display();
    let cmd = format!(
        "sh -c 'exec env WARREN_STORE={store} WARREN_LOG_DIR={dir}/logs {bin} --config {dir}/config.toml --amqp-url amqp://guest:wrong@{host}:{port} 2> {dir}/stderr'; echo $? > {dir}/exit; sleep 60",
        store = home.store().display(),
        bin = replay_util::bin().display(),
        host = b.host,
        port = b.amqp_port,
    );
    let t = tmux_util::Tmux::open(&cmd, None, 100, 24);
    t.wait_for("wrong username or password", Duration::from_secs(30));
    t.keys(&["q"]);
    let file = home.dir.join("exit");
    let code = common::wait::poll_blocking(Duration::from_secs(20), || {
        std::fs::read_to_string(&file)
            .ok()
            .and_then(|s| s.trim().parse::<i32>().ok())
            .ok_or(())
    })
    .unwrap_or_else(|()| panic!("{}", t.screen()));
    let stderr = std::fs::read_to_string(home.dir.join("stderr")).unwrap_or_default();
    assert_eq!(code, 3, "{stderr}");
    assert!(
        stderr.contains("the broker was never reached")
            && stderr.contains("wrong username or password"),
        "{stderr}"
    );
}
