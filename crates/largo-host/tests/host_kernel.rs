//! The model against this machine's kernel (Linux 6.18 with mTHP controls,
//! run as root): the validation suite must agree exactly, and the knob
//! guard must always restore what it changed. Without root or mTHP sysfs
//! files each test says why it did not run.

use largo_host::knobs::{read_knob, KnobGuard, JOURNAL_PATH};
use largo_host::validate::validate_workload;
use largo_mm::MachineConfig;
use largo_workloads::builtin;

/// The tests of this binary use the host one at a time: a test that forks
/// must not copy another thread's lock descriptor into its child.
static HOST: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn host_lock() -> std::sync::MutexGuard<'static, ()> {
    HOST.lock().unwrap_or_else(|e| e.into_inner())
}

/// Whether the host can be used; a visible SKIPPED line says why not.
fn host_available(test: &str) -> bool {
    largo_host::skip::host_ready(test)
}

fn config(thp: &[(&str, &str)]) -> MachineConfig {
    MachineConfig {
        knobs: thp
            .iter()
            .map(|(kb, mode)| (format!("transparent_hugepage/hugepages-{kb}/enabled"), mode.to_string()))
            .collect(),
        ..MachineConfig::default()
    }
}

#[test]
fn the_validation_suite_agrees_with_the_host_kernel_exactly() {
    if !host_available("validation suite") {
        return;
    }
    let _serial = host_lock();
    // (name, per-size settings, map with MADV_HUGEPAGE)
    type Config<'a> = (&'a str, Vec<(&'a str, &'a str)>, bool);
    let configs: [Config; 6] = [
        ("4K", vec![], false),
        ("4K+16K", vec![("16kB", "always")], false),
        ("4K+16K+32K", vec![("16kB", "always"), ("32kB", "always")], false),
        (
            "4K+16K+32K+64K",
            vec![("16kB", "always"), ("32kB", "always"), ("64kB", "always")],
            false,
        ),
        ("2M-always", vec![("2048kB", "always")], false),
        ("2M-madvise", vec![("2048kB", "madvise")], true),
    ];
    let workloads = [
        "page_fault1:iterations=1",
        "malloc1:iterations=1",
        "anon-r-seq:size=128M",
        "anon-rw-seq:size=64M",
        "anon-cow-seq:size=128M",
        "munmap-partial:size=64M",
    ];
    let mut failures = Vec::new();
    for w in workloads {
        for (name, thp, madvise) in &configs {
            let text = if *madvise && w != "malloc1:iterations=1" {
                format!("{w},hugepage=1")
            } else {
                w.to_string()
            };
            let (def, spec) = builtin::parse(&text).unwrap();
            let v = validate_workload(&config(thp), def, &spec).unwrap();
            let nonzero: Vec<String> = v
                .nonzero()
                .map(|r| format!("{} {}/{}", r.counter, r.model, r.host))
                .collect();
            println!(
                "{text} under {name}: {} [{}]",
                if v.agrees() { "agree" } else { "DIFFER" },
                nonzero.join(", ")
            );
            if !v.agrees() {
                failures.push(format!("{text} under {name}: {nonzero:?}"));
            }
        }
    }
    assert!(
        failures.is_empty(),
        "largo and the host kernel differ:\n{}",
        failures.join("\n")
    );
}

const KNOB: &str = "transparent_hugepage/hugepages-32kB/enabled";

#[test]
fn the_knob_guard_restores_on_drop_and_on_panic() {
    if !host_available("knob guard") {
        return;
    }
    let _serial = host_lock();
    let original = read_knob(KNOB).unwrap();
    let other = if original == "madvise" { "always" } else { "madvise" };
    {
        let mut g = KnobGuard::acquire().unwrap();
        g.set(KNOB, other).unwrap();
        assert_eq!(read_knob(KNOB).unwrap(), other);
    }
    assert_eq!(read_knob(KNOB).unwrap(), original, "restored on drop");
    let result = std::panic::catch_unwind(|| {
        let mut g = KnobGuard::acquire().unwrap();
        g.set(KNOB, other).unwrap();
        panic!("a failing test while the knob is changed");
    });
    assert!(result.is_err());
    assert_eq!(read_knob(KNOB).unwrap(), original, "restored while unwinding");
}

/// Set for the helper: the knob value it leaves behind.
const DEAD_HOLDER_VALUE: &str = "LARGO_DEAD_HOLDER_VALUE";

/// Run by the test below in a process of its own: takes the guard,
/// changes the knob and exits without restoring (as a killed holder).
#[test]
fn dead_holder_helper() {
    let Some(value) = std::env::var_os(DEAD_HOLDER_VALUE) else {
        return;
    };
    let mut g = KnobGuard::acquire().unwrap();
    g.set(KNOB, value.to_str().unwrap()).unwrap();
    std::process::exit(0);
}

#[test]
fn a_dead_holders_journal_is_replayed_by_the_next_guard() {
    if !host_available("knob journal") {
        return;
    }
    let _serial = host_lock();
    let original = read_knob(KNOB).unwrap();
    let other = if original == "never" { "always" } else { "never" };
    // A holder that dies without restoring (as on SIGKILL): another
    // process (this test binary, running the helper below) changes the
    // knob and exits at once without unwinding; its lock goes with it.
    let exit = std::process::Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "dead_holder_helper", "--test-threads=1"])
        .env(DEAD_HOLDER_VALUE, other)
        .status()
        .unwrap();
    assert_eq!(exit.code(), Some(0));
    assert_eq!(read_knob(KNOB).unwrap(), other, "left changed by the dead holder");
    assert!(std::path::Path::new(JOURNAL_PATH).exists());
    drop(KnobGuard::acquire().unwrap());
    assert_eq!(read_knob(KNOB).unwrap(), original, "the journal put it back");
    assert!(!std::path::Path::new(JOURNAL_PATH).exists());
}

#[test]
fn the_scenario_suite_agrees_with_the_host_kernel_exactly() {
    if !host_available("scenario suite") {
        return;
    }
    let _serial = host_lock();
    let mut failures = Vec::new();
    let mut cases = 0;
    let mut cannot = Vec::new();
    for s in largo_host::scenario::builtin() {
        for (config, flags) in &s.configs {
            let machine = s.machine_for(flags).unwrap();
            let v = match largo_host::validate::validate(&machine, &s.trace.events) {
                Ok(v) => v,
                Err(e) => match e.cannot_run_here() {
                    Some(why) => {
                        largo_host::skip::skip(
                            &format!(
                                "the_scenario_suite_agrees_with_the_host_kernel_exactly: {} under {config}",
                                s.name
                            ),
                            &why,
                        );
                        cannot.push(format!("{} under {config}", s.name));
                        continue;
                    }
                    None => panic!("{} under {config}: {e}", s.name),
                },
            };
            cases += 1;
            let nonzero: Vec<String> = v
                .nonzero()
                .map(|r| format!("{} {}/{}", r.counter, r.model, r.host))
                .collect();
            let layout = if v.layout_agrees() {
                String::new()
            } else {
                format!(" layout largo {:?} host {:?}", v.model_layout, v.host_layout)
            };
            println!(
                "{} under {config}: {} [{}]{layout}",
                s.name,
                if v.agrees() { "agree" } else { "DIFFER" },
                nonzero.join(", ")
            );
            if !v.agrees() {
                failures.push(format!("{} under {config}: [{}]{layout}", s.name, nonzero.join(", ")));
            }
        }
    }
    assert!(cases > 0, "no scenario case could run: {cannot:?}");
    println!(
        "{cases} scenario cases, {} differ; {} cannot run on this host's kernel build: {}",
        failures.len(),
        cannot.len(),
        cannot.join(", ")
    );
    assert!(
        failures.is_empty(),
        "largo and the host kernel differ:\n{}",
        failures.join("\n")
    );
}
