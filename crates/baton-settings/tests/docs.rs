//! The generated tables of README.md and docs/LAUNCHER.md match the registry.

use baton_settings::markdown;
use std::path::Path;

#[test]
fn generated_tables_are_up_to_date() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let stale = markdown::stale(&root).unwrap();
    assert!(
        stale.is_empty(),
        "generated tables out of date: {}; run `{}` and commit the result",
        stale.join(", "),
        markdown::FIX
    );
}
