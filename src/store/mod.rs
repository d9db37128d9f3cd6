//! Warren's local memory (being written).
