//! The sessions of a scope: one per vhost, opened on first need and kept.

use std::collections::HashMap;

use super::{Session, SessionError};

/// The sessions of a scope: the one opened for it, and for a scope of every vhost one per other
/// vhost, opened on first need ([`Session::open_in`]) and kept, so each vhost has its own AMQP
/// connection and its own record of what was read (the quorum rules are per session). A
/// session that fails to open is not kept: the next need tries again.
pub struct Sessions {
    main: std::sync::Arc<Session>,
    /// The scope is every vhost of the context (`--vhost '*'`), listed through `main`.
    every: bool,
    others: tokio::sync::Mutex<HashMap<String, std::sync::Arc<Session>>>,
}

impl Sessions {
    pub fn new(main: Session, every: bool) -> Sessions {
        Sessions {
            main: std::sync::Arc::new(main),
            every,
            others: tokio::sync::Mutex::new(HashMap::new()),
        }
    }

    pub fn every(&self) -> bool {
        self.every
    }

    /// The session the scope was opened with (listings go through it).
    pub fn main(&self) -> &std::sync::Arc<Session> {
        &self.main
    }

    /// The session of `vhost`.
    pub async fn of(&self, vhost: &str) -> Result<std::sync::Arc<Session>, SessionError> {
        if vhost == self.main.vhost() {
            return Ok(self.main.clone());
        }
        let mut others = self.others.lock().await;
        if let Some(s) = others.get(vhost) {
            return Ok(s.clone());
        }
        let s = std::sync::Arc::new(self.main.open_in(vhost).await?);
        others.insert(vhost.to_string(), s.clone());
        Ok(s)
    }
}
