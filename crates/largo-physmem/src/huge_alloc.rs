//! The allocator for the simulator's own memory: large arrays on host
//! huge pages.
//!
//! A `sim` run's metadata is a few large arrays that grow with the
//! modelled footprint: the anonymous folio records (128 bytes per modelled
//! folio), the page tables, the LRU and swap structures. With the host's
//! base pages each 4 KiB of them costs a host page fault the first time a
//! run writes it: page_fault1's first 128 MiB loop at 4K wrote 4 MiB of
//! folio records and spent about as long in the host kernel's fault path
//! for them as in the model. [`HugeAlloc`] gives every allocation of at
//! least 2 MiB its own mapping, aligned to 2 MiB and rounded up to a
//! multiple of it, and asks the host for transparent huge pages on it
//! (`MADV_HUGEPAGE`, which the default `madvise` mode honours): one host
//! fault per 2 MiB, and one TLB entry.
//!
//! Zeroed allocations are mapped the same way but not advised: the memmap
//! of a TiB machine is a zeroed array whose pages the host materialises
//! only where a record is written (`memmap/array.rs`), and huge pages
//! there would make a few written records cost 2 MiB each. Smaller
//! allocations, and the rare layout aligned beyond 2 MiB, go to the
//! system allocator unchanged.
//!
//! A freed mapping is kept for the next allocation that fits it (up to 16
//! mappings and 256 MiB), as the system allocator keeps freed heap memory:
//! a sweep or a benchmark makes machine after machine in one process, and
//! each new machine's arrays then reuse host pages already faulted in.
//!
//! Installed by the `largo` binary (`#[global_allocator]`), and on only
//! for its commands that model and do not fork programs to measure the
//! host kernel ([`enable`]); off, every allocation goes to the system
//! allocator.

use std::alloc::{GlobalAlloc, Layout, System};
use std::ptr;
use std::sync::atomic::{AtomicU8, Ordering};

/// 2 MiB: the x86-64 and arm64 (4K) PMD size, the size of a host THP.
const HUGE_BYTES: usize = 2 << 20;

/// The global allocator described in the module documentation.
#[derive(Clone, Copy, Debug, Default)]
pub struct HugeAlloc;

/// Mappings freed and kept for reuse: a sweep or a benchmark makes one
/// machine after another, and a new machine's arrays then land on host
/// pages already faulted in, as they do on the system allocator's heap,
/// instead of fresh ones the host must zero. At most [`CACHE_SLOTS`]
/// mappings and [`CACHE_BYTES`] are kept; the rest go back to the host.
struct Cache {
    /// `(address, bytes)` of each kept mapping; `bytes == 0`: a free slot.
    slots: [(usize, usize); CACHE_SLOTS],
}

const CACHE_SLOTS: usize = 16;
const CACHE_BYTES: usize = 256 << 20;

static CACHE: std::sync::Mutex<Cache> = std::sync::Mutex::new(Cache {
    slots: [(0, 0); CACHE_SLOTS],
});

impl Cache {
    /// Takes the smallest kept mapping of at least `bytes`.
    fn take(&mut self, bytes: usize) -> Option<(usize, usize)> {
        let (i, _) = self
            .slots
            .iter()
            .enumerate()
            .filter(|(_, &(_, len))| len >= bytes)
            .min_by_key(|(_, &(_, len))| len)?;
        Some(std::mem::take(&mut self.slots[i]))
    }

    /// Keeps a mapping if there is room; returns whether it did.
    fn keep(&mut self, addr: usize, bytes: usize) -> bool {
        let held: usize = self.slots.iter().map(|&(_, len)| len).sum();
        if held + bytes > CACHE_BYTES {
            return false;
        }
        match self.slots.iter_mut().find(|(_, len)| *len == 0) {
            Some(slot) => {
                *slot = (addr, bytes);
                true
            }
            None => false,
        }
    }
}

/// A kept mapping of at least `bytes`, trimmed to `bytes`; null if none.
fn reuse(bytes: usize) -> *mut u8 {
    let Some((addr, len)) = CACHE.lock().ok().and_then(|mut c| c.take(bytes)) else {
        return ptr::null_mut();
    };
    if len > bytes {
        // SAFETY: the tail beyond `bytes` is part of the kept mapping,
        // which nothing else refers to.
        unsafe { libc::munmap((addr + bytes) as *mut libc::c_void, len - bytes) };
    }
    addr as *mut u8
}

/// Gives a mapping of `bytes` at `p` up: kept for reuse, or unmapped.
///
/// # Safety
/// `p` is a mapping of `bytes` made by this allocator that nothing uses.
unsafe fn release(p: *mut u8, bytes: usize) {
    let kept = CACHE.lock().map(|mut c| c.keep(p as usize, bytes)).unwrap_or(false);
    if !kept {
        // SAFETY: the caller gives the mapping up.
        unsafe { libc::munmap(p.cast(), bytes) };
    }
}

/// Whether large allocations get mappings of their own: [`UNDECIDED`]
/// until [`enable`] or the first large allocation decides, then
/// [`HUGE`] or [`SYSTEM`] for the rest of the process. Decided once, the
/// rule reads only the layout, so `dealloc` and `realloc` (which are given
/// the layout again) know how the memory was obtained.
static MODE: AtomicU8 = AtomicU8::new(UNDECIDED);
const UNDECIDED: u8 = 0;
const HUGE: u8 = 1;
const SYSTEM: u8 = 2;

/// Turns the huge mappings on for this process; returns whether they
/// are on. Call it before the first allocation of 2 MiB or more (which
/// otherwise decides for the system allocator). A process that forks
/// programs to measure the host kernel leaves them off, so that what its
/// children inherit, and what the host does for them, is as it was
/// before this allocator (a precaution: no measurement here has shown a
/// difference).
pub fn enable() -> bool {
    let _ = MODE.compare_exchange(UNDECIDED, HUGE, Ordering::Relaxed, Ordering::Relaxed);
    MODE.load(Ordering::Relaxed) == HUGE
}

/// Whether an allocation of `layout` gets a mapping of its own (the first
/// large allocation of an undecided process decides for the system
/// allocator).
#[inline]
fn own_mapping(layout: Layout) -> bool {
    if layout.size() < HUGE_BYTES || layout.align() > HUGE_BYTES {
        return false;
    }
    match MODE.load(Ordering::Relaxed) {
        HUGE => true,
        SYSTEM => false,
        _ => {
            let _ = MODE.compare_exchange(UNDECIDED, SYSTEM, Ordering::Relaxed, Ordering::Relaxed);
            MODE.load(Ordering::Relaxed) == HUGE
        }
    }
}

/// The length of the mapping that holds `size` bytes: whole huge pages.
#[inline]
fn mapping_bytes(size: usize) -> usize {
    size.next_multiple_of(HUGE_BYTES)
}

/// A fresh anonymous mapping of `bytes` (a multiple of [`HUGE_BYTES`])
/// starting on a [`HUGE_BYTES`] boundary, advised for huge pages when
/// `huge`; null when the host refuses it.
fn map_aligned(bytes: usize, huge: bool) -> *mut u8 {
    let Some(reserve) = bytes.checked_add(HUGE_BYTES) else {
        return ptr::null_mut();
    };
    // SAFETY: a new private anonymous mapping at an address the kernel
    // picks: no existing memory is affected.
    let raw = unsafe {
        libc::mmap(
            ptr::null_mut(),
            reserve,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE,
            -1,
            0,
        )
    };
    if raw == libc::MAP_FAILED {
        return ptr::null_mut();
    }
    let start = raw as usize;
    let aligned = start.next_multiple_of(HUGE_BYTES);
    let head = aligned - start;
    let tail = reserve - head - bytes;
    // SAFETY: both ranges lie inside the mapping just made and outside
    // the `bytes` this function returns; nothing refers to them.
    unsafe {
        if head > 0 {
            libc::munmap(raw, head);
        }
        if tail > 0 {
            libc::munmap((aligned + bytes) as *mut libc::c_void, tail);
        }
    }
    if huge {
        advise_huge(aligned as *mut u8, bytes);
    }
    aligned as *mut u8
}

/// `MADV_HUGEPAGE` on a mapping this allocator made. A refusal (THP not
/// built in, a seccomp filter) leaves base pages: correct, only slower.
fn advise_huge(p: *mut u8, bytes: usize) {
    // SAFETY: advice on a range this allocator mapped; it changes how the
    // host backs the range, never its contents.
    unsafe {
        libc::madvise(p.cast(), bytes, libc::MADV_HUGEPAGE);
    }
}

/// Asks the host for transparent huge pages under the whole 2 MiB
/// ranges of `v` (`MADV_HUGEPAGE`): for an array the caller knows it will
/// mostly write, where a zeroed allocation was left unadvised. Returns
/// the bytes advised (0 when `v` spans no whole aligned 2 MiB, or the
/// host refused).
pub fn advise_huge_pages<T>(v: &mut [T]) -> usize {
    if MODE.load(Ordering::Relaxed) != HUGE {
        return 0;
    }
    let start = v.as_mut_ptr() as usize;
    let end = start + std::mem::size_of_val(v);
    let (first, last) = (start.next_multiple_of(HUGE_BYTES), end & !(HUGE_BYTES - 1));
    if last <= first {
        return 0;
    }
    // SAFETY: advice on whole pages inside memory the caller holds
    // mutably; it changes how the host backs them, never their contents.
    let r = unsafe { libc::madvise(first as *mut libc::c_void, last - first, libc::MADV_HUGEPAGE) };
    if r == 0 {
        last - first
    } else {
        0
    }
}

/// Grows or shrinks the mapping at `p` from `old` to `new` bytes (both
/// multiples of [`HUGE_BYTES`]), keeping its contents and its advice;
/// null when the host refuses.
///
/// # Safety
/// `p` is a live mapping of `old` bytes made by [`map_aligned`].
unsafe fn remap(p: *mut u8, old: usize, new: usize) -> *mut u8 {
    if new == old {
        return p;
    }
    if new < old {
        // SAFETY: the tail beyond `new` belongs to this mapping, and the
        // caller gives it up.
        unsafe { libc::munmap(p.add(new).cast(), old - new) };
        return p;
    }
    // In place when the addresses after it are free; otherwise the pages
    // move (no copy) to a fresh aligned range, replacing its mapping.
    // SAFETY: `p` is the caller's live mapping of `old` bytes.
    let grown = unsafe { libc::mremap(p.cast(), old, new, 0) };
    if grown != libc::MAP_FAILED {
        return p;
    }
    let dst = map_aligned(new, false);
    if dst.is_null() {
        return ptr::null_mut();
    }
    // SAFETY: `dst` is a mapping of `new` bytes just made for this move;
    // MREMAP_FIXED replaces it with the caller's pages and their flags.
    let moved = unsafe {
        libc::mremap(
            p.cast(),
            old,
            new,
            libc::MREMAP_MAYMOVE | libc::MREMAP_FIXED,
            dst.cast::<libc::c_void>(),
        )
    };
    if moved == libc::MAP_FAILED {
        // SAFETY: `dst` is the unused mapping made above.
        unsafe { libc::munmap(dst.cast(), new) };
        return ptr::null_mut();
    }
    dst
}

// SAFETY: every pointer returned is null or valid for the layout's size
// and aligned to its alignment (own mappings are aligned to 2 MiB, which
// is at least the layout's alignment); `dealloc` and `realloc` tell the
// two kinds of memory apart by the layout they are given, which is the
// layout the memory was allocated with.
unsafe impl GlobalAlloc for HugeAlloc {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        if !own_mapping(layout) {
            // SAFETY: forwarded with the caller's guarantees.
            return unsafe { System.alloc(layout) };
        }
        let bytes = mapping_bytes(layout.size());
        let p = reuse(bytes);
        if !p.is_null() {
            // A kept zeroed array's mapping was not advised.
            advise_huge(p, bytes);
            return p;
        }
        map_aligned(bytes, true)
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        if !own_mapping(layout) {
            // SAFETY: forwarded with the caller's guarantees.
            return unsafe { System.alloc_zeroed(layout) };
        }
        // A fresh anonymous mapping reads as zeros.
        map_aligned(mapping_bytes(layout.size()), false)
    }

    unsafe fn dealloc(&self, p: *mut u8, layout: Layout) {
        if !own_mapping(layout) {
            // SAFETY: forwarded with the caller's guarantees.
            return unsafe { System.dealloc(p, layout) };
        }
        // SAFETY: `p` is a mapping of this size made by `alloc` or
        // `alloc_zeroed`, which the caller gives up.
        unsafe { release(p, mapping_bytes(layout.size())) };
    }

    unsafe fn realloc(&self, p: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: the caller guarantees `new_size`, rounded up to the
        // alignment, does not overflow isize.
        let new_layout = unsafe { Layout::from_size_align_unchecked(new_size, layout.align()) };
        match (own_mapping(layout), own_mapping(new_layout)) {
            // SAFETY: forwarded with the caller's guarantees.
            (false, false) => unsafe { System.realloc(p, layout, new_size) },
            (true, true) => {
                let (old, new) = (mapping_bytes(layout.size()), mapping_bytes(new_size));
                // The mapping keeps its advice as it grows or moves (the
                // host's VMA carries it), so a zeroed array stays unadvised.
                // SAFETY: `p` is the caller's live mapping of `old` bytes.
                unsafe { remap(p, old, new) }
            }
            _ => {
                // Across the 2 MiB line: a new allocation of the other
                // kind, the contents copied, the old one freed.
                // SAFETY: `new_layout` has a non-zero size (it is at least
                // as large as one of the two, and one of them is 2 MiB).
                let q = unsafe { self.alloc(new_layout) };
                if !q.is_null() {
                    // SAFETY: both are valid for the smaller size and are
                    // distinct allocations.
                    unsafe { ptr::copy_nonoverlapping(p, q, layout.size().min(new_size)) };
                    // SAFETY: `p` was allocated with `layout`.
                    unsafe { self.dealloc(p, layout) };
                }
                q
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn layout(size: usize) -> Layout {
        Layout::from_size_align(size, 8).unwrap()
    }

    /// Writes a pattern over `len` bytes at `p` and returns it checked later.
    fn fill(p: *mut u8, len: usize) {
        for i in (0..len).step_by(4096) {
            // SAFETY: `p` is valid for `len` bytes.
            unsafe { p.add(i).write((i / 4096) as u8) };
        }
    }

    fn check(p: *mut u8, len: usize) {
        for i in (0..len).step_by(4096) {
            // SAFETY: `p` is valid for `len` bytes.
            assert_eq!(unsafe { p.add(i).read() }, (i / 4096) as u8, "byte {i}");
        }
    }

    #[test]
    fn large_allocations_are_aligned_and_keep_their_contents_when_they_grow() {
        assert!(
            enable(),
            "this test process allocates nothing large through HugeAlloc first"
        );
        let a = HugeAlloc;
        let small = 3 << 20;
        // SAFETY: a non-zero layout; the memory is freed with it below.
        let p = unsafe { a.alloc(layout(small)) };
        assert!(!p.is_null());
        assert_eq!(
            p as usize % HUGE_BYTES,
            0,
            "a large allocation starts on a 2 MiB boundary"
        );
        fill(p, small);
        // Grow far enough that the mapping may have to move.
        let big = 40 << 20;
        // SAFETY: `p` was allocated with `layout(small)`.
        let q = unsafe { a.realloc(p, layout(small), big) };
        assert!(!q.is_null());
        check(q, small);
        fill(q, big);
        // Shrink below 2 MiB: back to the system allocator, contents kept.
        // SAFETY: `q` was (re)allocated with size `big`.
        let r = unsafe { a.realloc(q, layout(big), 1 << 20) };
        assert!(!r.is_null());
        check(r, 1 << 20);
        // And back above.
        // SAFETY: `r` was reallocated with size 1 MiB.
        let s = unsafe { a.realloc(r, layout(1 << 20), 5 << 20) };
        check(s, 1 << 20);
        // SAFETY: `s` was reallocated with size 5 MiB.
        unsafe { a.dealloc(s, layout(5 << 20)) };
    }

    #[test]
    fn zeroed_large_allocations_read_as_zero() {
        enable();
        let a = HugeAlloc;
        let size = (4 << 20) + 100;
        // SAFETY: a non-zero layout; freed with it below.
        let p = unsafe { a.alloc_zeroed(layout(size)) };
        assert!(!p.is_null());
        // SAFETY: `p` is valid for `size` bytes.
        let bytes = unsafe { std::slice::from_raw_parts(p, size) };
        assert!(bytes.iter().step_by(997).all(|&b| b == 0));
        // SAFETY: allocated with this layout.
        unsafe { a.dealloc(p, layout(size)) };
    }

    #[test]
    fn the_cache_hands_back_the_smallest_mapping_that_fits_and_keeps_to_its_bounds() {
        let mut c = Cache {
            slots: [(0, 0); CACHE_SLOTS],
        };
        assert!(c.keep(0x1000_0000, 8 << 20));
        assert!(c.keep(0x2000_0000, 4 << 20));
        assert!(c.keep(0x3000_0000, 16 << 20));
        assert_eq!(c.take(3 << 20), Some((0x2000_0000, 4 << 20)));
        assert_eq!(c.take(9 << 20), Some((0x3000_0000, 16 << 20)));
        assert_eq!(c.take(9 << 20), None);
        // The byte bound: what is held plus the new one.
        assert!(!c.keep(0x4000_0000, CACHE_BYTES));
        // The slot bound.
        let mut full = Cache {
            slots: [(0x1000, 2 << 20); CACHE_SLOTS],
        };
        assert!(!full.keep(0x5000_0000, 2 << 20));
        assert_eq!(full.take(2 << 20), Some((0x1000, 2 << 20)));
        assert!(full.keep(0x5000_0000, 2 << 20));
    }

    #[test]
    fn a_freed_mapping_serves_the_next_allocation_that_fits() {
        enable();
        let a = HugeAlloc;
        let size = 6 << 20;
        // SAFETY: non-zero layouts, each freed with its own below.
        let p = unsafe { a.alloc(layout(size)) };
        fill(p, size);
        // SAFETY: allocated with this layout.
        unsafe { a.dealloc(p, layout(size)) };
        // A smaller one may take (a trimmed piece of) it; either way it is
        // aligned and usable over its whole length.
        // SAFETY: as above.
        let q = unsafe { a.alloc(layout(3 << 20)) };
        assert_eq!(q as usize % HUGE_BYTES, 0);
        fill(q, 3 << 20);
        check(q, 3 << 20);
        // SAFETY: allocated with this layout.
        unsafe { a.dealloc(q, layout(3 << 20)) };
    }

    #[test]
    fn small_and_over_aligned_allocations_go_to_the_system_allocator() {
        enable();
        assert!(!own_mapping(layout(HUGE_BYTES - 1)));
        assert!(own_mapping(layout(HUGE_BYTES)));
        assert!(!own_mapping(Layout::from_size_align(8 << 20, 4 << 20).unwrap()));
        assert_eq!(mapping_bytes(HUGE_BYTES + 1), 2 * HUGE_BYTES);
    }
}
