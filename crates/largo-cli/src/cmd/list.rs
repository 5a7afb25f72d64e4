//! `largo list workloads|presets|knobs`.

use anyhow::Result;
use comfy_table::{presets::UTF8_FULL_CONDENSED, Table};
use largo_mm::Machine;
use largo_types::{format_size, Preset};

use crate::args::{ListWhat, MachineArgs, PolicyArgs};

pub fn run(what: ListWhat, machine: &MachineArgs) -> Result<()> {
    match what {
        ListWhat::Workloads => print_workloads(),
        ListWhat::Presets => print_presets(),
        ListWhat::Knobs => print_knobs(machine)?,
    }
    Ok(())
}

fn print_workloads() {
    let mut t = Table::new();
    t.load_preset(UTF8_FULL_CONDENSED);
    t.set_header(["workload", "parameters (default)", "what it does"]);
    for def in largo_workloads::catalog() {
        let params: Vec<String> = def
            .params
            .iter()
            .map(|p| format!("{}={}  {}", p.name, p.default_text(), p.help))
            .collect();
        let name = if def.default_suite {
            format!("{} *", def.name)
        } else {
            def.name.to_string()
        };
        t.add_row([name, params.join("\n"), def.summary.to_string()]);
    }
    for r in largo_workloads::recorded::RECORDED {
        t.add_row([
            format!("{} *", r.name),
            "(a recorded trace)".to_string(),
            r.summary.to_string(),
        ]);
    }
    println!("{t}");
    println!("* in the default suite of `largo run`. Give parameters as NAME:KEY=VALUE,... e.g. page_fault1:iterations=2,size=64M");
}

fn print_presets() {
    let mut t = Table::new();
    t.load_preset(UTF8_FULL_CONDENSED);
    t.set_header([
        "preset",
        "page size",
        "MAX_PAGE_ORDER",
        "pageblock",
        "section",
        "subsections",
        "PMD (THP)",
        "mTHP sizes",
        "pgtable levels",
    ]);
    for preset in Preset::ALL {
        let g = preset.geometry();
        let orders = g.anon_orders();
        t.add_row([
            preset.name().to_string(),
            format_size(g.page_size()),
            format!(
                "{} ({})",
                g.max_page_order,
                format_size(g.page_size() << g.max_page_order)
            ),
            format!(
                "order {} ({})",
                g.pageblock_order,
                format_size(g.page_size() << g.pageblock_order)
            ),
            format!("{} bits ({})", g.section_size_bits, format_size(g.section_size_bytes())),
            g.subsections_per_section().to_string(),
            format!("order {} ({})", g.pmd_order, format_size(g.pmd_size_bytes())),
            format!(
                "{}..{}",
                format_size(g.page_size() << orders.start()),
                format_size(g.page_size() << orders.end())
            ),
            g.pgtable_levels.to_string(),
        ]);
    }
    println!("{t}");
}

fn print_knobs(machine: &MachineArgs) -> Result<()> {
    let m = Machine::new(machine.config(&PolicyArgs::default())?)?;
    let mut t = Table::new();
    t.load_preset(UTF8_FULL_CONDENSED);
    t.set_header(["knob", "value", "meaning"]);
    for k in m.knobs() {
        t.add_row([k.path, k.value, k.help.to_string()]);
    }
    println!("{t}");
    Ok(())
}
