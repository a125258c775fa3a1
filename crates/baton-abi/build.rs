#[path = "src/data.rs"]
#[allow(dead_code)]
mod data;

use std::fmt::Write;

fn main() {
    let dir = data::abi_dir();
    for f in ["constants.tsv", "types.tsv", "functions.tsv"] {
        println!("cargo:rerun-if-changed={}", dir.join(f).display());
    }
    let abi = data::load(&dir).expect("read abi/*.tsv");
    let mut out = String::new();
    let known: std::collections::HashMap<&str, &data::Constant> =
        abi.constants.iter().map(|c| (c.name.as_str(), c)).collect();
    for c in &abi.constants {
        if c.name == "MPI_H_ABI" {
            continue;
        }
        // An alias (`MPI_LONG_LONG_INT MPI_LONG_LONG`) takes the type of its target.
        let target = known.get(c.value.as_str()).copied().unwrap_or(c);
        let Some((ty, _)) = data::rust_const(target) else { continue };
        let lit = if target.name != c.name { c.value.clone() } else { data::rust_const(c).unwrap().1 };
        writeln!(out, "pub const {}: {} = {};", c.name, ty, lit).unwrap();
    }
    // Error class names, for messages that say "MPI_ERR_RANK".
    out.push_str("pub const ERROR_CLASS_NAMES: &[(i32, &str)] = &[\n");
    for c in &abi.constants {
        if c.name.starts_with("MPI_ERR_") && c.kind == data::ConstKind::Enum && c.name != "MPI_ERR_LASTCODE" {
            writeln!(out, "    ({}, \"{}\"),", c.value, c.name).unwrap();
        }
    }
    out.push_str("];\n");
    let path = std::path::Path::new(&std::env::var("OUT_DIR").unwrap()).join("consts.rs");
    std::fs::write(path, out).unwrap();
}
