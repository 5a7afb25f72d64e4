//! Exit statuses: 0 success; 1 a failure (a comparison that differs, a
//! replayed program's SIGSEGV, a host error); 2 bad input (usage); and a
//! closed standard output ends the command quietly with 141 (128 +
//! SIGPIPE), the status a shell reports for coreutils in the same place.

use std::process::ExitCode;

use crate::args::UsageError;

/// The exit status of a closed standard output.
pub const BROKEN_PIPE: u8 = 141;

/// Whether an error comes from writing to a closed pipe.
pub fn is_broken_pipe(e: &anyhow::Error) -> bool {
    e.chain().any(|c| {
        c.downcast_ref::<std::io::Error>()
            .is_some_and(|io| io.kind() == std::io::ErrorKind::BrokenPipe)
    })
}

/// Whether an error is bad input.
pub fn is_usage(e: &anyhow::Error) -> bool {
    e.chain().any(|c| {
        c.downcast_ref::<UsageError>().is_some()
            || c.downcast_ref::<largo_mm::MachineError>().is_some()
            || c.downcast_ref::<crate::config::ConfigSpecError>().is_some()
    })
}

/// The status of a command's result, its error (if any) on stderr.
pub fn status(result: anyhow::Result<()>) -> ExitCode {
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) if is_broken_pipe(&e) => ExitCode::from(BROKEN_PIPE),
        Err(e) => {
            eprintln!("largo: {e:#}");
            ExitCode::from(if is_usage(&e) { 2 } else { 1 })
        }
    }
}
