//! Issue 16 as a user runs it: `largo bench pageblock --json`, CMA and
//! virtio-mem steps through `largo hotplug`, and their bad input.

mod common;

use common::{assert_usage_error, json_lines, largo, stdout};

#[test]
fn bench_pageblock_puts_numbers_on_each_claim() {
    let cells = json_lines(&["bench", "pageblock", "--mem", "4G", "--minutes", "5", "--json"]);
    let value = |variant: &str, metric: &str| {
        cells
            .iter()
            .find(|c| c["variant"] == variant && c["metric"] == metric)
            .unwrap_or_else(|| panic!("no {variant} {metric}"))["value"]
            .as_f64()
            .unwrap()
    };
    for c in &cells {
        assert_eq!(c["experiment"], "pageblock");
        assert_eq!(c["mem_gib"], 4);
    }
    assert_eq!(cells.len(), 2 * 8, "two variants x eight metrics");
    // A CMA area is at least a pageblock.
    assert_eq!(value("pageblock-2M", "cma_min_area_mib"), 2.0);
    assert_eq!(value("pageblock-1G", "cma_min_area_mib"), 1024.0);
    assert_eq!(value("pageblock-1G", "cma_area_mib_for_256m"), 1024.0);
    // Reporting at a 1 GiB order on a 4 GiB machine returns nothing; at 2 MiB it does.
    assert!(value("pageblock-2M", "reported_mib_per_min") > 0.0);
    assert_eq!(value("pageblock-1G", "reported_mib_per_min"), 0.0);
    // Half of a 1 GiB device is below one 1 GiB big block: nothing unplugs.
    assert_eq!(value("pageblock-1G", "virtio_mem_unplug_2m_pct"), 0.0);
    assert!(value("pageblock-2M", "virtio_mem_unplug_2m_pct") > 50.0);
    for c in &cells {
        let v = c["value"].as_f64().unwrap();
        if c["metric"].as_str().unwrap().ends_with("_pct") {
            assert!((0.0..=100.0).contains(&v), "{c}");
        }
    }
    assert_usage_error(&["bench", "pageblock", "--mem", "6G"], "multiple of 4G");
}

#[test]
fn hotplug_steps_resize_virtio_mem_and_take_cma() {
    let text = stdout(&[
        "hotplug",
        "--mem",
        "2G",
        "--virtio-mem",
        "1G,plugged=256M",
        "plug:256M",
        "unplug:128M",
    ]);
    assert!(
        text.contains("virtio-mem: plug 256M: requested 512M, plugged 256M -> 512M (128 sub-blocks"),
        "{text}"
    );
    assert!(text.contains("plugged 512M -> 384M"), "{text}");
    let text = stdout(&[
        "hotplug",
        "--mem",
        "2G",
        "--cma",
        "128M",
        "--workload",
        "anon-w-seq:size=1600M",
        "cma_alloc:64M",
        "cma_release:0",
    ]);
    assert!(text.contains("cma0 (reserved): cma_alloc 64M: pfn"), "{text}");
    assert!(text.contains("cma0: cma_release of pfn"), "{text}");
    // meminfo of a CMA machine carries its lines.
    let info = stdout(&["show", "meminfo", "--mem", "2G", "--cma", "128M@0"]);
    assert!(info.contains("CmaTotal:         131072 kB"), "{info}");
    let out = largo(&["hotplug", "--mem", "2G", "plug:128M"]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("--virtio-mem"));
    assert_usage_error(
        &["hotplug", "--mem", "2G", "--cma", "64M@x", "list"],
        "not a node number",
    );
    assert_usage_error(
        &["hotplug", "--mem", "2G", "--virtio-mem", "1G,colour=red", "list"],
        "virtio-mem option",
    );
}
