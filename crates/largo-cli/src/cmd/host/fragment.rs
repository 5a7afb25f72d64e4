//! `largo host fragment` (root): fragments this host's free memory and
//! stays alive (`largo_host::fragmenter`): fills most of it with base
//! pages, frees every other one, prints /proc/buddyinfo before and after,
//! then holds the pages until killed or `--for` has passed.

use std::io::IsTerminal;
use std::time::Duration;

use anyhow::{bail, Context, Result};
use clap::Args;

use crate::args::parse_size_arg;

#[derive(Args, Debug)]
pub struct FragmentArgs {
    /// Bytes to fill; default: free memory (MemFree) less --leave.
    #[arg(long, value_parser = parse_size_arg, value_name = "SIZE")]
    pub fill: Option<u64>,
    /// Free memory left untouched when --fill is not given.
    #[arg(long, value_parser = parse_size_arg, value_name = "SIZE", default_value = "1G")]
    pub leave: u64,
    /// How long to hold the pages (e.g. 10m); default: until killed.
    #[arg(long = "for", value_parser = parse_duration, value_name = "DURATION")]
    pub hold: Option<Duration>,
}

fn parse_duration(s: &str) -> Result<Duration, String> {
    largo_workloads::spec::parse_duration(s)
        .map(Duration::from_nanos)
        .map_err(|e| e.to_string())
}

fn buddyinfo() -> String {
    std::fs::read_to_string("/proc/buddyinfo").unwrap_or_default()
}

pub fn run(args: &FragmentArgs) -> Result<()> {
    if let Some(reason) = largo_host::unavailable_reason() {
        bail!("cannot fragment this host: {reason}");
    }
    // Never more than MemAvailable less --leave: the fragmenter must not
    // push the host into reclaim storms or the OOM killer.
    let ceiling = largo_host::fragmenter::available_bytes().saturating_sub(args.leave);
    let fill = match args.fill {
        Some(b) if b > ceiling => bail!(
            "--fill {} is more than available memory less --leave ({} MiB)",
            largo_types::format_size(b),
            ceiling >> 20
        ),
        Some(b) => b,
        None => largo_host::fragmenter::free_bytes()
            .saturating_sub(args.leave)
            .min(ceiling),
    };
    if fill < 4 << 20 {
        bail!("nothing to fill: --fill or free memory less --leave is under 4 MiB");
    }
    println!("buddyinfo before:\n{}", buddyinfo().trim_end());
    let tty = std::io::stderr().is_terminal();
    let started = std::time::Instant::now();
    let window = largo_host::fragmenter::fragment(fill, &mut |done, total| {
        if tty && (done % (1 << 18) == 0 || done == total) {
            eprint!("\r\x1b[Kfragmenting: {}%", done * 100 / total.max(1));
        }
    })
    .context("fragmenting")?;
    if tty {
        eprintln!();
    }
    println!(
        "fragmented: {} MiB written in base pages, every other page freed, {} MiB held, in {:.1} s",
        fill >> 20,
        fill >> 21,
        started.elapsed().as_secs_f64()
    );
    println!("buddyinfo after:\n{}", buddyinfo().trim_end());
    match args.hold {
        Some(d) => {
            println!("holding for {:.0} s", d.as_secs_f64());
            std::thread::sleep(d);
        }
        None => {
            println!("holding until killed (pid {})", std::process::id());
            loop {
                std::thread::sleep(Duration::from_secs(3600));
            }
        }
    }
    drop(window);
    Ok(())
}
