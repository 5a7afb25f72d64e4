//! Pointer chasing through a window's memory, for measuring what a TLB
//! miss costs on the host (`largo bench tlb`): a chain of 8-byte slots,
//! each holding the offset of the next, followed by dependent loads so
//! that every access waits for the one before.

use crate::host::{HostError, Window};

/// Bits of an offset that address an aligned 8-byte slot of a region of
/// `len` bytes (a power of two).
fn slot_mask(len: u64) -> u64 {
    (len - 1) & !7
}

impl Window {
    /// `[addr, addr + len)` lies in one live writable mapping and `len` is a
    /// power of two of at least 8 bytes.
    fn check_region(&self, addr: u64, len: u64) -> Result<(), HostError> {
        let whole = self
            .mapped_span(addr)
            .is_some_and(|(start, end, write)| write && start <= addr && addr + len <= end);
        if !whole || !len.is_power_of_two() || len < 8 || !addr.is_multiple_of(8) {
            return Err(HostError::NotMapped { addr });
        }
        Ok(())
    }

    /// Writes a cyclic chain through `slots` (byte offsets from `addr`, in
    /// visiting order): each slot holds the offset of the next, the last
    /// the first's.
    pub fn write_chain(&self, addr: u64, len: u64, slots: &[u64]) -> Result<(), HostError> {
        self.check_region(addr, len)?;
        let mask = slot_mask(len);
        for (i, &slot) in slots.iter().enumerate() {
            let next = slots[(i + 1) % slots.len()] & mask;
            let p = (addr + (slot & mask)) as *mut u64;
            // SAFETY: `addr + (slot & mask)` is an aligned 8-byte slot inside
            // `[addr, addr + len)`, which `check_region` found in one live
            // writable anonymous mapping of this window that no Rust
            // reference covers.
            unsafe { std::ptr::write_volatile(p, next) };
        }
        Ok(())
    }

    /// Writes `byte` over `[addr, addr + len)` (a memset, for measuring
    /// memory bandwidth); the range must lie in one live writable mapping.
    pub fn fill(&self, addr: u64, len: u64, byte: u8) -> Result<(), HostError> {
        let whole = self
            .mapped_span(addr)
            .is_some_and(|(start, end, write)| write && start <= addr && addr + len <= end);
        if !whole {
            return Err(HostError::NotMapped { addr });
        }
        // SAFETY: `[addr, addr + len)` lies in one live writable anonymous
        // mapping of this window (checked above) that no Rust reference
        // covers.
        unsafe { std::ptr::write_bytes(addr as *mut u8, byte, len as usize) };
        Ok(())
    }

    /// Follows the chain from offset `start` for `steps` dependent loads;
    /// returns the offset reached (so the loads cannot be elided).
    pub fn chase(&self, addr: u64, len: u64, start: u64, steps: u64) -> Result<u64, HostError> {
        self.check_region(addr, len)?;
        let mask = slot_mask(len);
        let mut off = start & mask;
        for _ in 0..steps {
            let p = (addr + off) as *const u64;
            // SAFETY: `off` is masked to an aligned 8-byte slot inside
            // `[addr, addr + len)`, one live anonymous mapping of this
            // window (checked above) that no Rust reference covers.
            off = unsafe { std::ptr::read_volatile(p) } & mask;
        }
        Ok(off)
    }
}
