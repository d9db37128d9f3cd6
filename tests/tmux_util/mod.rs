//! The tmux driver the end-to-end TUI tests share: the real `warren` binary in a tmux session of
//! a given size, its screen read as text, keys sent as an operator types them.

use std::path::Path;
use std::process::Command;
use std::time::Duration;

pub struct Tmux {
    session: String,
}

impl Tmux {
    /// A session of `width`×`height` running `cmd`, in `dir` when given.
    pub fn open(cmd: &str, dir: Option<&Path>, width: u16, height: u16) -> Tmux {
        let session = super::common::unique("warren-e2e");
        let mut tmux = Command::new("tmux");
        tmux.args(["new-session", "-d", "-s", &session]);
        if let Some(dir) = dir {
            tmux.arg("-c").arg(dir);
        }
        let ok = tmux
            .args(["-x", &width.to_string(), "-y", &height.to_string(), cmd])
            .status()
            .expect("tmux must be installed (scripts/test installs it)");
        assert!(ok.success(), "tmux new-session failed");
        Tmux { session }
    }

    /// The session's name, for tmux commands of the test's own (`kill-session`, `display`).
    // Not every test binary that includes this module uses it.
    #[allow(dead_code)]
    pub fn name(&self) -> &str {
        &self.session
    }

    pub fn screen(&self) -> String {
        let out = Command::new("tmux")
            .args(["capture-pane", "-p", "-t", &self.session])
            .output()
            .expect("capture-pane");
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    pub fn keys(&self, keys: &[&str]) {
        for k in keys {
            let ok = Command::new("tmux")
                .args(["send-keys", "-t", &self.session, k])
                .status()
                .expect("send-keys");
            assert!(ok.success());
            // Time, not an event: a terminal's input parser reads an Esc followed at once by a
            // key as Alt+key (one read of `\x1bj`): keys are sent as typed, apart.
            std::thread::sleep(Duration::from_millis(150));
        }
    }

    /// Waits until the screen shows `text`; panics with the screen when it does not.
    pub fn wait_for(&self, text: &str, within: Duration) -> String {
        self.wait_until(text, within, |s| s.contains(text))
    }

    /// The screen once `done` holds for it (`what` says what is awaited), within `within`.
    pub fn wait_until(&self, what: &str, within: Duration, done: impl Fn(&str) -> bool) -> String {
        super::common::wait::poll_blocking(within, || {
            let s = self.screen();
            if done(&s) { Ok(s) } else { Err(s) }
        })
        .unwrap_or_else(|s| panic!("waited {within:?} for {what:?}; the screen shows:\n{s}"))
    }
}

impl Drop for Tmux {
    fn drop(&mut self) {
        let _ = Command::new("tmux")
            .args(["kill-session", "-t", &self.session])
            .status();
    }
}
