//! mpiexec checks the settings it reads before it starts anything: a bad value is one line
//! naming the variable, the value and what is accepted, and exit status 2.

use std::process::{Command, Output, Stdio};

const MPIEXEC: &str = env!("CARGO_BIN_EXE_mpiexec");

fn mpiexec(args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut cmd = Command::new(MPIEXEC);
    cmd.args(args).stdin(Stdio::null());
    for v in ["MPIEXEC_TIMEOUT", "BATON_LAUNCH_FANOUT", "BATON_HEARTBEAT_TIMEOUT", "BATON_RSH"] {
        cmd.env_remove(v);
    }
    cmd.envs(env.iter().copied()).output().unwrap()
}

#[test]
fn a_bad_setting_stops_mpiexec_before_it_starts_anything() {
    let dir = std::env::temp_dir().join(format!("baton-settings-test-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let mark = dir.to_str().unwrap();
    let cases = [
        ("BATON_LAUNCH_FANOUT", "0", "mpiexec: BATON_LAUNCH_FANOUT=0 is not a whole number (1..=256)\n"),
        (
            "BATON_HEARTBEAT_TIMEOUT",
            "0.2",
            "mpiexec: BATON_HEARTBEAT_TIMEOUT=0.2 is not a number of seconds (1..=86400)\n",
        ),
        (
            "MPIEXEC_TIMEOUT",
            "soon",
            "mpiexec: MPIEXEC_TIMEOUT=soon is not a whole number of seconds (1..=4294967295)\n",
        ),
    ];
    for (var, value, want) in cases {
        // The job would create the directory: it must not run.
        let o = mpiexec(&["-n", "2", "mkdir", "-p", mark], &[(var, value)]);
        assert_eq!(o.status.code(), Some(2), "{var}");
        assert_eq!(String::from_utf8_lossy(&o.stderr), want);
        assert!(!dir.exists(), "{var}={value}: the job ran");
    }
    // Even with -timeout given, a bad MPIEXEC_TIMEOUT is an error rather than ignored.
    let o = mpiexec(&["-timeout", "5", "-n", "1", "true"], &[("MPIEXEC_TIMEOUT", "-1")]);
    assert_eq!(o.status.code(), Some(2));
    // Blank is unset; good values run.
    let o = mpiexec(&["-n", "2", "true"], &[("MPIEXEC_TIMEOUT", " "), ("BATON_LAUNCH_FANOUT", " 4 ")]);
    assert_eq!(o.status.code(), Some(0), "{}", String::from_utf8_lossy(&o.stderr));
    // Help and version need no settings.
    assert_eq!(mpiexec(&["--help"], &[("BATON_LAUNCH_FANOUT", "x")]).status.code(), Some(0));
}
