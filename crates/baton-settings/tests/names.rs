//! Every `"BATON_..."` string literal in the workspace's Rust code names a declared variable: a
//! setting, a protocol variable or a build variable. (Names are compared, not greped for
//! meaning: a literal such as `"BATON_TCP_IF={list} matches ..."` names `BATON_TCP_IF`.)

use baton_settings::{protocol, ALL};
use std::path::{Path, PathBuf};

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else { return };
    for e in entries.flatten() {
        let p = e.path();
        if p.is_dir() {
            if p.file_name().is_some_and(|n| n != "target") {
                rust_files(&p, out);
            }
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

/// The names in `"BATON_...` literals of `src`: the longest run of `A-Z 0-9 _` after the quote.
fn literal_names(src: &str) -> Vec<String> {
    src.match_indices("\"BATON_")
        .map(|(i, _)| {
            let rest = &src[i + 1..];
            let end =
                rest.find(|c: char| !(c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_')).unwrap_or(rest.len());
            rest[..end].to_string()
        })
        .collect()
}

fn declared(name: &str) -> bool {
    let mut all = ALL
        .iter()
        .map(|e| e.meta().name)
        .chain(protocol::ALL.iter().map(|p| p.name))
        .chain(protocol::BUILD.iter().copied());
    // A name ending in `_` is a prefix (`"BATON_COLL_"`): some declared name must start with it.
    if name.ends_with('_') {
        all.any(|d| d.starts_with(name))
    } else {
        all.any(|d| d == name)
    }
}

#[test]
fn literal_names_are_taken_apart() {
    assert_eq!(literal_names(r#"f("BATON_TCP_IF={x} y", "BATON_COLL_", "x")"#), ["BATON_TCP_IF", "BATON_COLL_"]);
    assert!(declared("BATON_COLL_") && declared("BATON_RANK") && declared("BATON_STUB_COUNT"));
    assert!(!declared("BATON_NO_SUCH") && !declared("BATON_NOPE_"));
}

#[test]
fn every_baton_name_in_the_code_is_declared() {
    let crates = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let mut files = Vec::new();
    for c in std::fs::read_dir(&crates).unwrap().flatten() {
        // This crate declares the names; its tests use undeclared ones on purpose.
        if c.file_name() != "baton-settings" {
            rust_files(&c.path(), &mut files);
        }
    }
    assert!(files.len() > 50, "found only {} files under {}", files.len(), crates.display());
    let mut undeclared = Vec::new();
    for f in &files {
        let src = std::fs::read_to_string(f).unwrap();
        for n in literal_names(&src) {
            if !declared(&n) {
                undeclared.push(format!("{}: {n}", f.strip_prefix(&crates).unwrap_or(f).display()));
            }
        }
    }
    assert!(
        undeclared.is_empty(),
        "names used but not declared in crates/baton-settings (registry.rs or protocol.rs):\n{}",
        undeclared.join("\n")
    );
}
