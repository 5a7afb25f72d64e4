//! zswap (mm/zswap.c, v6.18): a compressed cache in front of the swap
//! devices. A folio of any order is stored page by page, all or nothing,
//! when zswap is enabled and its pool is below `max_pool_percent` of RAM
//! (with the `accept_threshold_percent` hysteresis); a load serves one
//! page. Once zswap has ever been enabled, large folios are never swapped
//! in whole (`zswap_never_enabled`).
//!
//! The model does not compress: a stored page takes
//! [`Zswap::compressed_bytes`] in the pool, rounded up to zsmalloc's
//! 16-byte size classes (at least 32 bytes); the pool's size in pages is
//! that total divided by the page size. A page the workload never wrote
//! does not reach zswap (the swap zero map takes it first).

use rustc_hash::FxHashMap as HashMap;

use super::SwapEntry;

/// Bytes an lzo-compressed page of a largo workload takes (a page holding
/// one non-zero byte per 4 KiB): the figure zram's `mm_stat` gives for
/// such pages on the development host (`compr_data_size / pages_stored`).
pub const DEFAULT_COMPRESSED_BYTES: u32 = 48;

/// zswap's counters (debugfs `/sys/kernel/debug/zswap/`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct ZswapStats {
    /// `pool_limit_hit`.
    pub pool_limit_hit: u64,
    /// `written_back_pages`.
    pub written_back_pages: u64,
}

/// The zswap state.
#[derive(Clone, Debug)]
pub struct Zswap {
    /// `zswap.enabled`.
    pub enabled: bool,
    /// `zswap_ever_enabled`: set when zswap is first set up, never cleared.
    pub ever_enabled: bool,
    /// `max_pool_percent` (default 20).
    pub max_pool_percent: u32,
    /// `accept_threshold_percent` (default 90).
    pub accept_threshold_percent: u32,
    /// `zswap_pool_reached_full`.
    reached_full: bool,
    /// Compressed length of each stored page, by slot.
    entries: HashMap<SwapEntry, u32>,
    /// zsmalloc bytes in use (size-class rounded).
    pool_bytes: u64,
    /// Bytes a stored page takes before size-class rounding.
    pub compressed_bytes: u32,
    pub stats: ZswapStats,
    page_size: u64,
}

impl Default for Zswap {
    fn default() -> Self {
        Zswap {
            enabled: false,
            ever_enabled: false,
            max_pool_percent: 20,
            accept_threshold_percent: 90,
            reached_full: false,
            entries: HashMap::default(),
            pool_bytes: 0,
            compressed_bytes: DEFAULT_COMPRESSED_BYTES,
            stats: ZswapStats::default(),
            page_size: 4096,
        }
    }
}

/// zsmalloc's size class for `len` bytes (16-byte steps from 32).
fn size_class(len: u32, page_size: u64) -> u64 {
    (len.max(32) as u64).next_multiple_of(16).min(page_size)
}

impl Zswap {
    pub fn set_page_size(&mut self, page_size: u64) {
        self.page_size = page_size;
    }

    /// A write of `zswap/enabled`: even `N` sets zswap up the first time.
    pub fn set_enabled(&mut self, on: bool) {
        self.enabled = on;
        self.ever_enabled = true;
    }

    /// `zswap_never_enabled`.
    pub fn never_enabled(&self) -> bool {
        !self.ever_enabled
    }

    /// `zswap_total_pages`: the pool's size in pages.
    pub fn pool_pages(&self) -> u64 {
        self.pool_bytes.div_ceil(self.page_size)
    }

    /// `stored_pages`.
    pub fn stored_pages(&self) -> u64 {
        self.entries.len() as u64
    }

    /// `zswap_check_limits`: whether the pool is full for `totalram`
    /// pages of RAM (hysteresis between the limit and the accept threshold).
    fn check_limits(&mut self, totalram: u64) -> bool {
        let max = totalram * self.max_pool_percent as u64 / 100;
        let thr = max * self.accept_threshold_percent as u64 / 100;
        let cur = self.pool_pages();
        if cur >= max {
            self.stats.pool_limit_hit += 1;
            self.reached_full = true;
        } else if self.reached_full && cur <= thr {
            self.reached_full = false;
        }
        self.reached_full
    }

    /// `zswap_store` of a folio written to `nr` slots from `entry`: true
    /// when every page went into the pool. A refused folio leaves no
    /// entry behind (stale ones are dropped too).
    pub fn store(&mut self, entry: SwapEntry, nr: u64, totalram: u64) -> bool {
        let ok = self.enabled && !self.check_limits(totalram);
        for i in 0..nr {
            self.invalidate(entry.plus(i));
        }
        if !ok {
            return false;
        }
        let len = self.compressed_bytes;
        for i in 0..nr {
            self.entries.insert(entry.plus(i), len);
            self.pool_bytes += size_class(len, self.page_size);
        }
        true
    }

    /// The slot's page is in the pool.
    pub fn contains(&self, entry: SwapEntry) -> bool {
        self.entries.contains_key(&entry)
    }

    /// `zswap_invalidate`: the slot was freed or rewritten.
    pub fn invalidate(&mut self, entry: SwapEntry) {
        if let Some(len) = self.entries.remove(&entry) {
            self.pool_bytes -= size_class(len, self.page_size);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_pool_refuses_at_its_limit_until_it_drains_below_the_threshold() {
        let mut z = Zswap::default();
        z.set_enabled(true);
        z.compressed_bytes = 4096;
        let totalram = 100;
        // 20 pages of pool at most: stores of one page succeed until then.
        let mut n = 0;
        while z.store(SwapEntry::new(0, 1 + n), 1, totalram) {
            n += 1;
        }
        assert_eq!(n, 20);
        assert_eq!(z.stats.pool_limit_hit, 1);
        // Below the limit but above 90% of it: still refused.
        z.invalidate(SwapEntry::new(0, 1));
        assert!(!z.store(SwapEntry::new(0, 100), 1, totalram));
        z.invalidate(SwapEntry::new(0, 2));
        assert!(
            z.store(SwapEntry::new(0, 101), 1, totalram),
            "18 pages is at the threshold"
        );
    }

    #[test]
    fn a_disabled_zswap_stores_nothing_but_stays_ever_enabled() {
        let mut z = Zswap::default();
        assert!(z.never_enabled());
        z.set_enabled(false);
        assert!(!z.never_enabled());
        assert!(!z.store(SwapEntry::new(0, 1), 4, 1 << 20));
    }
}
