use largo_types::Pfn;

use crate::backing::{check_bytes, check_pages};
use crate::{Backing, BackingError, BackingKind, BackingStats};

/// Metadata-only backing: operations are range-checked and counted, page
/// contents are not kept. Writes are accepted and dropped; reads fail with
/// [`BackingError::NoData`].
#[derive(Debug)]
pub struct SimBacking {
    nr_pages: u64,
    page_size: u64,
    stats: BackingStats,
}

impl SimBacking {
    pub fn new(nr_pages: u64, page_size: u64) -> SimBacking {
        SimBacking {
            nr_pages,
            page_size,
            stats: BackingStats::default(),
        }
    }
}

impl Backing for SimBacking {
    fn kind(&self) -> BackingKind {
        BackingKind::Sim
    }

    fn nr_pages(&self) -> u64 {
        self.nr_pages
    }

    fn page_size(&self) -> u64 {
        self.page_size
    }

    fn zero(&mut self, pfn: Pfn, nr_pages: u64) -> Result<(), BackingError> {
        check_pages(pfn, nr_pages, self.nr_pages)?;
        self.stats.zeroed_bytes += nr_pages * self.page_size;
        Ok(())
    }

    /// Checked and counted at once.
    fn zero_each(&mut self, pfns: &[u64]) -> Result<(), BackingError> {
        if let Some(&pfn) = pfns.iter().find(|&&p| p >= self.nr_pages) {
            return Err(BackingError::OutOfRange {
                pfn: Pfn(pfn),
                nr_pages: 1,
                limit: self.nr_pages,
            });
        }
        self.stats.zeroed_bytes += pfns.len() as u64 * self.page_size;
        Ok(())
    }

    fn copy(&mut self, src: Pfn, dst: Pfn, nr_pages: u64) -> Result<(), BackingError> {
        check_pages(src, nr_pages, self.nr_pages)?;
        check_pages(dst, nr_pages, self.nr_pages)?;
        self.stats.copied_bytes += nr_pages * self.page_size;
        Ok(())
    }

    fn discard(&mut self, pfn: Pfn, nr_pages: u64) -> Result<(), BackingError> {
        check_pages(pfn, nr_pages, self.nr_pages)?;
        self.stats.discarded_bytes += nr_pages * self.page_size;
        Ok(())
    }

    fn read(&self, pfn: Pfn, offset: u64, buf: &mut [u8]) -> Result<(), BackingError> {
        check_bytes(pfn, offset, buf.len() as u64, self.page_size, self.nr_pages)?;
        Err(BackingError::NoData)
    }

    fn write(&mut self, pfn: Pfn, offset: u64, data: &[u8]) -> Result<(), BackingError> {
        check_bytes(pfn, offset, data.len() as u64, self.page_size, self.nr_pages)?;
        self.stats.written_bytes += data.len() as u64;
        Ok(())
    }

    fn resident_bytes(&self) -> Option<u64> {
        None
    }

    fn stats(&self) -> BackingStats {
        self.stats
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn zero_each_counts_every_page_and_refuses_one_outside() {
        let mut b = SimBacking::new(16, 4096);
        b.zero_each(&[3, 0, 15]).unwrap();
        assert_eq!(b.stats().zeroed_bytes, 3 * 4096);
        let err = b.zero_each(&[1, 16, 2]).unwrap_err();
        assert!(matches!(err, BackingError::OutOfRange { pfn: Pfn(16), .. }), "{err:?}");
        assert_eq!(b.stats().zeroed_bytes, 3 * 4096, "a refused batch counts nothing");
        // The same as zeroing each page on its own.
        let mut one = SimBacking::new(16, 4096);
        for p in [3, 0, 15] {
            one.zero(Pfn(p), 1).unwrap();
        }
        assert_eq!(one.stats(), b.stats());
    }
}
