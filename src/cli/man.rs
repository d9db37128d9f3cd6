//! The man page (`warren man`): clap's sections, from the same definition as `--help` and the
//! completions, then what clap does not know: the exit codes, the terminal UI's keys (from the
//! key table the key handler and the help screen use, so the page cannot drift from them) and
//! the filter language (from `domain::filter::TERMS`, beside its parser). `docs/cli.md` and
//! `docs/manual.md` say the same at length.

use std::fmt::Write as _;

use super::Cli;
use crate::domain::filter;
use crate::tui::keys;

/// The exit codes (`super::exit`) and what each means.
const EXIT_CODES: &[(i32, &str)] = &[
    (
        super::exit::OK,
        "Success: everything asked was done. For replay, every selected message it reached \
         moved, none failed, none was returned and none may be duplicated; a --dry-run that \
         touched nothing.",
    ),
    (
        super::exit::FAILED,
        "The work failed or is incomplete: a replay, archive, restore or discard that ended \
         partial (window full, quorum safety stop, some failed or returned, messages held by \
         another consumer, a canary that came back dead or was not consumed), failed (connection lost, broker stalled, confirms missing, \
         publishing blocked too long), cancelled (Ctrl-C, SIGTERM, SIGHUP; settled) or \
         interrupted (a second signal); a read-only refusal; a redirect refused (its queue \
         missing or a wait queue, a chain, nothing to remove); \"nothing moved\" at the \
         confirmation prompt. For watch --once: an alert.",
    ),
    (
        super::exit::USAGE,
        "Usage: bad arguments (a queue name that names no queue in the vhost, an empty \
         --filter), no terminal to ask on and no --yes.",
    ),
    (
        super::exit::BROKER,
        "The broker unreachable or refused before anything moved. For watch --once: it could \
         not look.",
    ),
];

/// The whole page, in roff.
pub fn render() -> std::io::Result<Vec<u8>> {
    let man = clap_mangen::Man::new(<Cli as clap::CommandFactory>::command());
    let mut buf = Vec::new();
    man.render_title(&mut buf)?;
    man.render_name_section(&mut buf)?;
    man.render_synopsis_section(&mut buf)?;
    man.render_description_section(&mut buf)?;
    man.render_options_section(&mut buf)?;
    man.render_subcommands_section(&mut buf)?;
    buf.extend_from_slice(sections().as_bytes());
    man.render_version_section(&mut buf)?;
    Ok(buf)
}

/// EXIT STATUS, KEYS and FILTER LANGUAGE.
fn sections() -> String {
    let mut out = String::new();
    out.push_str(".SH \"EXIT STATUS\"\n");
    for (code, text) in EXIT_CODES {
        item(&mut out, &code.to_string(), text);
    }
    out.push_str(".PP\n");
    line(
        &mut out,
        "The terminal UI stopped by SIGHUP or SIGTERM during a run settles the run, then exits \
         128 + the signal (129, 143). Quit (q, Ctrl-C) during a run settles it, prints its \
         summary and exits 1 unless it completed; a terminal UI that never reached its broker \
         (a wrong password) says why and exits 3. The cause is one line on stderr; the full \
         chain is in the log file.",
    );

    out.push_str(".SH KEYS\n");
    line(
        &mut out,
        "The terminal UI's keys, from the table its key handler and its help screen (?) use; \
         the footer shows the keys that apply where you are, and the help screen also lists the \
         custom commands of the configuration file ([[commands]]). ^ is Ctrl, S- is Shift.",
    );
    for (title, bindings) in keys::help_sections() {
        let _ = writeln!(out, ".SS \"{}\"", escape(title).replace('"', "\"\""));
        for b in bindings {
            item(&mut out, b.label, b.help);
        }
    }

    out.push_str(".SH \"FILTER LANGUAGE\"\n");
    line(&mut out, filter::SYNTAX);
    for (term, matches) in filter::TERMS {
        item(&mut out, term, matches);
    }
    out.push_str(".PP\n");
    line(
        &mut out,
        "Example: warren replay orders.dlq --filter 'exception:timeout -queue:payments \
         age:<2h' --rate 50",
    );
    out
}

/// A tagged paragraph: `tag` in bold, then `text`.
fn item(out: &mut String, tag: &str, text: &str) {
    out.push_str(".TP\n");
    let _ = writeln!(out, "\\fB{}\\fR", escape(tag));
    line(out, text);
}

/// One line of text, escaped.
fn line(out: &mut String, text: &str) {
    let _ = writeln!(out, "{}", escape(text));
}

/// Text as roff reads it literally: backslashes and dashes escaped, and a leading `.` or `'`
/// (which would make a control line) guarded.
fn escape(text: &str) -> String {
    let s = text.replace('\\', "\\e").replace('-', "\\-");
    if s.starts_with('.') || s.starts_with('\'') {
        format!("\\&{s}")
    } else {
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_page_has_the_exit_codes_every_key_and_the_filter_language() {
        let page = String::from_utf8(render().unwrap()).unwrap();
        for section in [".SH \"EXIT STATUS\"", ".SH KEYS", ".SH \"FILTER LANGUAGE\""] {
            assert!(page.contains(section), "{section}");
        }
        for b in keys::BINDINGS {
            assert!(page.contains(&escape(b.help)), "{}", b.help);
        }
        for (term, _) in filter::TERMS {
            assert!(page.contains(&escape(term)), "{term}");
        }
    }

    #[test]
    fn control_characters_are_escaped() {
        assert_eq!(escape(".q"), "\\&.q");
        assert_eq!(escape("S-Tab"), "S\\-Tab");
        assert_eq!(escape("a\\b"), "a\\eb");
    }
}
