//! A workload to run: a built-in one with its parameters, or a trace
//! (recorded from a real program, or a hand-written scenario).

use std::path::Path;
use std::sync::Arc;

use largo_mm::Machine;
use largo_trace::Trace;

use crate::builtin::{self, WorkloadDef};
use crate::cost::Faults;
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
    /// A built-in specification (`page_fault1:iterations=2`), the name of
    /// a shipped recorded program (`lua-build`), or the path of a trace
    /// file.
    pub fn parse(text: &str) -> Result<Workload, String> {
        if let Some(r) = crate::recorded::find(text) {
            return Ok(Workload::from_trace(r.name, r.trace()));
        }
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

    /// The default suite: the built-in workloads marked for it, then the
    /// shipped recorded programs.
    pub fn default_suite() -> Vec<Workload> {
        let builtins = builtin::catalog()
            .iter()
            .filter(|d| d.default_suite)
            .map(|d| Workload::Builtin {
                def: d,
                spec: d.parse(d.name).expect("defaults parse"),
            });
        let recorded = crate::recorded::RECORDED
            .iter()
            .map(|r| Workload::from_trace(r.name, r.trace()));
        builtins.chain(recorded).collect()
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

    /// How its faults come: cold for traces recorded from real programs
    /// (`largo record`), hot for built-in loops and hand-written traces
    /// (see [`Faults`]).
    pub fn faults(&self) -> Faults {
        match self {
            Workload::Trace { trace, .. }
                if trace
                    .header
                    .get("captured")
                    .is_some_and(|c| c.starts_with("largo record")) =>
            {
                Faults::Cold
            }
            _ => Faults::Hot,
        }
    }

    /// Why it cannot run on a machine with `page_size` base pages, if it
    /// cannot: a trace recorded with other base pages. A program's
    /// layout follows its kernel's page size (ELF segment alignment,
    /// malloc's mmap and trim sizes), so a trace recorded at 4 KiB says
    /// nothing exact about the same program on a 64 KiB kernel.
    pub fn unsupported_on(&self, page_size: u64) -> Option<String> {
        let Workload::Trace { trace, .. } = self else {
            return None;
        };
        let recorded: u64 = trace.header.get("page_size")?.parse().ok()?;
        (recorded != page_size).then(|| {
            format!(
                "the trace was recorded with {} KiB base pages; a program's layout follows its kernel's page size, so record it on a kernel with the machine's",
                recorded >> 10
            )
        })
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
                if let Some(reason) = self.unsupported_on(m.geometry().page_size()) {
                    return Err(reason);
                }
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
