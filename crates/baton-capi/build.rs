//! Generates the 664 `MPI_` entry points (each forwards to its `PMPI_` twin, so a profiling tool
//! may replace `MPI_X` and call `PMPI_X`), the `PMPI_` entry points of the families annotated in
//! `abi/bindings.tsv` (`baton_abi::bindings`), and a `PMPI_` stub for every function that is
//! neither generated nor implemented in `src/`. A function counts as implemented when `src/`
//! mentions `PMPI_<name>` (macros define several at once).

use baton_abi::bindings::{self, rust_type};
use baton_abi::data::{self, Function};
use std::collections::BTreeSet;
use std::fmt::Write;
use std::path::Path;

fn is_implemented(f: &Function, implemented: &BTreeSet<String>) -> bool {
    implemented.contains(f.name.trim_start_matches("MPI_"))
}

fn scan(dir: &Path, out: &mut BTreeSet<String>) {
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            scan(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            println!("cargo:rerun-if-changed={}", p.display());
            let text = std::fs::read_to_string(&p).unwrap();
            // Any mention counts (macros define several at once); a name mentioned but never
            // defined fails to compile, since its MPI_ twin calls it.
            for (i, _) in text.match_indices("PMPI_") {
                let rest = &text[i + 5..];
                let end = rest.find(|c: char| !(c.is_ascii_alphanumeric() || c == '_')).unwrap();
                out.insert(rest[..end].to_string());
            }
        }
    }
}

fn main() {
    // The installed file is libmpi_abi.so.1, the standard ABI's library name.
    println!("cargo:rustc-cdylib-link-arg=-Wl,-soname,libmpi_abi.so.1");
    let dir = data::abi_dir();
    println!("cargo:rerun-if-changed={}", dir.join("functions.tsv").display());
    println!("cargo:rerun-if-changed={}", dir.join("bindings.tsv").display());
    println!("cargo:rerun-if-changed=src");
    let abi = data::load(&dir).expect("read abi tables");
    let table = std::fs::read_to_string(dir.join("bindings.tsv")).expect("read abi/bindings.tsv");
    let table = bindings::parse_table(&table).unwrap_or_else(|e| panic!("abi/bindings.tsv: {e}"));
    let (generated, names) =
        bindings::generate(&abi.functions, &table).unwrap_or_else(|e| panic!("abi/bindings.tsv: {e}"));
    let mut implemented: BTreeSet<String> = names.iter().map(|n| n.trim_start_matches("MPI_").to_string()).collect();
    scan(Path::new("src"), &mut implemented);

    let mut out = String::new();
    let mut stubs = 0;
    for f in &abi.functions {
        let short = f.name.trim_start_matches("MPI_");
        let params: Vec<(String, String)> =
            f.params.iter().enumerate().map(|(i, p)| (format!("p{i}"), rust_type(&p.ctype))).collect();
        let decl = params.iter().map(|(n, t)| format!("{n}: {t}")).collect::<Vec<_>>().join(", ");
        let args = params.iter().map(|(n, _)| n.clone()).collect::<Vec<_>>().join(", ");
        let ret = match f.ret.as_str() {
            "int" => "c_int".to_string(),
            other => rust_type(other),
        };
        writeln!(
            out,
            "#[no_mangle]\npub unsafe extern \"C\" fn MPI_{short}({decl}) -> {ret} {{ PMPI_{short}({args}) }}"
        )
        .unwrap();
        if !is_implemented(f, &implemented) {
            assert_eq!(ret, "c_int", "{} returns {ret}: implement it by hand", f.name);
            stubs += 1;
            // Raise on the communicator argument's error handler when there is one.
            let comm = f
                .params
                .iter()
                .position(|p| p.ctype.trim() == "MPI_Comm")
                .map(|i| format!("p{i}"))
                .unwrap_or_else(|| "baton_abi::consts::MPI_COMM_SELF".to_string());
            let decl_unused = params.iter().map(|(n, t)| format!("_{n}: {t}")).collect::<Vec<_>>().join(", ");
            let decl_unused = decl_unused.replace(&format!("_{comm}:"), &format!("{comm}:"));
            writeln!(
                out,
                "#[no_mangle]\npub unsafe extern \"C\" fn PMPI_{short}({decl_unused}) -> c_int {{ crate::errors::unsupported(\"{}\", {comm}) }}",
                f.name
            )
            .unwrap();
        }
    }
    let out_dir = std::env::var("OUT_DIR").unwrap();
    std::fs::write(Path::new(&out_dir).join("entry_points.rs"), out).unwrap();
    std::fs::write(Path::new(&out_dir).join("bindings.rs"), generated).unwrap();
    println!("cargo:rustc-env=BATON_STUB_COUNT={stubs}");
}
