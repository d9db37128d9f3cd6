//! Warren's own files that live only as long as the work that made them: a browsed page kept
//! out of memory (`spill`) and a run's moved ids kept out of memory (`spool`). Each is written
//! by this user only, read back in order, and removed when its last handle is dropped. Neither
//! reaches the broker, and neither is memory: what Warren remembers between runs is the
//! store (`crate::store`). Uses the domain only.

pub mod spill;
pub mod spool;
