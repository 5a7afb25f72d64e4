//! The fragmenter (`largo host fragment`): fills most of this host's free
//! memory with base pages of anonymous memory (MADV_NOHUGEPAGE, written
//! page by page), then frees every other page (MADV_DONTNEED), leaving
//! free memory in order-0 holes between pages it keeps. The caller keeps
//! the returned window (and so the pages) alive for as long as the host
//! should stay fragmented.

use largo_physmem::host::{host_page_size, HostAdvice, HostError, Window};

use crate::hostshape::meminfo_bytes;

/// Memory the kernel could hand out without reclaim: MemFree (on this
/// host's lazily initialised kernel it already counts the memory deferred
/// init has not reached).
pub fn free_bytes() -> u64 {
    meminfo_bytes(
        &std::fs::read_to_string("/proc/meminfo").unwrap_or_default(),
        "MemFree:",
    )
}

/// MemAvailable: what can be filled without pushing the host into the
/// OOM killer.
pub fn available_bytes() -> u64 {
    meminfo_bytes(
        &std::fs::read_to_string("/proc/meminfo").unwrap_or_default(),
        "MemAvailable:",
    )
}

/// Makes this process the OOM killer's first choice, so that filling
/// memory never costs another process.
fn volunteer_for_oom() {
    let _ = std::fs::write("/proc/self/oom_score_adj", "1000");
}

/// Maps and writes `fill_bytes` in base pages, then frees every other
/// page. `progress(done, total)` counts pages written, then freed.
pub fn fragment(fill_bytes: u64, progress: &mut dyn FnMut(u64, u64)) -> Result<Window, HostError> {
    volunteer_for_oom();
    let page = host_page_size();
    let len = fill_bytes / (2 * page) * (2 * page);
    let mut w = Window::reserve(len, 2 << 20, 0)?;
    let base = w.base();
    w.map(base, len, true)?;
    w.madvise(base, len, HostAdvice::NoHugePage)?;
    let nr = len / page;
    let step = 1u64 << 15;
    let mut done = 0;
    while done < nr {
        let n = step.min(nr - done);
        w.touch((done..done + n).map(|i| base + i * page), true)?;
        done += n;
        progress(done, 2 * nr);
    }
    for i in (1..nr).step_by(2) {
        w.madvise(base + i * page, page, HostAdvice::DontNeed)?;
        if i % step == 1 {
            progress(nr + i, 2 * nr);
        }
    }
    progress(2 * nr, 2 * nr);
    Ok(w)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn meminfo_lines_are_read_in_bytes() {
        let text = "MemTotal:       24575148 kB\nMemFree:        13170848 kB\n";
        assert_eq!(meminfo_bytes(text, "MemFree:"), 13170848 * 1024);
        assert_eq!(meminfo_bytes(text, "Cached:"), 0);
    }
}
