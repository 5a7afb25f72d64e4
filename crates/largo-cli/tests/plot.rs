//! `--plot FILE.svg`: every time series the CLI prints, and the run
//! table's grouped bars, drawn as SVG with labelled axes.

mod common;

use common::{largo, stdout};

/// A scratch directory for this test's figures.
fn dir(name: &str) -> std::path::PathBuf {
    let d = std::env::temp_dir().join(format!("largo-plot-{name}-{}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// The figure at `path`, checked to be SVG holding `texts`.
fn figure(path: &std::path::Path, texts: &[&str]) -> String {
    let svg = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    assert!(svg.starts_with("<svg"), "{}", &svg[..svg.len().min(200)]);
    for t in texts {
        assert!(svg.contains(t), "no '{t}' in {}", path.display());
    }
    svg
}

#[test]
fn a_run_table_is_drawn_as_grouped_bars_of_change() {
    let d = dir("run");
    let f = d.join("run.svg");
    let p = f.to_str().unwrap();
    stdout(&[
        "run",
        "page_fault1:size=16M",
        "anon-w-rand:size=16M",
        "--config",
        "4K:",
        "--config",
        "16K:--thp 16K",
        "--config",
        "64K:--thp 64K",
        "--plot",
        p,
        "--plot-metric",
        "faults",
    ]);
    let svg = figure(
        &f,
        &[
            "page faults (pgfault) against 4K",
            "change in page faults (pgfault) (%)",
            "page_fault1",
            "anon-w-rand",
            "16K",
            "64K",
        ],
    );
    // Two workloads x two configurations, plus the two legend swatches.
    assert!(
        svg.matches("<rect").count() >= 6,
        "{} rects",
        svg.matches("<rect").count()
    );
    let one = largo(&["run", "page_fault1:size=16M", "--config", "a:", "--plot", p]);
    assert_eq!(one.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&one.stderr).contains("needs two configurations"));
    let _ = std::fs::remove_dir_all(&d);
}

#[test]
fn the_reporting_timeline_of_a_balloon_run() {
    let d = dir("reporting");
    let f = d.join("rep.svg");
    let p = f.to_str().unwrap();
    stdout(&[
        "run",
        "memhog:size=256M,idle=20s",
        "--mem",
        "4G",
        "--balloon",
        "--config",
        "a:",
        "--plot-reporting",
        p,
    ]);
    let svg = figure(&f, &["reported (MiB, cumulative)", "time (s)", "a memhog"]);
    assert!(svg.contains("<polyline"), "a line drawn");
    let idle = largo(&[
        "run",
        "page_fault1:size=8M",
        "--balloon",
        "--config",
        "a:",
        "--plot-reporting",
        p,
    ]);
    assert!(String::from_utf8_lossy(&idle.stderr).contains("no reporting pass ran"));
    let none = largo(&["run", "page_fault1:size=8M", "--config", "a:", "--plot-reporting", p]);
    assert!(String::from_utf8_lossy(&none.stderr).contains("no configuration has a reporting device (add --balloon)"));
    assert_eq!(none.status.code(), Some(2));
    assert!(none.stdout.is_empty(), "refused before anything ran");
    let _ = std::fs::remove_dir_all(&d);
}

#[test]
fn the_benches_draw_their_series() {
    let d = dir("bench");
    let (g, t, m) = (d.join("gig.svg"), d.join("tlb.svg"), d.join("mig.svg"));
    stdout(&[
        "bench",
        "gigantic",
        "--mem",
        "8G",
        "--steps",
        "2",
        "--plot",
        g.to_str().unwrap(),
    ]);
    figure(
        &g,
        &[
            "2M allocations",
            "32M allocations",
            "1G allocations",
            "allocations that succeeded (%)",
            "max18",
        ],
    );
    stdout(&[
        "bench",
        "tlb",
        "--model-only",
        "--ranges",
        "64M,256M",
        "--plot",
        t.to_str().unwrap(),
    ]);
    figure(
        &t,
        &[
            "chase loads",
            "stride loads",
            "time per access (ns)",
            "64K largo",
            "range (MiB, log scale)",
        ],
    );
    stdout(&[
        "bench",
        "migrate",
        "--quick",
        "--runs",
        "1",
        "--plot",
        m.to_str().unwrap(),
    ]);
    figure(
        &m,
        &[
            "GB/s (measured copy + estimated kernel time)",
            "folios per move_pages call (log scale)",
            "vanilla",
            "memcpy (best)",
        ],
    );
    let _ = std::fs::remove_dir_all(&d);
}
