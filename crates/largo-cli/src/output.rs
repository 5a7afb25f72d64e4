//! What commands print: text with tables fitted to the terminal, JSON
//! lines, or CSV; all through one writer whose errors end the command (a
//! closed pipe ends it quietly, see `main.rs`).

use std::io::{self, IsTerminal, Write};

use clap::Args;
use comfy_table::presets::UTF8_FULL_CONDENSED;
use comfy_table::{CellAlignment, ContentArrangement, Table};

/// `--json` / `--csv`: machine-readable output instead of text.
#[derive(Args, Debug, Clone, Copy, Default)]
pub struct FormatArgs {
    /// JSON instead of text: one object per line.
    #[arg(long, conflicts_with = "csv")]
    pub json: bool,
    /// CSV instead of text: each table's columns with raw values, a header
    /// line first.
    #[arg(long)]
    pub csv: bool,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    Text,
    Json,
    Csv,
}

impl FormatArgs {
    pub fn format(self) -> Format {
        match (self.json, self.csv) {
            (true, _) => Format::Json,
            (_, true) => Format::Csv,
            _ => Format::Text,
        }
    }

    /// Whether progress may be drawn (text output only).
    pub fn is_text(self) -> bool {
        self.format() == Format::Text
    }
}

/// Width tables are fitted to when standard output is not a terminal and
/// `COLUMNS` is not set.
pub const DEFAULT_WIDTH: u16 = 160;

/// The width to fit tables to: the terminal's, else `COLUMNS`, else
/// [`DEFAULT_WIDTH`].
pub fn width() -> u16 {
    if io::stdout().is_terminal() {
        if let Some(w) = Table::new().width() {
            return w;
        }
    }
    std::env::var("COLUMNS")
        .ok()
        .and_then(|c| c.parse().ok())
        .filter(|&w: &u16| w >= 40)
        .unwrap_or(DEFAULT_WIDTH)
}

/// One cell: what the text table shows and what CSV holds.
#[derive(Clone, Debug, PartialEq)]
pub struct Cell {
    pub text: String,
    pub raw: String,
}

impl Cell {
    pub fn new(text: impl Into<String>, raw: impl Into<String>) -> Cell {
        Cell {
            text: text.into(),
            raw: raw.into(),
        }
    }

    /// Text shown and kept as is.
    pub fn text(s: impl Into<String>) -> Cell {
        let s = s.into();
        Cell {
            raw: s.clone(),
            text: s,
        }
    }

    /// A number with `decimals` shown, the full value in CSV.
    pub fn num(v: f64, decimals: usize) -> Cell {
        Cell {
            text: format!("{v:.decimals$}"),
            raw: if v.fract() == 0.0 && v.abs() < 1e15 {
                format!("{}", v as i64)
            } else {
                format!("{v}")
            },
        }
    }

    pub fn int(v: u64) -> Cell {
        Cell::text(v.to_string())
    }
}

impl From<&str> for Cell {
    fn from(s: &str) -> Cell {
        Cell::text(s)
    }
}

impl From<String> for Cell {
    fn from(s: String) -> Cell {
        Cell::text(s)
    }
}

/// A table: a header and rows of cells; numbers are right-aligned from
/// column `right_from` on.
#[derive(Clone, Debug, Default)]
pub struct Grid {
    pub header: Vec<String>,
    pub rows: Vec<Vec<Cell>>,
    right_from: Option<usize>,
}

impl Grid {
    pub fn new<T: ToString>(header: impl IntoIterator<Item = T>) -> Grid {
        Grid {
            header: header.into_iter().map(|h| h.to_string()).collect(),
            rows: Vec::new(),
            right_from: None,
        }
    }

    pub fn row<C: Into<Cell>>(&mut self, cells: impl IntoIterator<Item = C>) {
        self.rows.push(cells.into_iter().map(Into::into).collect());
    }

    /// Right-aligns columns `col..` (numbers).
    pub fn right_from(mut self, col: usize) -> Grid {
        self.right_from = Some(col);
        self
    }

    /// The table in the house style, wrapped to fit `width` columns.
    pub fn to_text(&self, width: u16) -> String {
        let mut t = Table::new();
        t.load_preset(UTF8_FULL_CONDENSED);
        t.set_content_arrangement(ContentArrangement::Dynamic);
        t.set_width(width);
        t.set_header(self.header.clone());
        for r in &self.rows {
            t.add_row(r.iter().map(|c| c.text.clone()).collect::<Vec<_>>());
        }
        if let Some(from) = self.right_from {
            for col in from..self.header.len() {
                if let Some(c) = t.column_mut(col) {
                    c.set_cell_alignment(CellAlignment::Right);
                }
            }
        }
        t.to_string()
    }

    /// The CSV lines, header first, raw values.
    pub fn write_csv(&self, out: &mut dyn Write, header: bool) -> io::Result<()> {
        let mut w = csv::WriterBuilder::new().from_writer(out);
        if header {
            w.write_record(&self.header)?;
        }
        for r in &self.rows {
            w.write_record(r.iter().map(|c| c.raw.as_str()))?;
        }
        w.flush()
    }
}

/// Standard output for a command, in its format.
pub struct Out {
    w: Box<dyn Write>,
    pub format: Format,
    width: u16,
    /// The CSV header last written (a table with the same header goes on
    /// under it).
    csv_header: Option<Vec<String>>,
}

thread_local! {
    /// Where this thread's commands write instead of standard output
    /// while [`capture`] runs them.
    static CAPTURE: std::cell::RefCell<Option<std::rc::Rc<std::cell::RefCell<Vec<u8>>>>> =
        const { std::cell::RefCell::new(None) };
}

/// Runs `f` with every [`Out::stdout`] this thread opens writing into a
/// buffer, and returns what was written: the Python package calls the
/// commands themselves, so its results hold the `--json` fields by
/// construction.
pub fn capture<R>(f: impl FnOnce() -> R) -> (R, Vec<u8>) {
    /// Puts the previous capture back, even when `f` unwinds.
    struct Restore(Option<std::rc::Rc<std::cell::RefCell<Vec<u8>>>>);
    impl Drop for Restore {
        fn drop(&mut self) {
            CAPTURE.with(|c| *c.borrow_mut() = self.0.take());
        }
    }
    let buf = std::rc::Rc::new(std::cell::RefCell::new(Vec::new()));
    let restore = Restore(CAPTURE.with(|c| c.replace(Some(buf.clone()))));
    let result = f();
    drop(restore);
    let bytes = std::mem::take(&mut *buf.borrow_mut());
    (result, bytes)
}

/// A writer appending to a capture buffer.
struct Captured(std::rc::Rc<std::cell::RefCell<Vec<u8>>>);

impl Write for Captured {
    fn write(&mut self, b: &[u8]) -> io::Result<usize> {
        self.0.borrow_mut().extend_from_slice(b);
        Ok(b.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// Standard output as a writer, or this thread's capture buffer inside
/// [`capture`] (for the commands that format their own lines).
pub fn stdout_writer() -> Box<dyn Write> {
    match CAPTURE.with(|c| c.borrow().clone()) {
        Some(buf) => Box::new(Captured(buf)),
        None => Box::new(io::stdout().lock()),
    }
}

impl Out {
    /// Standard output, or this thread's capture buffer inside [`capture`].
    pub fn stdout(format: FormatArgs) -> Out {
        let captured = CAPTURE.with(|c| c.borrow().is_some());
        let width = if captured { DEFAULT_WIDTH } else { width() };
        Out::to(stdout_writer(), format.format(), width)
    }

    pub fn to(w: Box<dyn Write>, format: Format, width: u16) -> Out {
        Out {
            w,
            format,
            width,
            csv_header: None,
        }
    }

    pub fn is_text(&self) -> bool {
        self.format == Format::Text
    }

    /// Text output (nothing in JSON or CSV).
    pub fn text(&mut self, s: &str) -> io::Result<()> {
        if self.is_text() {
            self.w.write_all(s.as_bytes())?;
        }
        Ok(())
    }

    /// A line of text output.
    pub fn line(&mut self, s: impl AsRef<str>) -> io::Result<()> {
        if self.is_text() {
            self.w.write_all(s.as_ref().as_bytes())?;
            self.w.write_all(b"\n")?;
        }
        Ok(())
    }

    /// Text whatever the format (a /proc file, a man page).
    pub fn raw(&mut self, s: &str) -> io::Result<()> {
        self.w.write_all(s.as_bytes())
    }

    /// A JSON object on a line of its own (JSON output only).
    pub fn json(&mut self, v: &serde_json::Value) -> io::Result<()> {
        if self.format == Format::Json {
            writeln!(self.w, "{v}")?;
        }
        Ok(())
    }

    /// A table: drawn in text, its rows in CSV (under one header while
    /// tables keep the same columns), nothing in JSON.
    pub fn table(&mut self, g: &Grid) -> io::Result<()> {
        match self.format {
            Format::Text => writeln!(self.w, "{}", g.to_text(self.width)),
            Format::Csv => {
                let header = self.csv_header.as_ref() != Some(&g.header);
                if header && self.csv_header.is_some() {
                    self.w.write_all(b"\n")?;
                }
                self.csv_header = Some(g.header.clone());
                g.write_csv(&mut self.w, header)
            }
            Format::Json => Ok(()),
        }
    }

    pub fn flush(&mut self) -> io::Result<()> {
        self.w.flush()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tables_fit_the_width_and_csv_keeps_raw_values() {
        let mut g = Grid::new(["workload", "parameters", "what it does"]);
        g.row([
            Cell::text("page_fault1"),
            Cell::text("size=128M  bytes mapped, written and unmapped per iteration"),
            Cell::text("mmap SIZE of private anonymous memory, write one byte per page, munmap; ITERATIONS times"),
        ]);
        g.row([Cell::text("x"), Cell::num(12.3456, 1), Cell::text("a, \"quoted\" cell")]);
        let text = g.to_text(60);
        for line in text.lines() {
            assert!(line.chars().count() <= 60, "{line:?} is wider than 60");
        }
        let mut csv = Vec::new();
        g.write_csv(&mut csv, true).unwrap();
        let csv = String::from_utf8(csv).unwrap();
        let lines: Vec<&str> = csv.lines().collect();
        assert_eq!(lines[0], "workload,parameters,what it does");
        assert_eq!(lines[2], "x,12.3456,\"a, \"\"quoted\"\" cell\"");
    }

    #[test]
    fn capture_takes_what_commands_print_on_this_thread_only() {
        let (r, bytes) = capture(|| {
            let mut out = Out::stdout(FormatArgs { json: true, csv: false });
            out.json(&serde_json::json!({"a": 1})).unwrap();
            out.line("text is not json").unwrap();
            7
        });
        assert_eq!((r, String::from_utf8(bytes).unwrap()), (7, "{\"a\":1}\n".to_string()));
        assert!(CAPTURE.with(|c| c.borrow().is_none()), "the capture ends with the call");
    }

    #[test]
    fn csv_tables_with_the_same_columns_share_a_header() {
        let shared = std::rc::Rc::new(std::cell::RefCell::new(Vec::new()));
        let mut out = Out::to(Box::new(Captured(shared.clone())), Format::Csv, 80);
        let mut a = Grid::new(["k", "v"]);
        a.row([Cell::text("a"), Cell::int(1)]);
        out.table(&a).unwrap();
        out.table(&a).unwrap();
        let mut b = Grid::new(["other"]);
        b.row([Cell::text("z")]);
        out.table(&b).unwrap();
        out.text("not in csv").unwrap();
        let text = String::from_utf8(shared.borrow().clone()).unwrap();
        assert_eq!(text, "k,v\na,1\na,1\n\nother\nz\n");
    }
}
