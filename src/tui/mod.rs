//! tui (to be filled in).
