//! Custom commands from the configuration (`[[commands]]`, as k9s plugins and lazygit custom
//! commands): a key runs a shell command on the message under the cursor. The message's fields
//! reach the command as environment variables, never spliced into its text: every broker string
//! is untrusted, and `"$MESSAGE_ID"` is quoted by the shell, not by Warren. This module decides
//! (which key, which variables, whether read-only allows it); `run` hands the terminal over and
//! runs it.

use ratatui::crossterm::event::KeyEvent;

use super::keys::{self, Key, Scope};
use super::state::{Opened, State};
use crate::config::CommandConfig;
use crate::domain::sanitize;

/// Where custom commands act: on a message, so the panes that show one.
pub const SCOPES: &[Scope] = &[Scope::Messages, Scope::Groups, Scope::Detail];

/// Longest value of one variable, in characters (a body is not among them).
const VALUE_CAP: usize = 4096;

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CustomCommand {
    pub key: char,
    pub name: String,
    pub run: String,
    pub dangerous: bool,
}

/// A command to run with the terminal handed over: what `update` decided, for the loop to do.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Run {
    pub name: String,
    /// The configured text, given to `sh -c` as it is.
    pub command: String,
    /// The message's fields, sanitised, as `NAME=value`.
    pub env: Vec<(String, String)>,
}

/// The configured commands, checked: one character each, no key used twice, and none that a
/// built-in key already has where custom commands act (nor a global one). The error names both.
pub fn from_config(list: &[CommandConfig]) -> Result<Vec<CustomCommand>, String> {
    let mut out: Vec<CustomCommand> = Vec::new();
    for c in list {
        let name = c.name.trim();
        let what = if name.is_empty() {
            format!("[[commands]] with key \"{}\"", c.key)
        } else {
            format!("custom command \"{name}\"")
        };
        let mut chars = c.key.chars();
        let key = match (chars.next(), chars.next()) {
            (Some(k), None) if !k.is_control() && !k.is_whitespace() => k,
            _ => {
                return Err(format!(
                    "{what}: key \"{}\" must be one character, e.g. key = \"L\"",
                    c.key
                ));
            }
        };
        if name.is_empty() {
            return Err(format!("{what}: give it a name (shown in the help screen)"));
        }
        if c.run.trim().is_empty() {
            return Err(format!("{what}: run is empty"));
        }
        if let Some(b) = builtin(key) {
            return Err(format!(
                "{what}: key \"{key}\" is Warren's own key {} ({}); choose another key",
                b.label, b.help
            ));
        }
        if let Some(other) = out.iter().find(|o| o.key == key) {
            return Err(format!(
                "{what}: key \"{key}\" is already custom command \"{}\"; choose another key",
                other.name
            ));
        }
        out.push(CustomCommand {
            key,
            name: name.to_string(),
            run: c.run.clone(),
            dangerous: c.dangerous,
        });
    }
    Ok(out)
}

/// The built-in binding `key` would shadow where custom commands act.
fn builtin(key: char) -> Option<&'static keys::Binding> {
    keys::BINDINGS.iter().find(|b| {
        b.keys.contains(&Key::Char(key))
            && b.scopes
                .iter()
                .any(|s| *s == Scope::Global || SCOPES.contains(s))
    })
}

/// The command `ev` names, if it is a plain key press of one.
pub fn find<'a>(commands: &'a [CustomCommand], ev: &KeyEvent) -> Option<&'a CustomCommand> {
    commands.iter().find(|c| keys::Key::Char(c.key).matches(ev))
}

/// What the command may not do now: a dangerous one in read-only mode.
pub fn refusal(state: &State, cmd: &CustomCommand) -> Option<String> {
    (cmd.dangerous && state.read_only).then(|| {
        format!(
            "{} ({}) is marked dangerous in the config and Warren runs read-only (--read-only or the context's read_only): not run",
            cmd.key, cmd.name
        )
    })
}

/// The variables a command sees, for `row` in `state`'s session. Unknown values are empty, so
/// that `set -u` scripts still run; every value goes through the sanitiser and is bounded.
pub fn environment(state: &State, row: &Opened) -> Vec<(String, String)> {
    let p = &row.msg.properties;
    let fault = row.exp.fault.as_ref();
    // The newest death's reason, as `groups --by reason` names it.
    let reason = crate::domain::grouping::death_reason(&row.exp).map(str::to_string);
    let vars: [(&str, Option<&str>); 14] = [
        ("MESSAGE_ID", p.message_id.as_deref()),
        ("CORRELATION_ID", p.correlation_id.as_deref()),
        ("MESSAGE_KEY", Some(&row.key)),
        (
            "MESSAGE_TYPE",
            crate::domain::brief::message_type(&row.msg, &row.exp),
        ),
        ("QUEUE", Some(&row.msg.queue)),
        ("ORIGIN_QUEUE", row.exp.source.queue.as_deref()),
        // The open queue's vhost (with every vhost listed, the overview's is `*`).
        (
            "VHOST",
            Some(
                state
                    .msgs
                    .browse
                    .as_ref()
                    .map_or(state.overview.vhost.as_str(), |b| b.vhost.as_str()),
            ),
        ),
        ("CONTEXT", Some(&state.overview.context)),
        ("EXCEPTION", fault.and_then(|f| f.exception_type.as_deref())),
        (
            "EXCEPTION_MESSAGE",
            fault.and_then(|f| f.message.as_deref()),
        ),
        ("REASON", reason.as_deref()),
        ("VERDICT", Some(&row.exp.verdict)),
        ("FINGERPRINT", Some(&row.exp.fingerprint.key)),
        ("CONVENTION", Some(row.exp.convention.as_str())),
    ];
    vars.iter()
        .map(|(name, value)| {
            (
                name.to_string(),
                value.map_or_else(String::new, |v| sanitize::display(v, VALUE_CAP)),
            )
        })
        .collect()
}

/// The process for `work`: `sh -c` with the configured text, the variables in its environment.
/// Nothing runs until the caller starts it (`run` does, with the terminal handed over).
pub fn process(work: &Run) -> std::process::Command {
    let mut p = std::process::Command::new("sh");
    p.arg("-c")
        .arg(&work.command)
        .envs(work.env.iter().cloned());
    p
}

/// Lines the configured commands add to the help overlay (a title and one a command).
pub fn help_lines(state: &State) -> usize {
    // A search of the help lists the key table's matches only.
    if !state.help.query.is_empty() {
        return 0;
    }
    let n = help_rows(state).len();
    if n == 0 { 0 } else { n + 1 }
}

/// The help screen's section for the configured commands: key and what it runs.
pub fn help_rows(state: &State) -> Vec<(String, String)> {
    state
        .settings
        .custom_commands
        .iter()
        .map(|c| {
            let mut help = c.name.clone();
            if c.dangerous {
                help.push_str(if state.read_only {
                    " — dangerous; disabled: read-only"
                } else {
                    " — dangerous"
                });
            }
            (c.key.to_string(), help)
        })
        .collect()
}

/// The help section's title.
pub const HELP_TITLE: &str = "Custom commands (config, on the message)";
