//! The Python `Machine` and `Policy` objects (dataclasses, passed here as
//! dicts of their fields) turned into the command line's typed MACHINE and
//! POLICY options field by field: no flag string is built or parsed. Values
//! are checked by the same value parsers clap uses, so a bad one fails with
//! the command line's message, prefixed by the field's name.

use largo_cli::args::{
    parse_backing, parse_knob_write, parse_machine, parse_shmem_spec, parse_thp_policy, parse_thp_spec, MachineArgs,
    PolicyArgs, ThpEnabledArg,
};
use largo_mm::cma::CmaSpec;
use largo_mm::swap::{SwapKind, SwapSpec};
use largo_mm::virtio_mem::VirtioMemSpec;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList};

use crate::errors::usage;

/// The fields of `largo.Machine`, in its order.
pub const MACHINE_FIELDS: &[&str] = &[
    "preset",
    "mem",
    "nodes",
    "node_mem",
    "cpus",
    "backing",
    "max_page_order",
    "pageblock_order",
    "section_bits",
    "memory_block_size",
    "maxmem",
    "buddy_beyond_section",
    "pageblock_beyond_pmd",
    "cma",
    "virtio_mem",
    "movable",
    "balloon",
    "balloon_ack_us",
    "swap",
    "zswap",
    "memcg_max",
    "page_cache",
];

/// The fields of `largo.Policy`.
pub const POLICY_FIELDS: &[&str] = &["thp", "thp_enabled", "shmem", "thp_policy", "set"];

/// One dict's fields, each read at most once, unknown keys refused.
struct Fields<'py> {
    what: &'static str,
    dict: Bound<'py, PyDict>,
}

impl<'py> Fields<'py> {
    fn new(what: &'static str, obj: Option<&Bound<'py, PyAny>>, known: &[&str]) -> PyResult<Option<Fields<'py>>> {
        let Some(obj) = obj.filter(|o| !o.is_none()) else {
            return Ok(None);
        };
        let dict = obj
            .cast::<PyDict>()
            .map_err(|_| usage(format!("{what}: expected a dict of its fields")))?
            .clone();
        for key in dict.keys() {
            let key: String = key.extract()?;
            if !known.contains(&key.as_str()) {
                return Err(usage(format!(
                    "{what}: unknown field '{key}' (fields: {})",
                    known.join(", ")
                )));
            }
        }
        Ok(Some(Fields { what, dict }))
    }

    /// A field's value, `None` when absent or None.
    fn get(&self, key: &str) -> PyResult<Option<Bound<'py, PyAny>>> {
        Ok(self.dict.get_item(key)?.filter(|v| !v.is_none()))
    }

    fn name(&self, key: &str) -> String {
        format!("{}.{key}", self.what)
    }

    fn size(&self, key: &str) -> PyResult<Option<u64>> {
        self.get(key)?.map(|v| size_of(&v, &self.name(key))).transpose()
    }

    fn int<T: for<'a> FromPyObject<'a, 'py>>(&self, key: &str) -> PyResult<Option<T>> {
        self.get(key)?
            .map(|v| {
                v.extract::<T>()
                    .map_err(|_| usage(format!("{}: expected a non-negative integer in range", self.name(key))))
            })
            .transpose()
    }

    fn flag(&self, key: &str) -> PyResult<bool> {
        Ok(match self.get(key)? {
            Some(v) => v
                .extract::<bool>()
                .map_err(|_| usage(format!("{}: expected True or False", self.name(key))))?,
            None => false,
        })
    }

    fn text(&self, key: &str) -> PyResult<Option<String>> {
        self.get(key)?
            .map(|v| {
                v.extract::<String>()
                    .map_err(|_| usage(format!("{}: expected a string", self.name(key))))
            })
            .transpose()
    }

    fn list(&self, key: &str) -> PyResult<Vec<Bound<'py, PyAny>>> {
        match self.get(key)? {
            None => Ok(Vec::new()),
            Some(v) => Ok(v
                .cast::<PyList>()
                .map_err(|_| usage(format!("{}: expected a list", self.name(key))))?
                .iter()
                .collect()),
        }
    }
}

/// A byte count: an int, or a string with a K/M/G/T suffix.
fn size_of(v: &Bound<'_, PyAny>, name: &str) -> PyResult<u64> {
    if let Ok(n) = v.extract::<u64>() {
        return Ok(n);
    }
    let text: String = v
        .extract()
        .map_err(|_| usage(format!("{name}: expected bytes (int) or a size such as '16G'")))?;
    largo_types::parse_size(&text).map_err(|e| usage(format!("{name}: {e}")))
}

fn checked<T>(r: Result<T, String>, name: &str) -> PyResult<T> {
    r.map_err(|e| usage(format!("{name}: {e}")))
}

/// `largo.Machine` as MACHINE options.
pub fn machine_args(obj: Option<&Bound<'_, PyAny>>) -> PyResult<MachineArgs> {
    let Some(f) = Fields::new("Machine", obj, MACHINE_FIELDS)? else {
        return Ok(MachineArgs::default());
    };
    let node_mem = f
        .list("node_mem")?
        .iter()
        .map(|v| size_of(v, &f.name("node_mem")))
        .collect::<PyResult<Vec<u64>>>()?;
    if !node_mem.is_empty() && f.get("nodes")?.is_some() {
        return Err(usage("Machine: give nodes or node_mem, not both"));
    }
    Ok(MachineArgs {
        machine: f
            .text("preset")?
            .map(|p| checked(parse_machine(&p), "Machine.preset"))
            .transpose()?,
        mem: f.size("mem")?,
        nodes: ranged(f.int::<u16>("nodes")?, 1, 64, &f.name("nodes"))?,
        node_mem,
        cpus: ranged(f.int::<u16>("cpus")?, 1, 1024, &f.name("cpus"))?,
        backing: f
            .text("backing")?
            .map(|b| checked(parse_backing(&b), "Machine.backing"))
            .transpose()?,
        max_page_order: f.int("max_page_order")?,
        pageblock_order: f.int("pageblock_order")?,
        section_bits: f.int("section_bits")?,
        memory_block_size: f.size("memory_block_size")?,
        maxmem: f.size("maxmem")?,
        buddy_beyond_section: f.flag("buddy_beyond_section")?,
        pageblock_beyond_pmd: f.flag("pageblock_beyond_pmd")?,
        cma: f.list("cma")?.iter().map(cma_of).collect::<PyResult<_>>()?,
        virtio_mem: f.get("virtio_mem")?.map(|v| virtio_mem_of(&v)).transpose()?,
        movable: f.size("movable")?,
        balloon: f.flag("balloon")?,
        balloon_ack_us: f.int("balloon_ack_us")?,
        swap: f.list("swap")?.iter().map(swap_of).collect::<PyResult<_>>()?,
        zswap: f.flag("zswap")?,
        memcg_max: f.size("memcg_max")?,
        page_cache: f.size("page_cache")?,
    })
}

fn ranged(v: Option<u16>, lo: u16, hi: u16, name: &str) -> PyResult<Option<u16>> {
    match v {
        Some(n) if !(lo..=hi).contains(&n) => Err(usage(format!("{name}: {n} is not in {lo}..={hi}"))),
        _ => Ok(v),
    }
}

/// `largo.Cma(size, node=None)`.
fn cma_of(v: &Bound<'_, PyAny>) -> PyResult<CmaSpec> {
    let f = Fields::new("Cma", Some(v), &["size", "node"])?.expect("not None");
    let bytes = f.size("size")?.ok_or_else(|| usage("Cma.size: required"))?;
    if bytes == 0 {
        return Err(usage("Cma.size: a CMA area of size 0 (-EINVAL)"));
    }
    Ok(CmaSpec {
        bytes,
        nid: f.int("node")?,
    })
}

/// `largo.VirtioMem(size, block="2M", plugged=0, movable=False)`.
fn virtio_mem_of(v: &Bound<'_, PyAny>) -> PyResult<VirtioMemSpec> {
    let f = Fields::new("VirtioMem", Some(v), &["size", "block", "plugged", "movable"])?.expect("not None");
    let spec = VirtioMemSpec {
        region_bytes: f.size("size")?.ok_or_else(|| usage("VirtioMem.size: required"))?,
        block_bytes: f.size("block")?.unwrap_or(2 << 20),
        plugged_bytes: f.size("plugged")?.unwrap_or(0),
        movable: f.flag("movable")?,
    };
    if spec.plugged_bytes > spec.region_bytes {
        return Err(usage("VirtioMem: plugged exceeds the region size"));
    }
    Ok(spec)
}

/// `largo.Swap(size, kind="zram")`.
fn swap_of(v: &Bound<'_, PyAny>) -> PyResult<SwapSpec> {
    let f = Fields::new("Swap", Some(v), &["size", "kind"])?.expect("not None");
    let kind = match f.text("kind")?.as_deref() {
        None | Some("zram") => SwapKind::Zram,
        Some("disk") => SwapKind::Disk,
        Some(other) => return Err(usage(format!("Swap.kind: '{other}' is not zram or disk"))),
    };
    Ok(SwapSpec {
        size_bytes: f.size("size")?.ok_or_else(|| usage("Swap.size: required"))?,
        kind,
    })
}

/// `largo.Policy` as POLICY options.
pub fn policy_args(obj: Option<&Bound<'_, PyAny>>) -> PyResult<PolicyArgs> {
    let Some(f) = Fields::new("Policy", obj, POLICY_FIELDS)? else {
        return Ok(PolicyArgs::default());
    };
    let thp_enabled = match f.text("thp_enabled")?.as_deref() {
        None => None,
        Some("always") => Some(ThpEnabledArg::Always),
        Some("madvise") => Some(ThpEnabledArg::Madvise),
        Some("never") => Some(ThpEnabledArg::Never),
        Some(other) => {
            return Err(usage(format!(
                "Policy.thp_enabled: '{other}' is not always, madvise or never"
            )))
        }
    };
    Ok(PolicyArgs {
        thp: sizes(&f, "thp", parse_thp_spec)?,
        thp_enabled,
        shmem: sizes(&f, "shmem", parse_shmem_spec)?,
        thp_policy: f
            .text("thp_policy")?
            .map(|p| checked(parse_thp_policy(&p), "Policy.thp_policy"))
            .transpose()?,
        set: match f.get("set")? {
            None => Vec::new(),
            Some(v) => {
                let d = v
                    .cast::<PyDict>()
                    .map_err(|_| usage("Policy.set: expected a dict of knob path to value"))?;
                d.iter()
                    .map(|(k, v)| {
                        // Booleans as the kernel's 1 and 0.
                        let v: String = match v.cast::<pyo3::types::PyBool>() {
                            Ok(b) => if b.is_true() { "1" } else { "0" }.to_string(),
                            Err(_) => v.str()?.extract()?,
                        };
                        let k: String = k.extract()?;
                        checked(parse_knob_write(&format!("{k}={v}")), "Policy.set")
                    })
                    .collect::<PyResult<_>>()?
            }
        },
    })
}

/// `thp`/`shmem`: a dict of size to mode, each checked as one `SIZE=MODE`
/// value of the flag.
fn sizes<T>(f: &Fields<'_>, key: &str, parse: fn(&str) -> Result<T, String>) -> PyResult<Vec<T>> {
    let Some(v) = f.get(key)? else {
        return Ok(Vec::new());
    };
    let d = v
        .cast::<PyDict>()
        .map_err(|_| usage(format!("{}: expected a dict of size to mode", f.name(key))))?;
    d.iter()
        .map(|(size, mode)| {
            let (size, mode): (String, String) = (size.str()?.extract()?, mode.extract()?);
            checked(parse(&format!("{size}={mode}")), &f.name(key))
        })
        .collect()
}
