//! A workload to run: a built-in one with its parameters, or a trace
//! (recorded from a real program, or a hand-written scenario).

use std::path::Path;
use std::sync::Arc;

use largo_mm::Machine;
use largo_trace::Trace;

use crate::builtin::{self, WorkloadDef};
use crate::replay::{replay, ReplayOptions};
use crate::run::{run, RunOptions, RunOutcome};
use crate::spec::WorkloadSpec;

#[derive(Clone, Debug)]
pub enum Workload {
    Builtin {
        def: &'static WorkloadDef,
        spec: WorkloadSpec,
    },
    Trace {
        name: String,
        trace: Arc<Trace>,
    },
}

impl Workload {
    /// A built-in specification (`page_fault1:iterations=2`), or the path
    /// of a trace file.
    pub fn parse(text: &str) -> Result<Workload, String> {
        let path = Path::new(text);
        if path.is_file() {
            let trace = largo_trace::read_trace(path).map_err(|e| format!("{text}: {e}"))?;
            return Ok(Workload::Trace {
                name: path
                    .file_name()
                    .map_or(text.to_string(), |n| n.to_string_lossy().to_string()),
                trace: Arc::new(trace),
            });
        }
        let (def, spec) = builtin::parse(text).map_err(|e| {
            if text.contains('/') || text.contains(".trace") || text.contains(".ltb") {
                format!("{text}: no such trace file")
            } else {
                e.to_string()
            }
        })?;
        Ok(Workload::Builtin { def, spec })
    }

    /// A trace given by name and contents.
    pub fn from_trace(name: &str, trace: Trace) -> Workload {
        Workload::Trace {
            name: name.to_string(),
            trace: Arc::new(trace),
        }
    }

    /// The name in reports: the full specification, or the trace's name.
    pub fn describe(&self) -> String {
        match self {
            Workload::Builtin { spec, .. } => spec.describe(),
            Workload::Trace { name, .. } => name.clone(),
        }
    }

    /// Runs (or replays) it on `m`.
    pub fn run(
        &self,
        m: &mut Machine,
        opts: &RunOptions,
        progress: &mut dyn FnMut(u64, u64),
    ) -> Result<RunOutcome, String> {
        match self {
            Workload::Builtin { def, spec } => run(m, def, spec, opts, progress).map_err(|e| e.to_string()),
            Workload::Trace { trace, .. } => {
                let ro = ReplayOptions {
                    check_every: opts.check_every,
                    ..ReplayOptions::default()
                };
                replay(m, &trace.events, &ro, progress)
                    .map(|o| o.run)
                    .map_err(|e| e.to_string())
            }
        }
    }
}
