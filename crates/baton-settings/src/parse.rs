//! Parsing by [`Kind`], and what each kind accepts, in words: the long form for error messages
//! ([`Kind::expects`]) and the short one for tables ([`Kind::accepts`]).

use crate::{Kind, Meta, Unit};
use std::ffi::OsStr;
use std::path::PathBuf;
use std::time::Duration;

const TRUE_WORDS: [&str; 4] = ["1", "yes", "on", "true"];
const FALSE_WORDS: [&str; 4] = ["0", "no", "off", "false"];

/// A type a setting reads as; each fits some [`Kind`]s.
pub trait Value: Clone + Send + Sync + 'static {
    /// Whether a setting of `kind` reads as this type.
    fn fits(kind: &Kind) -> bool;
    /// Parses a set, non-blank value, or says what is wrong with it.
    fn parse(meta: &Meta, raw: &OsStr) -> Result<Self, String>;
}

/// The value as UTF-8 text without surrounding blanks, after checking that `T` fits.
fn text<'a, T: Value>(meta: &Meta, raw: &'a OsStr) -> Result<&'a str, String> {
    if !T::fits(&meta.kind) {
        return Err(format!(
            "{}: a {:?} setting does not read as {}",
            meta.name,
            meta.kind,
            std::any::type_name::<T>()
        ));
    }
    raw.to_str().map(str::trim).ok_or_else(|| format!("{}={} is not valid UTF-8", meta.name, raw.to_string_lossy()))
}

/// `raw` as an error message shows it: as written, unless it holds control characters.
fn show(raw: &str) -> String {
    if raw.chars().any(char::is_control) {
        raw.escape_debug().to_string()
    } else {
        raw.to_string()
    }
}

fn bad(meta: &Meta, raw: &str) -> String {
    format!("{}={} is not {}", meta.name, show(raw), meta.kind.expects())
}

/// `4096`, `64k`, `1m`, `2g` (case-insensitive), checked against overflow.
pub(crate) fn parse_size(s: &str) -> Option<usize> {
    let s = s.trim().to_ascii_lowercase();
    let (num, mul) = match s.chars().last()? {
        'k' => (&s[..s.len() - 1], 1usize << 10),
        'm' => (&s[..s.len() - 1], 1 << 20),
        'g' => (&s[..s.len() - 1], 1 << 30),
        _ => (&s[..], 1),
    };
    // `parse` accepts a leading `+`; a size is digits only.
    if num.is_empty() || !num.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    num.parse::<usize>().ok()?.checked_mul(mul)
}

/// A size as a user would write it: `128k`, `1m`, or bytes.
pub(crate) fn show_size(n: usize) -> String {
    match n {
        0 => "0".into(),
        _ if n % (1 << 30) == 0 => format!("{}g", n >> 30),
        _ if n % (1 << 20) == 0 => format!("{}m", n >> 20),
        _ if n % (1 << 10) == 0 => format!("{}k", n >> 10),
        _ => n.to_string(),
    }
}

impl Unit {
    fn words(self) -> &'static str {
        match self {
            Unit::Count => "a whole number",
            Unit::Microseconds => "a whole number of microseconds",
            Unit::Seconds => "a whole number of seconds",
        }
    }

    fn symbol(self) -> &'static str {
        match self {
            Unit::Count => "",
            Unit::Microseconds => " µs",
            Unit::Seconds => " s",
        }
    }
}

fn quoted(words: &[&str]) -> String {
    words.iter().map(|w| format!("`{w}`")).collect::<Vec<_>>().join(", ")
}

impl Kind {
    /// What a value must be, completing "NAME=VALUE is not ...".
    pub fn expects(&self) -> String {
        match *self {
            Kind::Bool => format!("yes or no ({}; {})", TRUE_WORDS.join(", "), FALSE_WORDS.join(", ")),
            Kind::Uint { unit, min, max } => format!("{} ({min}..={max})", unit.words()),
            Kind::Size { min, max, off } => {
                let range = if max == usize::MAX {
                    format!("at least {}", show_size(min))
                } else {
                    format!("{}..={}", show_size(min), show_size(max))
                };
                format!("a size in bytes ({range}; suffixes k, m, g{})", if off { "; or off" } else { "" })
            }
            Kind::Seconds { min, max } => format!("a number of seconds ({min}..={max})"),
            Kind::Choice { choices, .. } => format!("one of: {}", choices.join(", ")),
            Kind::Algorithm { algos } => format!("one of: auto, {}", algos.join(", ")),
            Kind::List { items: Some(items), .. } => format!("a comma list of: {}", items.join(", ")),
            Kind::List { items: None, what } => format!("a comma list of {what}"),
            Kind::Text { what, .. } => what.to_string(),
            Kind::Path => "a path".into(),
        }
    }

    /// What a value may be, for a table cell (Markdown).
    pub fn accepts(&self) -> String {
        match *self {
            Kind::Bool => "`0` or `1`".into(),
            Kind::Uint { unit, min, max } => format!("{min}–{max}{}", unit.symbol()),
            Kind::Size { min, max, off } => {
                let range = match (min, max) {
                    (0, usize::MAX) => "bytes".to_string(),
                    (_, usize::MAX) => format!("≥ {} bytes", show_size(min)),
                    _ => format!("{}–{} bytes", show_size(min), show_size(max)),
                };
                if off {
                    format!("{range}, or `off`")
                } else {
                    range
                }
            }
            Kind::Seconds { min, max } => format!("{min}–{max} s"),
            Kind::Choice { choices, .. } => quoted(choices),
            Kind::Algorithm { algos } => format!("`auto`, {}", quoted(algos)),
            Kind::List { items: Some(items), .. } => format!("comma list of {}", quoted(items)),
            Kind::List { items: None, what } => format!("comma list of {what}"),
            Kind::Text { what, .. } => what.to_string(),
            Kind::Path => "a path".into(),
        }
    }
}

/// `n`, the number `s` reads as (`None`: not a number), when it lies in `min..=max`; else the
/// error that names `s`.
fn within<N: PartialOrd>(meta: &Meta, s: &str, n: Option<N>, min: N, max: N) -> Result<N, String> {
    n.filter(|n| (min..=max).contains(n)).ok_or_else(|| bad(meta, s))
}

impl Value for bool {
    fn fits(kind: &Kind) -> bool {
        matches!(kind, Kind::Bool)
    }
    fn parse(meta: &Meta, raw: &OsStr) -> Result<bool, String> {
        let s = text::<bool>(meta, raw)?;
        let w = s.to_ascii_lowercase();
        if TRUE_WORDS.contains(&w.as_str()) {
            Ok(true)
        } else if FALSE_WORDS.contains(&w.as_str()) {
            Ok(false)
        } else {
            Err(bad(meta, s))
        }
    }
}

impl Value for u64 {
    fn fits(kind: &Kind) -> bool {
        matches!(kind, Kind::Uint { .. })
    }
    fn parse(meta: &Meta, raw: &OsStr) -> Result<u64, String> {
        let s = text::<u64>(meta, raw)?;
        let Kind::Uint { min, max, .. } = meta.kind else { unreachable!("checked by fits") };
        within(meta, s, s.bytes().all(|b| b.is_ascii_digit()).then(|| s.parse::<u64>().ok()).flatten(), min, max)
    }
}

impl Value for usize {
    fn fits(kind: &Kind) -> bool {
        matches!(kind, Kind::Size { .. })
    }
    fn parse(meta: &Meta, raw: &OsStr) -> Result<usize, String> {
        let s = text::<usize>(meta, raw)?;
        let Kind::Size { min, max, off } = meta.kind else { unreachable!("checked by fits") };
        if off && s.eq_ignore_ascii_case("off") {
            return Ok(usize::MAX);
        }
        within(meta, s, parse_size(s), min, max)
    }
}

impl Value for Duration {
    fn fits(kind: &Kind) -> bool {
        matches!(kind, Kind::Seconds { .. })
    }
    fn parse(meta: &Meta, raw: &OsStr) -> Result<Duration, String> {
        let s = text::<Duration>(meta, raw)?;
        let Kind::Seconds { min, max } = meta.kind else { unreachable!("checked by fits") };
        // Digits and one point only: `f64::from_str` also takes `inf`, `nan` and exponents.
        let plain = !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit() || b == b'.') && s.matches('.').count() <= 1;
        within(meta, s, plain.then(|| s.parse::<f64>().ok()).flatten(), min, max).map(Duration::from_secs_f64)
    }
}

impl Value for &'static str {
    fn fits(kind: &Kind) -> bool {
        matches!(kind, Kind::Choice { .. } | Kind::Algorithm { .. })
    }
    /// The choice as the table spells it (an alias reads as the choice it stands for).
    fn parse(meta: &Meta, raw: &OsStr) -> Result<&'static str, String> {
        let s = text::<&'static str>(meta, raw)?;
        let found = match meta.kind {
            Kind::Choice { choices, aliases } => choices
                .iter()
                .copied()
                .find(|&c| c == s)
                .or_else(|| aliases.iter().find(|(a, _)| *a == s).map(|&(_, c)| c)),
            Kind::Algorithm { algos } => std::iter::once("auto").chain(algos.iter().copied()).find(|&c| c == s),
            _ => unreachable!("checked by fits"),
        };
        found.ok_or_else(|| bad(meta, s))
    }
}

impl Value for String {
    fn fits(kind: &Kind) -> bool {
        matches!(kind, Kind::List { .. } | Kind::Text { .. })
    }
    fn parse(meta: &Meta, raw: &OsStr) -> Result<String, String> {
        let s = text::<String>(meta, raw)?;
        match meta.kind {
            Kind::List { items, .. } => {
                let words: Vec<&str> = s.split(',').map(str::trim).filter(|w| !w.is_empty()).collect();
                if words.is_empty() {
                    return Err(bad(meta, s));
                }
                if let Some(items) = items {
                    if let Some(w) = words.iter().find(|w| !items.contains(w)) {
                        return Err(format!(
                            "{}={} names '{}', which is not one of: {}",
                            meta.name,
                            show(s),
                            show(w),
                            items.join(", ")
                        ));
                    }
                }
                Ok(words.join(","))
            }
            Kind::Text { check, .. } => match check {
                Some(ok) if !ok(s) => Err(bad(meta, s)),
                _ => Ok(s.to_string()),
            },
            _ => unreachable!("checked by fits"),
        }
    }
}

impl Value for PathBuf {
    fn fits(kind: &Kind) -> bool {
        matches!(kind, Kind::Path)
    }
    /// Any bytes: a path need not be UTF-8, and its blanks are kept.
    fn parse(meta: &Meta, raw: &OsStr) -> Result<PathBuf, String> {
        if !Self::fits(&meta.kind) {
            return Err(format!("{}: a {:?} setting does not read as a path", meta.name, meta.kind));
        }
        Ok(PathBuf::from(raw))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Meta, OnBad, Optional, Setting};

    fn meta(kind: Kind) -> Meta {
        Meta { name: "BATON_T", kind, doc: "t", ..Meta::LIBRARY }
    }

    #[test]
    fn bools() {
        let s: Setting<bool> = Setting::new("1", meta(Kind::Bool));
        for t in ["1", "yes", "ON", "True", " on "] {
            assert_eq!(s.parse(t), Ok(true), "{t}");
        }
        for f in ["0", "no", "off", "FALSE"] {
            assert_eq!(s.parse(f), Ok(false), "{f}");
        }
        assert_eq!(
            s.parse("maybe").unwrap_err(),
            "BATON_T=maybe is not yes or no (1, yes, on, true; 0, no, off, false)"
        );
        assert!(s.parse("2").is_err());
        assert!(s.default_value());
    }

    #[test]
    fn whole_numbers_and_their_range() {
        let s: Setting<u64> = Setting::new("5", meta(Kind::Uint { unit: Unit::Count, min: 1, max: 256 }));
        assert_eq!(s.parse("1"), Ok(1));
        assert_eq!(s.parse("256"), Ok(256));
        assert_eq!(s.parse(" 17\t"), Ok(17));
        for b in ["0", "257", "-1", "+3", "1.5", "abc", "1k", "99999999999999999999999"] {
            assert_eq!(s.parse(b).unwrap_err(), format!("BATON_T={b} is not a whole number (1..=256)"), "{b}");
        }
        let us: Setting<u64> = Setting::new("0", meta(Kind::Uint { unit: Unit::Microseconds, min: 0, max: 10 }));
        assert_eq!(us.parse("11").unwrap_err(), "BATON_T=11 is not a whole number of microseconds (0..=10)");
        assert_eq!(us.meta.kind.accepts(), "0–10 µs");
    }

    #[test]
    fn sizes_with_suffixes() {
        let s: Setting<usize> = Setting::new("4k", meta(Kind::Size { min: 4096, max: 1 << 20, off: false }));
        assert_eq!(s.default_value(), 4096);
        assert_eq!(s.parse("8192"), Ok(8192));
        assert_eq!(s.parse("64k"), Ok(65536));
        assert_eq!(s.parse("64K"), Ok(65536));
        assert_eq!(s.parse("1m"), Ok(1 << 20));
        assert_eq!(s.parse("1M "), Ok(1 << 20));
        for b in ["4095", "2m", "1g", "k", "1.5k", "-1", "+4k", "4 k", "4kb", "off"] {
            assert_eq!(
                s.parse(b).unwrap_err(),
                format!("BATON_T={b} is not a size in bytes (4k..=1m; suffixes k, m, g)")
            );
        }
        assert_eq!(s.meta.kind.accepts(), "4k–1m bytes");
        let any: Setting<usize> = Setting::new("off", meta(Kind::Size { min: 0, max: usize::MAX, off: true }));
        assert_eq!(any.default_value(), usize::MAX);
        assert_eq!(any.parse("OFF"), Ok(usize::MAX));
        assert_eq!(any.parse("2g"), Ok(2 << 30));
        assert_eq!(any.parse("0"), Ok(0));
        assert!(any.parse("99999999999999999999g").is_err(), "overflow is refused, not wrapped");
        assert!(any.parse("17179869184g").is_err());
        assert_eq!(
            any.parse("x").unwrap_err(),
            "BATON_T=x is not a size in bytes (at least 0; suffixes k, m, g; or off)"
        );
        assert_eq!(any.meta.kind.accepts(), "bytes, or `off`");
    }

    #[test]
    fn seconds_with_fractions() {
        let s: Setting<Duration> = Setting::new("5", meta(Kind::Seconds { min: 1.0, max: 86400.0 }));
        assert_eq!(s.default_value(), Duration::from_secs(5));
        assert_eq!(s.parse("2.5"), Ok(Duration::from_millis(2500)));
        assert_eq!(s.parse("86400"), Ok(Duration::from_secs(86400)));
        for b in ["0.5", "86401", "inf", "nan", "1e3", "-2", "1.2.3", ".", "soon"] {
            assert_eq!(s.parse(b).unwrap_err(), format!("BATON_T={b} is not a number of seconds (1..=86400)"), "{b}");
        }
    }

    #[test]
    fn choices_aliases_and_algorithms() {
        let kind = Kind::Choice { choices: &["cyclic", "block", "off"], aliases: &[("none", "off")] };
        let s: Setting<&'static str> = Setting::new("cyclic", Meta { on_bad: OnBad::Warn, ..meta(kind) });
        assert_eq!(s.parse("block"), Ok("block"));
        assert_eq!(s.parse("none"), Ok("off"));
        assert_eq!(s.parse("Block").unwrap_err(), "BATON_T=Block is not one of: cyclic, block, off");
        let a: Setting<&'static str> = Setting::new("auto", meta(Kind::Algorithm { algos: &["ring", "tree"] }));
        assert_eq!(a.parse("auto"), Ok("auto"));
        assert_eq!(a.parse("tree"), Ok("tree"));
        assert_eq!(a.parse("mesh").unwrap_err(), "BATON_T=mesh is not one of: auto, ring, tree");
        assert_eq!(a.meta.kind.accepts(), "`auto`, `ring`, `tree`");
    }

    #[test]
    fn lists_and_text() {
        let l: Setting<String> =
            Setting::new("shm,tcp", meta(Kind::List { items: Some(&["self", "shm", "tcp"]), what: "transports" }));
        assert_eq!(l.parse(" tcp , self,"), Ok("tcp,self".to_string()));
        assert_eq!(l.parse("shm,ucx").unwrap_err(), "BATON_T=shm,ucx names 'ucx', which is not one of: self, shm, tcp");
        assert!(l.parse(",").is_err(), "a list of nothing is not a list");
        let free: Optional<String> = Optional::new("auto", meta(Kind::List { items: None, what: "interfaces" }));
        assert_eq!(free.parse("eth1, 10.0.0.0/8"), Ok("eth1,10.0.0.0/8".to_string()));
        fn word(s: &str) -> bool {
            s.bytes().all(|b| b.is_ascii_alphanumeric())
        }
        let t: Setting<String> = Setting::new("ssh", meta(Kind::Text { what: "a word", check: Some(word) }));
        assert_eq!(t.parse("rsh"), Ok("rsh".to_string()));
        assert_eq!(t.parse("r sh").unwrap_err(), "BATON_T=r sh is not a word");
        assert_eq!(t.parse("a\nb").unwrap_err(), "BATON_T=a\\nb is not a word", "control characters are escaped");
        let p: Optional<PathBuf> = Optional::new("auto", meta(Kind::Path));
        assert_eq!(p.parse("/tmp/x y"), Ok(PathBuf::from("/tmp/x y")));
    }

    #[test]
    fn a_type_that_does_not_fit_the_kind_is_a_registry_error() {
        let s: Setting<u64> = Setting::new("1", meta(Kind::Bool));
        assert!(s.parse("1").unwrap_err().contains("does not read as u64"));
        let o: Optional<bool> = Optional::new("x", meta(Kind::Path));
        assert!(crate::Entry::self_check(&o).is_err());
    }

    #[test]
    fn non_utf8_is_refused_except_for_paths() {
        use std::os::unix::ffi::OsStrExt;
        let raw = OsStr::from_bytes(b"\xff1");
        let m = meta(Kind::Uint { unit: Unit::Count, min: 0, max: 9 });
        assert!(<u64 as Value>::parse(&m, raw).unwrap_err().contains("is not valid UTF-8"));
        assert_eq!(<PathBuf as Value>::parse(&meta(Kind::Path), raw).unwrap().as_os_str(), raw);
    }

    #[test]
    fn sizes_shown_as_written() {
        assert_eq!(show_size(0), "0");
        assert_eq!(show_size(4096), "4k");
        assert_eq!(show_size(1 << 20), "1m");
        assert_eq!(show_size(3 << 30), "3g");
        assert_eq!(show_size(1000), "1000");
    }
}
