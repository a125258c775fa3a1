//! Parser for the standard ABI tables in `abi/` (constants, types, function signatures).
//!
//! This file is compiled twice: into the library (for the header generator and for
//! `baton-capi`'s build script) and, through `#[path]`, into this crate's own build script,
//! which turns the constants into Rust. Keeping one parser means one reading of the data.

use std::path::{Path, PathBuf};

/// The folder holding `constants.tsv`, `types.tsv` and `functions.tsv`.
pub fn abi_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../abi")
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ConstKind {
    Define,
    Enum,
}

#[derive(Debug, Clone)]
pub struct Constant {
    pub kind: ConstKind,
    pub name: String,
    pub value: String,
}

#[derive(Debug, Clone)]
pub struct TypeDef {
    /// `struct` or `typedef`.
    pub kind: String,
    pub definition: String,
}

#[derive(Debug, Clone)]
pub struct Param {
    /// The C declaration as written, e.g. `const int recvcounts[]`.
    pub decl: String,
    pub name: String,
    /// The C type with the name removed, e.g. `const int []`.
    pub ctype: String,
}

#[derive(Debug, Clone)]
pub struct Function {
    pub ret: String,
    pub name: String,
    pub params: Vec<Param>,
    /// Ends in `...` (only `MPI_Pcontrol`).
    pub variadic: bool,
    pub raw_params: String,
}

fn rows(text: &str) -> impl Iterator<Item = Vec<&str>> {
    text.lines().filter(|l| !l.trim().is_empty() && !l.starts_with('#')).map(|l| l.split('\t').collect())
}

pub fn parse_constants(text: &str) -> Vec<Constant> {
    rows(text)
        .map(|c| Constant {
            kind: if c[0] == "enum" { ConstKind::Enum } else { ConstKind::Define },
            name: c[1].to_string(),
            value: c.get(2).copied().unwrap_or("").trim().to_string(),
        })
        .collect()
}

pub fn parse_types(text: &str) -> Vec<TypeDef> {
    rows(text).map(|c| TypeDef { kind: c[0].to_string(), definition: c[1..].join("\t").trim().to_string() }).collect()
}

/// Splits a C parameter list at top-level commas (function-pointer parameters have none here).
pub fn parse_params(list: &str) -> (Vec<Param>, bool) {
    let mut params = Vec::new();
    let mut variadic = false;
    let list = list.trim();
    if list.is_empty() || list == "void" {
        return (params, false);
    }
    for p in list.split(',') {
        let p = p.trim();
        if p == "..." {
            variadic = true;
            continue;
        }
        // The name is the last identifier before any array brackets.
        let base = p.find('[').map(|i| &p[..i]).unwrap_or(p).trim_end();
        let start = base.rfind(|c: char| !(c.is_ascii_alphanumeric() || c == '_')).map(|i| i + 1).unwrap_or(0);
        let name = base[start..].to_string();
        let ctype = format!("{}{}", &base[..start], &p[base.len()..]).trim().to_string();
        params.push(Param { decl: p.to_string(), name, ctype });
    }
    (params, variadic)
}

pub fn parse_functions(text: &str) -> Vec<Function> {
    rows(text)
        .map(|c| {
            let (params, variadic) = parse_params(c[2]);
            Function {
                ret: c[0].trim().to_string(),
                name: c[1].trim().to_string(),
                params,
                variadic,
                raw_params: c[2].trim().to_string(),
            }
        })
        .collect()
}

pub struct Abi {
    pub constants: Vec<Constant>,
    pub types: Vec<TypeDef>,
    pub functions: Vec<Function>,
}

pub fn load(dir: &Path) -> std::io::Result<Abi> {
    let read = |f: &str| std::fs::read_to_string(dir.join(f));
    Ok(Abi {
        constants: parse_constants(&read("constants.tsv")?),
        types: parse_types(&read("types.tsv")?),
        functions: parse_functions(&read("functions.tsv")?),
    })
}

/// The Rust type of a constant's value and the value as a Rust literal, or None for the
/// constants that are not values (the `MPI_H_ABI` guard, aliases resolved by the caller).
pub fn rust_const(c: &Constant) -> Option<(&'static str, String)> {
    let v = c.value.as_str();
    if c.kind == ConstKind::Enum {
        return Some(("i32", v.to_string()));
    }
    if let Ok(n) = v.parse::<i64>() {
        return Some(("i32", n.to_string()));
    }
    // ((Type)value) or ((Type*)value)
    let inner = v.strip_prefix("((")?.strip_suffix(')')?;
    let (ty, num) = inner.split_once(')')?;
    let ty = ty.trim();
    let rty = match ty {
        "MPI_Offset" => "i64",
        _ if ty.ends_with('*') => "usize",
        _ if ty.starts_with("MPI_T_") => "usize",
        _ => "usize", // handle types are pointers to incomplete structs
    };
    let num = num.trim();
    let lit = if rty == "i64" { num.to_string() } else { format!("{num}usize") };
    Some((rty, lit))
}
