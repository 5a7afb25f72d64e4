//! Behaviours that differ between the host kernel builds largo is
//! validated on, found by asking the host.
//!
//! The development fleet runs more than one 6.18.44 build. They agree on
//! every vmstat and mTHP counter of the scenario suite but one charges a
//! memcg differently: for a charge whose gfp has no reclaim bits (an mTHP
//! fault's `GFP_TRANSHUGE_LIGHT`), the fc-v595 build charges exactly the
//! folio's pages, as 6.18's `try_charge_memcg` does, while the fc-v769
//! build tries the 64-page batch first and refills the stock. The model
//! has both (`largo/memcg_thp_charge_batch`); validation of a memcg
//! machine uses the one this host runs.

use std::sync::OnceLock;

use crate::scenario::Scenario;
use crate::validate::{validate, ValidateError};

/// The model knob selecting the behaviour.
pub const MEMCG_THP_CHARGE_BATCH: &str = "largo/memcg_thp_charge_batch";

/// The discriminating case: 16 MiB of 64K folios written in a memcg and
/// unmapped. What the stock holds at the end differs by 48 pages between
/// the two behaviours (`memory.usage_in_bytes` 63 vs 15 pages).
const PROBE: &str = "largo-trace 1
@scenario probe-memcg-thp-charge
@describe which memcg charge behaviour of mTHP faults this host kernel build has
@machine --swap 1G --memcg-max 32M
1 mmap 0x7f0000000000 16M rw- private,anonymous
1 touch 0x7f0000000000 16M w
1 munmap 0x7f0000000000 16M
1 exit
";

static MEMCG_THP_BATCH: OnceLock<bool> = OnceLock::new();

/// Whether this host's memcg charges of mTHP faults try the batch first
/// (probed once per process: a native run of [`PROBE`] compared with the
/// model under each behaviour).
pub fn memcg_thp_charge_batch() -> Result<bool, ValidateError> {
    if let Some(&b) = MEMCG_THP_BATCH.get() {
        return Ok(b);
    }
    let s = Scenario::parse(PROBE, "probe-memcg-thp-charge").expect("the probe scenario parses");
    // Its errors are the probe's, never "cannot run here": a memcg case that
    // uses no 64K folio is not this probe's case.
    let probe_err = |e: &dyn std::fmt::Display| ValidateError::Config(format!("the memcg probe (host build): {e}"));
    let mut found = None;
    for batch in [false, true] {
        let flags = format!("--thp 64K --set {MEMCG_THP_CHARGE_BATCH}={}", u8::from(batch));
        let config = s.machine_for(&flags).map_err(|e| probe_err(&e))?;
        let v = validate(&config, &s.trace.events).map_err(|e| probe_err(&e))?;
        // Judged on what the two behaviours leave different: the usage the
        // charge stock keeps at the end (63 vs 15 pages).
        if v.rows.iter().filter(|r| r.counter == "memcg/usage").all(|r| r.agrees()) {
            found = Some(batch);
            break;
        }
    }
    let batch = found.ok_or_else(|| {
        probe_err(
            &"this host's memcg charging of mTHP faults matches neither modelled kernel build \
              (exact charges or the batch first); see largo/memcg_thp_charge_batch",
        )
    })?;
    Ok(*MEMCG_THP_BATCH.get_or_init(|| batch))
}
