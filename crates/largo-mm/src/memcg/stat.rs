//! The v1 `memory.stat` events of a memcg (`memcg1_stat_format`): folios
//! charged and uncharged (one per folio, whatever its size) and faults.

/// Event counters of `memory.stat`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct MemcgStat {
    /// `pgpgin`: folios charged.
    pub pgpgin: u64,
    /// `pgpgout`: folios uncharged or swapped out.
    pub pgpgout: u64,
    pub pgfault: u64,
    pub pgmajfault: u64,
}
