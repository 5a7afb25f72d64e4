//! `largo._native`: the engine for the `largo` Python package. Each entry
//! point runs the command of the same name (crates/largo-cli) with the GIL
//! released and returns its `--json` output; the package (python/largo)
//! wraps it in typed results. Built with maturin against the abi3 stable
//! ABI (Python 3.9 and later).

use pyo3::prelude::*;

mod commands;
mod config;
mod errors;

#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    // Ctrl-C stays Python's; helper processes are the largo binary.
    largo_cli::embed::set_embedded();
    let py = m.py();
    m.add("LargoError", py.get_type::<errors::LargoError>())?;
    m.add("UsageError", py.get_type::<errors::UsageError>())?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    m.add("MACHINE_FIELDS", config::MACHINE_FIELDS.to_vec())?;
    m.add("POLICY_FIELDS", config::POLICY_FIELDS.to_vec())?;
    m.add_function(wrap_pyfunction!(commands::run, m)?)?;
    m.add_function(wrap_pyfunction!(commands::replay, m)?)?;
    m.add_function(wrap_pyfunction!(commands::advise, m)?)?;
    m.add_function(wrap_pyfunction!(commands::show, m)?)?;
    m.add_function(wrap_pyfunction!(commands::validate, m)?)?;
    m.add_function(wrap_pyfunction!(commands::command, m)?)?;
    m.add_function(wrap_pyfunction!(commands::parse_size, m)?)?;
    Ok(())
}
