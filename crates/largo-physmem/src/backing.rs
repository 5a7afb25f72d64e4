use largo_types::Pfn;

/// Which backing a machine runs on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BackingKind {
    /// Metadata only: page contents are not stored.
    Sim,
    /// Every page frame is backed by host memory.
    Ram,
}

impl BackingKind {
    pub fn name(self) -> &'static str {
        match self {
            BackingKind::Sim => "sim",
            BackingKind::Ram => "ram",
        }
    }

    pub fn from_name(name: &str) -> Option<BackingKind> {
        match name {
            "sim" => Some(BackingKind::Sim),
            "ram" => Some(BackingKind::Ram),
            _ => None,
        }
    }
}

/// Bytes each kind of operation touched, for the cost model and reports.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct BackingStats {
    pub zeroed_bytes: u64,
    pub copied_bytes: u64,
    pub discarded_bytes: u64,
    pub written_bytes: u64,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BackingError {
    #[error("page range {pfn}+{nr_pages} is outside the backing ({limit} pages)")]
    OutOfRange { pfn: Pfn, nr_pages: u64, limit: u64 },
    #[error("byte range at {pfn}+{offset} of {len} bytes is outside the backing")]
    ByteRangeOutOfRange { pfn: Pfn, offset: u64, len: u64 },
    #[error("the sim backing stores no page contents")]
    NoData,
    #[error("cannot map a {size_bytes}-byte host arena: {reason}")]
    Map { size_bytes: u64, reason: String },
    #[error("madvise(MADV_DONTNEED) failed: {0}")]
    Discard(String),
    #[error("copy jobs overlap: {0}")]
    Overlap(String),
}

/// The contents of the machine's page frames.
///
/// Mutating operations take `&mut self`: the engine owns the machine and
/// serialises them, so no two operations ever race on a page.
pub trait Backing: Send + Sync {
    fn kind(&self) -> BackingKind;
    /// Number of page frames covered (pfn 0 up to this, exclusive).
    fn nr_pages(&self) -> u64;
    /// Bytes per modelled base page.
    fn page_size(&self) -> u64;
    /// Fills `nr_pages` pages from `pfn` with zeroes (`clear_page`).
    fn zero(&mut self, pfn: Pfn, nr_pages: u64) -> Result<(), BackingError>;
    /// Zeroes each of the pages `pfns`, one after another: what a batch
    /// of order-0 allocations each zeroes (`clear_page` per page).
    fn zero_each(&mut self, pfns: &[u64]) -> Result<(), BackingError> {
        for &pfn in pfns {
            self.zero(Pfn(pfn), 1)?;
        }
        Ok(())
    }
    /// Copies `nr_pages` pages from `src` to `dst` (`copy_page`).
    fn copy(&mut self, src: Pfn, dst: Pfn, nr_pages: u64) -> Result<(), BackingError>;
    /// Gives the pages' host memory back; they read as zeroes afterwards.
    fn discard(&mut self, pfn: Pfn, nr_pages: u64) -> Result<(), BackingError>;
    /// Reads bytes starting `offset` bytes into page `pfn`.
    fn read(&self, pfn: Pfn, offset: u64, buf: &mut [u8]) -> Result<(), BackingError>;
    /// Writes bytes starting `offset` bytes into page `pfn`.
    fn write(&mut self, pfn: Pfn, offset: u64, data: &[u8]) -> Result<(), BackingError>;
    /// Host memory currently resident for the backing, if it has any.
    fn resident_bytes(&self) -> Option<u64>;
    /// Copies every job's pages, the work split as `exec` says.
    /// Destination ranges must not overlap each other or any source. The
    /// default copies one job after the other on the calling thread.
    fn copy_jobs(&mut self, jobs: &[crate::copy::CopyJob], exec: &crate::copy::Executor) -> Result<(), BackingError> {
        let _ = exec;
        crate::copy::check_disjoint(jobs)?;
        for j in jobs {
            self.copy(j.src, j.dst, j.nr_pages)?;
        }
        Ok(())
    }
    fn stats(&self) -> BackingStats;
}

/// Checks that `[pfn, pfn + nr_pages)` lies inside `limit` pages.
pub(crate) fn check_pages(pfn: Pfn, nr_pages: u64, limit: u64) -> Result<(), BackingError> {
    match pfn.0.checked_add(nr_pages) {
        Some(end) if end <= limit => Ok(()),
        _ => Err(BackingError::OutOfRange { pfn, nr_pages, limit }),
    }
}

/// Checks a byte range starting `offset` bytes into page `pfn`; returns
/// its byte offset into the arena.
pub(crate) fn check_bytes(
    pfn: Pfn,
    offset: u64,
    len: u64,
    page_size: u64,
    limit_pages: u64,
) -> Result<u64, BackingError> {
    let err = || BackingError::ByteRangeOutOfRange { pfn, offset, len };
    let start = pfn
        .0
        .checked_mul(page_size)
        .and_then(|b| b.checked_add(offset))
        .ok_or_else(err)?;
    let end = start.checked_add(len).ok_or_else(err)?;
    if end > limit_pages * page_size {
        return Err(err());
    }
    Ok(start)
}
