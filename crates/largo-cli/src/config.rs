//! Named configurations: `--config NAME:FLAGS` is parsed once, when the
//! command line is, into a typed [`ConfigSpec`] (its MACHINE and POLICY
//! flags parsed by the same clap definitions as the command's own), and
//! resolved by merging: the flags given outside `--config` apply to every
//! configuration, a configuration's own flags override them.

use clap::Parser;
use largo_mm::MachineConfig;

use crate::args::{first_error_line, MachineArgs, PolicyArgs, UsageError};

/// `--config NAME:FLAGS`.
#[derive(Clone, Debug)]
pub struct ConfigSpec {
    pub name: String,
    pub machine: MachineArgs,
    pub policy: PolicyArgs,
}

/// The MACHINE and POLICY flags of one spec.
#[derive(Parser, Debug)]
#[command(name = "--config", no_binary_name = true)]
struct ConfigFlags {
    #[command(flatten)]
    machine: MachineArgs,
    #[command(flatten)]
    policy: PolicyArgs,
}

/// Why a `--config` value is malformed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ConfigSpecError {
    #[error(
        "'{0}': expected NAME:FLAGS, e.g. '64K:--thp 64K' ('base:' names a configuration of the common flags alone)"
    )]
    NoColon(String),
    #[error("'{0}': the configuration needs a name before ':'")]
    NoName(String),
    #[error("configuration {name}: {reason}")]
    Flags { name: String, reason: String },
}

impl ConfigSpec {
    /// Parses `NAME:FLAGS` (flags separated by spaces).
    pub fn parse(text: &str) -> Result<ConfigSpec, ConfigSpecError> {
        let (name, flags) = text
            .split_once(':')
            .ok_or_else(|| ConfigSpecError::NoColon(text.to_string()))?;
        let name = name.trim();
        if name.is_empty() {
            return Err(ConfigSpecError::NoName(text.to_string()));
        }
        let parsed = ConfigFlags::try_parse_from(flags.split_whitespace()).map_err(|e| ConfigSpecError::Flags {
            name: name.to_string(),
            reason: first_error_line(&e),
        })?;
        Ok(ConfigSpec {
            name: name.to_string(),
            machine: parsed.machine,
            policy: parsed.policy,
        })
    }

    /// A built-in configuration (its flags known to parse).
    pub fn builtin(name: &str, flags: &str) -> ConfigSpec {
        ConfigSpec::parse(&format!("{name}:{flags}")).expect("built-in configurations parse (tested)")
    }
}

/// Built-in configuration sets as (name, flags).
pub type Suite = [(&'static str, &'static str)];

/// The seed paper's configuration set, `largo run`'s default: 4K base
/// pages as the baseline, 16K and 64K base pages, and 4K pages with 16K,
/// 16K+32K, 16K+32K+64K anonymous folios.
pub const DEFAULT_SUITE: &Suite = &[
    ("4K", "--machine x86_64"),
    ("16K-pages", "--machine arm64-16k"),
    ("64K-pages", "--machine arm64-64k"),
    ("4K+16K", "--machine x86_64 --thp 16K"),
    ("4K+16K+32K", "--machine x86_64 --thp 16K,32K"),
    ("4K+16K+32K+64K", "--machine x86_64 --thp 16K,32K,64K"),
];

/// The specs of a built-in set.
pub fn suite(set: &Suite) -> Vec<ConfigSpec> {
    set.iter().map(|(n, f)| ConfigSpec::builtin(n, f)).collect()
}

/// A named configuration, resolved.
#[derive(Clone, Debug)]
pub struct NamedConfig {
    pub name: String,
    pub config: MachineConfig,
}

/// The configurations of a command: `specs` with the common `machine`
/// and `policy` flags under each.
pub fn resolve(
    specs: &[ConfigSpec],
    machine: &MachineArgs,
    policy: &PolicyArgs,
) -> Result<Vec<NamedConfig>, UsageError> {
    let mut seen = std::collections::HashSet::new();
    specs
        .iter()
        .map(|s| {
            if !seen.insert(s.name.as_str()) {
                return Err(UsageError(format!("--config: the name '{}' is used twice", s.name)));
            }
            let config = machine
                .merged(&s.machine)
                .config_with(policy.then(&s.policy))
                .map_err(|e| UsageError(format!("configuration {}: {e}", s.name)))?;
            Ok(NamedConfig {
                name: s.name.clone(),
                config,
            })
        })
        .collect()
}

/// `--config`s if given; else one configuration of the common flags if
/// a machine or policy flag was given; else `default`.
pub fn resolve_or(
    specs: &[ConfigSpec],
    machine: &MachineArgs,
    policy: &PolicyArgs,
    default: &Suite,
) -> Result<Vec<NamedConfig>, UsageError> {
    if !specs.is_empty() {
        return resolve(specs, machine, policy);
    }
    if machine.machine.is_some() || policy.is_set() {
        return resolve(&[ConfigSpec::builtin("config", "")], machine, policy);
    }
    resolve(&suite(default), machine, policy)
}

/// Parses arbitrary text as a `--config` value (the fuzz target's entry):
/// a spec or an error, never a panic.
pub fn fuzz_config_spec(data: &[u8]) {
    if let Ok(text) = std::str::from_utf8(data) {
        if let Ok(spec) = ConfigSpec::parse(text) {
            let _ = resolve(&[spec], &MachineArgs::default(), &PolicyArgs::default());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn specs_parse_once_into_typed_flags() {
        let s = ConfigSpec::parse("big:--thp 64K --mem 8G --set vm/min_free_kbytes=65536").unwrap();
        assert_eq!(s.name, "big");
        assert_eq!(s.machine.mem, Some(8 << 30));
        assert_eq!(s.policy.thp.len(), 1);
        assert_eq!(s.policy.set[0].path, "vm/min_free_kbytes");
        assert!(ConfigSpec::parse("base:").unwrap().policy.knobs().is_empty());
        assert!(matches!(ConfigSpec::parse("nocolon"), Err(ConfigSpecError::NoColon(_))));
        assert!(matches!(
            ConfigSpec::parse(" :--thp 64K"),
            Err(ConfigSpecError::NoName(_))
        ));
        let e = ConfigSpec::parse("a:--mode thread").unwrap_err().to_string();
        assert!(e.contains("configuration a") && e.contains("--mode"), "{e}");
    }

    #[test]
    fn a_config_overrides_the_common_flags_and_adds_its_knobs() {
        let common = ConfigSpec::parse("x:--mem 4G --cpus 4 --thp 16K").unwrap();
        let specs = [
            ConfigSpec::parse("a:").unwrap(),
            ConfigSpec::parse("b:--mem 8G --thp 64K").unwrap(),
        ];
        let c = resolve(&specs, &common.machine, &common.policy).unwrap();
        assert_eq!((c[0].config.mem_bytes, c[0].config.nr_cpus), (4 << 30, 4));
        assert_eq!((c[1].config.mem_bytes, c[1].config.nr_cpus), (8 << 30, 4));
        let last = |c: &NamedConfig| c.config.knobs.last().cloned().unwrap();
        assert_eq!(last(&c[0]).0, "transparent_hugepage/hugepages-16kB/enabled");
        assert_eq!(last(&c[1]).0, "transparent_hugepage/hugepages-64kB/enabled");
        assert_eq!(c[1].config.knobs.len(), 2, "the common --thp, then the config's");
        let twice = resolve(&[specs[0].clone(), specs[0].clone()], &common.machine, &common.policy);
        assert!(twice.unwrap_err().0.contains("used twice"));
    }

    #[test]
    fn the_built_in_suites_parse() {
        assert_eq!(suite(DEFAULT_SUITE).len(), 6);
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(128))]
        /// What the config_spec fuzz target checks: any `--config` value
        /// is a typed spec or an error, never a panic.
        #[test]
        fn any_config_value_parses_or_is_refused(
            text in "[a-z0-9]{0,4}:?( ?--(thp|mem|nodes|cpus|set|machine|max-page-order|balloon)( [-=0-9A-Za-z,/_]{0,12})?){0,4}|\\PC{0,24}"
        ) {
            fuzz_config_spec(text.as_bytes());
        }
    }
}
