//! Where reported blocks go: the device side of `prdev->report`.

use largo_physmem::{Backing, BackingError};

/// A report the device could not take: the pages go back unflagged.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ReportError {
    #[error("discarding reported pages failed: {0}")]
    Discard(#[from] BackingError),
}

/// The device: receives batches of free, isolated blocks `(pfn, order)`
/// and gives their memory back to the host.
pub trait ReportSink: Send {
    fn name(&self) -> &'static str;
    /// `prdev->report` (virtio-balloon: queue the batch, kick the host,
    /// wait for its acknowledgement). An error leaves the blocks unreported.
    fn report(&mut self, blocks: &[(u64, u32)], backing: &mut dyn Backing) -> Result<(), ReportError>;
}

/// Counts what it is given (the `sim` backing has no host memory).
#[derive(Clone, Debug, Default)]
pub struct CountingSink {
    pub calls: u64,
    pub pages: u64,
}

impl ReportSink for CountingSink {
    fn name(&self) -> &'static str {
        "counting"
    }

    fn report(&mut self, blocks: &[(u64, u32)], _backing: &mut dyn Backing) -> Result<(), ReportError> {
        self.calls += 1;
        self.pages += blocks.iter().map(|&(_, order)| 1u64 << order).sum::<u64>();
        Ok(())
    }
}

/// Discards every reported block's host memory, as QEMU's
/// `virtio_balloon_handle_report` does with `ram_block_discard_range`
/// (MADV_DONTNEED on the `ram` arena): the host's resident memory really
/// drops, and the next touch faults in a zero page.
#[derive(Clone, Debug, Default)]
pub struct DiscardingSink {
    pub calls: u64,
    pub pages: u64,
}

impl ReportSink for DiscardingSink {
    fn name(&self) -> &'static str {
        "discarding"
    }

    fn report(&mut self, blocks: &[(u64, u32)], backing: &mut dyn Backing) -> Result<(), ReportError> {
        for &(pfn, order) in blocks {
            backing.discard(largo_types::Pfn(pfn), 1 << order)?;
        }
        self.calls += 1;
        self.pages += blocks.iter().map(|&(_, order)| 1u64 << order).sum::<u64>();
        Ok(())
    }
}
