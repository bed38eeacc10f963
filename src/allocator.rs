//! The allocator robotsguard's binary installs (and the pass-through it is measured against):
//! jemalloc, with small reallocations moved by allocating, copying and freeing.
//!
//! jemalloc's `realloc` first tries to grow a block where it is, and on failure takes a slower
//! path than its thread-cache `malloc` and sized free: moving a small block that way costs about
//! three times as much as allocating, copying and freeing it. A proxied request grows one such
//! block every time (the forwarding headers outgrow the header map pingora copies with room for
//! exactly the headers received), so small growths take the cheap move; a block that still has
//! room stays where it is, as jemalloc would leave it, and shrinking and large blocks are
//! jemalloc's own.

// The one module the crate allows `unsafe` in wholesale: a global allocator is unsafe code by
// definition; each block says why it is sound (`SAFETY:`).
#![allow(unsafe_code)]

use std::alloc::{GlobalAlloc, Layout};

use tikv_jemallocator::Jemalloc;

/// Growths up to this size are moved here (jemalloc's small size classes reach 14 KiB; copying
/// more than a few KiB is no longer cheap beside what `realloc` can do in place).
const SMALL_GROWTH_LIMIT: usize = 4096;

/// The alignment every small jemalloc block has without asking (`max_align_t`).
const NATURAL_ALIGNMENT: usize = 16;

/// jemalloc, with a cheaper move for small growths (see the module).
#[derive(Debug, Default, Clone, Copy)]
pub struct Allocator;

// SAFETY: every block comes from jemalloc and goes back to it with the layout it was allocated
// or last grown with, as `Jemalloc`'s own implementation requires.
unsafe impl GlobalAlloc for Allocator {
    #[inline]
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: the caller's contract is passed on unchanged.
        unsafe { Jemalloc.alloc(layout) }
    }

    #[inline]
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        // SAFETY: as above.
        unsafe { Jemalloc.alloc_zeroed(layout) }
    }

    #[inline]
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: as above.
        unsafe { Jemalloc.dealloc(ptr, layout) }
    }

    #[inline]
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        if new_size <= layout.size()
            || new_size > SMALL_GROWTH_LIMIT
            || layout.align() > NATURAL_ALIGNMENT
        {
            // SAFETY: as above.
            return unsafe { Jemalloc.realloc(ptr, layout, new_size) };
        }
        // SAFETY: `ptr` is a live jemalloc block (the caller's contract).
        if unsafe { tikv_jemallocator::usable_size(ptr) } >= new_size {
            // Its size class already holds `new_size`: jemalloc would leave it in place too, and
            // a sized free with `new_size` names the same class.
            return ptr;
        }
        // SAFETY: `new_size` is non-zero and, rounded up to `layout.align()`, does not overflow
        // (the caller's contract for `realloc`).
        let grown = unsafe { Layout::from_size_align_unchecked(new_size, layout.align()) };
        // SAFETY: a non-zero size, as above.
        let moved = unsafe { Jemalloc.alloc(grown) };
        if !moved.is_null() {
            // SAFETY: both blocks are live, distinct, and at least `layout.size()` long; the old
            // one is freed with the layout it was allocated with, after the copy.
            unsafe {
                std::ptr::copy_nonoverlapping(ptr, moved, layout.size());
                Jemalloc.dealloc(ptr, layout);
            }
        }
        moved
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn growth_keeps_the_bytes_and_shrinking_and_large_blocks_too() {
        let allocator = Allocator;
        for (from, to) in [
            (8, 24),
            (24, 25),
            (100, 4096),
            (2000, 9000),
            (5000, 300),
            (64, 64),
        ] {
            let layout = Layout::from_size_align(from, 8).expect("a valid layout");
            // SAFETY: non-zero sizes; each block is freed once with its current layout.
            unsafe {
                let block = allocator.alloc(layout);
                assert!(!block.is_null());
                for i in 0..from {
                    *block.add(i) = (i % 251) as u8;
                }
                let grown = allocator.realloc(block, layout, to);
                assert!(!grown.is_null());
                for i in 0..from.min(to) {
                    assert_eq!(*grown.add(i), (i % 251) as u8, "{from} -> {to}, byte {i}");
                }
                allocator.dealloc(
                    grown,
                    Layout::from_size_align(to, 8).expect("a valid layout"),
                );
            }
        }
    }
}
