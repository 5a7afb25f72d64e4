//! A process kept on khugepaged's list while the host runs a validation
//! case: a stopped child holding one PMD-mapped THP in a MADV_HUGEPAGE
//! range. With it, khugepaged never idles, so a case's own registration
//! (its first PMD fault, MADV_HUGEPAGE) does not wake it at a moment
//! timing decides (mm/khugepaged.c `__khugepaged_enter` wakes only an
//! empty list); it scans when a case wakes it (`khugepaged_wake`) or
//! when its `scan_sleep_millisecs` timer ends. Its range is PMD-mapped,
//! so scanning it changes no counter. The model is told
//! (`Khugepaged::external_mm`). Dropping it kills the child.

use largo_physmem::host::{Forked, HostAdvice, StoppedChild, Window};
use largo_physmem::native::{self, End, Placement, Step};

use crate::native::NativeError;

pub struct Sentinel {
    _child: Option<StoppedChild>,
    _window: Window,
}

impl Sentinel {
    /// Starts it (a PMD of `pmd_size` bytes; nothing happens where PMD
    /// THPs are off, as khugepaged then does not run).
    pub fn start(pmd_size: u64) -> Result<Sentinel, NativeError> {
        let mut window = Window::reserve(2 * pmd_size, pmd_size, 0)?;
        let base = window.base();
        let steps = [
            Step::Map {
                addr: base,
                len: pmd_size,
                write: true,
                shared: false,
            },
            Step::Advise {
                addr: base,
                len: pmd_size,
                advice: HostAdvice::HugePage,
            },
            Step::Fault {
                addr: base,
                write: true,
            },
        ];
        let place = Placement {
            delta: 0,
            work: None,
            cpu: None,
            cgroup: None,
            khugepaged: None,
        };
        let child = match native::run_forked(&mut window, &steps, place, End::Stop)? {
            Forked::Stopped(c) => Some(c),
            Forked::Exited(_) => None,
        };
        Ok(Sentinel {
            _child: child,
            _window: window,
        })
    }
}
