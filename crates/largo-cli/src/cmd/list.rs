//! `largo list workloads|presets|knobs|events`: tables fitted to the
//! terminal, or JSON lines or CSV.

use anyhow::Result;
use clap::{Args, ValueEnum};
use largo_trace::EVENT_KINDS;
use largo_types::{format_size, Preset};

use crate::args::{boot, MachineArgs, PolicyArgs};
use crate::output::{Cell, FormatArgs, Grid, Out};

#[derive(Args, Debug)]
pub struct ListArgs {
    #[arg(value_enum)]
    pub what: ListWhat,
    #[command(flatten)]
    pub machine: MachineArgs,
    #[command(flatten)]
    pub format: FormatArgs,
}

#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum ListWhat {
    /// Built-in workloads with their parameters, and the shipped recorded programs.
    Workloads,
    /// Machine presets.
    Presets,
    /// Knobs by kernel path, their values on the machine given.
    Knobs,
    /// Trace events: text verb, binary tag, arguments.
    Events,
}

pub fn run(args: &ListArgs) -> Result<()> {
    let grid = match args.what {
        ListWhat::Workloads => workloads(),
        ListWhat::Presets => presets(),
        ListWhat::Knobs => knobs(&args.machine)?,
        ListWhat::Events => events(),
    };
    let mut out = Out::stdout(args.format);
    for row in &grid.rows {
        let obj: serde_json::Map<String, serde_json::Value> = grid
            .header
            .iter()
            .zip(row)
            .map(|(h, c)| (h.clone(), c.raw.clone().into()))
            .collect();
        out.json(&obj.into())?;
    }
    out.table(&grid)?;
    if args.what == ListWhat::Workloads {
        out.line(
            "* in the default suite of `largo run`. Give parameters as NAME:KEY=VALUE,... e.g. page_fault1:iterations=2,size=64M",
        )?;
    }
    out.flush()?;
    Ok(())
}

fn workloads() -> Grid {
    let mut g = Grid::new(["workload", "parameters (default)", "what it does"]);
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
        g.row([
            Cell::new(name, def.name),
            Cell::text(params.join("\n")),
            Cell::text(def.summary),
        ]);
    }
    for r in largo_workloads::recorded::RECORDED {
        g.row([
            Cell::new(format!("{} *", r.name), r.name),
            Cell::text("(a recorded trace)"),
            Cell::text(r.summary),
        ]);
    }
    g
}

fn presets() -> Grid {
    let mut g = Grid::new([
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
        let geo = preset.geometry();
        let orders = geo.anon_orders();
        let bytes = |order: u32| format_size(geo.page_size() << order);
        g.row([
            preset.name().to_string(),
            format_size(geo.page_size()),
            format!("{} ({})", geo.max_page_order, bytes(geo.max_page_order)),
            format!("order {} ({})", geo.pageblock_order, bytes(geo.pageblock_order)),
            format!(
                "{} bits ({})",
                geo.section_size_bits,
                format_size(geo.section_size_bytes())
            ),
            geo.subsections_per_section().to_string(),
            format!("order {} ({})", geo.pmd_order, format_size(geo.pmd_size_bytes())),
            format!("{}..{}", bytes(*orders.start()), bytes(*orders.end())),
            geo.pgtable_levels.to_string(),
        ]);
    }
    g
}

fn knobs(machine: &MachineArgs) -> Result<Grid> {
    let m = boot(machine.config(&PolicyArgs::default())?)?;
    let mut g = Grid::new(["knob", "value", "meaning"]);
    for k in m.knobs() {
        g.row([k.path, k.value, k.help.to_string()]);
    }
    Ok(g)
}

fn events() -> Grid {
    let mut g = Grid::new(["event", "binary tag", "text form"]);
    for k in EVENT_KINDS {
        g.row([k.verb.to_string(), k.tag.to_string(), k.usage()]);
    }
    g
}
