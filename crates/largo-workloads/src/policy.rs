//! POLICY flags as text (`--thp 16K,64K=madvise --set KNOB=VALUE
//! --thp-enabled always`), for scenario files and named configurations:
//! the knob writes they mean, in order.

/// `--thp SIZES[=MODE]`: per-size `enabled` writes. Sizes are checked
/// against the machine when the knobs are applied.
pub fn thp_knobs(spec: &str) -> Result<Vec<(String, String)>, String> {
    let (sizes, mode) = spec.split_once('=').unwrap_or((spec, "always"));
    let mode = mode.trim();
    if !["always", "inherit", "madvise", "never"].contains(&mode) {
        return Err(format!(
            "--thp {spec}: unknown mode '{mode}': expected always, inherit, madvise or never"
        ));
    }
    let mut out = Vec::new();
    for size in sizes.split(',').map(str::trim).filter(|s| !s.is_empty()) {
        let bytes = largo_types::parse_size(size).map_err(|e| format!("--thp {spec}: {e}"))?;
        if bytes < 1024 || !bytes.is_power_of_two() {
            return Err(format!(
                "--thp {spec}: {size} is not a power-of-two size of at least 1K"
            ));
        }
        out.push((
            format!("transparent_hugepage/hugepages-{}kB/enabled", bytes >> 10),
            mode.to_string(),
        ));
    }
    if out.is_empty() {
        return Err(format!("--thp {spec}: no size given, e.g. --thp 16K,64K"));
    }
    Ok(out)
}

/// The knob writes of POLICY flags separated by spaces.
pub fn policy_knobs(flags: &str) -> Result<Vec<(String, String)>, String> {
    let mut out = Vec::new();
    let mut it = flags.split_whitespace();
    while let Some(flag) = it.next() {
        let (name, inline) = match flag.split_once('=') {
            Some((n, v)) if n.starts_with("--") && !n.contains("thp ") => (n, Some(v)),
            _ => (flag, None),
        };
        let mut value = || {
            inline
                .map(str::to_string)
                .or_else(|| it.next().map(str::to_string))
                .ok_or_else(|| format!("{name} needs a value"))
        };
        match name {
            "--thp" => out.extend(thp_knobs(&value()?)?),
            "--thp-enabled" => out.push(("transparent_hugepage/enabled".into(), value()?)),
            "--set" => {
                let v = value()?;
                let (k, val) = v
                    .split_once('=')
                    .ok_or_else(|| format!("--set {v}: expected KNOB=VALUE"))?;
                out.push((k.trim().to_string(), val.trim().to_string()));
            }
            other => return Err(format!("'{other}' is not a policy flag (--thp, --thp-enabled, --set)")),
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
