//! The copy engine of page migration: how the data of a batch of folios
//! moves from their old frames to their new ones.
//!
//! - [`Vanilla`]: mainline `migrate_pages_batch`: each folio's data is
//!   copied inside its own move step (`folio_mc_copy`), one after another.
//! - [`BatchCopy`]: the seed series (Zi Yan, 2025): every folio of the
//!   batch is unmapped and its metadata moved with the copy skipped, then
//!   one pass copies the whole batch.
//! - [`MtCopy`]: the batch copy split across a pool of worker threads; a
//!   large folio is cut into chunks so several threads share it.
//!
//! [`CopyPolicy`] is the trait a DMA-like offload or an idle-CPU-only
//! policy would implement.

use largo_types::Pfn;

use crate::{Backing, BackingError};

/// One folio's copy: `nr_pages` frames from `src` to `dst`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CopyJob {
    pub src: Pfn,
    pub dst: Pfn,
    pub nr_pages: u64,
}

/// How a migration batch copies its data.
pub trait CopyPolicy: Send + Sync {
    /// The name in reports (`vanilla`, `batch`, `mt_4`).
    fn name(&self) -> String;
    /// Whether the data moves after every folio of the batch was moved
    /// (true) or inside each folio's move step (false).
    fn batched(&self) -> bool;
    /// Copies `jobs`: the whole batch if [`Self::batched`], else one folio.
    fn copy(&self, backing: &mut dyn Backing, jobs: &[CopyJob]) -> Result<(), BackingError>;
}

/// Mainline: one folio at a time, on the migrating thread.
#[derive(Clone, Copy, Debug, Default)]
pub struct Vanilla;

impl CopyPolicy for Vanilla {
    fn name(&self) -> String {
        "vanilla".into()
    }

    fn batched(&self) -> bool {
        false
    }

    fn copy(&self, backing: &mut dyn Backing, jobs: &[CopyJob]) -> Result<(), BackingError> {
        for j in jobs {
            backing.copy(j.src, j.dst, j.nr_pages)?;
        }
        Ok(())
    }
}

/// The seed's batch copy on the migrating thread.
#[derive(Clone, Copy, Debug, Default)]
pub struct BatchCopy;

impl CopyPolicy for BatchCopy {
    fn name(&self) -> String {
        "batch".into()
    }

    fn batched(&self) -> bool {
        true
    }

    fn copy(&self, backing: &mut dyn Backing, jobs: &[CopyJob]) -> Result<(), BackingError> {
        backing.copy_jobs(jobs, &Executor::SERIAL)
    }
}

/// The batch copy on `threads` workers (the calling thread and a pool of
/// `threads - 1` kept for the policy's life), folios cut into `chunk_pages`.
#[derive(Clone, Debug)]
pub struct MtCopy {
    pub threads: usize,
    pub chunk_pages: u64,
    pool: Option<std::sync::Arc<rayon::ThreadPool>>,
}

impl MtCopy {
    pub fn new(threads: usize, chunk_pages: u64) -> MtCopy {
        let threads = threads.max(1);
        let pool = (threads > 1)
            .then(|| rayon::ThreadPoolBuilder::new().num_threads(threads - 1).build().ok())
            .flatten()
            .map(std::sync::Arc::new);
        MtCopy {
            threads,
            chunk_pages: chunk_pages.max(1),
            pool,
        }
    }
}

impl CopyPolicy for MtCopy {
    fn name(&self) -> String {
        format!("mt_{}", self.threads)
    }

    fn batched(&self) -> bool {
        true
    }

    fn copy(&self, backing: &mut dyn Backing, jobs: &[CopyJob]) -> Result<(), BackingError> {
        // A worker costs a wake-up: each gets at least MIN_PAGES_PER_THREAD.
        let pages: u64 = jobs.iter().map(|j| j.nr_pages).sum();
        let threads = self.threads.min((pages / MIN_PAGES_PER_THREAD).max(1) as usize);
        let exec = Executor {
            threads,
            chunk_pages: self.chunk_pages,
            pool: self.pool.as_deref(),
        };
        backing.copy_jobs(jobs, &exec)
    }
}

/// The least work a copy thread is woken for: 64 base pages (256 KiB of
/// 4 KiB pages); a smaller batch runs on fewer threads.
pub const MIN_PAGES_PER_THREAD: u64 = 64;

/// Where a batch copy runs: `threads` shares of chunks of `chunk_pages`,
/// the first on the calling thread, the others on `pool`.
pub struct Executor<'a> {
    pub threads: usize,
    pub chunk_pages: u64,
    pub pool: Option<&'a rayon::ThreadPool>,
}

impl Executor<'_> {
    /// One share, on the calling thread.
    pub const SERIAL: Executor<'static> = Executor {
        threads: 1,
        chunk_pages: u64::MAX,
        pool: None,
    };
}

/// Checks that no destination range overlaps another destination or any
/// source (sources may overlap each other: they are only read).
pub fn check_disjoint(jobs: &[CopyJob]) -> Result<(), BackingError> {
    let mut dst: Vec<(u64, u64, usize)> = jobs
        .iter()
        .enumerate()
        .map(|(i, j)| (j.dst.0, j.dst.0 + j.nr_pages, i))
        .collect();
    dst.sort_unstable();
    for w in dst.windows(2) {
        if w[1].0 < w[0].1 {
            return Err(BackingError::Overlap(format!(
                "the destinations of jobs {} and {} overlap",
                w[0].2, w[1].2
            )));
        }
    }
    // The sources as a union of disjoint intervals, sorted.
    let mut src: Vec<(u64, u64)> = jobs.iter().map(|j| (j.src.0, j.src.0 + j.nr_pages)).collect();
    src.sort_unstable();
    let mut union: Vec<(u64, u64)> = Vec::with_capacity(src.len());
    for (s, e) in src {
        match union.last_mut() {
            Some(last) if s <= last.1 => last.1 = last.1.max(e),
            _ => union.push((s, e)),
        }
    }
    for &(s, e, i) in &dst {
        // The last source interval starting before this destination ends.
        let k = union.partition_point(|&(us, _)| us < e);
        if k > 0 && union[k - 1].1 > s {
            return Err(BackingError::Overlap(format!(
                "the destination of job {i} overlaps a source"
            )));
        }
    }
    Ok(())
}

/// Byte ranges `(src_offset, dst_offset, len)` of `jobs` cut into chunks
/// of at most `chunk_bytes`, then dealt into `threads` contiguous shares
/// of about equal bytes.
pub fn plan(jobs: &[CopyJob], page_size: u64, threads: usize, chunk_pages: u64) -> Vec<Vec<(u64, u64, u64)>> {
    let chunk_bytes = chunk_pages.saturating_mul(page_size).max(page_size);
    let mut chunks = Vec::new();
    for j in jobs {
        let (src, dst, len) = (j.src.0 * page_size, j.dst.0 * page_size, j.nr_pages * page_size);
        let mut at = 0;
        while at < len {
            let n = chunk_bytes.min(len - at);
            chunks.push((src + at, dst + at, n));
            at += n;
        }
    }
    let total: u64 = chunks.iter().map(|c| c.2).sum();
    let threads = threads.max(1);
    let share = total.div_ceil(threads as u64).max(1);
    let mut out: Vec<Vec<(u64, u64, u64)>> = vec![Vec::new(); threads];
    let mut done = 0u64;
    for c in chunks {
        let t = ((done / share) as usize).min(threads - 1);
        out[t].push(c);
        done += c.2;
    }
    out.retain(|v| !v.is_empty());
    out
}

/// `jobs` with each run of jobs contiguous in both source and destination
/// merged into one: the plain copy a memcpy of the same frames would make.
pub fn coalesce(jobs: &[CopyJob]) -> Vec<CopyJob> {
    let mut out: Vec<CopyJob> = Vec::with_capacity(jobs.len());
    for j in jobs {
        match out.last_mut() {
            Some(l) if l.src.0 + l.nr_pages == j.src.0 && l.dst.0 + l.nr_pages == j.dst.0 => {
                l.nr_pages += j.nr_pages;
            }
            _ => out.push(*j),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn job(src: u64, dst: u64, nr: u64) -> CopyJob {
        CopyJob {
            src: Pfn(src),
            dst: Pfn(dst),
            nr_pages: nr,
        }
    }

    #[test]
    fn coalesce_merges_runs_contiguous_on_both_sides() {
        let jobs = [
            job(0, 100, 1),
            job(1, 101, 1),
            job(2, 105, 1),
            job(3, 106, 2),
            job(9, 108, 1),
        ];
        assert_eq!(coalesce(&jobs), vec![job(0, 100, 2), job(2, 105, 3), job(9, 108, 1)]);
        assert!(coalesce(&[]).is_empty());
    }

    #[test]
    fn overlapping_destinations_are_refused() {
        assert!(check_disjoint(&[job(0, 100, 16), job(16, 116, 16)]).is_ok());
        assert!(
            check_disjoint(&[job(0, 100, 16), job(0, 200, 16)]).is_ok(),
            "shared sources"
        );
        assert!(
            check_disjoint(&[job(0, 100, 16), job(16, 108, 16)]).is_err(),
            "destinations"
        );
        assert!(
            check_disjoint(&[job(0, 100, 16), job(105, 200, 4)]).is_err(),
            "a source in a destination"
        );
        assert!(check_disjoint(&[job(0, 8, 16)]).is_err(), "a job onto itself");
    }

    #[test]
    fn plans_cover_every_byte_once() {
        let jobs = [job(0, 1000, 512), job(600, 2000, 1), job(700, 3000, 16)];
        for threads in 1..=5 {
            let p = plan(&jobs, 4096, threads, 16);
            assert!(p.len() <= threads);
            let mut all: Vec<_> = p.concat();
            all.sort_unstable();
            let total: u64 = all.iter().map(|c| c.2).sum();
            assert_eq!(total, (512 + 1 + 16) * 4096);
            assert!(all.iter().all(|c| c.2 <= 16 * 4096));
        }
    }
}
