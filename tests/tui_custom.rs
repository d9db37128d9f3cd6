//! Custom commands (`[[commands]]`): the config's keys are checked against the key table, a key
//! on a message hands the loop a command with the message's fields in its environment, read-only
//! refuses the dangerous ones, and a real `sh -c` sees the variables and nothing is spliced into
//! its text.

use crate::tui_fixtures;

use ratatui::Terminal;
use ratatui::backend::TestBackend;
use ratatui::crossterm::event::KeyCode;
use tui_fixtures::*;
use warren::config::CommandConfig;
use warren::tui::custom::{self, CustomCommand};
use warren::tui::state::Focus;
use warren::tui::{State, update, view};

fn cfg(key: &str, name: &str, run: &str, dangerous: bool) -> CommandConfig {
    CommandConfig {
        key: key.into(),
        name: name.into(),
        run: run.into(),
        dangerous,
    }
}

fn logs() -> CustomCommand {
    CustomCommand {
        key: 'L',
        name: "logs for this message".into(),
        run: r#"echo "$MESSAGE_ID""#.into(),
        dangerous: false,
    }
}

fn purge() -> CustomCommand {
    CustomCommand {
        key: 'Z',
        name: "delete from the outbox".into(),
        run: "true".into(),
        dangerous: true,
    }
}

fn with_commands(read_only: bool) -> State {
    let mut st = browsed(read_only, "shipping-label_error", vec![masstransit()]);
    st.settings.custom_commands = vec![logs(), purge()];
    st
}

fn env_of(run: &custom::Run, name: &str) -> String {
    run.env
        .iter()
        .find(|(k, _)| k == name)
        .map(|(_, v)| v.clone())
        .unwrap_or_else(|| panic!("{name} is not set: {:?}", run.env))
}

#[test]
fn config_commands_are_checked_against_the_key_table() {
    let ok = custom::from_config(&[
        cfg("L", "logs", "echo", false),
        cfg("Z", "purge", "true", true),
    ])
    .expect("free keys");
    assert_eq!(ok.len(), 2);
    assert_eq!(ok[0].key, 'L');
    assert!(ok[1].dangerous);

    // A built-in key of a message pane: the error names both.
    let e = custom::from_config(&[cfg("j", "jump", "true", false)]).unwrap_err();
    assert!(e.contains("custom command \"jump\""), "{e}");
    assert!(e.contains("Warren's own key ↓/j"), "{e}");
    // A global key.
    let e = custom::from_config(&[cfg("q", "query", "true", false)]).unwrap_err();
    assert!(
        e.contains("\"query\"") && e.contains("own key q (quit)"),
        "{e}"
    );
    let e = custom::from_config(&[cfg("r", "run", "true", false)]).unwrap_err();
    assert!(e.contains("own key r (replay"), "{e}");
    // Twice the same key.
    let e = custom::from_config(&[
        cfg("L", "logs", "true", false),
        cfg("L", "more", "true", false),
    ])
    .unwrap_err();
    assert!(
        e.contains("\"more\"") && e.contains("already custom command \"logs\""),
        "{e}"
    );
    // One character, a name, something to run.
    for (bad, why) in [
        (
            cfg("ctrl-l", "logs", "true", false),
            "must be one character",
        ),
        (cfg("", "logs", "true", false), "must be one character"),
        (cfg(" ", "logs", "true", false), "must be one character"),
        (cfg("L", " ", "true", false), "give it a name"),
        (cfg("L", "logs", "  ", false), "run is empty"),
    ] {
        let e = custom::from_config(&[bad]).unwrap_err();
        assert!(e.contains(why), "{e}");
    }
}

#[test]
fn a_custom_key_on_a_message_hands_the_command_to_the_loop() {
    let mut st = with_commands(false);
    let cmds = update(&mut st, ch('L'));
    assert!(cmds.is_empty(), "nothing for the worker: {cmds:?}");
    let run = st
        .handover
        .custom
        .take()
        .expect("the loop is asked to run it");
    assert_eq!(run.name, "logs for this message");
    assert_eq!(
        run.command, r#"echo "$MESSAGE_ID""#,
        "the text is the config's, untouched"
    );
    assert_eq!(
        env_of(&run, "MESSAGE_ID"),
        "0b5e0000-5d4c-0015-3c1a-08dd00000001"
    );
    assert_eq!(env_of(&run, "QUEUE"), "shipping-label_error");
    assert_eq!(env_of(&run, "VHOST"), "/orders");
    assert_eq!(env_of(&run, "CONTEXT"), "prod-eu");
    assert_eq!(
        env_of(&run, "EXCEPTION"),
        "System.InvalidOperationException"
    );
    assert_eq!(
        env_of(&run, "EXCEPTION_MESSAGE"),
        "Carrier DHL unavailable for order 1000"
    );
    assert_eq!(
        env_of(&run, "CORRELATION_ID"),
        "",
        "unknown is empty, not unset"
    );

    // From the detail pane too; not from the queue list.
    update(&mut st, key(KeyCode::Enter));
    assert_eq!(st.focus, Focus::Detail);
    update(&mut st, ch('L'));
    assert!(st.handover.custom.take().is_some());
    update(&mut st, key(KeyCode::Esc));
    update(&mut st, key(KeyCode::Esc));
    assert_eq!(st.focus, Focus::Queues);
    update(&mut st, ch('L'));
    assert!(
        st.handover.custom.is_none(),
        "the queue list has no message"
    );

    // A key no command has does nothing.
    update(&mut st, key(KeyCode::Tab));
    update(&mut st, ch('Y'));
    assert!(st.handover.custom.is_none());
}

#[test]
fn broker_reason_and_ids_are_sanitised_in_the_environment() {
    let mut st = browsed(false, "orders.dlq", vec![hostile(), broker_ladder(1)]);
    st.settings.custom_commands = vec![logs()];
    update(&mut st, ch('L'));
    let run = st.handover.custom.take().unwrap();
    let id = env_of(&run, "MESSAGE_ID");
    assert!(!id.contains('\x1b') && !id.contains('\u{202e}'), "{id:?}");
    assert!(id.starts_with("evil"), "{id:?}");
    update(&mut st, ch('j'));
    update(&mut st, ch('L'));
    let run = st.handover.custom.take().unwrap();
    assert_eq!(env_of(&run, "MESSAGE_ID"), "order-1001");
    assert_eq!(
        env_of(&run, "REASON"),
        "rejected",
        "the newest death: what put it in the DLQ"
    );
}

#[test]
fn read_only_refuses_dangerous_commands_and_says_why() {
    let mut st = with_commands(true);
    update(&mut st, ch('Z'));
    assert!(
        st.handover.custom.is_none(),
        "a dangerous command never runs read-only"
    );
    let e = st.banner.error.clone().unwrap_or_default();
    assert!(
        e.contains("delete from the outbox") && e.contains("dangerous") && e.contains("read-only"),
        "{e}"
    );
    // A harmless one still runs.
    update(&mut st, ch('L'));
    assert!(st.handover.custom.is_some());
    // Writable: the dangerous one runs.
    let mut st = with_commands(false);
    update(&mut st, ch('Z'));
    assert!(st.handover.custom.is_some());
}

#[test]
fn help_lists_the_configured_commands() {
    let mut st = with_commands(true);
    update(
        &mut st,
        warren::tui::Event::Resize {
            width: 200,
            height: 50,
        },
    );
    update(&mut st, ch('?'));
    // They come last, under the right column: on the help's last page.
    update(&mut st, ch('G'));
    let mut term = Terminal::new(TestBackend::new(200, 50)).unwrap();
    term.draw(|f| view(&st, f)).unwrap();
    let text: String = term
        .backend()
        .buffer()
        .content()
        .iter()
        .map(|c| c.symbol())
        .collect();
    assert!(text.contains("Custom commands"), "{text}");
    assert!(text.contains("logs for this message"), "{text}");
    assert!(
        text.contains("delete from the outbox — dangerous; disabled"),
        "{text}"
    );
}

#[test]
fn sh_sees_the_variables_and_nothing_is_spliced() {
    let dir = std::env::temp_dir().join(format!("warren-custom-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let out = dir.join("env.txt");
    let pwned = dir.join("pwned");
    let mut msg = masstransit();
    // A hostile id: were it spliced into the command, the shell would run `touch`.
    msg.properties.message_id = Some(format!("x\"; touch {}; echo \"", pwned.display()));
    msg.properties.correlation_id = Some("corr-42".into());
    let mut st = browsed(false, "shipping-label_error", vec![msg]);
    st.settings.custom_commands = vec![CustomCommand {
        key: 'L',
        name: "dump".into(),
        run: format!(
            r#"printf '%s\n' "id=$MESSAGE_ID" "corr=$CORRELATION_ID" "queue=$QUEUE" "vhost=$VHOST" "ctx=$CONTEXT" "exc=$EXCEPTION" > '{}'"#,
            out.display()
        ),
        dangerous: false,
    }];
    update(&mut st, ch('L'));
    let run = st.handover.custom.take().unwrap();
    let status = custom::process(&run).status().expect("sh runs");
    assert!(status.success());
    let text = std::fs::read_to_string(&out).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(
        lines,
        vec![
            format!("id=x\"; touch {}; echo \"", pwned.display()).as_str(),
            "corr=corr-42",
            "queue=shipping-label_error",
            "vhost=/orders",
            "ctx=prod-eu",
            "exc=System.InvalidOperationException",
        ]
    );
    assert!(!pwned.exists(), "the id was data, not shell code");
    let _ = std::fs::remove_dir_all(&dir);
}
