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

/// Memory write bandwidth, GB/s, of `threads` threads each filling its own
/// `bytes` buffer `passes` times at once (after one untimed pass that
/// faults the buffers in): what zeroing pages can get.
pub fn fill_bandwidth(threads: usize, bytes: u64, passes: u32) -> Result<f64, ScalingError> {
    let windows: Vec<Window> = (0..threads)
        .map(|_| -> Result<Window, HostError> {
            let mut w = Window::reserve(bytes, 2 << 20, 0)?;
            let base = w.base();
            w.map(base, bytes, true)?;
            w.fill(base, bytes, 1)?;
            Ok(w)
        })
        .collect::<Result<_, _>>()?;
    let start = std::time::Instant::now();
    let results: Vec<Result<(), HostError>> = std::thread::scope(|s| {
        let handles: Vec<_> = windows
            .iter()
            .map(|w| {
                s.spawn(move || -> Result<(), HostError> {
                    for p in 0..passes {
                        w.fill(w.base(), bytes, p as u8)?;
                    }
                    Ok(())
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().expect("a fill thread panicked"))
            .collect()
    });
    let secs = start.elapsed().as_secs_f64();
    for r in results {
        r?;
    }
    Ok((threads as u64 * bytes * passes as u64) as f64 / secs / 1e9)
}
