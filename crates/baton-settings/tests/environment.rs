//! Reading the real environment: one test, so that nothing else in this process reads a
//! setting before the variables are set.

use baton_settings::{check, Reader, CMA, COLL_BARRIER, MPIEXEC_TIMEOUT, NAME_DIR, PLACE, SPIN_US, TCP_CHUNK, TCP_IF};
use std::path::PathBuf;

#[test]
fn check_reports_every_bad_value_of_one_program_and_reads_the_rest() {
    std::env::set_var("BATON_SPIN_US", "abc");
    std::env::set_var("BATON_TCP_CHUNK", " 64k ");
    std::env::set_var("BATON_CMA", "");
    std::env::set_var("BATON_COLL_BARRIER", "no_such_algorithm");
    std::env::set_var("BATON_PLACE", "blok");
    std::env::set_var("BATON_TCP_IF", "   ");
    std::env::set_var("BATON_NAME_DIR", "/tmp/some dir");
    std::env::set_var("MPIEXEC_TIMEOUT", "soon");
    std::env::set_var("BATON_LAUNCH_FANOUT", "8");

    let r = check(Reader::Library);
    let errors: Vec<&str> = r.errors.iter().map(|p| p.message.as_str()).collect();
    assert_eq!(
        errors,
        [
            "BATON_SPIN_US=abc is not a whole number of microseconds (0..=1000000)",
            "BATON_COLL_BARRIER=no_such_algorithm is not one of: auto, dissemination, shm",
        ]
    );
    assert_eq!(r.warnings.len(), 1);
    assert_eq!(r.warnings[0].message, "BATON_PLACE=blok is not one of: cyclic, block, off; using cyclic");
    assert!(r.error().unwrap().contains("; BATON_COLL_BARRIER="));

    // Bad values read as the default; good ones are trimmed; blank is unset.
    assert_eq!(SPIN_US.get(), 200);
    assert_eq!(COLL_BARRIER.get(), "auto");
    assert_eq!(PLACE.get(), "cyclic");
    assert_eq!(TCP_CHUNK.get(), 64 * 1024);
    assert!(CMA.get());
    assert_eq!(TCP_IF.value(), None);
    assert_eq!(NAME_DIR.value(), Some(PathBuf::from("/tmp/some dir")));

    // Read once: a later change of the environment is not seen.
    std::env::set_var("BATON_TCP_CHUNK", "8k");
    assert_eq!(TCP_CHUNK.get(), 64 * 1024);

    let l = check(Reader::Launcher);
    assert_eq!(l.error().unwrap(), "MPIEXEC_TIMEOUT=soon is not a whole number of seconds (1..=4294967295)");
    assert_eq!(MPIEXEC_TIMEOUT.value(), None);
    assert!(check(Reader::Wrapper).error().is_none());
}
