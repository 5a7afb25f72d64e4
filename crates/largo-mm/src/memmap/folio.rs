use largo_types::Pfn;

/// A handle to an allocated folio: its head pfn and order. The state lives
/// in the memmap; the handle is a plain value.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Folio {
    pub pfn: Pfn,
    pub order: u32,
}

impl Folio {
    #[inline]
    pub fn nr_pages(&self) -> u64 {
        1 << self.order
    }

    /// First pfn after the folio.
    #[inline]
    pub fn end_pfn(&self) -> Pfn {
        self.pfn + self.nr_pages()
    }
}
