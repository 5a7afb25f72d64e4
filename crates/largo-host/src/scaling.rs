//! The host side of `largo bench contention`: will-it-scale page_fault1
//! run by N tasks at once (processes or threads), to measure how the
//! kernel time per page changes from one CPU to two.

use std::path::Path;
use std::process::Command;

use largo_physmem::host::{rusage_children, rusage_self, HostError, Window};

/// One task's loop: `iterations` times, map `size` bytes, write one byte
/// per 4 KiB page, unmap.
pub fn page_fault1_task(size: u64, iterations: u64) -> Result<(), HostError> {
    let mut w = Window::reserve(size, 2 << 20, 0)?;
    let base = w.base();
    for _ in 0..iterations {
        w.map(base, size, true)?;
        w.touch((0..size / 4096).map(|i| base + i * 4096), true)?;
        w.unmap(base, size)?;
    }
    Ok(())
}

/// Why a measurement failed.
#[derive(Debug, thiserror::Error)]
pub enum ScalingError {
    #[error(transparent)]
    Host(#[from] HostError),
    #[error("a task process failed: {0}")]
    Child(String),
}

/// Kernel time (ns, `getrusage` stime) of `n` threads of this process
/// each running [`page_fault1_task`] at once.
pub fn threads(n: usize, size: u64, iterations: u64) -> Result<u64, ScalingError> {
    let before = rusage_self().stime_ns;
    let results: Vec<Result<(), HostError>> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..n)
            .map(|_| s.spawn(move || page_fault1_task(size, iterations)))
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().expect("a task thread panicked"))
            .collect()
    });
    for r in results {
        r?;
    }
    Ok(rusage_self().stime_ns - before)
}

/// Kernel time (ns) of `n` processes, each `exe args` (which runs one
/// [`page_fault1_task`]), started together and waited for.
pub fn processes(n: usize, exe: &Path, args: &[String]) -> Result<u64, ScalingError> {
    let before = rusage_children().stime_ns;
    let mut children = Vec::new();
    for _ in 0..n {
        children.push(
            Command::new(exe)
                .args(args)
                .spawn()
                .map_err(|e| ScalingError::Child(e.to_string()))?,
        );
    }
    for mut c in children {
        let status = c.wait().map_err(|e| ScalingError::Child(e.to_string()))?;
        if !status.success() {
            return Err(ScalingError::Child(format!("exited with {status}")));
        }
    }
    Ok(rusage_children().stime_ns - before)
}
