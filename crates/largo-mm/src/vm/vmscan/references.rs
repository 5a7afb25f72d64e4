//! Whether a folio was used recently (mm/rmap.c `folio_referenced`,
//! mm/vmscan.c `folio_check_references`, v6.18 without MGLRU).

use super::super::lru::FolioRef;
use super::super::pgtable::Pte;
use super::super::rmap::Mappings;
use super::super::Vm;

/// `enum folio_references`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Verdict {
    Reclaim,
    /// `FOLIOREF_RECLAIM_CLEAN`: a file folio, referenced before but not now.
    ReclaimClean,
    Keep,
    Activate,
}

impl Vm {
    /// Every mapping of a folio: the anon rmap walk, or for shmem the
    /// VMAs of its inode (`rmap_walk_file`).
    pub(crate) fn folio_mappings(&self, r: FolioRef) -> Mappings {
        match r {
            FolioRef::Anon(k) => {
                if self.folios[k].is_anon() {
                    self.rmap_walk(k)
                } else {
                    Mappings::new()
                }
            }
            FolioRef::Shmem(k) => self.shmem_rmap_walk(k),
        }
    }

    /// `folio_referenced`: test and clear the young bit of every PTE and
    /// PMD mapping the folio; the result counts the VMAs in which at least
    /// one was young (not the entries). In memcg reclaim only mms of the
    /// target memcg are looked at (`mm_match_cgroup`).
    pub(crate) fn folio_referenced(&mut self, r: FolioRef, target_memcg: Option<usize>) -> u32 {
        let mut referenced_vmas: smallvec::SmallVec<[usize; 2]> = smallvec::SmallVec::new();
        for m in self.folio_mappings(r) {
            if target_memcg.is_some_and(|t| self.mms[m.mm].memcg as usize != t) {
                continue;
            }
            let entries = if m.level == 1 { 1 } else { m.nr as usize };
            let mut young = false;
            for i in 0..entries {
                let (t, idx) = (m.slot.table, m.slot.index + i);
                let e = self.pt.get(t, idx);
                if e.has(Pte::YOUNG) {
                    young = true;
                    self.pt.set_hw(t, idx, e.without(Pte::YOUNG));
                }
            }
            if young && !referenced_vmas.contains(&m.vma) {
                referenced_vmas.push(m.vma);
            }
        }
        referenced_vmas.len() as u32
    }

    /// `folio_check_references` on the inactive list.
    pub(crate) fn folio_check_references(&mut self, r: FolioRef, target_memcg: Option<usize>) -> Verdict {
        let n = self.folio_referenced(r, target_memcg);
        let was_referenced = std::mem::replace(&mut self.lru_state_mut(r).referenced, false);
        if n > 0 {
            self.lru_state_mut(r).referenced = true;
            if was_referenced || n > 1 {
                return Verdict::Activate;
            }
            return Verdict::Keep;
        }
        if was_referenced && self.folio_is_file_lru(r) {
            return Verdict::ReclaimClean;
        }
        Verdict::Reclaim
    }
}
