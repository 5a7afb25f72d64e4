//! Workload specifications as the command line writes them:
//! `NAME[:KEY=VALUE[,KEY=VALUE]...]`, e.g. `page_fault1:iterations=2,size=64M`.

use std::collections::BTreeMap;
use std::fmt;

use largo_types::{format_size, parse_size};

/// The kind of value a parameter takes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ParamKind {
    /// A byte size with an optional K/M/G/T suffix.
    Size,
    /// A non-negative integer.
    Count,
    /// Simulated time in ns, written `30s`, `500ms`, `2m`, `100us`.
    Duration,
    /// One of these names; the value is its index.
    Choice(&'static [&'static str]),
}

/// A malformed duration.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DurationError {
    #[error("'{0}': expected a duration such as 30s, 500ms or 2m")]
    NotADuration(String),
    #[error("unknown time unit '{0}': use ns, us, ms, s or m")]
    UnknownUnit(String),
    #[error("'{0}': duration too long")]
    TooLong(String),
}

/// Parses `30s`, `500ms`, `100us`, `2m` (or plain ns) into ns.
pub fn parse_duration(text: &str) -> Result<u64, DurationError> {
    let t = text.trim();
    let split = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let n: u64 = num.parse().map_err(|_| DurationError::NotADuration(t.to_string()))?;
    let scale = match unit {
        "" | "ns" => 1,
        "us" => 1_000,
        "ms" => 1_000_000,
        "s" => 1_000_000_000,
        "m" => 60_000_000_000,
        _ => return Err(DurationError::UnknownUnit(unit.to_string())),
    };
    n.checked_mul(scale)
        .ok_or_else(|| DurationError::TooLong(t.to_string()))
}

/// A duration as `parse_duration` reads it, in the largest exact unit.
pub fn format_duration(ns: u64) -> String {
    for (unit, scale) in [
        ("m", 60_000_000_000),
        ("s", 1_000_000_000),
        ("ms", 1_000_000),
        ("us", 1_000),
    ] {
        if ns >= scale && ns.is_multiple_of(scale) {
            return format!("{}{unit}", ns / scale);
        }
    }
    format!("{ns}ns")
}

/// One named parameter of a workload, with its default.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ParamDef {
    pub name: &'static str,
    pub kind: ParamKind,
    pub default: u64,
    /// Smallest accepted value.
    pub min: u64,
    pub help: &'static str,
}

impl ParamDef {
    /// The default as the command line would write it.
    pub fn default_text(&self) -> String {
        match self.kind {
            ParamKind::Size => format_size(self.default),
            ParamKind::Count => self.default.to_string(),
            ParamKind::Duration => format_duration(self.default),
            ParamKind::Choice(names) => names[self.default as usize].to_string(),
        }
    }
}

/// A malformed or unknown workload specification.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SpecError {
    #[error("unknown workload '{name}': `largo list workloads` shows the {available}")]
    UnknownWorkload { name: String, available: String },
    #[error("workload {workload} has no parameter '{param}': it takes {accepted}")]
    UnknownParam {
        workload: String,
        param: String,
        accepted: String,
    },
    #[error("invalid value '{value}' for {workload}:{param}: {reason}")]
    BadValue {
        workload: String,
        param: String,
        value: String,
        reason: String,
    },
    #[error("malformed workload parameter '{0}': expected KEY=VALUE, e.g. size=128M")]
    Malformed(String),
}

/// A parsed specification: a workload name and its parameter values
/// (defaults filled in).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WorkloadSpec {
    pub name: String,
    pub params: BTreeMap<&'static str, u64>,
    defs: &'static [ParamDef],
}

impl WorkloadSpec {
    /// Parses `NAME[:K=V,...]` against the parameter list of its workload.
    pub fn parse(text: &str, defs: &'static [ParamDef], name: &str) -> Result<WorkloadSpec, SpecError> {
        let mut params: BTreeMap<&'static str, u64> = defs.iter().map(|d| (d.name, d.default)).collect();
        let rest = text.split_once(':').map(|(_, r)| r).unwrap_or("");
        for item in rest.split(',').filter(|s| !s.trim().is_empty()) {
            let (key, value) = item
                .split_once('=')
                .ok_or_else(|| SpecError::Malformed(item.to_string()))?;
            let (key, value) = (key.trim(), value.trim());
            let def = defs
                .iter()
                .find(|d| d.name == key)
                .ok_or_else(|| SpecError::UnknownParam {
                    workload: name.to_string(),
                    param: key.to_string(),
                    accepted: defs.iter().map(|d| d.name).collect::<Vec<_>>().join(", "),
                })?;
            let bad = |reason: String| SpecError::BadValue {
                workload: name.to_string(),
                param: key.to_string(),
                value: value.to_string(),
                reason,
            };
            let v = match def.kind {
                ParamKind::Size => parse_size(value).map_err(|e| bad(e.to_string()))?,
                ParamKind::Count => value
                    .parse::<u64>()
                    .map_err(|_| bad("expected a non-negative integer".into()))?,
                ParamKind::Duration => parse_duration(value).map_err(|e| bad(e.to_string()))?,
                ParamKind::Choice(names) => names
                    .iter()
                    .position(|n| *n == value)
                    .ok_or_else(|| bad(format!("expected one of {}", names.join(", "))))?
                    as u64,
            };
            if v < def.min {
                return Err(bad(format!("must be at least {}", def.min)));
            }
            params.insert(def.name, v);
        }
        Ok(WorkloadSpec {
            name: name.to_string(),
            params,
            defs,
        })
    }

    /// A parameter's value (every declared parameter has one).
    pub fn get(&self, name: &str) -> u64 {
        *self
            .params
            .get(name)
            .unwrap_or_else(|| panic!("workload {} declares no parameter {name}", self.name))
    }

    /// The name of the workload as given, without parameters.
    pub fn workload_name(text: &str) -> &str {
        text.split_once(':').map_or(text, |(n, _)| n).trim()
    }
}

impl WorkloadSpec {
    /// The full specification with every parameter, sizes with suffixes,
    /// in declaration order: `page_fault1:size=128M,iterations=4`.
    pub fn describe(&self) -> String {
        self.to_string()
    }
}

impl fmt::Display for WorkloadSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.name)?;
        let mut sep = ':';
        for def in self.defs {
            let v = self.get(def.name);
            match def.kind {
                ParamKind::Size => write!(f, "{sep}{}={}", def.name, format_size(v))?,
                ParamKind::Count => write!(f, "{sep}{}={v}", def.name)?,
                ParamKind::Duration => write!(f, "{sep}{}={}", def.name, format_duration(v))?,
                ParamKind::Choice(names) => write!(f, "{sep}{}={}", def.name, names[v as usize])?,
            }
            sep = ',';
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_round_trip() {
        assert_eq!(parse_duration("30s"), Ok(30_000_000_000));
        assert_eq!(parse_duration("500ms"), Ok(500_000_000));
        assert_eq!(parse_duration("2m"), Ok(120_000_000_000));
        assert!(parse_duration("3h").unwrap_err().to_string().contains("unit"));
        assert!(parse_duration("s").is_err());
        for ns in [0, 1500, 2_000_000, 30_000_000_000, 90_000_000_000] {
            assert_eq!(parse_duration(&format_duration(ns)), Ok(ns));
        }
    }

    const DEFS: &[ParamDef] = &[
        ParamDef {
            name: "size",
            kind: ParamKind::Size,
            default: 128 << 20,
            min: 1,
            help: "",
        },
        ParamDef {
            name: "iterations",
            kind: ParamKind::Count,
            default: 1,
            min: 1,
            help: "",
        },
    ];

    #[test]
    fn parses_defaults_and_overrides() {
        let s = WorkloadSpec::parse("w", DEFS, "w").unwrap();
        assert_eq!((s.get("size"), s.get("iterations")), (128 << 20, 1));
        let s = WorkloadSpec::parse("w:iterations=2, size=64M", DEFS, "w").unwrap();
        assert_eq!((s.get("size"), s.get("iterations")), (64 << 20, 2));
    }

    #[test]
    fn describes_itself_as_it_parses() {
        let s = WorkloadSpec::parse("w:iterations=2", DEFS, "w").unwrap();
        assert_eq!(s.describe(), "w:size=128M,iterations=2");
        assert_eq!(WorkloadSpec::parse(&s.describe(), DEFS, "w").unwrap(), s);
    }

    #[test]
    fn rejects_bad_input_with_the_reason() {
        let e = WorkloadSpec::parse("w:pages=2", DEFS, "w").unwrap_err();
        assert!(e.to_string().contains("it takes size, iterations"), "{e}");
        let e = WorkloadSpec::parse("w:size=12Q", DEFS, "w").unwrap_err();
        assert!(matches!(e, SpecError::BadValue { .. }), "{e}");
        let e = WorkloadSpec::parse("w:iterations=0", DEFS, "w").unwrap_err();
        assert!(e.to_string().contains("at least 1"), "{e}");
        assert!(matches!(
            WorkloadSpec::parse("w:size", DEFS, "w"),
            Err(SpecError::Malformed(_))
        ));
    }

    proptest::proptest! {
        /// What the workload_spec fuzz target checks: any text is a
        /// specification that prints and parses back the same, or an error.
        #[test]
        fn any_specification_parses_or_is_refused(
            text in "(page_fault1|anon-w-seq|memhog|sparse|x)(:[a-z]{0,10}=[0-9a-zA-Z]{0,6}(,[a-z]{0,10}=[0-9a-zA-Z]{0,6}){0,3})?|\\PC{0,20}"
        ) {
            if let Ok((def, spec)) = crate::builtin::parse(&text) {
                proptest::prop_assert_eq!(def.parse(&spec.describe()), Ok(spec));
            }
            let _ = parse_duration(&text);
            let _ = crate::policy::thp_knobs(&text);
            let _ = crate::policy::policy_knobs(&text);
        }
    }
}
