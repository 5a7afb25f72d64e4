//! Real host memory behind every modelled page frame: one anonymous
//! `MAP_NORESERVE` arena, so a large machine costs only what it touches, and
//! discard is `madvise(MADV_DONTNEED)`, so host memory really goes back.

use std::ptr::NonNull;

use largo_types::Pfn;

use crate::backing::{check_bytes, check_pages};
use crate::copy::{CopyJob, Executor};

/// The arena's base address, handed to the copy threads.
#[derive(Clone, Copy)]
struct ArenaPtr(*mut u8);

// SAFETY: the pointer is only used inside `copy_jobs`, whose threads write
// disjoint byte ranges of the arena while `&mut RamBacking` is held.
unsafe impl Send for ArenaPtr {}
// SAFETY: as for Send: shared between the copy threads of one `copy_jobs`
// call, each writing only its own disjoint ranges.
unsafe impl Sync for ArenaPtr {}
use crate::{Backing, BackingError, BackingKind, BackingStats};

/// Bytes of the arena `mincore` is asked about at once when counting
/// resident memory (bounds the temporary vector to 256 KiB).
const MINCORE_CHUNK_BYTES: usize = 1 << 30;

pub struct RamBacking {
    /// Start of the arena; `len_bytes` bytes are mapped read-write.
    base: NonNull<u8>,
    len_bytes: usize,
    nr_pages: u64,
    page_size: u64,
    host_page_size: usize,
    stats: BackingStats,
}

// SAFETY: the arena is plain anonymous memory owned by this value alone;
// nothing in it is tied to the creating thread.
unsafe impl Send for RamBacking {}
// SAFETY: `&self` methods only read the arena; every write needs `&mut self`,
// so shared references never observe a concurrent write.
unsafe impl Sync for RamBacking {}

impl RamBacking {
    /// Maps an arena for `nr_pages` pages of `page_size` bytes.
    pub fn new(nr_pages: u64, page_size: u64) -> Result<RamBacking, BackingError> {
        let size_bytes = nr_pages.saturating_mul(page_size);
        let map_err = |reason: String| BackingError::Map { size_bytes, reason };
        let len_bytes = usize::try_from(size_bytes)
            .map_err(|_| map_err("larger than the address space".into()))?
            .max(1);
        // SAFETY: anonymous private mapping at a kernel-chosen address; no
        // existing memory is affected. The result is checked for MAP_FAILED.
        let ptr = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len_bytes,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE,
                -1,
                0,
            )
        };
        if ptr == libc::MAP_FAILED {
            return Err(map_err(std::io::Error::last_os_error().to_string()));
        }
        let base = NonNull::new(ptr.cast::<u8>()).ok_or_else(|| map_err("null mapping".into()))?;
        // SAFETY: sysconf has no memory-safety preconditions.
        let host_page_size = unsafe { libc::sysconf(libc::_SC_PAGESIZE) }.max(4096) as usize;
        Ok(RamBacking {
            base,
            len_bytes,
            nr_pages,
            page_size,
            host_page_size,
            stats: BackingStats::default(),
        })
    }

    fn byte_offset(&self, pfn: Pfn) -> usize {
        (pfn.0 * self.page_size) as usize
    }

    fn byte_len(&self, nr_pages: u64) -> usize {
        (nr_pages * self.page_size) as usize
    }

    /// `madvise(MADV_DONTNEED)` on whole host pages inside `[start, start+len)`
    /// and zero-fill of any partial host page at either end, so the whole
    /// range reads back as zeroes.
    fn discard_bytes(&mut self, start: usize, len: usize) -> Result<(), BackingError> {
        let hp = self.host_page_size;
        let inner_start = start.div_ceil(hp) * hp;
        let inner_end = ((start + len) / hp * hp).max(inner_start);
        if inner_end > inner_start {
            // SAFETY: [inner_start, inner_end) lies inside the arena (the
            // caller checked [start, start+len)) and is host-page aligned;
            // MADV_DONTNEED on private anonymous memory only drops contents.
            let rc = unsafe {
                libc::madvise(
                    self.base.as_ptr().add(inner_start).cast(),
                    inner_end - inner_start,
                    libc::MADV_DONTNEED,
                )
            };
            if rc != 0 {
                return Err(BackingError::Discard(std::io::Error::last_os_error().to_string()));
            }
        }
        let head_len = inner_start.min(start + len) - start;
        self.fill_zero(start, head_len);
        if inner_end > inner_start {
            self.fill_zero(inner_end, start + len - inner_end);
        }
        Ok(())
    }

    fn fill_zero(&mut self, start: usize, len: usize) {
        if len == 0 {
            return;
        }
        debug_assert!(start + len <= self.len_bytes);
        // SAFETY: the range was checked against the arena by the caller;
        // `&mut self` guarantees no other access to the arena meanwhile.
        unsafe { std::ptr::write_bytes(self.base.as_ptr().add(start), 0, len) };
    }
}

impl Drop for RamBacking {
    fn drop(&mut self) {
        // SAFETY: unmaps exactly the mapping created in `new`; no references
        // into it outlive `self`.
        unsafe { libc::munmap(self.base.as_ptr().cast(), self.len_bytes) };
    }
}

impl Backing for RamBacking {
    fn kind(&self) -> BackingKind {
        BackingKind::Ram
    }

    fn nr_pages(&self) -> u64 {
        self.nr_pages
    }

    fn page_size(&self) -> u64 {
        self.page_size
    }

    fn zero(&mut self, pfn: Pfn, nr_pages: u64) -> Result<(), BackingError> {
        check_pages(pfn, nr_pages, self.nr_pages)?;
        self.fill_zero(self.byte_offset(pfn), self.byte_len(nr_pages));
        self.stats.zeroed_bytes += nr_pages * self.page_size;
        Ok(())
    }

    fn copy(&mut self, src: Pfn, dst: Pfn, nr_pages: u64) -> Result<(), BackingError> {
        check_pages(src, nr_pages, self.nr_pages)?;
        check_pages(dst, nr_pages, self.nr_pages)?;
        let len = self.byte_len(nr_pages);
        // SAFETY: both ranges were checked to lie inside the arena; `copy`
        // (memmove) is correct even if they overlap; `&mut self` excludes
        // any other access meanwhile.
        unsafe {
            std::ptr::copy(
                self.base.as_ptr().add(self.byte_offset(src)),
                self.base.as_ptr().add(self.byte_offset(dst)),
                len,
            )
        };
        self.stats.copied_bytes += len as u64;
        Ok(())
    }

    fn copy_jobs(&mut self, jobs: &[CopyJob], exec: &Executor) -> Result<(), BackingError> {
        for j in jobs {
            check_pages(j.src, j.nr_pages, self.nr_pages)?;
            check_pages(j.dst, j.nr_pages, self.nr_pages)?;
        }
        crate::copy::check_disjoint(jobs)?;
        let threads = if exec.pool.is_some() { exec.threads } else { 1 };
        let shares = crate::copy::plan(jobs, self.page_size, threads, exec.chunk_pages);
        let base = ArenaPtr(self.base.as_ptr());
        let run = move |share: &[(u64, u64, u64)]| {
            let base = base;
            for &(src, dst, len) in share {
                // SAFETY: every job's source and destination lie inside the
                // arena (checked above); no destination overlaps another
                // destination or any source (check_disjoint), and the plan
                // gives each byte of each job to exactly one share, so no
                // two threads write the same byte and none reads a byte
                // another writes. `&mut self` keeps every other access out
                // until all shares are done (the scope below joins them).
                unsafe {
                    std::ptr::copy_nonoverlapping(base.0.add(src as usize), base.0.add(dst as usize), len as usize)
                };
            }
        };
        match (exec.pool, shares.split_first()) {
            (Some(pool), Some((first, rest))) if !rest.is_empty() => pool.scope(|s| {
                for share in rest {
                    s.spawn(move |_| run(share));
                }
                run(first);
            }),
            _ => shares.iter().for_each(|share| run(share)),
        }
        self.stats.copied_bytes += jobs.iter().map(|j| j.nr_pages * self.page_size).sum::<u64>();
        Ok(())
    }

    fn discard(&mut self, pfn: Pfn, nr_pages: u64) -> Result<(), BackingError> {
        check_pages(pfn, nr_pages, self.nr_pages)?;
        self.discard_bytes(self.byte_offset(pfn), self.byte_len(nr_pages))?;
        self.stats.discarded_bytes += nr_pages * self.page_size;
        Ok(())
    }

    fn read(&self, pfn: Pfn, offset: u64, buf: &mut [u8]) -> Result<(), BackingError> {
        let start = check_bytes(pfn, offset, buf.len() as u64, self.page_size, self.nr_pages)?;
        // SAFETY: the byte range was checked to lie inside the arena and
        // `buf` is a distinct Rust allocation, so the copy cannot overlap.
        unsafe { std::ptr::copy_nonoverlapping(self.base.as_ptr().add(start as usize), buf.as_mut_ptr(), buf.len()) };
        Ok(())
    }

    fn write(&mut self, pfn: Pfn, offset: u64, data: &[u8]) -> Result<(), BackingError> {
        let start = check_bytes(pfn, offset, data.len() as u64, self.page_size, self.nr_pages)?;
        // SAFETY: the byte range was checked to lie inside the arena and
        // `data` is a distinct Rust allocation; `&mut self` excludes readers.
        unsafe { std::ptr::copy_nonoverlapping(data.as_ptr(), self.base.as_ptr().add(start as usize), data.len()) };
        self.stats.written_bytes += data.len() as u64;
        Ok(())
    }

    fn resident_bytes(&self) -> Option<u64> {
        let hp = self.host_page_size;
        let mut resident_pages = 0u64;
        let mut vec = vec![0u8; MINCORE_CHUNK_BYTES / hp];
        let mut start = 0usize;
        while start < self.len_bytes {
            let len = MINCORE_CHUNK_BYTES.min(self.len_bytes - start);
            let nr = len.div_ceil(hp);
            // SAFETY: [start, start+len) is inside the mapping (start is a
            // multiple of the chunk size, hence host-page aligned) and `vec`
            // has room for one byte per host page of the range.
            let rc = unsafe { libc::mincore(self.base.as_ptr().add(start).cast(), len, vec.as_mut_ptr().cast()) };
            if rc != 0 {
                return None;
            }
            resident_pages += vec[..nr].iter().filter(|b| **b & 1 != 0).count() as u64;
            start += len;
        }
        Some(resident_pages * hp as u64)
    }

    fn stats(&self) -> BackingStats {
        self.stats
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const PAGE: u64 = 4096;

    #[test]
    fn zero_copy_read_write_round_trip() {
        let mut ram = RamBacking::new(16, PAGE).unwrap();
        ram.write(Pfn(3), 100, b"largo").unwrap();
        ram.copy(Pfn(3), Pfn(9), 1).unwrap();
        let mut buf = [0u8; 5];
        ram.read(Pfn(9), 100, &mut buf).unwrap();
        assert_eq!(&buf, b"largo");
        ram.zero(Pfn(9), 1).unwrap();
        ram.read(Pfn(9), 100, &mut buf).unwrap();
        assert_eq!(buf, [0; 5]);
        assert_eq!(ram.stats().copied_bytes, PAGE);
    }

    #[test]
    fn discard_returns_host_memory_and_reads_zero() {
        let nr_pages = 1024;
        let mut ram = RamBacking::new(nr_pages, PAGE).unwrap();
        let before = ram.resident_bytes().unwrap();
        for pfn in 0..nr_pages {
            ram.write(Pfn(pfn), 0, &[0xAB]).unwrap();
        }
        let touched = ram.resident_bytes().unwrap();
        assert!(touched >= before + nr_pages * PAGE, "{before} -> {touched}");
        ram.discard(Pfn(0), nr_pages).unwrap();
        let after = ram.resident_bytes().unwrap();
        assert!(after <= before, "discard kept memory: {after} > {before}");
        let mut buf = [0xFFu8; 1];
        ram.read(Pfn(7), 0, &mut buf).unwrap();
        assert_eq!(buf, [0]);
    }

    #[test]
    fn out_of_range_is_an_error() {
        let mut ram = RamBacking::new(4, PAGE).unwrap();
        assert!(ram.zero(Pfn(3), 2).is_err());
        assert!(ram.copy(Pfn(0), Pfn(4), 1).is_err());
        assert!(ram.write(Pfn(3), PAGE - 1, &[1, 2]).is_err());
        let mut buf = [0u8; 1];
        assert!(ram.read(Pfn(u64::MAX), 0, &mut buf).is_err());
    }

    #[test]
    fn huge_sparse_arena_costs_nothing_until_touched() {
        // 64 GiB of modelled memory on a 24 GiB machine: NORESERVE makes it free.
        let ram = RamBacking::new(16 << 20, PAGE).unwrap();
        assert!(ram.resident_bytes().unwrap() < (64 << 20));
    }
}
