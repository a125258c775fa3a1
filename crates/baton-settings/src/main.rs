//! `baton-settings`: prints the registry's documentation tables, or brings the generated regions
//! of README.md and docs/LAUNCHER.md up to date.

use baton_settings::{markdown, Reader, ALL};
use std::path::PathBuf;
use std::process::ExitCode;

const USAGE: &str = "usage: baton-settings COMMAND
  markdown [all|library|launcher|wrapper|protocol]
                 print a Markdown table (default: all, the README's section)
  write-docs [ROOT]
                 rewrite the generated tables of ROOT/README.md and ROOT/docs/LAUNCHER.md
                 (ROOT: this source tree)
  check-docs [ROOT]
                 exit 1 if a generated table is out of date
  list           every setting: name, MPI_T datatype, default, reader";

/// The source tree this program was built from.
fn default_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn run(args: &[String]) -> Result<(), String> {
    let arg = |i: usize| args.get(i).map(String::as_str);
    let root = || arg(1).map_or_else(default_root, PathBuf::from);
    match arg(0) {
        Some("markdown") => {
            let text = match arg(1).unwrap_or("all") {
                "all" => markdown::all_settings(),
                "library" => markdown::settings_table(Reader::Library),
                "launcher" => markdown::settings_table(Reader::Launcher),
                "wrapper" => markdown::settings_table(Reader::Wrapper),
                "protocol" => markdown::protocol_table(),
                other => return Err(format!("unknown table '{other}'\n{USAGE}")),
            };
            print!("{text}");
        }
        Some("write-docs") => {
            for f in markdown::write(&root())? {
                println!("updated {f}");
            }
        }
        Some("check-docs") => {
            let stale = markdown::stale(&root())?;
            if !stale.is_empty() {
                return Err(format!("out of date: {}; run `{}`", stale.join(", "), markdown::FIX));
            }
        }
        Some("list") => {
            for e in ALL {
                let m = e.meta();
                println!("{}\t{:?}\t{}\t{:?}", m.name, m.kind.datatype(), e.default_text(), m.reader);
            }
        }
        Some("-h" | "--help" | "help") => println!("{USAGE}"),
        _ => return Err(USAGE.to_string()),
    }
    Ok(())
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match run(&args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("baton-settings: {e}");
            ExitCode::FAILURE
        }
    }
}
