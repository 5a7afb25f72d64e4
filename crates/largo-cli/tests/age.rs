//! `largo age`: aging over simulated hours, the remedies side by side.

mod common;

use common::{largo, stdout};

#[test]
fn aging_samples_every_minute_of_every_remedy_reproducibly() {
    let args = ["age", "server", "--hours", "1", "--mem", "4G", "--json"];
    let text = stdout(&args);
    let lines: Vec<serde_json::Value> = text.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    assert_eq!(lines.len(), 4 * 60, "four remedies, sixty minutes each");
    let configs: std::collections::BTreeSet<&str> = lines.iter().map(|l| l["config"].as_str().unwrap()).collect();
    assert_eq!(configs.len(), 4);
    assert!(lines
        .iter()
        .all(|l| l["minute"].as_u64().unwrap() >= 1 && l["alloc"].is_object()));
    // The heap is written in the first minute with 2M folios.
    assert!(lines[0]["alloc"]["2048kB"].as_u64().unwrap() > 0, "{}", lines[0]);
    assert_eq!(stdout(&args), text, "the same seed gives the same minutes");
    let table = stdout(&["age", "phone", "--hours", "1", "--mem", "4G"]);
    assert!(
        table.contains("2048kB success") && table.contains("movable-25%"),
        "{table}"
    );
    let bad = largo(&["age", "desktop"]);
    assert_eq!(bad.status.code(), Some(2));
}
