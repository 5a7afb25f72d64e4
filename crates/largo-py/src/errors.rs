//! The package's exceptions: `largo.LargoError` for a failure (exit status
//! 1 on the command line), its subclass `largo.UsageError` for bad input
//! (exit status 2); the message is the command line's one line, without
//! its `largo: ` prefix.

use pyo3::create_exception;
use pyo3::exceptions::PyException;
use pyo3::PyErr;

create_exception!(_native, LargoError, PyException, "A largo command failed.");
create_exception!(_native, UsageError, LargoError, "Bad input to a largo command.");

/// A usage error with this message.
pub fn usage(msg: impl Into<String>) -> PyErr {
    UsageError::new_err(msg.into())
}

/// A command's error as the command line reports it.
pub fn from_command(e: anyhow::Error) -> PyErr {
    let msg = format!("{e:#}");
    if largo_cli::exit::is_usage(&e) {
        UsageError::new_err(msg)
    } else {
        LargoError::new_err(msg)
    }
}
