//! One resource budget per call: every linear memory and every table of every
//! core instance that a plugin's component creates count against the same
//! byte limit, so that extra memories, extra instances or huge tables cannot
//! add up past it.

use wasmtime::ResourceLimiter;

/// Core instances one call may create (a Rust component has about 5, CPython
/// about 10).
pub const MAX_INSTANCES: usize = 64;
/// Linear memories one call may create, all together.
pub const MAX_MEMORIES: usize = 16;
/// Tables one call may create, all together.
pub const MAX_TABLES: usize = 64;
/// What one table element costs the host (a pointer), counted against the
/// call's memory limit.
pub const TABLE_ELEMENT_BYTES: usize = 8;

/// What the budget stopped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Exceeded {
    /// A memory would have grown the total to this many bytes.
    Memory { total: usize },
    /// A table would have grown the total to this many bytes.
    Table { total: usize },
}

/// The budget of one call. Growing past it fails the growth with an error
/// (a trap, rather than `memory.grow` returning -1), so that the error names
/// the cap and what was asked, and `exceeded` tells the caller it was the
/// memory cap and not some other trap.
pub(crate) struct CallLimits {
    /// The byte limit for memories and table elements together.
    pub limit: usize,
    /// Bytes held by all memories and tables so far.
    pub used: usize,
    /// Set when the budget refused a growth.
    pub exceeded: Option<Exceeded>,
}

impl CallLimits {
    pub fn new(limit: usize) -> Self {
        Self {
            limit,
            used: 0,
            exceeded: None,
        }
    }

    /// Accounts `current -> desired` bytes, or refuses it.
    fn grow(
        &mut self,
        current: usize,
        desired: usize,
        what: fn(usize) -> Exceeded,
    ) -> wasmtime::Result<bool> {
        let total = (self.used - current.min(self.used)).saturating_add(desired);
        if total > self.limit {
            self.exceeded = Some(what(total));
            return Err(wasmtime::Error::msg(format!(
                "memory limit exceeded: the plugin's memories and tables would hold {total} bytes, its cap is {} bytes",
                self.limit
            )));
        }
        self.used = total;
        Ok(true)
    }
}

impl ResourceLimiter for CallLimits {
    fn memory_growing(
        &mut self,
        current: usize,
        desired: usize,
        _maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        self.grow(current, desired, |total| Exceeded::Memory { total })
    }

    fn table_growing(
        &mut self,
        current: usize,
        desired: usize,
        _maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        self.grow(
            current.saturating_mul(TABLE_ELEMENT_BYTES),
            desired.saturating_mul(TABLE_ELEMENT_BYTES),
            |total| Exceeded::Table { total },
        )
    }

    fn instances(&self) -> usize {
        MAX_INSTANCES
    }

    fn tables(&self) -> usize {
        MAX_TABLES
    }

    fn memories(&self) -> usize {
        MAX_MEMORIES
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn memories_and_tables_share_one_budget() {
        let mut l = CallLimits::new(100 << 20);
        // Three memories of 30 MiB fit; a fourth does not.
        for _ in 0..3 {
            assert!(l.memory_growing(0, 30 << 20, None).unwrap());
        }
        assert!(l.memory_growing(0, 30 << 20, None).is_err());
        assert!(matches!(l.exceeded, Some(Exceeded::Memory { .. })));
        // Growing one of them by 1 MiB counts only the difference.
        let mut l = CallLimits::new(100 << 20);
        l.memory_growing(0, 60 << 20, None).unwrap();
        l.memory_growing(60 << 20, 61 << 20, None).unwrap();
        assert_eq!(l.used, 61 << 20);
        // A table of a million elements costs 8 MB of the same budget.
        l.table_growing(0, 1_000_000, None).unwrap();
        assert_eq!(l.used, (61 << 20) + 8_000_000);
        assert!(l.table_growing(0, 5_000_000, None).is_err());
        assert!(matches!(l.exceeded, Some(Exceeded::Table { .. })));
    }
}
