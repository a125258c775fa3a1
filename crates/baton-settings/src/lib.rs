//! Every setting Baton reads from the environment, declared once.
//!
//! * [`ALL`] — the table: every user-facing variable, in the order the README shows it.
//! * [`Setting`] — a variable with a fixed default; [`Setting::get`] returns its value.
//! * [`Optional`] — a variable whose absence means something computed (an interface chosen
//!   from the host's addresses, a ring size from the host's rank count); [`Optional::value`].
//! * [`Meta`] — what the table holds for each: name, [`Kind`] (type with its range or choices),
//!   one-line doc, which program reads it ([`Reader`]), what a bad value does ([`OnBad`]).
//! * [`check`] — reads and validates the variables of one program and returns a [`Report`];
//!   `MPI_Init` and `mpiexec` call it before they use any setting.
//! * [`protocol`] — the variables `mpiexec` sets for each rank. They are not settings, but are
//!   declared here too, so that every `BATON_` name the code uses has one declaration.
//! * [`markdown`] — the documentation tables, generated from the two lists.
//!
//! Rules shared by every setting: a variable is read once per process (at its first use, or at
//! [`check`]) and kept; later reads load a `OnceLock`. Surrounding blanks are ignored, and an
//! empty value is the same as unset. A bad value is an error naming the variable, the value
//! and what is accepted; it reads as the default, which matters only to a program that skips
//! [`check`]. The one exception is a setting marked [`OnBad::Warn`] (a placement hint, where
//! a typo is not worth failing a job): [`check`] returns a warning, and the default applies.
//!
//! The metadata is what the MPI tool interface needs to expose the settings as control
//! variables: name, [`Kind::datatype`], default, doc, and [`Meta::changeable`].

#![forbid(unsafe_code)]

pub mod markdown;
mod parse;
pub mod protocol;
mod registry;

pub use parse::Value;
pub use registry::*;

use std::ffi::{OsStr, OsString};
use std::sync::OnceLock;

/// The type of a setting, with its range or choices.
#[derive(Clone, Copy, Debug)]
pub enum Kind {
    /// Yes or no: `1`, `yes`, `on`, `true`; `0`, `no`, `off`, `false`.
    Bool,
    /// A whole number in `min..=max`.
    Uint { unit: Unit, min: u64, max: u64 },
    /// Bytes in `min..=max`, optionally with a suffix `k`, `m` or `g` (powers of 1024). With
    /// `off`, the word `off` stands for "never" and reads as `usize::MAX`.
    Size { min: usize, max: usize, off: bool },
    /// Seconds in `min..=max`, fractions allowed.
    Seconds { min: f64, max: f64 },
    /// One of `choices`; `aliases` are older spellings of some of them.
    Choice { choices: &'static [&'static str], aliases: &'static [(&'static str, &'static str)] },
    /// `auto` or one of a collective's algorithms, the first being the general one, which
    /// applies to every call.
    Algorithm { algos: &'static [&'static str] },
    /// A comma-separated list: of some of `items`, or of anything (described by `what`) when
    /// `items` is `None`. Reads as the list's items joined by `,`, blanks removed.
    List { items: Option<&'static [&'static str]>, what: &'static str },
    /// Text, described by `what` (a noun phrase); `check`, when given, refuses values.
    Text { what: &'static str, check: Option<fn(&str) -> bool> },
    /// A file system path (any bytes).
    Path,
}

/// What a whole number counts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Unit {
    Count,
    Microseconds,
    Seconds,
}

/// The program that reads a setting, and so reports a bad value of it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Reader {
    /// The MPI library, at `MPI_Init`.
    Library,
    /// `mpiexec`, at start-up.
    Launcher,
    /// The compiler wrappers `mpicc` and `mpicxx` (shell scripts).
    Wrapper,
}

/// What a value that does not parse does.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OnBad {
    /// [`check`] reports an error: `MPI_Init` fails, `mpiexec` exits.
    Fail,
    /// [`check`] reports a warning and the default applies.
    Warn,
}

/// The MPI datatype a tool would read a setting as (`MPI_T_cvar_get_info`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Datatype {
    /// `MPI_INT`: yes/no, or the index of a choice in [`Kind::enumeration`].
    Int,
    /// `MPI_UNSIGNED_LONG_LONG`: numbers and sizes.
    UnsignedLongLong,
    /// `MPI_DOUBLE`: seconds.
    Double,
    /// `MPI_CHAR`: text, lists and paths.
    Char,
}

impl Kind {
    /// The datatype of the setting as a control variable.
    pub fn datatype(&self) -> Datatype {
        match self {
            Kind::Bool | Kind::Choice { .. } | Kind::Algorithm { .. } => Datatype::Int,
            Kind::Uint { .. } | Kind::Size { .. } => Datatype::UnsignedLongLong,
            Kind::Seconds { .. } => Datatype::Double,
            Kind::List { .. } | Kind::Text { .. } | Kind::Path => Datatype::Char,
        }
    }

    /// The named values of a choice, in order (`MPI_T_enum`); `None` for other kinds.
    pub fn enumeration(&self) -> Option<Vec<&'static str>> {
        match self {
            Kind::Choice { choices, .. } => Some(choices.to_vec()),
            Kind::Algorithm { algos } => Some(std::iter::once("auto").chain(algos.iter().copied()).collect()),
            _ => None,
        }
    }
}

/// What the table says of one setting.
#[derive(Clone, Copy, Debug)]
pub struct Meta {
    /// The environment variable.
    pub name: &'static str,
    pub kind: Kind,
    /// One line, the user's view: what it does.
    pub doc: &'static str,
    /// Where more is written (`docs/ARCHITECTURE.md, TCP`).
    pub details: Option<&'static str>,
    pub reader: Reader,
    pub on_bad: OnBad,
    /// Whether a tool could change it after `MPI_Init` (a control variable that is not
    /// read-only). None can today: each is read once, before what it shapes is built.
    pub changeable: bool,
}

impl Meta {
    /// The base of a library setting, completed with struct update syntax.
    pub const LIBRARY: Meta = Meta {
        name: "",
        kind: Kind::Bool,
        doc: "",
        details: None,
        reader: Reader::Library,
        on_bad: OnBad::Fail,
        changeable: false,
    };
    /// The base of a setting of `mpiexec`.
    pub const LAUNCHER: Meta = Meta { reader: Reader::Launcher, ..Meta::LIBRARY };
    /// The base of a setting of the compiler wrappers.
    pub const WRAPPER: Meta = Meta { reader: Reader::Wrapper, ..Meta::LIBRARY };

    /// A collective's algorithms, the general one first (empty for other kinds).
    pub fn algorithms(&self) -> &'static [&'static str] {
        match self.kind {
            Kind::Algorithm { algos } => algos,
            _ => &[],
        }
    }
}

/// A bad value found by [`check`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Problem {
    pub name: &'static str,
    /// `NAME=VALUE is not ...`, naming what is accepted.
    pub message: String,
    /// Whether it is an error ([`OnBad::Fail`]) rather than a warning.
    pub fatal: bool,
}

/// One row of the table, whatever its value type.
pub trait Entry: Sync {
    fn meta(&self) -> &Meta;
    /// What an unset variable means, as the documentation shows it.
    fn default_text(&self) -> &'static str;
    /// Whether [`default_text`](Entry::default_text) is a value (else a description).
    fn has_fixed_default(&self) -> bool;
    /// Reads the variable if not yet read; its problem if the value is bad.
    fn problem(&self) -> Option<Problem>;
    /// Whether the declared default parses and the value type fits the kind (the registry's
    /// own consistency, checked by its tests).
    fn self_check(&self) -> Result<(), String>;
}

/// What a process read: the value (or the default) and what was wrong with the variable.
#[derive(Debug)]
struct Read<T> {
    value: T,
    problem: Option<Problem>,
}

/// A variable with a fixed default.
pub struct Setting<T: Value> {
    pub meta: Meta,
    /// The value when unset, written as a user would write it.
    pub default: &'static str,
    read: OnceLock<Read<T>>,
}

/// A variable whose absence means something computed where it is used.
pub struct Optional<T: Value> {
    pub meta: Meta,
    /// What an unset variable means, in words.
    pub unset: &'static str,
    read: OnceLock<Read<Option<T>>>,
}

/// The variable's text, or `None` when unset or blank.
fn raw(name: &str) -> Option<OsString> {
    let v = std::env::var_os(name)?;
    if v.to_str().is_some_and(|s| s.trim().is_empty()) {
        return None;
    }
    Some(v)
}

fn problem(meta: &Meta, message: String, default: Option<&str>) -> Problem {
    let fatal = meta.on_bad == OnBad::Fail;
    let message = match (fatal, default) {
        (false, Some(d)) => format!("{message}; using {d}"),
        _ => message,
    };
    Problem { name: meta.name, message, fatal }
}

impl<T: Value> Setting<T> {
    pub const fn new(default: &'static str, meta: Meta) -> Setting<T> {
        Setting { meta, default, read: OnceLock::new() }
    }

    /// The value: the variable's if set and valid, else the default.
    pub fn get(&self) -> T {
        self.read().value.clone()
    }

    /// Parses `raw` as if the variable held it.
    pub fn parse(&self, raw: &str) -> Result<T, String> {
        T::parse(&self.meta, OsStr::new(raw))
    }

    /// The default, parsed.
    pub fn default_value(&self) -> T {
        // The registry's tests parse every default, so this cannot fail in a tested build.
        self.parse(self.default).unwrap_or_else(|e| panic!("baton-settings: bad default: {e}"))
    }

    fn read(&self) -> &Read<T> {
        self.read.get_or_init(|| self.read_from(raw(self.meta.name).as_deref()))
    }

    fn read_from(&self, raw: Option<&OsStr>) -> Read<T> {
        match raw.map(|r| T::parse(&self.meta, r)) {
            None => Read { value: self.default_value(), problem: None },
            Some(Ok(value)) => Read { value, problem: None },
            Some(Err(m)) => {
                Read { value: self.default_value(), problem: Some(problem(&self.meta, m, Some(self.default))) }
            }
        }
    }
}

impl<T: Value> Optional<T> {
    pub const fn new(unset: &'static str, meta: Meta) -> Optional<T> {
        Optional { meta, unset, read: OnceLock::new() }
    }

    /// The variable's value if set and valid.
    pub fn value(&self) -> Option<T> {
        self.read().value.clone()
    }

    /// Parses `raw` as if the variable held it.
    pub fn parse(&self, raw: &str) -> Result<T, String> {
        T::parse(&self.meta, OsStr::new(raw))
    }

    fn read(&self) -> &Read<Option<T>> {
        self.read.get_or_init(|| self.read_from(raw(self.meta.name).as_deref()))
    }

    fn read_from(&self, raw: Option<&OsStr>) -> Read<Option<T>> {
        match raw.map(|r| T::parse(&self.meta, r)) {
            None => Read { value: None, problem: None },
            Some(Ok(v)) => Read { value: Some(v), problem: None },
            Some(Err(m)) => Read { value: None, problem: Some(problem(&self.meta, m, None)) },
        }
    }
}

impl<T: Value> Entry for Setting<T> {
    fn meta(&self) -> &Meta {
        &self.meta
    }
    fn default_text(&self) -> &'static str {
        self.default
    }
    fn has_fixed_default(&self) -> bool {
        true
    }
    fn problem(&self) -> Option<Problem> {
        self.read().problem.clone()
    }
    fn self_check(&self) -> Result<(), String> {
        self.parse(self.default).map(|_| ())
    }
}

impl<T: Value> Entry for Optional<T> {
    fn meta(&self) -> &Meta {
        &self.meta
    }
    fn default_text(&self) -> &'static str {
        self.unset
    }
    fn has_fixed_default(&self) -> bool {
        false
    }
    fn problem(&self) -> Option<Problem> {
        self.read().problem.clone()
    }
    fn self_check(&self) -> Result<(), String> {
        if T::fits(&self.meta.kind) {
            Ok(())
        } else {
            Err(format!("{}: {:?} does not read as {}", self.meta.name, self.meta.kind, std::any::type_name::<T>()))
        }
    }
}

/// The problems [`check`] found.
#[derive(Debug, Default)]
pub struct Report {
    pub errors: Vec<Problem>,
    pub warnings: Vec<Problem>,
}

impl Report {
    /// Every error in one message (`; ` between them), if there is any.
    pub fn error(&self) -> Option<String> {
        if self.errors.is_empty() {
            return None;
        }
        Some(self.errors.iter().map(|p| p.message.as_str()).collect::<Vec<_>>().join("; "))
    }
}

/// Reads every setting of `reader` and reports the bad values.
pub fn check(reader: Reader) -> Report {
    let mut r = Report::default();
    for p in ALL.iter().filter(|e| e.meta().reader == reader).filter_map(|e| e.problem()) {
        if p.fatal {
            r.errors.push(p);
        } else {
            r.warnings.push(p);
        }
    }
    r
}

/// The entry of variable `name`.
pub fn find(name: &str) -> Option<&'static dyn Entry> {
    ALL.iter().copied().find(|e| e.meta().name == name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_entry_is_consistent() {
        let mut names = std::collections::HashSet::new();
        for e in ALL {
            let m = e.meta();
            assert!(m.name.starts_with("BATON_") || m.name == "MPIEXEC_TIMEOUT", "{}", m.name);
            assert!(m.name.bytes().all(|b| b.is_ascii_uppercase() || b.is_ascii_digit() || b == b'_'), "{}", m.name);
            assert!(names.insert(m.name), "{} declared twice", m.name);
            assert!(!m.doc.is_empty() && !m.doc.contains('\n') && !m.doc.contains('|'), "{}: doc", m.name);
            assert!(!m.doc.ends_with('.'), "{}: doc is a line of the table, without a full stop", m.name);
            assert!(!m.changeable, "{}: nothing supports changing a setting after MPI_Init", m.name);
            e.self_check().unwrap();
            if let Kind::Choice { choices, aliases } = m.kind {
                for (alias, to) in aliases {
                    assert!(choices.contains(to) && !choices.contains(alias), "{}: alias {alias}", m.name);
                }
            }
            if m.on_bad == OnBad::Warn {
                assert!(e.has_fixed_default(), "{}: a warning says which default applies", m.name);
            }
        }
        for p in protocol::ALL {
            assert!(names.insert(p.name), "{} declared as a setting and a protocol variable", p.name);
        }
    }

    #[test]
    fn a_bad_value_reads_as_the_default_and_is_reported() {
        let r = SPIN_US.read_from(Some(OsStr::new("abc")));
        assert_eq!(r.value, 200);
        let p = r.problem.unwrap();
        assert!(p.fatal);
        assert_eq!(p.message, "BATON_SPIN_US=abc is not a whole number of microseconds (0..=1000000)");
        let r = SPIN_US.read_from(Some(OsStr::new("  35 ")));
        assert_eq!((r.value, r.problem), (35, None));
        assert_eq!(SPIN_US.read_from(None).value, 200);
        let r = SHM_RING_SIZE.read_from(Some(OsStr::new("1x")));
        assert_eq!(r.value, None);
        assert!(r.problem.unwrap().message.starts_with("BATON_SHM_RING_SIZE=1x is not a size in bytes"));
        assert_eq!(SHM_RING_SIZE.read_from(Some(OsStr::new("64k"))).value, Some(65536));
    }

    #[test]
    fn a_lenient_setting_warns_and_names_the_default() {
        let r = PLACE.read_from(Some(OsStr::new("blok")));
        assert_eq!(r.value, "cyclic");
        let p = r.problem.unwrap();
        assert!(!p.fatal);
        assert_eq!(p.message, "BATON_PLACE=blok is not one of: cyclic, block, off; using cyclic");
    }

    #[test]
    fn mpi_t_view() {
        assert_eq!(SPIN_US.meta.kind.datatype(), Datatype::UnsignedLongLong);
        assert_eq!(CMA.meta.kind.datatype(), Datatype::Int);
        assert_eq!(SPAWN_TIMEOUT.meta.kind.datatype(), Datatype::Double);
        assert_eq!(NAME_DIR.meta.kind.datatype(), Datatype::Char);
        assert_eq!(COLL_BARRIER.meta.kind.enumeration().unwrap(), ["auto", "dissemination", "shm"]);
        assert_eq!(PLACE.meta.kind.enumeration().unwrap(), ["cyclic", "block", "off"]);
        assert!(TRANSPORTS.meta.kind.enumeration().is_none());
    }

    #[test]
    fn find_and_report() {
        assert_eq!(find("BATON_TCP_CHUNK").unwrap().default_text(), "512k");
        assert!(find("BATON_RANK").is_none(), "protocol variables are not settings");
        let r = Report {
            errors: vec![
                Problem { name: "A", message: "A=1 is not x".into(), fatal: true },
                Problem { name: "B", message: "B=2 is not y".into(), fatal: true },
            ],
            warnings: Vec::new(),
        };
        assert_eq!(r.error().unwrap(), "A=1 is not x; B=2 is not y");
        assert_eq!(Report::default().error(), None);
    }
}
