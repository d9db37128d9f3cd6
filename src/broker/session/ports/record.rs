//! The session's side of `ops::ports` (record): the broker code the operations reach through the
//! traits `ops` owns.

use crate::broker::audit::{BrokerRecord, Consent};
use crate::broker::session::Session;
use crate::ops::ports::Author;
use crate::ops::ports::*;
use crate::store::Store;
use std::future::Future;

impl RecordPort for Session {
    type Log = BrokerRecord;
    type Memory = Store;

    fn operator(&self) -> Author {
        Author {
            broker_user: self.handle.whoami.name.clone(),
            context: self.handle.target.context.clone(),
            vhost: self.vhost().to_string(),
            create_streams: self.handle.target.audit.create,
            audit_stream: self.handle.target.audit.stream.is_some(),
        }
    }

    fn memory_key(&self) -> String {
        self.handle.memory_key()
    }

    fn memory(&self) -> Result<Store, String> {
        Store::open_default().map_err(|e| e.to_string())
    }

    fn open_log(&self, consent: Consent<'_>) -> impl Future<Output = BrokerRecord> + Send {
        BrokerRecord::open(self, consent)
    }
}
