//! A cost profile that holds on this host now: the [`probe`] checks the
//! profile in use against the host; a stale one is recalibrated (a short
//! `largo calibrate`, about a minute) and the result cached for this boot
//! of this host, so later estimates in the same boot start from it.
//!
//! The cache is `$LARGO_CACHE_DIR`, else `$XDG_CACHE_HOME/largo`, else
//! `~/.cache/largo`: one `profile-BOOT_ID.json` per boot (a reboot may
//! land the VM on other hardware, and its kernel may differ).

use std::path::PathBuf;

use largo_workloads::cost::Profile;

use crate::calibrate::{fit_profile, measure, method};
use crate::hostid;
use crate::kernel_time::HostClock;
use crate::probe::{probe, Probe};
use crate::validate::ValidateError;

/// page_fault1 passes and repeats of the recalibration: half the loops
/// of a full `largo calibrate` and three repeats.
const RECAL_ITERATIONS: u64 = 4;
const RECAL_REPEATS: u64 = 3;

/// Where the profile in use came from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Origin {
    /// `--profile FILE`.
    Given,
    /// The checked-in default.
    Default,
    /// Cached for this boot by an earlier recalibration.
    Cached(PathBuf),
    /// Measured now and cached there.
    Recalibrated(PathBuf),
}

/// What was checked and what it found.
#[derive(Clone, Debug)]
pub struct Freshness {
    pub origin: Origin,
    /// `None`: not probed (not root, no mTHP controls), see `unchecked`.
    pub probe: Option<Probe>,
    /// The probe of the profile before it was recalibrated.
    pub stale_probe: Option<Probe>,
    /// Why the profile was not checked.
    pub unchecked: Option<String>,
}

impl Freshness {
    /// Whether the estimate rests on a profile the probe found stale.
    pub fn stale(&self) -> bool {
        self.probe.as_ref().is_some_and(Probe::stale)
    }
}

/// The cache directory.
pub fn cache_dir() -> Option<PathBuf> {
    if let Some(d) = std::env::var_os("LARGO_CACHE_DIR") {
        return Some(PathBuf::from(d));
    }
    if let Some(d) = std::env::var_os("XDG_CACHE_HOME") {
        return Some(PathBuf::from(d).join("largo"));
    }
    std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache/largo"))
}

/// The cached profile's path for this boot.
pub fn cache_path() -> Option<PathBuf> {
    Some(cache_dir()?.join(format!("profile-{}.json", hostid::boot_id()?)))
}

/// The profile cached for this boot, if one was and it still parses.
pub fn cached() -> Option<(Profile, PathBuf)> {
    let path = cache_path()?;
    let text = std::fs::read_to_string(&path).ok()?;
    let p = Profile::from_json(&text).ok()?;
    (p.boot_id == hostid::boot_id()).then_some((p, path))
}

/// Writes `profile` to this boot's cache file.
fn store(profile: &Profile) -> std::io::Result<PathBuf> {
    let path = cache_path().ok_or_else(|| std::io::Error::other("no cache directory (set LARGO_CACHE_DIR)"))?;
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)?;
    }
    let text = serde_json::to_string_pretty(profile).map_err(std::io::Error::other)? + "\n";
    std::fs::write(&path, text)?;
    Ok(path)
}

/// The profile to estimate this host with: `given` (`--profile`), else
/// this boot's cached one, else the default; probed against the host
/// when it can be (root), recalibrated when stale if `recalibrate` and
/// none was given, and carrying the host's measured refault cost when it
/// reports free pages. `progress` hears what is being measured.
pub fn fresh_profile(
    given: Option<Profile>,
    recalibrate: bool,
    reports_free_pages: bool,
    progress: &mut dyn FnMut(&str),
) -> Result<(Profile, Freshness), ValidateError> {
    let explicit = given.is_some();
    let (mut profile, origin) = match (given, cached()) {
        (Some(p), _) => (p, Origin::Given),
        (None, Some((p, path))) => (p, Origin::Cached(path)),
        (None, None) => (Profile::default_profile(), Origin::Default),
    };
    if let Some(reason) = crate::unavailable_reason() {
        return Ok((
            profile,
            Freshness {
                origin,
                probe: None,
                stale_probe: None,
                unchecked: Some(reason),
            },
        ));
    }
    let mut clock = HostClock::best();
    progress("probing the host's fault costs");
    let first = probe(&profile, &mut clock, reports_free_pages)?;
    if !first.stale() || !recalibrate || explicit {
        first.apply(&mut profile);
        return Ok((
            profile,
            Freshness {
                origin,
                probe: Some(first),
                stale_probe: None,
                unchecked: None,
            },
        ));
    }
    let mut recal = recalibrated(&mut clock, progress)?;
    first.apply(&mut recal);
    let path = store(&recal).map_err(ValidateError::Cache)?;
    progress("probing the recalibrated profile");
    let check = probe(&recal, &mut clock, false)?;
    Ok((
        recal,
        Freshness {
            origin: Origin::Recalibrated(path),
            probe: Some(Probe {
                refault: first.refault,
                ..check
            }),
            stale_probe: Some(first),
            unchecked: None,
        },
    ))
}

/// A short calibration of this host, named after it and the day.
fn recalibrated(clock: &mut HostClock, progress: &mut dyn FnMut(&str)) -> Result<Profile, ValidateError> {
    let points = measure(
        clock,
        RECAL_ITERATIONS,
        RECAL_REPEATS as usize,
        &mut |p| progress(&format!("recalibrating: {p}")),
        &crate::interleave::stop_requested,
    )?;
    let now = hostid::now_rfc3339();
    let name = format!("host-{}", &now[..10]);
    Ok(fit_profile(
        &points,
        &name,
        &hostid::describe_host(),
        &method(RECAL_ITERATIONS, RECAL_REPEATS, clock),
    )?)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The only test in this crate that sets LARGO_CACHE_DIR.
    #[test]
    fn a_cached_profile_serves_only_the_boot_it_was_measured_in() {
        let Some(boot) = hostid::boot_id() else {
            crate::skip::skip("a_cached_profile_serves_only_the_boot_it_was_measured_in", "no boot_id");
            return;
        };
        let dir = std::env::temp_dir().join(format!("largo-fresh-test-{}", std::process::id()));
        std::env::set_var("LARGO_CACHE_DIR", &dir);
        assert!(cached().is_none(), "an empty cache");
        let mut p = Profile::default_profile();
        p.name = "cached-here".into();
        p.boot_id = Some(boot);
        let path = store(&p).expect("the cache is writable");
        assert_eq!(
            path,
            dir.join(format!("profile-{}.json", p.boot_id.as_deref().unwrap()))
        );
        let (back, at) = cached().expect("this boot's profile");
        assert_eq!((back.name.as_str(), at), ("cached-here", path.clone()));
        // The same file claiming another boot is not used.
        p.boot_id = Some("another-boot".into());
        std::fs::write(&path, serde_json::to_string(&p).unwrap()).unwrap();
        assert!(cached().is_none());
        std::fs::remove_dir_all(&dir).unwrap();
        std::env::remove_var("LARGO_CACHE_DIR");
    }
}
