//! Order policies: which folio orders an anonymous write fault tries.
//!
//! The kernel's choice (`alloc_anon_folio`, `__handle_mm_fault`'s PMD
//! branch) is fixed: the largest order the sysfs knobs allow whose
//! aligned block fits the VMA and is all `pte_none`. largo keeps that as
//! the `static` policy, the default, and adds policies that narrow the
//! knobs' orders per fault from the VMA's fault history
//! ([`FaultHistory`]): `adaptive` (a per-VMA ceiling that rises on faults
//! extending a contiguous run and falls on sparse ones) and `ingens`
//! (base pages at fault time, a block promoted to a large folio once
//! enough of it is populated; Kwon et al., "Coordinated and Efficient
//! Huge Page Management with Ingens", OSDI 2016). A policy never widens
//! what the knobs allow: it only chooses among the orders they permit.
//!
//! Selected with the largo-only knob `largo/thp_policy`
//! (`--thp-policy NAME[:PARAM=VALUE,...]`).

mod adaptive;
mod history;
mod ingens;

pub use adaptive::Adaptive;
pub use history::FaultHistory;
pub use ingens::Ingens;

use super::order::Orders;

/// What a policy sees of one anonymous write fault.
#[derive(Clone, Copy, Debug)]
pub struct FaultSite {
    /// The faulting page (address >> PAGE_SHIFT).
    pub page: u64,
    /// The VMA's size in base pages.
    pub vma_pages: u64,
    /// The PMD order of the machine (the largest order a fault maps).
    pub pmd_order: u32,
    /// The page just before or just after the faulting one is populated
    /// (after the fault: just before or after its folio).
    pub beside_populated: bool,
}

/// What is populated around a fault, read from the page tables on demand.
pub trait BlockFill {
    /// The populated share, per mille, of the fuller of the two aligned
    /// blocks of `order` just before and just after the faulting one (a
    /// PMD-mapped block is full). Blocks outside the VMA count as empty.
    fn beside_per_mille(&self, order: u32) -> u32;
}

/// A folio-order policy for anonymous write faults.
pub trait OrderPolicy {
    /// Of `allowed` (the orders the knobs allow at this fault, already
    /// filtered for fit and `pte_none`), the orders to try, largest first.
    /// An empty set means a base page.
    fn orders(&self, site: &FaultSite, hist: &FaultHistory, allowed: Orders, fill: &dyn BlockFill) -> Orders;

    /// The fault mapped a folio of `order` whose first page is
    /// `first_page`: update the VMA's history.
    fn mapped(&self, site: &FaultSite, first_page: u64, order: u32, hist: &mut FaultHistory);

    /// Whether policy may promote blocks at all (the hook below is only
    /// asked then).
    fn promotes(&self) -> bool {
        false
    }

    /// After a fault (and [`OrderPolicy::mapped`]): promote the aligned
    /// block of `order` around it, `populated` of whose `nr_pages` base
    /// pages are populated, into one folio of that order?
    fn promote(&self, _site: &FaultSite, _hist: &FaultHistory, _order: u32, _populated: u64, _nr_pages: u64) -> bool {
        false
    }
}

/// The kernel's policy: every order the knobs allow, largest first.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Static;

impl OrderPolicy for Static {
    fn orders(&self, _: &FaultSite, _: &FaultHistory, allowed: Orders, _: &dyn BlockFill) -> Orders {
        allowed
    }

    fn mapped(&self, _: &FaultSite, _: u64, _: u32, _: &mut FaultHistory) {}
}

/// The machine's order policy with its parameters (`largo/thp_policy`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum ThpPolicy {
    #[default]
    Static,
    Adaptive(Adaptive),
    Ingens(Ingens),
}

/// The policy names, for help and errors.
pub const POLICY_NAMES: &str = "static, adaptive[:grow=N,small=PAGES,dense=PERCENT], ingens[:util=PERCENT]";

/// A `largo/thp_policy` value that does not parse.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PolicyParseError {
    #[error("unknown order policy '{0}': expected {POLICY_NAMES}")]
    Unknown(String),
    #[error("policy '{policy}': unknown parameter '{param}' (expected {expected})")]
    UnknownParam {
        policy: &'static str,
        param: String,
        expected: &'static str,
    },
    #[error("policy '{policy}': {param}={value}: expected an integer in {min}..={max}")]
    BadValue {
        policy: &'static str,
        param: String,
        value: String,
        min: u32,
        max: u32,
    },
}

impl ThpPolicy {
    /// Parses `NAME[:PARAM=VALUE,...]`.
    pub fn parse(text: &str) -> Result<ThpPolicy, PolicyParseError> {
        let text = text.trim();
        let (name, params) = text.split_once(':').unwrap_or((text, ""));
        let params: Vec<(&str, &str)> = params
            .split(',')
            .map(str::trim)
            .filter(|p| !p.is_empty())
            .map(|p| p.split_once('=').unwrap_or((p, "")))
            .collect();
        match name {
            "static" => match params.first() {
                None => Ok(ThpPolicy::Static),
                Some((p, _)) => Err(PolicyParseError::UnknownParam {
                    policy: "static",
                    param: p.to_string(),
                    expected: "none",
                }),
            },
            "adaptive" => Adaptive::from_params(&params).map(ThpPolicy::Adaptive),
            "ingens" => Ingens::from_params(&params).map(ThpPolicy::Ingens),
            other => Err(PolicyParseError::Unknown(other.to_string())),
        }
    }

    /// The value as `largo/thp_policy` prints it (parses back to itself).
    pub fn spec(&self) -> String {
        match self {
            ThpPolicy::Static => "static".into(),
            ThpPolicy::Adaptive(a) => a.spec(),
            ThpPolicy::Ingens(i) => i.spec(),
        }
    }

    /// The kernel's own policy: the model is exactly the kernel.
    pub fn is_static(&self) -> bool {
        *self == ThpPolicy::Static
    }

    pub fn policy(&self) -> &dyn OrderPolicy {
        match self {
            ThpPolicy::Static => &Static,
            ThpPolicy::Adaptive(a) => a,
            ThpPolicy::Ingens(i) => i,
        }
    }
}

/// One integer parameter in `min..=max`.
pub(crate) fn param_u32(
    policy: &'static str,
    param: &str,
    value: &str,
    min: u32,
    max: u32,
) -> Result<u32, PolicyParseError> {
    value
        .parse::<u32>()
        .ok()
        .filter(|v| (min..=max).contains(v))
        .ok_or_else(|| PolicyParseError::BadValue {
            policy,
            param: param.to_string(),
            value: value.to_string(),
            min,
            max,
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn specs_parse_back_to_themselves() {
        for text in [
            "static",
            "adaptive",
            "adaptive:grow=2,small=4,dense=60",
            "ingens",
            "ingens:util=50",
        ] {
            let p = ThpPolicy::parse(text).unwrap();
            assert_eq!(ThpPolicy::parse(&p.spec()).unwrap(), p, "{text}");
        }
        assert!(ThpPolicy::parse("static").unwrap().is_static());
        assert!(!ThpPolicy::parse("adaptive").unwrap().is_static());
    }

    #[test]
    fn bad_specs_say_why() {
        let e = ThpPolicy::parse("greedy").unwrap_err().to_string();
        assert!(e.contains("unknown order policy 'greedy'"), "{e}");
        let e = ThpPolicy::parse("ingens:util=0").unwrap_err().to_string();
        assert!(e.contains("util=0"), "{e}");
        let e = ThpPolicy::parse("adaptive:speed=3").unwrap_err().to_string();
        assert!(e.contains("unknown parameter 'speed'"), "{e}");
        assert!(ThpPolicy::parse("static:x=1").is_err());
    }
}
