//! The allocator setting for processes that run policies.
//!
//! tract allocates every intermediate tensor of a plan at each run and frees it at the end.
//! mimalloc (the binaries' allocator) hands freed blocks back to the OS ("purges" them) after
//! 10 ms by default, and the kernel then zeroes fresh pages when the next run touches them:
//! `clear_page_erms` was 1.1-1.5% of a batch-64 decision of the visual and Walker-sized
//! benchmark networks (perf, AVX-512 Xeon), and 0.3-0.4% with purging off. A process that
//! runs decision after decision keeps that memory instead: its peak is one plan's tensors.

use std::ffi::{c_int, c_long};
// Links mimalloc into every binary of the crate, so that `mi_option_set` resolves.
use mimalloc as _;

/// mimalloc's `mi_option_purge_delay` (the same position in its v2 and v3 headers).
const PURGE_DELAY: c_int = 15;

extern "C" {
    /// mimalloc's `mi_option_set` (linked through the `mimalloc` crate).
    fn mi_option_set(option: c_int, value: c_long);
}

/// Keeps the memory freed by mimalloc for reuse (no purging), unless the environment sets
/// `MIMALLOC_PURGE_DELAY` itself. Only for processes whose global allocator is mimalloc.
pub fn keep_freed_memory() {
    if std::env::var_os("MIMALLOC_PURGE_DELAY").is_none() {
        // SAFETY: mimalloc's options may be set at any time; -1 is its documented "never".
        unsafe { mi_option_set(PURGE_DELAY, -1) };
    }
}
