//! Where a look goes: one vhost or every vhost of the context, one context or every context of
//! the config file. The operator types `*` for "every" (`--vhost '*'`, `--context '*'`,
//! `:vhost *`, `:ctx *`); it is parsed here, once, and nothing else compares a name with `*`.

use std::fmt;

/// What the operator types for "every" (the command line's syntax, and how the TUI's header
/// shows the scope).
const EVERY: &str = "*";

/// Which vhosts a look covers.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum VhostScope {
    /// The vhost of this name.
    Vhost(String),
    /// Every vhost of the context, each queue listed with its vhost (`queues`, `watch`, the
    /// terminal UI; a session per vhost opened when first needed).
    EveryVhost,
}

/// Which contexts a look covers.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ContextScope {
    /// The context of this name.
    Context(String),
    /// Every context of the config file, each reached as itself (its own URLs, credentials and
    /// read-only setting), one listing each.
    EveryContext,
}

impl VhostScope {
    /// What the operator typed: `*` is every vhost, anything else names one.
    pub fn parse(typed: &str) -> VhostScope {
        if typed == EVERY {
            VhostScope::EveryVhost
        } else {
            VhostScope::Vhost(typed.to_string())
        }
    }

    pub fn is_every(&self) -> bool {
        matches!(self, VhostScope::EveryVhost)
    }
}

impl ContextScope {
    /// What the operator typed: `*` is every context, anything else names one.
    pub fn parse(typed: &str) -> ContextScope {
        if typed == EVERY {
            ContextScope::EveryContext
        } else {
            ContextScope::Context(typed.to_string())
        }
    }

    pub fn is_every(&self) -> bool {
        matches!(self, ContextScope::EveryContext)
    }
}

/// As the operator types it (and the TUI's header shows it): the name, or `*`.
impl fmt::Display for VhostScope {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            VhostScope::Vhost(name) => f.write_str(name),
            VhostScope::EveryVhost => f.write_str(EVERY),
        }
    }
}

/// As the operator types it: the name, or `*`.
impl fmt::Display for ContextScope {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ContextScope::Context(name) => f.write_str(name),
            ContextScope::EveryContext => f.write_str(EVERY),
        }
    }
}

impl super::Overrides {
    /// The vhosts the command line asks for (`None`: none named, the context's own).
    pub fn vhost_scope(&self) -> Option<VhostScope> {
        self.vhost.as_deref().map(VhostScope::parse)
    }

    /// The contexts the command line asks for (`None`: none named, the config's default).
    pub fn context_scope(&self) -> Option<ContextScope> {
        self.context.as_deref().map(ContextScope::parse)
    }

    /// Whether every vhost of the context is asked for.
    pub fn every_vhost(&self) -> bool {
        self.vhost_scope().is_some_and(|s| s.is_every())
    }

    /// Whether every context of the config file is asked for.
    pub fn every_context(&self) -> bool {
        self.context_scope().is_some_and(|s| s.is_every())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Overrides;

    #[test]
    fn a_star_is_every_and_any_other_name_is_one_and_both_read_back_as_typed() {
        assert_eq!(VhostScope::parse("*"), VhostScope::EveryVhost);
        assert_eq!(VhostScope::parse("/"), VhostScope::Vhost("/".into()));
        // Only the star alone means every: a name that holds one is a name.
        assert_eq!(VhostScope::parse("a*"), VhostScope::Vhost("a*".into()));
        assert_eq!(VhostScope::parse(" *"), VhostScope::Vhost(" *".into()));
        assert_eq!(ContextScope::parse("*"), ContextScope::EveryContext);
        assert_eq!(
            ContextScope::parse("prod"),
            ContextScope::Context("prod".into())
        );
        for typed in ["*", "/", "orders", "a*"] {
            assert_eq!(VhostScope::parse(typed).to_string(), typed);
            assert_eq!(ContextScope::parse(typed).to_string(), typed);
        }
    }

    #[test]
    fn the_command_line_s_scope_is_parsed_from_its_overrides() {
        let none = Overrides::default();
        assert_eq!((none.vhost_scope(), none.context_scope()), (None, None));
        assert!(!none.every_vhost() && !none.every_context());
        let every = Overrides {
            vhost: Some("*".into()),
            context: Some("*".into()),
            ..Overrides::default()
        };
        assert!(every.every_vhost() && every.every_context());
        let one = Overrides {
            vhost: Some("billing".into()),
            context: Some("prod".into()),
            ..Overrides::default()
        };
        assert_eq!(one.vhost_scope(), Some(VhostScope::Vhost("billing".into())));
        assert!(!one.every_vhost() && !one.every_context());
    }
}
