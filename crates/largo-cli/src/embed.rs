//! Whether the commands run inside another program (the Python package)
//! rather than as the `largo` binary. Embedded, a command leaves the host
//! program's signal handlers alone (Ctrl-C stays the host program's, e.g.
//! Python's KeyboardInterrupt) and re-executes the `largo` binary named by
//! `LARGO_EXE` or found on `PATH` where it would re-execute itself (the
//! recorder's launcher, the contention bench's children), not the host
//! program.

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};

use crate::args::UsageError;

static EMBEDDED: AtomicBool = AtomicBool::new(false);

/// Marks this process as embedding the commands (once, at module load).
pub fn set_embedded() {
    EMBEDDED.store(true, Ordering::SeqCst);
}

/// Whether [`set_embedded`] was called.
pub fn is_embedded() -> bool {
    EMBEDDED.load(Ordering::SeqCst)
}

/// Installs `handler` for SIGINT and SIGTERM when running as the binary;
/// embedded, the host program keeps its own handlers.
pub fn on_interrupt(handler: impl FnMut() + Send + 'static) {
    if !is_embedded() {
        let _ = ctrlc::set_handler(handler);
    }
}

/// The `largo` executable to re-execute: this very image as the binary
/// (`/proc/self/exe`, also if its file was replaced since it started);
/// embedded, `LARGO_EXE` or the first `largo` on `PATH`.
pub fn largo_exe() -> Result<PathBuf, UsageError> {
    if !is_embedded() {
        return Ok(PathBuf::from("/proc/self/exe"));
    }
    if let Some(exe) = std::env::var_os("LARGO_EXE") {
        return Ok(PathBuf::from(exe));
    }
    let on_path = std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .map(|dir| dir.join("largo"))
            .find(|p| p.is_file())
    });
    on_path.ok_or_else(|| {
        UsageError(
            "this runs the largo binary as a helper process: install it (cargo install --path crates/largo-cli) \
             or set LARGO_EXE to its path"
                .into(),
        )
    })
}
