//! The compiler wrappers (`scripts/mpicc.in`, installed as `mpicc` and `mpicxx`): the flags
//! users' build scripts ask them for. Each test installs the script into a prefix of its own, as
//! `scripts/install.sh` does, with a stand-in compiler that prints its arguments, so what the
//! wrapper would run is seen exactly.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;

const VERSION: &str = env!("CARGO_PKG_VERSION");

struct Prefix {
    dir: PathBuf,
}

impl Prefix {
    fn new(test: &str) -> Prefix {
        let dir = std::env::temp_dir().join(format!("baton-wrappers-{test}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(dir.join("bin")).unwrap();
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scripts/mpicc.in");
        let text = std::fs::read_to_string(script).unwrap().replace("@BATON_VERSION@", VERSION);
        for name in ["mpicc", "mpicxx"] {
            write_exe(&dir.join("bin").join(name), &text);
        }
        // The compiler: says how it was called; `--version` and a lone `-v` as a compiler would.
        write_exe(
            &dir.join("fakecc"),
            "#!/bin/sh\ncase \"$*\" in --version) echo 'fakecc 1.2.3'; exit 0 ;; -v) echo 'fakecc version 1.2.3' >&2; exit 0 ;; esac\necho \"fakecc $*\"\n",
        );
        Prefix { dir: dir.canonicalize().unwrap() }
    }

    /// Runs wrapper `name` with `args`: exit status, stdout, stderr.
    fn run(&self, name: &str, args: &[&str]) -> (i32, String, String) {
        let cc = self.dir.join("fakecc");
        let o = Command::new(self.dir.join("bin").join(name))
            .args(args)
            .env("BATON_CC", &cc)
            .env("BATON_CXX", &cc)
            .output()
            .unwrap();
        let text = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
        (o.status.code().unwrap_or(-1), text(&o.stdout), text(&o.stderr))
    }

    fn out(&self, args: &[&str]) -> String {
        let (code, out, err) = self.run("mpicc", args);
        assert_eq!(code, 0, "mpicc {args:?}: {err}");
        out
    }

    fn p(&self, sub: &str) -> String {
        format!("{}/{sub}", self.dir.display())
    }
}

impl Drop for Prefix {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn write_exe(path: &Path, text: &str) {
    std::fs::write(path, text).unwrap();
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755)).unwrap();
}

#[test]
fn showme_parts() {
    let px = Prefix::new("showme");
    let (inc, lib) = (px.p("include"), px.p("lib"));
    let cc = px.p("fakecc");
    let link = format!("-L{lib} -Wl,-rpath,{lib} -lmpi_abi");
    assert_eq!(px.out(&["--showme:compile"]), format!("-I{inc}\n"));
    assert_eq!(px.out(&["-showme:link"]), format!("{link}\n"));
    assert_eq!(px.out(&["--showme:incdirs"]), format!("{inc}\n"));
    assert_eq!(px.out(&["--showme:libdirs"]), format!("{lib}\n"));
    assert_eq!(px.out(&["--showme:libs"]), "mpi_abi\n");
    assert_eq!(px.out(&["--showme:command"]), format!("{cc}\n"));
    let identity = format!("mpicc for Baton {VERSION} (MPI 5.0 standard ABI), compiling with {cc}\n");
    assert_eq!(px.out(&["--showme:version"]), identity);
    let (code, _, err) = px.run("mpicc", &["--showme:nonsense"]);
    assert_eq!(code, 2);
    assert!(err.contains("'--showme:nonsense'"), "{err}");
    // Whole commands, not run.
    assert_eq!(px.out(&["--showme", "a.c", "-o", "a"]), format!("{cc} -I{inc} a.c -o a {link}\n"));
    assert_eq!(px.out(&["-show", "-c", "a.c"]), format!("{cc} -I{inc} -c a.c\n"));
    assert_eq!(px.out(&["-compile_info", "a.c"]), format!("{cc} -I{inc} a.c\n"));
    assert_eq!(px.out(&["-link_info", "a.o", "-o", "a"]), format!("{cc} -I{inc} a.o -o a {link}\n"));
    // And run: arguments with blanks and quotes arrive intact.
    assert_eq!(px.out(&["-DX=it's a b", "a.c"]), format!("fakecc -I{inc} -DX=it's a b a.c {link}\n"));
    assert_eq!(px.out(&["-c", "a.c"]), format!("fakecc -I{inc} -c a.c\n"));
}

#[test]
fn version_flags_say_baton_then_the_compiler() {
    let px = Prefix::new("version");
    let cc = px.p("fakecc");
    for name in ["mpicc", "mpicxx"] {
        let identity = format!("{name} for Baton {VERSION} (MPI 5.0 standard ABI), compiling with {cc}");
        let (code, out, _) = px.run(name, &["--version"]);
        assert_eq!((code, out), (0, format!("{identity}\nfakecc 1.2.3\n")), "{name} --version");
        // -v alone: the compiler's version (on its stderr), not a link of nothing.
        let (code, out, err) = px.run(name, &["-v"]);
        assert_eq!((code, out, err), (0, format!("{identity}\n"), "fakecc version 1.2.3\n".into()), "{name} -v");
        // -v with a build: the identity, then the verbose build with Baton's flags.
        let (code, out, _) = px.run(name, &["-v", "a.c"]);
        assert_eq!(code, 0);
        let lines: Vec<&str> = out.lines().collect();
        assert_eq!(lines[0], identity);
        assert!(
            lines[1].starts_with("fakecc -I") && lines[1].contains(" -v a.c ") && lines[1].ends_with("-lmpi_abi"),
            "{out}"
        );
    }
}
