//! The documentation tables, generated from [`crate::ALL`] and [`crate::protocol::ALL`].
//!
//! Each table lives in a [`Region`] of a Markdown file, between two marker comments; the
//! `baton-settings` program prints the tables and rewrites the regions (`write-docs`), and the
//! crate's tests fail while a region differs from what the registry generates.

use crate::{protocol, Entry, Reader, ALL};
use std::path::Path;

/// The command that brings every region up to date.
pub const FIX: &str = "cargo run -q -p baton-settings -- write-docs";

/// Text inside a table cell: a `|` would end the cell.
fn cell(s: &str) -> String {
    s.replace('|', "\\|")
}

/// A row; `here` is the file the table goes to, whose own pointers are left out.
fn row(e: &dyn Entry, here: &str) -> String {
    let m = e.meta();
    let default = if e.has_fixed_default() { format!("`{}`", e.default_text()) } else { e.default_text().to_string() };
    let meaning = match m.details.filter(|d| !d.starts_with(here)) {
        Some(d) => format!("{} — details: {d}", m.doc),
        None => m.doc.to_string(),
    };
    format!("| `{}` | {} | {} | {} |\n", m.name, cell(&default), cell(&m.kind.accepts()), cell(&meaning))
}

/// The table of the settings `reader` reads.
pub fn settings_table(reader: Reader) -> String {
    table_for(reader, "README.md")
}

fn table_for(reader: Reader, here: &str) -> String {
    let mut t = String::from("| variable | default | values | meaning |\n|---|---|---|---|\n");
    for e in ALL.iter().filter(|e| e.meta().reader == reader) {
        t.push_str(&row(*e, here));
    }
    t
}

/// The README's section: every setting, one table per program that reads them.
pub fn all_settings() -> String {
    [
        (
            "Read by the MPI library; a bad value makes `MPI_Init` fail with a message naming the variable:",
            Reader::Library,
        ),
        ("Read by `mpiexec`; a bad value stops it before it starts anything:", Reader::Launcher),
        ("Read by the compiler wrappers:", Reader::Wrapper),
    ]
    .iter()
    .map(|(title, r)| format!("{title}\n\n{}", settings_table(*r)))
    .collect::<Vec<_>>()
    .join("\n")
}

/// The settings of `mpiexec`, for docs/LAUNCHER.md.
pub fn launcher_settings() -> String {
    table_for(Reader::Launcher, "docs/LAUNCHER.md")
}

/// The protocol variables, for docs/LAUNCHER.md.
pub fn protocol_table() -> String {
    let mut t = String::from("| variable | value |\n|---|---|\n");
    for p in protocol::ALL {
        t.push_str(&format!("| `{}` | {} |\n", p.name, cell(p.doc)));
    }
    t
}

/// A generated part of a Markdown file.
pub struct Region {
    /// Relative to the repository's root.
    pub file: &'static str,
    pub begin: &'static str,
    pub end: &'static str,
    pub render: fn() -> String,
}

pub const REGIONS: &[Region] = &[
    Region { file: "README.md", begin: "<!-- settings:begin -->", end: "<!-- settings:end -->", render: all_settings },
    Region {
        file: "docs/LAUNCHER.md",
        begin: "<!-- settings:launcher:begin -->",
        end: "<!-- settings:launcher:end -->",
        render: launcher_settings,
    },
    Region {
        file: "docs/LAUNCHER.md",
        begin: "<!-- protocol:begin -->",
        end: "<!-- protocol:end -->",
        render: protocol_table,
    },
];

/// `text` with the region's lines between its markers replaced by `body`.
pub fn splice(text: &str, region: &Region, body: &str) -> Result<String, String> {
    let once = |marker: &str| match text.match_indices(marker).count() {
        1 => Ok(text.find(marker).unwrap()),
        n => Err(format!("{}: the marker {marker} appears {n} times (want once)", region.file)),
    };
    let (b, e) = (once(region.begin)?, once(region.end)?);
    if e < b {
        return Err(format!("{}: {} comes before {}", region.file, region.end, region.begin));
    }
    let head = &text[..b + region.begin.len()];
    Ok(format!("{head}\n{body}{}", &text[e..]))
}

/// The regions under `root` that differ from what the registry generates, as `FILE (MARKER)`.
pub fn stale(root: &Path) -> Result<Vec<String>, String> {
    let mut out = Vec::new();
    for r in REGIONS {
        let path = root.join(r.file);
        let text = std::fs::read_to_string(&path).map_err(|e| format!("{}: {e}", path.display()))?;
        if splice(&text, r, &(r.render)())? != text {
            out.push(format!("{} ({})", r.file, r.begin));
        }
    }
    Ok(out)
}

/// Rewrites the stale regions under `root`; returns the files it changed.
pub fn write(root: &Path) -> Result<Vec<String>, String> {
    let mut changed = Vec::new();
    for r in REGIONS {
        let path = root.join(r.file);
        let text = std::fs::read_to_string(&path).map_err(|e| format!("{}: {e}", path.display()))?;
        let new = splice(&text, r, &(r.render)())?;
        if new != text {
            std::fs::write(&path, new).map_err(|e| format!("{}: {e}", path.display()))?;
            if !changed.contains(&r.file.to_string()) {
                changed.push(r.file.to_string());
            }
        }
    }
    Ok(changed)
}

#[cfg(test)]
mod tests {
    use super::*;

    const R: Region = Region { file: "x.md", begin: "<!-- a -->", end: "<!-- b -->", render: protocol_table };

    #[test]
    fn splice_replaces_between_markers_only() {
        let t = "intro\n<!-- a -->\nold\nrows\n<!-- b -->\nafter\n";
        assert_eq!(splice(t, &R, "new\n").unwrap(), "intro\n<!-- a -->\nnew\n<!-- b -->\nafter\n");
        assert_eq!(
            splice(&splice(t, &R, "new\n").unwrap(), &R, "new\n").unwrap(),
            "intro\n<!-- a -->\nnew\n<!-- b -->\nafter\n"
        );
        assert!(splice("<!-- b --> <!-- a -->", &R, "").unwrap_err().contains("comes before"));
        assert!(splice("<!-- a -->", &R, "").unwrap_err().contains("appears 0 times"));
        assert!(splice("<!-- a --><!-- a --><!-- b -->", &R, "").unwrap_err().contains("appears 2 times"));
    }

    #[test]
    fn rows_show_defaults_ranges_and_details() {
        let t = settings_table(Reader::Library);
        assert!(t.contains(
            "| `BATON_SPIN_US` | `200` | 0–1000000 µs | least time a blocking call polls before sleeping on its \
             doorbell — details: docs/ARCHITECTURE.md, Waiting |\n"
        ));
        assert!(t.contains("| `BATON_TCP_IF` | automatic | comma list of interface names, subnets or addresses |"));
        assert!(!t.contains("MPIEXEC_TIMEOUT"), "launcher settings have their own table");
        assert!(launcher_settings().contains("| `MPIEXEC_TIMEOUT` | none | 1–4294967295 s |"));
        assert!(!launcher_settings().contains("details: docs/LAUNCHER.md"), "no pointer to the page itself");
        assert!(settings_table(Reader::Launcher).contains("details: docs/LAUNCHER.md"));
        assert!(protocol_table().contains("| `BATON_RANK` | the rank in its job |"));
        assert_eq!(cell("a|b"), "a\\|b");
    }
}
