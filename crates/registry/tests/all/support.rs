//! The real registry of the test kit (`nodestatus_tests::registry`), shared
//! with tests/all.

pub use nodestatus_tests::registry::*;
