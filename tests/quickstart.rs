//! The README's quick start, followed literally on a fresh clone: its code block holds exactly two
//! commands; the first (`cargo run -- open assets/demo/*.jsonl`) is run as written, in
//! tmux, in a `git clone` of this repository, and must show the demo's dead letters; the second
//! must be the test command that `.ci/run` calls (running it here would run this test again).

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

fn quick_start_commands(readme: &str) -> Vec<String> {
    let section = readme
        .split("## Quick start")
        .nth(1)
        .expect("README has a Quick start section");
    let block = section
        .split("```sh")
        .nth(1)
        .and_then(|b| b.split("```").next())
        .expect("a ```sh block");
    block
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .map(str::to_string)
        .collect()
}

fn run(cmd: &mut Command) -> String {
    let out = cmd.output().expect("command runs");
    assert!(
        out.status.success(),
        "{cmd:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
fn the_readme_quick_start_works_on_a_fresh_clone() {
    let repo = Path::new(env!("CARGO_MANIFEST_DIR"));
    let readme = std::fs::read_to_string(repo.join("README.md")).expect("README.md");
    let commands = quick_start_commands(&readme);
    assert_eq!(commands.len(), 2, "exactly two commands: {commands:?}");
    assert_eq!(commands[0], "cargo run -- open assets/demo/*.jsonl");
    let ci = std::fs::read_to_string(repo.join(".ci/run")).expect(".ci/run");
    assert!(
        ci.lines().any(|l| l.trim() == commands[1]),
        ".ci/run calls the README's test command {:?}",
        commands[1]
    );
    assert!(repo.join(&commands[1]).is_file(), "{} exists", commands[1]);

    // A fresh clone of what is committed.
    let dir = std::env::temp_dir().join(format!("warren-quickstart-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    run(Command::new("git")
        .arg("clone")
        .arg("--quiet")
        .arg(repo)
        .arg(&dir));

    // The test build's own target directory: the registry crates `cargo test` just compiled (same
    // dev profile) are reused, so only the clone's own code builds. Cargo holds the directory's
    // lock while it compiles, not while tests run.
    let target: PathBuf = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| repo.join("target"));
    let session = format!("warren-quickstart-{}", std::process::id());
    // As a user runs it: without CI's clippy wrapper (`.ci/run`), which would lint the clone's
    // code once more, beside every other test.
    let shell = format!(
        "cd '{}' && env -u RUSTC_WORKSPACE_WRAPPER CARGO_TARGET_DIR='{}' {} ; sleep 600",
        dir.display(),
        target.display(),
        commands[0]
    );
    run(Command::new("tmux").args([
        "new-session",
        "-d",
        "-s",
        &session,
        "-x",
        "120",
        "-y",
        "36",
        &shell,
    ]));
    let kill = || {
        let _ = Command::new("tmux")
            .args(["kill-session", "-t", &session])
            .status();
    };

    // The build takes a minute or more on a busy machine.
    let start = Instant::now();
    let screen = loop {
        let out = Command::new("tmux")
            .args(["capture-pane", "-p", "-t", &session])
            .output()
            .expect("capture");
        let s = String::from_utf8_lossy(&out.stdout).into_owned();
        if s.contains("Dead-letter queues (10)") {
            break s;
        }
        if start.elapsed() > Duration::from_secs(1200) {
            kill();
            panic!("the quick start did not show the demo within 20 minutes; screen:\n{s}");
        }
        std::thread::sleep(Duration::from_millis(500));
    };
    assert!(
        screen.contains("READ-ONLY"),
        "a snapshot opens read-only:\n{screen}"
    );
    assert!(screen.contains("orders.dlq"), "{screen}");

    // Open the seed's example and read its verdict.
    let capture = || {
        let out = Command::new("tmux")
            .args(["capture-pane", "-p", "-t", &session])
            .output()
            .expect("capture");
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    let keys = |k: &str| {
        let _ = Command::new("tmux")
            .args(["send-keys", "-t", &session, k])
            .status();
    };
    // Down until the queue is selected; each key once the screen shows the last one's move.
    for _ in 0..12 {
        let before = capture();
        if before.contains("▶ orders.dlq") {
            break;
        }
        keys("j");
        let start = Instant::now();
        while capture() == before && start.elapsed() < Duration::from_secs(10) {
            std::thread::sleep(Duration::from_millis(50));
        }
    }
    keys("Enter");
    let start = Instant::now();
    let mut s = capture();
    while !s.contains("Rejected 3 times by orders.process")
        && start.elapsed() < Duration::from_secs(10)
    {
        std::thread::sleep(Duration::from_millis(300));
        s = capture();
    }
    keys("q");
    kill();
    let _ = std::fs::remove_dir_all(&dir);
    assert!(s.contains("Rejected 3 times by orders.process"), "{s}");
}
