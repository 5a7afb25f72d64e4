//! A workload to run: a built-in one with its parameters, or a trace
//! (recorded from a real program, or a hand-written scenario).

use std::path::{Path, PathBuf};
use std::sync::Arc;

use largo_mm::Machine;
use largo_trace::{Location, Trace, TraceError};

use crate::builtin::{self, WorkloadDef};
use crate::cost::Faults;
use crate::recorded::Recorded;
use crate::replay::{replay, ReplayError, ReplayOptions};
use crate::run::{run, RunError, RunOptions, RunOutcome};
use crate::spec::{SpecError, WorkloadSpec};

/// Where a trace came from: to say where in it an event is.
#[derive(Clone, Debug)]
pub enum TraceSource {
    /// A trace file.
    File(PathBuf),
    /// A shipped recorded program.
    Recorded(&'static Recorded),
    /// Built in memory (recorded just now, or made by a test).
    Memory,
}

#[derive(Clone, Debug)]
pub enum Workload {
    Builtin {
        def: &'static WorkloadDef,
        spec: WorkloadSpec,
    },
    Trace {
        name: String,
        trace: Arc<Trace>,
        source: TraceSource,
    },
}

/// A workload that cannot be named or run.
#[derive(Debug, thiserror::Error)]
pub enum WorkloadError {
    #[error(transparent)]
    Spec(#[from] SpecError),
    #[error("{path}: {source}")]
    Trace { path: String, source: TraceError },
    #[error("{0}: no such trace file")]
    NoSuchTrace(String),
    #[error("{0}")]
    Run(#[from] RunError),
    #[error(transparent)]
    Replay(#[from] ReplayError),
    /// A trace recorded with other base pages than the machine's.
    #[error("the trace was recorded with {recorded_kib} KiB base pages; a program's layout follows its kernel's page size, so record it on a kernel with the machine's")]
    PageSize { recorded_kib: u64 },
}

impl Workload {
    /// A built-in specification (`page_fault1:iterations=2`), the name of
    /// a shipped recorded program (`lua-build`), or the path of a trace
    /// file.
    pub fn parse(text: &str) -> Result<Workload, WorkloadError> {
        if let Some(r) = crate::recorded::find(text) {
            return Ok(Workload::Trace {
                name: r.name.to_string(),
                trace: Arc::new(r.trace()),
                source: TraceSource::Recorded(r),
            });
        }
        let path = Path::new(text);
        if path.exists() {
            let trace = largo_trace::read_trace(path).map_err(|source| WorkloadError::Trace {
                path: text.to_string(),
                source,
            })?;
            return Ok(Workload::Trace {
                name: path
                    .file_name()
                    .map_or(text.to_string(), |n| n.to_string_lossy().to_string()),
                trace: Arc::new(trace),
                source: TraceSource::File(path.to_path_buf()),
            });
        }
        match builtin::parse(text) {
            Ok((def, spec)) => Ok(Workload::Builtin { def, spec }),
            Err(_) if text.contains('/') || text.contains(".trace") || text.contains(".ltb") => {
                Err(WorkloadError::NoSuchTrace(text.to_string()))
            }
            Err(e) => Err(e.into()),
        }
    }

    /// Where event `index` of a trace workload is (its line or byte).
    pub fn locate(&self, index: u64) -> Option<Location> {
        match self {
            Workload::Trace {
                source: TraceSource::File(path),
                ..
            } => largo_trace::locate(path, index).ok().flatten(),
            Workload::Trace {
                source: TraceSource::Recorded(r),
                ..
            } => r.locate(index),
            _ => None,
        }
    }

    /// The default suite: the built-in workloads marked for it, then the
    /// shipped recorded programs marked for it.
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
            .filter(|r| r.default_suite)
            .map(|r| Workload::Trace {
                name: r.name.to_string(),
                trace: Arc::new(r.trace()),
                source: TraceSource::Recorded(r),
            });
        builtins.chain(recorded).collect()
    }

    /// A trace given by name and contents.
    pub fn from_trace(name: &str, trace: Trace) -> Workload {
        Workload::Trace {
            name: name.to_string(),
            trace: Arc::new(trace),
            source: TraceSource::Memory,
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

    /// The machine it runs on under `config`: a trace recorded under a
    /// memory limit (`largo record --memcg-max`, `--swap`: header keys
    /// `memcg_max` in bytes and `swap` as `SIZE:KIND`) runs under the same
    /// limit and swap device unless the configuration sets its own.
    pub fn machine_config(&self, config: &largo_mm::MachineConfig) -> largo_mm::MachineConfig {
        let mut c = config.clone();
        let Workload::Trace { trace, .. } = self else {
            return c;
        };
        if c.memcg_max_bytes.is_none() {
            c.memcg_max_bytes = trace.header.get("memcg_max").and_then(|v| v.parse().ok());
        }
        if c.swap.is_empty() {
            let spec = trace.header.get("swap").map(largo_mm::swap::SwapSpec::parse);
            c.swap.extend(spec.and_then(Result::ok));
        }
        c
    }

    /// Why it cannot run on a machine with `page_size` base pages, if it
    /// cannot: a trace recorded with other base pages. A program's
    /// layout follows its kernel's page size (ELF segment alignment,
    /// malloc's mmap and trim sizes), so a trace recorded at 4 KiB says
    /// nothing exact about the same program on a 64 KiB kernel.
    pub fn unsupported_on(&self, page_size: u64) -> Option<WorkloadError> {
        let Workload::Trace { trace, .. } = self else {
            return None;
        };
        let recorded: u64 = trace.header.get("page_size")?.parse().ok()?;
        (recorded != page_size).then_some(WorkloadError::PageSize {
            recorded_kib: recorded >> 10,
        })
    }

    /// Runs (or replays) it on `m`. With `opts.keep_mapped`, a trace is
    /// replayed without its exits: every process keeps its memory.
    pub fn run(
        &self,
        m: &mut Machine,
        opts: &RunOptions,
        progress: &mut dyn FnMut(u64, u64),
    ) -> Result<RunOutcome, WorkloadError> {
        match self {
            Workload::Builtin { def, spec } => Ok(run(m, def, spec, opts, progress)?),
            Workload::Trace { trace, .. } => {
                if let Some(e) = self.unsupported_on(m.geometry().page_size()) {
                    return Err(e);
                }
                let ro = ReplayOptions {
                    check_every: opts.check_every,
                    keep_mapped: opts.keep_mapped,
                    tlb_overrides: opts.tlb_overrides.clone(),
                    ..ReplayOptions::default()
                };
                Ok(replay(m, &trace.events, &ro, progress)?.run)
            }
        }
    }
}
