//! End to end in tmux, the operators' habits: a custom command from `[[commands]]` gets the
//! terminal with the message's fields in its environment and gives it back; a `:ctx` to a context
//! whose password manager prompts gets the terminal for the prompt; the command log lists what
//! the session did on the broker.

use crate::common;
use crate::tmux_util;

use std::path::{Path, PathBuf};
use std::time::Duration;

use common::amqp::{confirm_channel, connect, dead_letter_by_reject, declare};
use common::{TestBroker, TestVhost, unique};
use lapin::types::FieldTable;
use tmux_util::Tmux;
use warren::domain::features::QueueType;

fn write_config(dir: &Path, text: &str) -> PathBuf {
    let path = dir.join("config.toml");
    std::fs::write(&path, text).expect("config");
    path
}

#[test]
fn a_custom_command_gets_the_terminal_and_gives_it_back() {
    let dir: PathBuf = std::env::temp_dir().join(unique("warren-e2e-custom"));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let out = dir.join("env.txt");
    let config = write_config(
        &dir,
        &format!(
            r#"
[[commands]]
key = "L"
name = "dump the message"
run = '''printf '%s\n' "id=$MESSAGE_ID" "queue=$QUEUE" "exc=$EXCEPTION" > '{out}'; echo "handed over: $MESSAGE_ID"'''
"#,
            out = out.display()
        ),
    );
    let demo = Path::new(env!("CARGO_MANIFEST_DIR")).join("assets/demo/shipping-label_error.jsonl");
    let cmd = format!(
        "WARREN_LOG_DIR={dir} {bin} --config '{config}' open '{demo}'; sleep 30",
        dir = dir.display(),
        bin = env!("CARGO_BIN_EXE_warren"),
        config = config.display(),
        demo = demo.display(),
    );
    let t = Tmux::open(&cmd, None, 100, 30);
    t.wait_for("Dead-letter queues (1)", Duration::from_secs(20));
    t.keys(&["Enter"]);
    t.wait_for("— 6 messages", Duration::from_secs(20));
    // The configured commands close the help: its last page.
    t.keys(&["?", "G"]);
    t.wait_for("dump the message", Duration::from_secs(5));
    t.keys(&["Escape"]);
    t.keys(&["L"]);
    // The shell's screen: the command's output, then the way back.
    let shell = t.wait_for("Press Enter to return to Warren", Duration::from_secs(10));
    assert!(
        shell.contains("handed over: ac9c1d9d-811d-4574-a824-25f12cda5e85"),
        "{shell}"
    );
    assert!(
        !shell.contains("Dead-letter queues"),
        "the alternate screen is left: {shell}"
    );
    let env = std::fs::read_to_string(&out).expect("the command ran");
    assert!(env.contains("queue=shipping-label_error"), "{env}");
    assert!(
        env.lines().any(|l| l.starts_with("id=") && l.len() > 3),
        "{env}"
    );
    assert!(
        env.contains("exc=Shipping.Carriers.CarrierUnavailableException"),
        "{env}"
    );
    t.keys(&["Enter"]);
    // Warren again, as it was, with the outcome in the notice line, and its keys work.
    let back = t.wait_for("dump the message: done", Duration::from_secs(10));
    assert!(back.contains("— 6 messages"), "{back}");
    t.keys(&["j"]);
    // The cursor on the second row, whose message id starts ac9c1e.
    let moved = t.wait_for("▶   ac9c1e", Duration::from_secs(5));
    assert!(
        moved.contains("— 6 messages"),
        "keys work after the handover: {moved}"
    );
    t.keys(&["q"]);
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test(flavor = "multi_thread")]
async fn ctx_to_a_prompting_password_manager_gets_the_terminal_and_the_log_says_so() {
    let broker = TestBroker::default_broker();
    let vhost = TestVhost::new(&broker, "e2e-habits").await;
    let conn = connect(&vhost).await;
    let ch = confirm_channel(&conn).await;
    declare(&ch, "habits.dlq", QueueType::Classic, FieldTable::default()).await;
    dead_letter_by_reject(&conn, "habits.work", "habits.dlq", 3).await;

    let dir: PathBuf = std::env::temp_dir().join(unique("warren-e2e-ctx"));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let runs = dir.join("runs");
    // Context b's "password manager" asks on the terminal, as pinentry does.
    let config = write_config(
        &dir,
        &format!(
            r#"
default_context = "a"

[contexts.a]
management_urls = ["http://127.0.0.1:{mgmt}"]
amqp_urls = ["amqp://127.0.0.1:{amqp}"]
vhost = "{vhost}"
username = "guest"
password_command = "echo a >> '{runs}'; echo guest"

[contexts.b]
management_urls = ["http://127.0.0.1:{mgmt}"]
amqp_urls = ["amqp://127.0.0.1:{amqp}"]
vhost = "{vhost}"
username = "guest"
password_command = "echo b >> '{runs}'; printf 'vault passphrase for b: ' > /dev/tty; read answer < /dev/tty; test \"$answer\" = open-sesame && echo guest"
"#,
            mgmt = broker.mgmt_port,
            amqp = broker.amqp_port,
            vhost = vhost.name,
            runs = runs.display(),
        ),
    );
    let cmd = format!(
        "WARREN_STORE={store} WARREN_LOG_DIR={dir} {bin} --config '{config}'; sleep 30",
        store = dir.join("warren.db").display(),
        dir = dir.display(),
        bin = env!("CARGO_BIN_EXE_warren"),
        config = config.display(),
    );
    let t = Tmux::open(&cmd, None, 100, 30);
    t.wait_for("habits.dlq", Duration::from_secs(20));
    assert_eq!(
        std::fs::read_to_string(&runs).unwrap(),
        "a\n",
        "a ran before the TUI"
    );
    t.keys(&[":", "c", "t", "x", " ", "b", "Enter"]);
    let prompt = t.wait_for("vault passphrase for b:", Duration::from_secs(10));
    assert!(prompt.contains("running its password_command"), "{prompt}");
    t.keys(&["open-sesame", "Enter"]);
    // Back in Warren, connected to b: the switch is over when the header names b (the old
    // list stays on screen while it connects).
    let back = t.wait_until("context b listed", Duration::from_secs(20), |s| {
        s.contains("habits.dlq") && !s.contains("switching to") && s.contains(" b ")
    });
    assert!(back.contains(" b "), "the header names context b: {back}");
    // Reconnects reuse the answer; each command ran once.
    t.keys(&["C-r"]);
    t.keys(&["@"]);
    let log = t.wait_for("Command log", Duration::from_secs(5));
    assert!(log.contains("context 'b'"), "{log}");
    assert!(log.contains("context 'a'"), "{log}");
    assert!(log.contains("listed vhost"), "{log}");
    t.keys(&["Escape", "q"]);
    assert_eq!(std::fs::read_to_string(&runs).unwrap(), "a\nb\n");
    let _ = std::fs::remove_dir_all(&dir);
    vhost.cleanup().await;
}

/// `warren open` on the demo's snapshot files `files` (a glob) in tmux, its log in a directory
/// of its own (removed by the caller).
fn open_demo(files: &str, width: u16, height: u16) -> (Tmux, PathBuf) {
    let demo = Path::new(env!("CARGO_MANIFEST_DIR")).join("assets/demo");
    let dir: PathBuf = std::env::temp_dir().join(unique("warren-e2e-demo"));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let cmd = format!(
        "cd '{demo}' && WARREN_LOG_DIR={dir} {bin} open {files}; sleep 30",
        dir = dir.display(),
        bin = env!("CARGO_BIN_EXE_warren"),
        demo = demo.display(),
    );
    (Tmux::open(&cmd, None, width, height), dir)
}

/// The newest tmux paste buffer holding `text`, within a deadline: OSC 52 from the program in
/// a pane becomes a buffer when the server's `set-clipboard` is on.
fn buffer_with(text: &str, within: Duration) -> String {
    common::wait::poll_blocking(within, || {
        let out = std::process::Command::new("tmux")
            .args(["list-buffers", "-F", "#{buffer_name}"])
            .output()
            .expect("tmux list-buffers");
        for name in String::from_utf8_lossy(&out.stdout).lines() {
            let b = std::process::Command::new("tmux")
                .args(["show-buffer", "-b", name])
                .output()
                .expect("tmux show-buffer");
            let b = String::from_utf8_lossy(&b.stdout).into_owned();
            if b.contains(text) {
                return Ok(b);
            }
        }
        Err(())
    })
    .unwrap_or_else(|()| panic!("no tmux buffer holds {text:?} after {within:?}"))
}

/// `y` and `Y` copy through the terminal (OSC 52), as lazygit and helix do: what reaches the
/// terminal at the other end (here tmux, which keeps it as a paste buffer) is the id, then
/// the body as it was published.
#[test]
fn y_copies_the_id_and_the_body_through_the_terminal() {
    let (t, dir) = open_demo("shipping-label_error.jsonl", 100, 30);
    // The server's option: a pane's OSC 52 sets a buffer (tmux's default only sends its own).
    let on = std::process::Command::new("tmux")
        .args(["set-option", "-s", "set-clipboard", "on"])
        .status()
        .expect("tmux set-option");
    assert!(on.success());
    t.wait_for("Dead-letter queues (1)", Duration::from_secs(20));
    t.keys(&["Enter"]);
    t.wait_for("— 6 messages", Duration::from_secs(20));
    t.keys(&["y"]);
    let s = t.wait_for("copied ac9c1d9d", Duration::from_secs(5));
    assert!(s.contains("OSC 52"), "{s}");
    let id = buffer_with(
        "ac9c1d9d-811d-4574-a824-25f12cda5e85",
        Duration::from_secs(5),
    );
    assert_eq!(id, "ac9c1d9d-811d-4574-a824-25f12cda5e85");
    t.keys(&["Y"]);
    t.wait_for("copied the body", Duration::from_secs(5));
    let body = buffer_with("\"conversationId\"", Duration::from_secs(5));
    assert!(body.starts_with("{\n  \"messageId\": \"ac9c1d9d"), "{body}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// Snapshot files hold every message: each queue of the list is dated at once (its Age), not
/// only the one the cursor rests on, and an unknown growth says so (`—`), not a blank.
#[test]
fn a_snapshot_dates_every_queue_in_the_list_without_reading_it() {
    let (t, dir) = open_demo("*.jsonl", 200, 50);
    let s = t.wait_for("Dead-letter queues (10)", Duration::from_secs(20));
    // A growth of "—" and an age in days (the demo was exported days ago; "≥" where the headers
    // give only a bound) on the rows whose messages carry a time: not only the cursor's.
    let aged = regex::Regex::new(r"—\s+≥?\d+d\s").expect("regex");
    let row = |name: &str| {
        s.lines()
            .find(|l| l.contains(&format!(" {name} ")))
            .and_then(|l| l.split(['┃', '│']).nth(1))
            .unwrap_or_default()
            .to_string()
    };
    for name in [
        "shipping-label_error",
        "orders.dlq",
        "payments.dlq",
        "error",
    ] {
        let r = row(name);
        assert!(aged.is_match(&r), "no age for {name} in {r:?}:\n{s}");
    }
    // Spring Cloud Stream's republished messages carry no time: said unknown, not guessed.
    assert!(row("inventory.reserve.group.dlq").contains('—'), "{s}");
    let _ = std::fs::remove_dir_all(&dir);
}
