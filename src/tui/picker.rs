//! The context picker (`:ctx` with no name) and the command line's Tab completion of context
//! names, as k9s offers them: the operator at 3 a.m. need not remember how the contexts of
//! the config file are spelled. The names come from the config file (read before the terminal
//! is taken); the picker only chooses, the switch is `:ctx NAME`'s.

use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::text::{Line, Span};

use super::state::State;
use crate::config::ContextScope;
use crate::domain::sanitize;

/// One context of the config file, as the picker lists it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ContextChoice {
    pub name: String,
    /// Its `label` (shown beside the name).
    pub label: Option<String>,
}

/// The picker's state: what is typed to narrow it, and the row under the cursor.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ContextPicker {
    pub query: String,
    pub cursor: usize,
}

/// The names the picker offers for `query`, in the config's order, then every context at
/// once (`*`) when there are several: each name or label holding the query, case-insensitively.
pub fn offered(contexts: &[ContextChoice], query: &str) -> Vec<String> {
    let q = query.trim().to_lowercase();
    let holds = |s: &str| s.to_lowercase().contains(&q);
    let mut out: Vec<String> = contexts
        .iter()
        .filter(|c| holds(&c.name) || c.label.as_deref().is_some_and(holds))
        .map(|c| c.name.clone())
        .collect();
    if contexts.len() > 1 && (q.is_empty() || ContextScope::parse(&q).is_every()) {
        out.push(ContextScope::EveryContext.to_string());
    }
    out
}

/// Tab on the command line: `line` completed as far as it is certain (a context name after
/// `ctx `, else a command), and the candidates when more than one fits.
pub fn complete(contexts: &[ContextChoice], line: &str) -> (String, Vec<String>) {
    const VERBS: &[&str] = &[
        "ctx",
        "vhost",
        "limit",
        "redirect",
        "redirects",
        "help",
        "quit",
    ];
    let (head, word, names): (&str, &str, Vec<String>) = match line.split_once(' ') {
        Some((verb @ ("ctx" | "context"), rest)) => (
            verb,
            rest.trim_start(),
            contexts.iter().map(|c| c.name.clone()).collect(),
        ),
        Some(_) => return (line.to_string(), Vec::new()),
        None => ("", line, VERBS.iter().map(|v| v.to_string()).collect()),
    };
    let fits: Vec<String> = names.into_iter().filter(|n| n.starts_with(word)).collect();
    let done = match fits.as_slice() {
        [] => word.to_string(),
        [one] => format!("{one} "),
        many => common_prefix(many),
    };
    let line = if head.is_empty() {
        done
    } else {
        format!("{head} {done}")
    };
    (line, if fits.len() > 1 { fits } else { Vec::new() })
}

fn common_prefix(words: &[String]) -> String {
    let Some(first) = words.first() else {
        return String::new();
    };
    let mut end = first.len();
    for w in &words[1..] {
        end = first
            .char_indices()
            .zip(w.chars())
            .take_while(|((_, a), b)| a == b)
            .last()
            .map_or(0, |((i, a), _)| i + a.len_utf8())
            .min(end);
    }
    first[..end].to_string()
}

/// The picker over the screen: the query, then each offered context (its label, the one
/// open now marked).
pub fn draw(state: &State, picker: &ContextPicker, frame: &mut Frame, area: Rect) {
    let t = &state.settings.theme;
    let names = offered(&state.settings.contexts, &picker.query);
    let listed = names
        .iter()
        .filter(|n| !ContextScope::parse(n).is_every())
        .count();
    let title = format!(
        " Open a context: {listed} of {} ",
        state.settings.contexts.len()
    );
    let lines = |width: usize| {
        let mut out = vec![
            Line::from(vec![
                Span::styled("> ", t.accent),
                Span::raw(sanitize::one_line(&picker.query, 60)),
            ]),
            Line::raw(""),
        ];
        if names.is_empty() {
            out.push(Line::styled("no context holds that name", t.muted));
        }
        for (i, name) in names.iter().enumerate() {
            out.push(row(state, name, i == picker.cursor, width));
        }
        out
    };
    super::oplog::draw_list(
        state,
        frame,
        area,
        title,
        " type to narrow · ↑/↓ choose · Enter open · Esc close ",
        lines,
    );
}

fn row(state: &State, name: &str, under: bool, width: usize) -> Line<'static> {
    let t = &state.settings.theme;
    let label = state
        .settings
        .contexts
        .iter()
        .find(|c| c.name == name)
        .and_then(|c| c.label.as_deref())
        .map_or(String::new(), |l| {
            format!("  [{}]", sanitize::one_line(l, 30))
        });
    let shown = if ContextScope::parse(name).is_every() {
        "*  every context at once (to look)".to_string()
    } else {
        sanitize::one_line(name, 60)
    };
    let open = if state.overview.context == name {
        "  (open now)"
    } else {
        ""
    };
    let text =
        sanitize::width_safe_truncate(&format!("{shown}{label}{open}"), width.saturating_sub(2));
    if under {
        Line::from(vec![
            Span::styled("▶ ", t.accent),
            Span::styled(text, t.accent),
        ])
    } else {
        Line::raw(format!("  {text}"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ctxs() -> Vec<ContextChoice> {
        ["lab-4.3", "prod-eu", "prod-us", "staging"]
            .iter()
            .map(|n| ContextChoice {
                name: n.to_string(),
                label: (*n == "staging").then(|| "STG".to_string()),
            })
            .collect()
    }

    #[test]
    fn the_picker_narrows_by_name_or_label_and_offers_every_context() {
        let c = ctxs();
        assert_eq!(offered(&c, "").len(), 5);
        assert_eq!(offered(&c, "").last().map(String::as_str), Some("*"));
        assert_eq!(offered(&c, "PROD"), vec!["prod-eu", "prod-us"]);
        assert_eq!(offered(&c, "stg"), vec!["staging"]);
        assert!(offered(&c, "nothing").is_empty());
        // One context: nothing to look at "at once".
        assert_eq!(offered(&c[..1], ""), vec!["lab-4.3"]);
    }

    #[test]
    fn tab_completes_what_is_certain_and_lists_the_rest() {
        let c = ctxs();
        assert_eq!(
            complete(&c, "ctx pr"),
            ("ctx prod-".into(), vec!["prod-eu".into(), "prod-us".into()])
        );
        assert_eq!(
            complete(&c, "ctx prod-e"),
            ("ctx prod-eu ".into(), Vec::new())
        );
        assert_eq!(complete(&c, "ctx x").0, "ctx x");
        assert_eq!(complete(&c, "vh").0, "vhost ");
        assert_eq!(
            complete(&c, "re"),
            (
                "redirect".into(),
                vec!["redirect".into(), "redirects".into()]
            )
        );
        assert_eq!(complete(&c, "limit 5").0, "limit 5");
    }
}
