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
            }
            sep = ',';
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
}
