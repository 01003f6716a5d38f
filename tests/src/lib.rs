//! Helpers for the end-to-end suite.
