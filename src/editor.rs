//! `$VISUAL` or `$EDITOR` for `warren replay --edit`, as `git commit` and `kubectl edit` use
//! them: the document in a private file, the terminal handed to the editor, the file read back.

use std::io::{IsTerminal, Write};
use std::path::PathBuf;

/// The operator's edit of `document`: `Ok(None)` when they choose not to edit again after a
/// document that could not be read (`problem`).
pub(crate) fn edit(document: &str, problem: Option<&str>) -> Result<Option<String>, String> {
    if let Some(p) = problem {
        crate::errln!("the edited document could not be read: {p}");
        if !(std::io::stdin().is_terminal() && std::io::stderr().is_terminal()) {
            return Err(format!("the edited document could not be read: {p}"));
        }
        crate::err!("Open the editor again? [Y/n] ");
        let _ = std::io::stderr().flush();
        let mut line = String::new();
        let _ = std::io::stdin().read_line(&mut line);
        if matches!(line.trim(), "n" | "N" | "no") {
            return Ok(None);
        }
    }
    let editor = ["VISUAL", "EDITOR"]
        .iter()
        .filter_map(std::env::var_os)
        .find(|e| !e.is_empty())
        .ok_or("set $VISUAL or $EDITOR to the editor to use")?;
    let file = Private::write(document)?;
    // As git does: the variable may hold arguments (`code --wait`), so a shell reads it.
    let status = std::process::Command::new("sh")
        .arg("-c")
        .arg(format!("{} \"$1\"", editor.to_string_lossy()))
        .arg("sh")
        .arg(&file.0)
        .status()
        .map_err(|e| format!("cannot start the editor: {e}"))?;
    if !status.success() {
        return Err(format!("the editor ended with {status}"));
    }
    std::fs::read_to_string(&file.0)
        .map(Some)
        .map_err(|e| format!("cannot read the edited document: {e}"))
}

/// A file only this user may read (message bodies are private), removed when dropped.
struct Private(PathBuf);

impl Private {
    fn write(text: &str) -> Result<Private, String> {
        use std::os::unix::fs::OpenOptionsExt;
        let nanos = jiff::Timestamp::now().as_nanosecond();
        let path =
            std::env::temp_dir().join(format!("warren-edit-{}-{nanos}.txt", std::process::id()));
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&path)
            .map_err(|e| format!("cannot write {}: {e}", path.display()))?;
        let file = Private(path);
        f.write_all(text.as_bytes())
            .and_then(|()| f.sync_all())
            .map_err(|e| format!("cannot write {}: {e}", file.0.display()))?;
        Ok(file)
    }
}

impl Drop for Private {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}
