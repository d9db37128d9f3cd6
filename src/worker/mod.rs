//! worker (to be filled in).
