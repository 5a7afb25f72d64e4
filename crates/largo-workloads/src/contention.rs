//! Lock contention at N CPUs: the wait for `zone->lock`, the lruvec
//! `lru_lock`, the deferred split queue lock and (for threads sharing an
//! mm) `mmap_lock` when N tasks like the run's run at once, one per CPU.
//!
//! The N tasks form a closed queueing network: each alternates between
//! work outside the locks (a delay station) and critical sections (one
//! single-server station per lock), and a task waiting for a lock makes no
//! new requests. It is solved exactly by mean value analysis (Reiser and
//! Lavenberg, 1980): for n = 1..N customers, the residence time at lock k
//! is R_k(n) = D_k (1 + Q_k(n - 1)), the throughput X(n) = n / (Z + sum
//! R_k(n)), the queue Q_k(n) = X(n) R_k(n); D_k is a task's total hold
//! time of lock k and Z its time outside. A discrete-event simulation
//! would need the order of acquisitions in time, which the counts do not
//! keep; an open M/M/1 model would let waiting tasks keep arriving and
//! overstate the waits near saturation. Waiting is spinning (or sleeping
//! on `mmap_lock`) inside the kernel, so it adds to kernel time. On a
//! machine with several nodes the CPUs form one such group per node (each
//! node has its own zones and lruvecs).
//!
//! Memory bandwidth is the other shared resource: zeroing and copying
//! pages write at one CPU's bandwidth alone and share the machine's when
//! several CPUs write at once ([`bandwidth_wait`]; `memory` among the
//! locks, with the bandwidths measured by `largo bench contention`).
//!
//! Hold times come from the cost model: `zone->lock` is held for the
//! buddy work done under it (the `zone_lock`, `buddy_op`, `buddy_level`
//! and `pcp_bulk_block` terms), `mmap_lock` for a VMA operation
//! (`vma_op`); the lru lock's hold per acquisition and per folio moved
//! and the split queue lock's are priors ([`LRU_LOCK_NS`],
//! [`LRU_FOLIO_NS`], [`SPLIT_QUEUE_LOCK_NS`]).

use std::collections::BTreeMap;

use serde::Serialize;

use crate::cost::{Faults, Profile, TermInput, TERMS};
use crate::report::Counters;

/// ns to take and drop the lru lock (prior).
pub const LRU_LOCK_NS: f64 = 20.0;
/// ns per folio added to or taken off an LRU list under it (prior).
pub const LRU_FOLIO_NS: f64 = 15.0;
/// ns the deferred split queue lock is held per acquisition (prior: a
/// list add or delete and a counter).
pub const SPLIT_QUEUE_LOCK_NS: f64 = 40.0;

/// One lock's figures.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize)]
pub struct LockEstimate {
    /// Acquisitions over the run (all its tasks).
    pub acquisitions: u64,
    /// Total time held over the run, ns.
    pub hold_ns: f64,
    /// Estimated total wait of the N concurrent tasks, ns.
    pub est_wait_ns: f64,
}

/// The contention estimate of a run.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Contention {
    /// The number of tasks running at once (the machine's CPUs).
    pub cpus: usize,
    pub locks: BTreeMap<&'static str, LockEstimate>,
    /// The N tasks' kernel time without waiting, ns.
    pub kernel_ns: f64,
    /// The same with the estimated waits.
    pub kernel_ns_with_waits: f64,
}

/// The cost, ns, of the named terms' counts.
fn terms_ns(profile: &Profile, input: &TermInput, names: &[&str], faults: Faults) -> f64 {
    TERMS
        .iter()
        .filter(|t| names.contains(&t.name))
        .map(|t| (t.count)(input) as f64 * profile.cost_at(t.name, faults))
        .sum()
}

/// Exact MVA for a closed network of single-server stations with
/// demands `d` and a delay station `z`, `n` customers: each station's
/// residence time per customer cycle.
pub fn mva(d: &[f64], z: f64, n: usize) -> Vec<f64> {
    let mut q = vec![0.0; d.len()];
    let mut r = d.to_vec();
    for k in 1..=n {
        for (i, ri) in r.iter_mut().enumerate() {
            *ri = d[i] * (1.0 + q[i]);
        }
        let x = k as f64 / (z + r.iter().sum::<f64>()).max(f64::MIN_POSITIVE);
        for (qi, ri) in q.iter_mut().zip(&r) {
            *qi = x * ri;
        }
    }
    r
}

/// A run's shape for the estimate.
#[derive(Clone, Copy, Debug)]
pub struct Concurrency {
    /// Tasks in the run (threads of one process if `threads`).
    pub tasks: usize,
    pub threads: bool,
    /// Tasks running at once: the machine's CPUs.
    pub cpus: usize,
    /// NUMA nodes: each has its own zones and lruvecs, so the CPUs split
    /// into independent groups, one per node, for those locks.
    pub nodes: usize,
    /// The memory write bandwidth zeroing and copying share.
    pub memory: largo_types::MemoryBandwidth,
}

/// The estimate for a run whose kernel time was estimated at `kernel_ns`
/// and user time at `user_ns`, were `n.cpus` such tasks to run at once.
pub fn estimate(
    c: &Counters,
    profile: &Profile,
    faults: Faults,
    kernel_ns: f64,
    user_ns: f64,
    n: Concurrency,
) -> Contention {
    let Concurrency {
        tasks,
        threads,
        cpus,
        nodes,
        memory,
    } = n;
    let input = TermInput::from_counters(c);
    let mut locks = BTreeMap::new();
    locks.insert(
        "zone_lock",
        LockEstimate {
            acquisitions: c.locks.zone_lock,
            hold_ns: terms_ns(
                profile,
                &input,
                &["zone_lock", "buddy_op", "buddy_level", "pcp_bulk_block"],
                faults,
            ),
            ..Default::default()
        },
    );
    locks.insert(
        "lru_lock",
        LockEstimate {
            acquisitions: c.locks.lru_lock,
            hold_ns: c.locks.lru_lock as f64 * LRU_LOCK_NS + c.locks.lru_folios as f64 * LRU_FOLIO_NS,
            ..Default::default()
        },
    );
    locks.insert(
        "split_queue_lock",
        LockEstimate {
            acquisitions: c.locks.split_queue_lock,
            hold_ns: c.locks.split_queue_lock as f64 * SPLIT_QUEUE_LOCK_NS,
            ..Default::default()
        },
    );
    if threads {
        locks.insert(
            "mmap_lock",
            LockEstimate {
                acquisitions: c.work.vm.vma_ops,
                hold_ns: terms_ns(profile, &input, &["vma_op"], faults),
                ..Default::default()
            },
        );
    }
    let tasks = tasks.max(1) as f64;
    let names: Vec<&'static str> = locks.keys().copied().collect();
    // Per task: hold of each lock, and the rest of its time.
    let d: Vec<f64> = names.iter().map(|n| locks[n].hold_ns / tasks).collect();
    let per_task = (kernel_ns + user_ns) / tasks;
    let z = (per_task - d.iter().sum::<f64>()).max(0.0);
    // Tasks spread over the nodes, each node's group contending for its
    // own locks.
    let nodes = nodes.clamp(1, cpus.max(1));
    let per_node = cpus.max(1).div_ceil(nodes);
    let r = mva(&d, z, per_node);
    let mut waits = 0.0;
    for (i, n) in names.iter().enumerate() {
        let wait = (r[i] - d[i]).max(0.0) * cpus.max(1) as f64;
        locks.get_mut(n).expect("named").est_wait_ns = wait;
        waits += wait;
    }
    // Memory bandwidth: zeroing and copying slow down when other CPUs
    // write at the same time.
    let zero_copy = terms_ns(profile, &input, &["page_zero", "page_copy"], faults) / tasks;
    let memory_wait = bandwidth_wait(zero_copy, per_task, cpus.max(1), memory) * cpus as f64;
    locks.insert(
        "memory",
        LockEstimate {
            acquisitions: 0,
            hold_ns: zero_copy * tasks,
            est_wait_ns: memory_wait,
        },
    );
    let kernel_n = kernel_ns / tasks * cpus as f64;
    Contention {
        cpus,
        locks,
        kernel_ns: kernel_n,
        kernel_ns_with_waits: kernel_n + waits + memory_wait,
    }
}

/// Extra ns per task its `write_ns` of zeroing and copying (at one CPU's
/// bandwidth) take when `n` tasks of `task_ns` each run at once: each
/// other task writes at any moment with the probability of the share of
/// its time it spends writing (binomially), and `k + 1` writers each get
/// `min(one CPU's bandwidth, all CPUs' / (k + 1))`; the slowdown feeds
/// back into that share (a fixed point). A machine of more CPUs than the
/// total was measured with is assumed to have proportionally more (the
/// measured share per CPU): only contention seen at the measured scale is
/// extrapolated.
pub fn bandwidth_wait(write_ns: f64, task_ns: f64, n: usize, bw: largo_types::MemoryBandwidth) -> f64 {
    if n < 2 || write_ns <= 0.0 || task_ns <= 0.0 {
        return 0.0;
    }
    let mut mult = 1.0;
    for _ in 0..50 {
        let f = (write_ns * mult / (task_ns + write_ns * (mult - 1.0))).clamp(0.0, 1.0);
        let mut expected = 0.0;
        let total = bw.all_cpus_gbs * (n as f64 / bw.measured_cpus.max(1) as f64).max(1.0);
        for k in 0..n {
            let rate = bw.one_cpu_gbs.min(total / (k + 1) as f64);
            expected += binomial(n - 1, k, f) * bw.one_cpu_gbs / rate;
        }
        if (expected - mult).abs() < 1e-9 {
            break;
        }
        mult = expected;
    }
    write_ns * (mult - 1.0)
}

/// P(X = k) for X ~ Binomial(n, p), in log space.
fn binomial(n: usize, k: usize, p: f64) -> f64 {
    if p <= 0.0 {
        return if k == 0 { 1.0 } else { 0.0 };
    }
    if p >= 1.0 {
        return if k == n { 1.0 } else { 0.0 };
    }
    let ln_choose: f64 = (1..=k).map(|i| ((n - k + i) as f64).ln() - (i as f64).ln()).sum();
    (ln_choose + k as f64 * p.ln() + (n - k) as f64 * (1.0 - p).ln()).exp()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mva_matches_the_machine_repairman_model() {
        // One customer never waits.
        assert_eq!(mva(&[1.0], 9.0, 1), vec![1.0]);
        // Two customers, service 1, think 9: R(2) = 1 + Q(1) = 1 + 0.1.
        let r = mva(&[1.0], 9.0, 2);
        assert!((r[0] - 1.1).abs() < 1e-12, "{r:?}");
        // Saturation: the residence time grows linearly with customers.
        let r = mva(&[1.0], 0.0, 10);
        assert!((r[0] - 10.0).abs() < 1e-9, "{r:?}");
        // A lock nobody holds costs nothing.
        assert_eq!(mva(&[0.0, 1.0], 1.0, 4)[0], 0.0);
    }

    #[test]
    fn writers_share_the_bandwidth() {
        let bw = largo_types::MemoryBandwidth {
            one_cpu_gbs: 10.0,
            all_cpus_gbs: 15.0,
            measured_cpus: 2,
        };
        // Alone, or with room for both: no wait.
        assert_eq!(bandwidth_wait(50.0, 100.0, 1, bw), 0.0);
        let roomy = largo_types::MemoryBandwidth {
            all_cpus_gbs: 20.0,
            ..bw
        };
        assert!(bandwidth_wait(50.0, 100.0, 2, roomy).abs() < 1e-9);
        // Two tasks writing all the time each get 7.5 of their 10 GB/s.
        let w = bandwidth_wait(100.0, 100.0, 2, bw);
        assert!((w - 100.0 / 3.0).abs() < 1e-6, "{w}");
        // Writing part of the time, they collide part of the time.
        let part = bandwidth_wait(50.0, 100.0, 2, bw);
        assert!(part > 0.0 && part < 50.0 / 3.0 + 1e-9, "{part}");
        let p: f64 = (0..=9).map(|k| binomial(9, k, 0.3)).sum();
        assert!((p - 1.0).abs() < 1e-12);
    }
}
