//! The command line: parses arguments with clap and dispatches to the commands.

/// Runs Warren and returns the process exit code.
pub fn main() -> i32 {
    0
}
