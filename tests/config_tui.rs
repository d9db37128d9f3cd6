//! What the terminal UI settles before it takes the terminal: `[[commands]]` parse and are
//! checked against the key table (a collision is an error at startup naming both keys), and the
//! starting context's `password_command` runs then, once; the worker's resolving only reads its
//! answer, and a context opened later is unlocked on demand.

use std::path::{Path, PathBuf};

use warren::cli::args::ConnArgs;
use warren::cli::commands::prepare_tui;
use warren::config::{self, Config, ConfigError, Overrides, Unlocked};

struct Dir(PathBuf);

impl Dir {
    fn new(tag: &str) -> Dir {
        let d = std::env::temp_dir().join(format!("warren-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        Dir(d)
    }

    /// A config whose contexts count their password_command runs in `<dir>/<name>.runs`.
    fn config(&self, extra: &str) -> PathBuf {
        let d = self.0.display();
        let text = format!(
            r#"
default_context = "a"

[contexts.a]
amqp_urls = ["amqp://127.0.0.1:5672"]
password_command = "echo run >> '{d}/a.runs'; echo pw-a"

[contexts.b]
amqp_urls = ["amqp://127.0.0.1:5672"]
password_command = "echo run >> '{d}/b.runs'; echo pw-b"

[contexts.c]
amqp_urls = ["amqp://127.0.0.1:5672"]
password_command = "echo run >> '{d}/c.runs'; echo 'vault sealed' >&2; exit 2"
{extra}
"#
        );
        let path = self.0.join("config.toml");
        std::fs::write(&path, text).unwrap();
        path
    }

    fn runs(&self, context: &str) -> usize {
        std::fs::read_to_string(self.0.join(format!("{context}.runs")))
            .map(|t| t.lines().count())
            .unwrap_or(0)
    }
}

impl Drop for Dir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn args(path: &Path) -> ConnArgs {
    ConnArgs {
        config: Some(path.to_path_buf()),
        ..Default::default()
    }
}

#[test]
fn commands_parse_with_dangerous_off_by_default() {
    let c = Config::parse(
        r#"
        [[commands]]
        key = "L"
        name = "logs"
        run = "open \"https://logs.example.com/?q=$MESSAGE_ID\""

        [[commands]]
        key = "Z"
        name = "delete from outbox"
        run = "outbox delete \"$CORRELATION_ID\""
        dangerous = true
        "#,
        Path::new("/tmp/c.toml"),
    )
    .expect("parses");
    assert_eq!(c.commands.len(), 2);
    assert_eq!(c.commands[0].key, "L");
    assert!(!c.commands[0].dangerous, "dangerous is opt-in, as in k9s");
    assert!(c.commands[1].dangerous);
    assert_eq!(
        c.commands[1].run, r#"outbox delete "$CORRELATION_ID""#,
        "the text is kept as written"
    );
    // A misspelt key is refused, not ignored.
    let e = Config::parse(
        "[[commands]]\nkey = \"L\"\nname = \"x\"\nrun = \"true\"\ndanger = true\n",
        Path::new("/tmp/c.toml"),
    )
    .unwrap_err();
    assert!(e.to_string().contains("danger"), "{e}");
}

#[test]
fn a_colliding_key_is_a_startup_error_naming_both() {
    let dir = Dir::new("cfg-collide");
    let path = dir.config("[[commands]]\nkey = \"/\"\nname = \"search logs\"\nrun = \"true\"\n");
    let e = prepare_tui(&args(&path)).unwrap_err();
    assert_eq!(e.code, warren::cli::exit::USAGE);
    assert!(
        e.message.contains("config.toml")
            && e.message.contains("\"search logs\"")
            && e.message
                .contains("key \"/\" is Warren's own key / (filter"),
        "{}",
        e.message
    );
    // Refused before anything else: no password command ran.
    assert_eq!(dir.runs("a"), 0);

    let path = dir.config("[[commands]]\nkey = \"L\"\nname = \"logs\"\nrun = \"true\"\n");
    let p = prepare_tui(&args(&path)).expect("a free key");
    assert_eq!(p.commands.len(), 1);
    assert_eq!(p.commands[0].key, 'L');
}

#[test]
fn password_command_runs_before_the_terminal_is_taken_and_only_once() {
    let dir = Dir::new("cfg-unlock");
    let path = dir.config("");
    // `prepare_tui` is what `warren` runs before the TUI takes the terminal: the starting
    // context's command has run when it returns, and nobody else's.
    let p = prepare_tui(&args(&path)).expect("prepares");
    assert_eq!(
        dir.runs("a"),
        1,
        "the starting context is unlocked up front"
    );
    assert_eq!(dir.runs("b"), 0, "a context not opened is never asked");
    assert!(
        p.overrides.unlocked.is_some(),
        "the worker resolves from the cache"
    );

    // The worker's resolving (every connect, every reconnect) reads the answer.
    for _ in 0..3 {
        let (_, t) = config::load(&p.overrides).expect("resolves from the cache");
        assert_eq!(t.credentials.password.expose(), "pw-a");
    }
    assert_eq!(
        dir.runs("a"),
        1,
        "never run again while the TUI holds the terminal"
    );

    // `:ctx b` while the TUI runs: the worker would not run the command; it says why.
    let unlocked: &Unlocked = p.overrides.unlocked.as_ref().unwrap();
    let b = Overrides {
        context: Some("b".into()),
        ..p.overrides.clone()
    };
    match config::load(&b) {
        Err(ConfigError::PasswordLocked { context }) => assert_eq!(context, "b"),
        other => panic!("expected a locked context, got {other:?}"),
    }
    assert_eq!(dir.runs("b"), 0);
    // The loop asks whether it must hand the terminal over, which runs nothing, then unlocks.
    assert_eq!(unlocked.needs(&b).as_deref(), Some("b"));
    assert_eq!(unlocked.needs(&p.overrides), None, "a is unlocked");
    assert_eq!(dir.runs("b"), 0);
    unlocked.unlock(&b).expect("b unlocks");
    assert_eq!(dir.runs("b"), 1);
    assert_eq!(unlocked.needs(&b), None);
    let (_, t) = config::load(&b).unwrap();
    assert_eq!(t.credentials.password.expose(), "pw-b");
    unlocked.unlock(&b).unwrap();
    assert_eq!(dir.runs("b"), 1, "unlocking again reuses the answer");

    // A command that fails: its reason is kept for the worker to show, and a later `:ctx`
    // tries again (the vault may be unsealed by then).
    let c = Overrides {
        context: Some("c".into()),
        ..p.overrides.clone()
    };
    assert!(unlocked.unlock(&c).is_err());
    let e = config::load(&c).unwrap_err().to_string();
    assert!(
        e.contains("context 'c'") && e.contains("vault sealed"),
        "{e}"
    );
    assert_eq!(unlocked.needs(&c).as_deref(), Some("c"));
    assert_eq!(dir.runs("c"), 1);
}

#[test]
fn without_a_cache_the_command_line_runs_the_command_itself() {
    let dir = Dir::new("cfg-cli");
    let path = dir.config("");
    let o = Overrides {
        config_path: Some(path),
        ..Default::default()
    };
    let (_, t) = config::load(&o).unwrap();
    assert_eq!(t.credentials.password.expose(), "pw-a");
    assert_eq!(dir.runs("a"), 1);
}

#[test]
fn the_example_files_commands_are_valid() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("config.example.toml");
    let c = Config::parse(&std::fs::read_to_string(&path).unwrap(), &path).unwrap();
    let commands = warren::tui::custom::from_config(&c.commands).expect("free keys");
    let keys: Vec<char> = commands.iter().map(|c| c.key).collect();
    assert_eq!(keys, vec!['L', 'Z']);
    assert!(commands[1].dangerous && !commands[0].dangerous);
}

#[test]
fn every_context_on_the_command_line_unlocks_each_context_before_the_terminal_is_taken() {
    let dir = Dir::new("cfg-every");
    let path = dir.config("");
    // `warren --context '*'` asked for every context: each one's command runs up front, once,
    // in the file's order (the worker never runs one).
    let p = prepare_tui(&ConnArgs {
        context: Some(config::ContextScope::EveryContext.to_string()),
        ..args(&path)
    })
    .expect("prepares");
    assert_eq!((dir.runs("a"), dir.runs("b"), dir.runs("c")), (1, 1, 1));
    let unlocked = p.overrides.unlocked.as_ref().expect("a cache");
    for (name, pw) in [("a", "pw-a"), ("b", "pw-b")] {
        let one = Overrides {
            context: Some(name.into()),
            ..p.overrides.clone()
        };
        assert_eq!(unlocked.needs(&one), None, "{name} answered");
        let (_, t) = config::load(&one).expect("resolves from the cache");
        assert_eq!(t.credentials.password.expose(), pw);
    }
    // The one that failed keeps its reason for the every-context list to show.
    let c = Overrides {
        context: Some("c".into()),
        ..p.overrides.clone()
    };
    let e = config::load(&c).unwrap_err().to_string();
    assert!(e.contains("vault sealed"), "{e}");
    assert_eq!((dir.runs("a"), dir.runs("b"), dir.runs("c")), (1, 1, 1));
}
