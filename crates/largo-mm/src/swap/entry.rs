//! A swap entry (`swp_entry_t`): a device (swap type) and a slot offset.

/// `swp_entry(type, offset)`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct SwapEntry {
    /// The device (`swp_type`).
    pub ty: u8,
    /// The slot (`swp_offset`); slot 0 is the header and never handed out.
    pub offset: u64,
}

impl SwapEntry {
    pub fn new(ty: u8, offset: u64) -> SwapEntry {
        SwapEntry { ty, offset }
    }

    /// The entry `n` slots further on the same device.
    #[inline]
    pub fn plus(self, n: u64) -> SwapEntry {
        SwapEntry {
            ty: self.ty,
            offset: self.offset + n,
        }
    }
}
