//! POLICY as text: the value of `--thp` (`16K,64K=madvise`), and the
//! flags of a scenario file's `@config` line (`--thp 16K,64K=madvise --set
//! KNOB=VALUE --thp-enabled always`): the knob writes they mean, in order.

/// A POLICY value or flag text that does not parse.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PolicyError {
    /// A machine flag (`--swap`, `--memcg-max`) with a bad value.
    #[error("{0}")]
    Machine(String),
    #[error("'{spec}': unknown mode '{mode}': expected {expected}")]
    UnknownMode {
        spec: String,
        mode: String,
        expected: &'static str,
    },
    #[error("'{spec}': {source}")]
    BadSize {
        spec: String,
        source: largo_types::SizeError,
    },
    #[error("'{size}' is not a power-of-two size of at least 1K")]
    NotAFolioSize { size: String },
    #[error("'{0}': no size given, e.g. 16K,64K")]
    NoSize(String),
    #[error("'{0}' is not a policy flag (--thp, --thp-enabled, --shmem, --shmem-enabled, --thp-policy, --set)")]
    NotAPolicyFlag(String),
    #[error("{0} needs a value")]
    NeedsValue(String),
    #[error("'{0}': expected KNOB=VALUE")]
    MalformedSet(String),
}

/// The per-size `enabled` writes of a `SIZES[=MODE]` value (`--thp`):
/// `16K,64K` (always), `2M=madvise`. Sizes are checked against the
/// machine when the knobs are applied.
pub fn thp_knobs(spec: &str) -> Result<Vec<(String, String)>, PolicyError> {
    sized_knobs(spec, "enabled", &["always", "inherit", "madvise", "never"])
}

/// The per-size `shmem_enabled` writes of a `SIZES[=MODE]` value
/// (`--shmem`): `64K` (always), `2M=within_size`.
pub fn shmem_knobs(spec: &str) -> Result<Vec<(String, String)>, PolicyError> {
    sized_knobs(
        spec,
        "shmem_enabled",
        &["always", "inherit", "within_size", "advise", "never"],
    )
}

/// `hugepages-<size>kB/<file>` writes of `SIZES[=MODE]`.
fn sized_knobs(spec: &str, file: &str, modes: &'static [&'static str]) -> Result<Vec<(String, String)>, PolicyError> {
    let (sizes, mode) = spec.split_once('=').unwrap_or((spec, "always"));
    let mode = mode.trim();
    if !modes.contains(&mode) {
        let expected = if modes.len() == 4 {
            "always, inherit, madvise or never"
        } else {
            "always, inherit, within_size, advise or never"
        };
        return Err(PolicyError::UnknownMode {
            spec: spec.to_string(),
            mode: mode.to_string(),
            expected,
        });
    }
    let mut out = Vec::new();
    for size in sizes.split(',').map(str::trim).filter(|s| !s.is_empty()) {
        let bytes = largo_types::parse_size(size).map_err(|source| PolicyError::BadSize {
            spec: spec.to_string(),
            source,
        })?;
        if bytes < 1024 || !bytes.is_power_of_two() {
            return Err(PolicyError::NotAFolioSize { size: size.to_string() });
        }
        out.push((
            format!("transparent_hugepage/hugepages-{}kB/{file}", bytes >> 10),
            mode.to_string(),
        ));
    }
    if out.is_empty() {
        return Err(PolicyError::NoSize(spec.to_string()));
    }
    Ok(out)
}

/// The knob writes of POLICY flags as text, separated by spaces (the
/// `@config` lines of scenario files): `--thp SIZES[=MODE]`,
/// `--thp-enabled MODE`, `--shmem SIZES[=MODE]`, `--shmem-enabled MODE`,
/// `--thp-policy NAME[:PARAMS]`, `--set KNOB=VALUE`.
pub fn policy_knobs(flags: &str) -> Result<Vec<(String, String)>, PolicyError> {
    let mut out = Vec::new();
    let mut it = flags.split_whitespace();
    while let Some(flag) = it.next() {
        let (name, inline) = match flag.split_once('=') {
            Some((n, v)) if n.starts_with("--") => (n, Some(v)),
            _ => (flag, None),
        };
        let mut value = || {
            inline
                .map(str::to_string)
                .or_else(|| it.next().map(str::to_string))
                .ok_or_else(|| PolicyError::NeedsValue(name.to_string()))
        };
        match name {
            "--thp" => out.extend(thp_knobs(&value()?)?),
            "--thp-enabled" => out.push(("transparent_hugepage/enabled".into(), value()?)),
            "--shmem" => out.extend(shmem_knobs(&value()?)?),
            "--shmem-enabled" => out.push(("transparent_hugepage/shmem_enabled".into(), value()?)),
            "--thp-policy" => out.push(("largo/thp_policy".into(), value()?)),
            "--set" => {
                let v = value()?;
                let (k, val) = v.split_once('=').ok_or_else(|| PolicyError::MalformedSet(v.clone()))?;
                out.push((k.trim().to_string(), val.trim().to_string()));
            }
            other => return Err(PolicyError::NotAPolicyFlag(other.to_string())),
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn policy_flags_become_knob_writes() {
        let k = policy_knobs("--thp 16K,64K --thp 2M=madvise --set transparent_hugepage/use_zero_page=0").unwrap();
        assert_eq!(
            k,
            [
                (
                    "transparent_hugepage/hugepages-16kB/enabled".to_string(),
                    "always".to_string()
                ),
                ("transparent_hugepage/hugepages-64kB/enabled".into(), "always".into()),
                ("transparent_hugepage/hugepages-2048kB/enabled".into(), "madvise".into()),
                ("transparent_hugepage/use_zero_page".into(), "0".into()),
            ]
        );
        assert!(policy_knobs("--thp 48K").is_err());
        assert!(policy_knobs("--mem 8G").is_err());
        assert!(policy_knobs("--set").is_err());
        assert!(policy_knobs("").unwrap().is_empty());
    }
}
