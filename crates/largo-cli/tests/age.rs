//! `largo age`: aging over simulated hours, the remedies side by side.

mod common;

use common::{largo, stdout};

#[test]
fn aging_samples_every_minute_of_every_remedy_reproducibly() {
    let args = ["age", "server", "--hours", "1", "--mem", "4G", "--json"];
    let text = stdout(&args);
    let lines: Vec<serde_json::Value> = text.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    assert_eq!(lines.len(), 5 * 60, "five remedies, sixty minutes each");
    let configs: std::collections::BTreeSet<&str> = lines.iter().map(|l| l["config"].as_str().unwrap()).collect();
    assert_eq!(configs.len(), 5);
    assert!(lines
        .iter()
        .all(|l| l["minute"].as_u64().unwrap() >= 1 && l["alloc"].is_object()));
    // The heap is written in the first minute with 2M folios.
    assert!(lines[0]["alloc"]["2048kB"].as_u64().unwrap() > 0, "{}", lines[0]);
    assert_eq!(stdout(&args), text, "the same seed gives the same minutes");
    let table = stdout(&["age", "phone", "--hours", "1", "--mem", "4G"]);
    assert!(
        table.contains("2048kB success") && table.contains("movable-25%") && table.contains("tao-25%"),
        "{table}"
    );
    let bad = largo(&["age", "desktop"]);
    assert_eq!(bad.status.code(), Some(2));
}

/// `largo age server` for an hour on 4 GiB under `config`, plotted to `path`.
fn plot_args<'a>(config: &'a str, path: &'a str) -> [&'a str; 10] {
    [
        "age", "server", "--hours", "1", "--mem", "4G", "--config", config, "--plot", path,
    ]
}

#[test]
fn the_success_curves_are_drawn_as_svg() {
    let dir = std::env::temp_dir().join(format!("largo-age-plot-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("age.svg");
    stdout(&plot_args("baseline:--thp 64K,2M", file.to_str().unwrap()));
    let svg = std::fs::read_to_string(&file).unwrap();
    assert!(svg.starts_with("<svg"), "{}", &svg[..svg.len().min(200)]);
    for text in [
        "simulated hours",
        "faults that got the size (%)",
        "baseline 2048kB",
        "baseline 64kB",
    ] {
        assert!(svg.contains(text), "no '{text}' in the figure");
    }
    assert!(svg.matches("<polyline").count() >= 2, "two series drawn");
    let bad = largo(&plot_args("baseline:--thp 64K", "/nonexistent-dir/x.svg"));
    assert!(!bad.status.success());
    assert!(String::from_utf8_lossy(&bad.stderr).contains("cannot draw /nonexistent-dir/x.svg"));
    let _ = std::fs::remove_dir_all(&dir);
}

/// Share of faults of `size` that got it over `minutes` of `config`.
fn success(lines: &[serde_json::Value], config: &str, size: &str, minutes: std::ops::RangeInclusive<u64>) -> f64 {
    let (mut a, mut f) = (0, 0);
    for l in lines
        .iter()
        .filter(|l| l["config"] == config && minutes.contains(&l["minute"].as_u64().unwrap()))
    {
        a += l["alloc"][size].as_u64().unwrap_or(0);
        f += l["fallback"][size].as_u64().unwrap_or(0);
    }
    a as f64 / (a + f).max(1) as f64
}

#[test]
fn a_phone_page_cache_fills_memory_and_the_tao_zone_keeps_large_folios() {
    let text = stdout(&[
        "age",
        "phone",
        "--hours",
        "1",
        "--mem",
        "4G",
        "--json",
        "--config",
        "baseline:--thp 64K,2M",
        "--config",
        "tao:--thp 64K,2M --movable 1024M --set largo/movable_min_kb=64",
    ]);
    let lines: Vec<serde_json::Value> = text.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    let early = success(&lines, "baseline", "64kB", 1..=10);
    let late = success(&lines, "baseline", "64kB", 40..=60);
    assert!(early > 0.95, "a fresh phone gets its 64K folios: {early}");
    assert!(late < 0.8, "once the page cache fills memory they get scarce: {late}");
    let tao = success(&lines, "tao", "2048kB", 40..=60);
    let base = success(&lines, "baseline", "2048kB", 40..=60);
    assert!(tao > base, "the TAO-style zone keeps 2M folios: {tao} vs {base}");
}
