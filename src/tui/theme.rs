//! Semantic styles. Views ask for a role (danger, selected, …), never for a colour, so that the
//! monochrome theme for `NO_COLOR` can carry the same meaning with bold, reverse and underline.

use ratatui::style::{Color, Modifier, Style};

use crate::config::ContextColor;

#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Theme {
    pub base: Style,
    /// Titles, the focused pane's border, key names.
    pub accent: Style,
    /// Secondary text: ages, hints, unfocused borders.
    pub muted: Style,
    /// The row under the cursor. Always reversed so that it shows without colour.
    pub selected: Style,
    /// Rows picked for replay (the mark column).
    pub marked: Style,
    /// Anything that can lose or move messages: the replay modal, errors.
    pub danger: Style,
    /// Caution: quorum delivery budget, warnings in a plan.
    pub warn: Style,
    /// Good news: connected, moved.
    pub ok: Style,
    /// The READ-ONLY badge.
    pub badge: Style,
    pub monochrome: bool,
}

impl Theme {
    pub fn color() -> Theme {
        Theme {
            base: Style::default(),
            accent: Style::default()
                .fg(Color::Cyan)
                .add_modifier(Modifier::BOLD),
            muted: Style::default().fg(Color::DarkGray),
            selected: Style::default().add_modifier(Modifier::REVERSED | Modifier::BOLD),
            marked: Style::default()
                .fg(Color::Yellow)
                .add_modifier(Modifier::BOLD),
            danger: Style::default().fg(Color::Red).add_modifier(Modifier::BOLD),
            warn: Style::default().fg(Color::Yellow),
            ok: Style::default().fg(Color::Green),
            badge: Style::default()
                .fg(Color::Black)
                .bg(Color::Yellow)
                .add_modifier(Modifier::BOLD),
            monochrome: false,
        }
    }

    /// For `NO_COLOR`: no colour at all; meaning carried by modifiers.
    pub fn monochrome() -> Theme {
        Theme {
            base: Style::default(),
            accent: Style::default().add_modifier(Modifier::BOLD),
            muted: Style::default().add_modifier(Modifier::DIM),
            selected: Style::default().add_modifier(Modifier::REVERSED | Modifier::BOLD),
            marked: Style::default().add_modifier(Modifier::BOLD),
            danger: Style::default().add_modifier(Modifier::BOLD | Modifier::UNDERLINED),
            warn: Style::default().add_modifier(Modifier::BOLD),
            ok: Style::default(),
            badge: Style::default().add_modifier(Modifier::REVERSED | Modifier::BOLD),
            monochrome: true,
        }
    }

    /// The theme the environment asks for: monochrome when `NO_COLOR` is set and not empty
    /// (<https://no-color.org>).
    pub fn from_env() -> Theme {
        match std::env::var_os("NO_COLOR") {
            Some(v) if !v.is_empty() => Theme::monochrome(),
            _ => Theme::color(),
        }
    }
}

impl Theme {
    /// The header bar's context badge in the context's configured colour (black on it, like the
    /// READ-ONLY badge); reversed without colour, so a coloured context stands out either way.
    pub fn context_badge(&self, color: ContextColor) -> Style {
        if self.monochrome {
            return Style::default().add_modifier(Modifier::REVERSED | Modifier::BOLD);
        }
        let bg = match color {
            ContextColor::Red => Color::Red,
            ContextColor::Green => Color::Green,
            ContextColor::Yellow => Color::Yellow,
            ContextColor::Blue => Color::Blue,
            ContextColor::Magenta => Color::Magenta,
            ContextColor::Cyan => Color::Cyan,
            ContextColor::White => Color::White,
            ContextColor::Gray => Color::Gray,
        };
        Style::default()
            .fg(Color::Black)
            .bg(bg)
            .add_modifier(Modifier::BOLD)
    }
}

impl Default for Theme {
    fn default() -> Self {
        Theme::color()
    }
}
