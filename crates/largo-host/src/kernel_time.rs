//! Kernel time of a process tree, measured with the CPU's cycle counter.
//!
//! `rusage` kernel time is useless for comparisons at the scale of these
//! runs: with tick-based accounting (`CONFIG_TICK_CPU_ACCOUNTING`, HZ=250
//! here) each tick is charged wholly to user or system mode, so a program
//! with 250 ms of kernel time carries a sampling error of several
//! percent, and a 4 ms one reads 0 or 4 ms. The PMU does not sample: a
//! cycle counter with `exclude_user` counts exactly the cycles spent in
//! the kernel on behalf of the tasks it follows.
//!
//! A [`KernelClock`] opens, on the calling thread, counters inherited by
//! every task it creates afterwards (`inherit`: counts of exited children
//! are folded into the parent's counter when they exit, so after the
//! tree has been waited for the counter holds it all): kernel cycles,
//! user cycles and the task clock (ns on CPU). Kernel nanoseconds are the
//! task clock times the kernel share of the cycles. A second kernel-cycle
//! counter, not inherited, counts the calling thread alone (its fork and
//! wait), which is taken away, so only the measured tree remains.

use std::io;

use perf_event::events::{Hardware, Software};

use crate::native::NativeError;
use crate::validate::ValidateError;
use perf_event::{Builder, Counter, ReadFormat};

/// Kernel and user time of the tasks measured.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct KernelTime {
    pub kernel_cycles: f64,
    pub user_cycles: f64,
    /// Time on CPU (user and kernel) of the tasks.
    pub task_clock_ns: f64,
}

impl KernelTime {
    /// Nanoseconds in the kernel: the task clock's kernel share.
    pub fn kernel_ns(&self) -> f64 {
        let cycles = self.kernel_cycles + self.user_cycles;
        if cycles <= 0.0 {
            return 0.0;
        }
        self.task_clock_ns * self.kernel_cycles / cycles
    }
}

/// The counters of [`KernelClock::measure`].
pub struct KernelClock {
    kernel: Counter,
    user: Counter,
    task_clock: Counter,
    /// Kernel cycles of the calling thread alone.
    own_kernel: Counter,
}

impl KernelClock {
    /// Opens the counters on the calling thread. Fails where the PMU is
    /// not available (no `cycles` event, perf_event_paranoid too strict).
    pub fn open() -> io::Result<KernelClock> {
        let format = ReadFormat::TOTAL_TIME_ENABLED | ReadFormat::TOTAL_TIME_RUNNING;
        let cycles = |exclude_user: bool, inherit: bool| {
            Builder::new(Hardware::CPU_CYCLES)
                .observe_self()
                .any_cpu()
                .exclude_user(exclude_user)
                .exclude_kernel(!exclude_user)
                .exclude_hv(true)
                .inherit(inherit)
                .read_format(format)
                .build()
        };
        Ok(KernelClock {
            kernel: cycles(true, true)?,
            user: cycles(false, true)?,
            task_clock: Builder::new(Software::TASK_CLOCK)
                .observe_self()
                .any_cpu()
                .inherit(true)
                .read_format(format)
                .build()?,
            own_kernel: cycles(true, false)?,
        })
    }

    /// Runs `f`, which creates and waits for the tasks to measure, and
    /// returns its result with their kernel and user time. The counters
    /// are read before and after (a reset would not clear what exited
    /// children already folded in).
    pub fn measure<T>(&mut self, f: impl FnOnce() -> T) -> io::Result<(T, KernelTime)> {
        for c in self.counters() {
            c.enable()?;
        }
        let before = self.read_all()?;
        let out = f();
        let after = self.read_all()?;
        for c in self.counters() {
            c.disable()?;
        }
        let delta = |i: usize| after[i].since(&before[i]);
        Ok((
            out,
            KernelTime {
                kernel_cycles: (delta(0) - delta(3)).max(0.0),
                user_cycles: delta(1),
                task_clock_ns: delta(2),
            },
        ))
    }

    fn read_all(&mut self) -> io::Result<[Reading; 4]> {
        let [a, b, c, d] = self.counters();
        Ok([Reading::of(a)?, Reading::of(b)?, Reading::of(c)?, Reading::of(d)?])
    }

    fn counters(&mut self) -> [&mut Counter; 4] {
        [
            &mut self.kernel,
            &mut self.user,
            &mut self.task_clock,
            &mut self.own_kernel,
        ]
    }
}

/// Kernel time a tick-sampled measurement gathers before it is read: 25
/// ticks at HZ=250, so one tick more or less is 4%.
pub const TICK_MIN_KERNEL_NS: u64 = 100_000_000;
/// Most runs repeated to gather it.
pub const TICK_MAX_RUNS: u32 = 32;

/// How a host run's kernel time is taken: the PMU where there is one,
/// else the tick-sampled `rusage` of waited-for children (coarse: see the
/// module documentation).
pub enum HostClock {
    Pmu(Box<KernelClock>),
    Ticks,
}

impl HostClock {
    /// The PMU clock if it can be opened, else ticks.
    pub fn best() -> HostClock {
        match KernelClock::open() {
            Ok(c) => HostClock::Pmu(Box::new(c)),
            Err(_) => HostClock::Ticks,
        }
    }

    /// What the figures are, for reports.
    pub fn source(&self) -> &'static str {
        match self {
            HostClock::Pmu(_) => "PMU kernel cycles x task clock",
            HostClock::Ticks => "rusage stime (tick-sampled)",
        }
    }

    /// The kernel ns per run of `run` (which creates and waits for the
    /// tasks to measure). The PMU reads one run exactly; with the
    /// tick-sampled clock a short run can read zero ticks, so `run` is
    /// repeated until [`TICK_MIN_KERNEL_NS`] were sampled (or
    /// [`TICK_MAX_RUNS`] runs) and the mean is returned.
    pub fn per_run_ns(&mut self, mut run: impl FnMut() -> Result<(), NativeError>) -> Result<f64, ValidateError> {
        let (mut total, mut runs) = (0u64, 0u32);
        loop {
            let (r, ns) = self.measure(&mut run).map_err(ValidateError::Clock)?;
            r?;
            total += ns;
            runs += 1;
            let enough = matches!(self, HostClock::Pmu(_)) || total >= TICK_MIN_KERNEL_NS || runs >= TICK_MAX_RUNS;
            if enough {
                return Ok(total as f64 / runs as f64);
            }
        }
    }

    /// Runs `f` (which creates and waits for the tasks to measure) and
    /// returns its result with their kernel time in ns.
    pub fn measure<T>(&mut self, f: impl FnOnce() -> T) -> io::Result<(T, u64)> {
        match self {
            HostClock::Pmu(c) => c.measure(f).map(|(out, t)| (out, t.kernel_ns().round() as u64)),
            HostClock::Ticks => {
                let before = largo_physmem::host::rusage_children();
                let out = f();
                let after = largo_physmem::host::rusage_children();
                Ok((out, after.stime_ns.saturating_sub(before.stime_ns)))
            }
        }
    }
}

/// A counter's value with the time it was enabled and running.
#[derive(Clone, Copy, Debug)]
struct Reading {
    count: u64,
    enabled_ns: u64,
    running_ns: u64,
}

impl Reading {
    fn of(c: &mut Counter) -> io::Result<Reading> {
        let d = c.read_full()?;
        let ns = |t: Option<std::time::Duration>| t.map_or(0, |t| t.as_nanos() as u64);
        Ok(Reading {
            count: d.count(),
            enabled_ns: ns(d.time_enabled()),
            running_ns: ns(d.time_running()),
        })
    }

    /// The count since `earlier`, scaled up by enabled/running time where
    /// the PMU multiplexed the counter.
    fn since(&self, earlier: &Reading) -> f64 {
        let count = self.count.saturating_sub(earlier.count) as f64;
        let enabled = self.enabled_ns.saturating_sub(earlier.enabled_ns);
        let running = self.running_ns.saturating_sub(earlier.running_ns);
        if running > 0 && running < enabled {
            count * enabled as f64 / running as f64
        } else {
            count
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_child_s_kernel_work_is_counted_and_the_parent_s_is_not() {
        let Ok(mut clock) = KernelClock::open() else {
            eprintln!("SKIPPED: no PMU cycle counter on this machine");
            return;
        };
        // A child that zeroes 64 MiB in the kernel (fresh anonymous pages)
        // against one that faults nothing: the first spends far more
        // kernel cycles.
        let run = |mib: u32| {
            let script = format!("head -c {}M /dev/zero > /dev/null", mib);
            std::process::Command::new("sh").arg("-c").arg(script).status().unwrap()
        };
        let (_, small) = clock.measure(|| run(0)).unwrap();
        let (_, big) = clock.measure(|| run(256)).unwrap();
        assert!(small.kernel_cycles > 0.0 && small.task_clock_ns > 0.0, "{small:?}");
        assert!(big.kernel_cycles > 2.0 * small.kernel_cycles, "{small:?} vs {big:?}");
        assert!(big.kernel_ns() > 0.0 && big.kernel_ns() <= big.task_clock_ns);
        // Nothing measured: the parent's own cycles are taken away.
        let ((), idle) = clock
            .measure(|| std::thread::sleep(std::time::Duration::from_millis(5)))
            .unwrap();
        assert!(idle.kernel_cycles < small.kernel_cycles, "{idle:?} vs {small:?}");
    }
}
