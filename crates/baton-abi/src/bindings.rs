//! The binding generator: from the standard's prototypes (`abi/functions.tsv`) and the
//! annotation table (`abi/bindings.tsv`), the `PMPI_` entry points of every annotated family.
//!
//! A *family* is a function and its large-count twins (`MPI_X`, `MPI_X_c`, and `MPI_X_x` when the
//! row asks for it). Each member becomes one `extern "C"` function that converts its arguments
//! into what the implementation takes (counts and displacements of every form as `i64`/`usize`,
//! checked pointers, looked-up handles: one `crate::validate` call per annotated parameter),
//! calls the one implementation function of the family, and maps its `Result` to an error code
//! through `crate::errors::guard`. `abi/README.md` describes the table; [`Family`] and [`Role`]
//! are its rows and cells; a bundle (`BUNDLES`) hands the implementation several checked
//! arguments as one value (a message: buffer, count, datatype, peer, tag).

use crate::data::Function;
use std::collections::BTreeSet;
use std::fmt::Write;

const HANDLES: &[&str] = &[
    "MPI_Comm",
    "MPI_Group",
    "MPI_Datatype",
    "MPI_Op",
    "MPI_Info",
    "MPI_Errhandler",
    "MPI_Request",
    "MPI_Message",
    "MPI_Win",
    "MPI_File",
    "MPI_Session",
    "MPI_T_enum",
    "MPI_T_cvar_handle",
    "MPI_T_pvar_handle",
    "MPI_T_pvar_session",
    "MPI_T_event_registration",
    "MPI_T_event_instance",
];

/// The Rust spelling of one C type (parameter name removed).
pub fn rust_type(ctype: &str) -> String {
    let t = ctype.replace("const ", "").replace("const", "");
    let arrays = t.matches("[]").count();
    let fixed = t.contains("[3]");
    let stars = t.matches('*').count() + arrays;
    let base = t.replace(['*', '[', ']'], " ").replace('3', " ");
    let base = base.split_whitespace().next().unwrap_or("");
    let mut r = match base {
        "int" => "c_int".to_string(),
        "char" => "c_char".to_string(),
        "void" => "c_void".to_string(),
        "double" => "f64".to_string(),
        "MPI_Aint" => "isize".to_string(),
        "MPI_Count" | "MPI_Offset" => "i64".to_string(),
        "MPI_Status" => "MPI_Status".to_string(),
        "MPI_T_cb_safety" | "MPI_T_source_order" => "c_int".to_string(),
        b if HANDLES.contains(&b) => "usize".to_string(),
        // Callback types are passed as opaque function pointers.
        b if b.ends_with("_function") || b.ends_with("_fn") || b.ends_with("_function_c") => "c_void".to_string(),
        other => panic!("unmapped C type {other:?} in {ctype:?}"),
    };
    if fixed {
        r = format!("[{r}; 3]");
    }
    for _ in 0..stars {
        r = format!("*mut {r}");
    }
    r
}

/// What one parameter is, as the table says: a role (`count`, `out`, `array`...) and its
/// options (`len=count`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Role {
    pub kind: String,
    pub opts: Vec<(String, String)>,
}

impl Role {
    fn opt(&self, key: &str) -> Option<&str> {
        self.opts.iter().find(|(k, _)| k == key).map(|(_, v)| v.as_str())
    }
}

/// One row of `abi/bindings.tsv`.
#[derive(Debug, Clone)]
pub struct Family {
    /// The plain form's name, e.g. `MPI_Type_vector`.
    pub name: String,
    /// The implementation, a path below the crate root, e.g. `datatype::vector`.
    pub imp: String,
    /// `lib` (the implementation takes the library), `self` (errors go to `MPI_COMM_SELF`'s
    /// handler), `x` (the family has an `_x` member), `express` (a path that needs no checks is
    /// tried first: `<implementation>_express(cx, raw arguments) -> Option<c_int>`), `completion`
    /// (errors go to the handler of a communicator the implementation finds, a completed
    /// request's: it takes a last `&mut usize` argument, `MPI_COMM_WORLD` until it sets it).
    pub flags: Vec<String>,
    /// Annotated parameters by name; the others pass as they are.
    pub roles: Vec<(String, Role)>,
}

impl Family {
    fn has(&self, flag: &str) -> bool {
        self.flags.iter().any(|f| f == flag)
    }
    fn role(&self, param: &str) -> Option<&Role> {
        self.roles.iter().find(|(p, r)| p == param && !BUNDLES.iter().any(|b| b.0 == r.kind)).map(|(_, r)| r)
    }
}

/// The roles that take no option.
const PLAIN_ROLES: &[&str] = &[
    "count",
    "nonneg",
    "bool",
    "tag",
    "tag_or_any",
    "info",
    "datatype",
    "datatype_committed",
    "out",
    "out_or_null",
    "status",
    "nonnull",
    "string",
];

/// The roles that look a handle up in the library (the family needs flag `lib`).
const LOOKUP_ROLES: &[&str] = &["comm", "intracomm", "group", "errhandler", "op", "win"];

/// The roles that take options, and the options each requires (bundles are in [`BUNDLES`]).
const OPTION_ROLES: &[(&str, &[&str])] = &[
    ("datatype_or_null", &["count", "peer"]),
    ("statuses", &["len"]),
    ("string_out", &["max"]),
    ("array", &["len"]),
    ("array_out", &["len"]),
    ("buf", &["count", "datatype"]),
    ("rank", &["in"]),
    ("rank_or_null", &["in"]),
    ("rank_or_any", &["in"]),
    ("root", &["in"]),
];

/// The options role `kind` requires, or None when there is no such role.
fn required_options(kind: &str) -> Option<&'static [&'static str]> {
    if PLAIN_ROLES.contains(&kind) || LOOKUP_ROLES.contains(&kind) {
        return Some(&[]);
    }
    let options = OPTION_ROLES.iter().map(|&(k, opts)| (k, opts));
    options.chain(BUNDLES.iter().map(|&(k, _, parts)| (k, parts))).find(|r| r.0 == kind).map(|r| r.1)
}

/// Bundles: a role whose entry names no parameter but a value made of several (each checked
/// by its own role) that the implementation takes in the place of the first of them. The
/// role, the Rust type, and the options naming the parts in the order its `new` takes them.
const BUNDLES: &[(&str, &str, &[&str])] = &[
    ("data", "crate::validate::Data", &["buf", "count", "datatype"]),
    ("message", "crate::validate::Message", &["buf", "count", "datatype", "peer", "tag"]),
    ("requests", "crate::validate::Requests", &["count", "handles"]),
    ("matching", "crate::validate::Matching", &["source", "tag"]),
    ("remote", "crate::validate::Remote", &["rank", "disp", "count", "datatype"]),
];

/// The bundle entries of `fam`: (name, type, the parameters it is made of).
fn bundles(fam: &Family) -> Vec<(&str, &'static str, Vec<&str>)> {
    let mut out = Vec::new();
    for (name, r) in &fam.roles {
        if let Some((_, ty, parts)) = BUNDLES.iter().find(|b| b.0 == r.kind) {
            out.push((name.as_str(), *ty, parts.iter().map(|k| r.opt(k).unwrap()).collect()));
        }
    }
    out
}

fn parse_role(cell: &str) -> Result<(String, Role), String> {
    let (param, role) = cell.split_once(':').ok_or_else(|| format!("{cell:?}: want param:role"))?;
    let (kind, opts) = match role.split_once('(') {
        Some((k, rest)) => {
            let inner = rest.strip_suffix(')').ok_or_else(|| format!("{cell:?}: unclosed '('"))?;
            let opts = inner
                .split(',')
                .map(|o| o.split_once('=').map(|(a, b)| (a.to_string(), b.to_string())))
                .collect::<Option<Vec<_>>>()
                .ok_or_else(|| format!("{cell:?}: options are key=value"))?;
            (k, opts)
        }
        None => (role, Vec::new()),
    };
    let need = required_options(kind).ok_or_else(|| format!("{cell:?}: unknown role {kind:?}"))?;
    for k in need {
        if !opts.iter().any(|(o, _)| o == k) {
            return Err(format!("{cell:?}: role {kind} needs option {k}="));
        }
    }
    Ok((param.to_string(), Role { kind: kind.to_string(), opts }))
}

/// Parses `abi/bindings.tsv`: family, implementation, flags (`-` for none), parameter roles.
pub fn parse_table(text: &str) -> Result<Vec<Family>, String> {
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate() {
        if line.trim().is_empty() || line.starts_with('#') {
            continue;
        }
        let cols: Vec<&str> = line.split('\t').collect();
        if cols.len() < 3 || cols.len() > 4 {
            return Err(format!("bindings.tsv:{}: want 3 or 4 tab-separated columns", i + 1));
        }
        let flags = match cols[2].trim() {
            "-" => Vec::new(),
            f => f.split(',').map(|s| s.trim().to_string()).collect(),
        };
        if let Some(f) = flags.iter().find(|f| !["lib", "self", "x", "express", "completion"].contains(&f.as_str())) {
            return Err(format!("bindings.tsv:{}: unknown flag {f:?}", i + 1));
        }
        let roles = cols
            .get(3)
            .map(|c| c.split_whitespace().map(parse_role).collect::<Result<Vec<_>, _>>())
            .transpose()
            .map_err(|e| format!("bindings.tsv:{}: {e}", i + 1))?
            .unwrap_or_default();
        out.push(Family { name: cols[0].trim().to_string(), imp: cols[1].trim().to_string(), flags, roles });
    }
    Ok(out)
}

/// One parameter of a family: its name, and its Rust type in each member (None where absent).
struct Param {
    name: String,
    types: Vec<Option<String>>,
}

impl Param {
    /// The forms disagree on the type (`int` / `MPI_Count`, `int *` / `MPI_Count *`).
    fn differs(&self) -> bool {
        let present: BTreeSet<&String> = self.types.iter().flatten().collect();
        present.len() > 1
    }
}

/// A member of a family, and whether it is a large-count form.
type Member<'a> = (&'a Function, bool);

/// The members of `fam` with their large-count flag, and the family's parameters (those of its
/// longest member, in order; shorter members must list theirs in the same order).
fn members<'a>(fam: &Family, fns: &'a [Function]) -> Result<(Vec<Member<'a>>, Vec<Param>), String> {
    let find = |n: &str| fns.iter().find(|f| f.name == n);
    let base = find(&fam.name).ok_or_else(|| format!("{}: not in functions.tsv", fam.name))?;
    let mut ms = vec![(base, false)];
    let mut suffixes = vec!["_c"];
    if fam.has("x") {
        suffixes.push("_x");
    }
    for s in suffixes {
        if let Some(f) = find(&format!("{}{s}", fam.name)) {
            ms.push((f, true));
        } else if s == "_x" {
            return Err(format!("{}: flag x but no {}_x", fam.name, fam.name));
        }
    }
    let longest = ms.iter().map(|(f, _)| f).max_by_key(|f| f.params.len()).unwrap();
    let params: Vec<Param> = longest
        .params
        .iter()
        .map(|p| Param {
            name: p.name.clone(),
            types: ms
                .iter()
                .map(|(f, _)| f.params.iter().find(|q| q.name == p.name).map(|q| rust_type(&q.ctype)))
                .collect(),
        })
        .collect();
    for (f, _) in &ms {
        let names: Vec<&str> = f.params.iter().map(|p| p.name.as_str()).collect();
        let order: Vec<&str> = params.iter().map(|p| p.name.as_str()).filter(|n| names.contains(n)).collect();
        if names != order {
            return Err(format!("{}: parameters not a subsequence of {}'s", f.name, longest.name));
        }
        if f.ret != "int" || f.variadic {
            return Err(format!("{}: only int-returning, non-variadic functions are generated", f.name));
        }
    }
    Ok((ms, params))
}

/// The conversion of parameter `p` for one member: a `let` line, or None to pass it as is.
fn convert(fam: &Family, p: &Param, params: &[Param]) -> Result<Option<String>, String> {
    let n = &p.name;
    let v = "crate::validate";
    let differs = p.differs();
    let Some(role) = fam.role(n) else {
        if differs {
            let pointer = p.types.iter().flatten().any(|t| t.starts_with("*mut"));
            if pointer {
                return Err(format!("{}: parameter {n} differs between forms; give it a role", fam.name));
            }
            return Ok(Some(format!("let {n} = {v}::wide({n});")));
        }
        return Ok(None);
    };
    // The role of another parameter an option names (array lengths, buffers, ranks).
    let of = |key: &str, want: &[&str]| -> Result<String, String> {
        let other = role.opt(key).unwrap();
        match fam.role(other) {
            Some(r) if want.contains(&r.kind.as_str()) => {}
            _ => return Err(format!("{}: {n}: {key}={other} must have role {}", fam.name, want.join(" or "))),
        }
        if !params.iter().any(|q| q.name == other) {
            return Err(format!("{}: {n}: no parameter {other}", fam.name));
        }
        Ok(other.to_string())
    };
    let safety = "// SAFETY: the C caller's contract for this argument (the standard's binding).\n";
    let line = match role.kind.as_str() {
        "count" | "nonneg" => format!("let {n} = {v}::{}(CX.name, \"{n}\", {n})?;", role.kind),
        "bool" => format!("let {n} = {n} != 0;"),
        "tag" | "tag_or_any" => format!("let {n} = {v}::tag(CX.name, \"{n}\", {n}, {})?;", role.kind == "tag_or_any"),
        "comm" | "intracomm" | "group" | "errhandler" | "op" | "win" => {
            format!("let {n} = {v}::{}(l, CX.name, \"{n}\", {n})?;", role.kind)
        }
        "info" => format!("let {n} = crate::info::info_arg(CX.name, \"{n}\", {n})?;"),
        "datatype" | "datatype_committed" => format!("let {n} = {v}::{}(CX.name, \"{n}\", {n})?;", role.kind),
        "datatype_or_null" => {
            let count = of("count", &["count"])?;
            let peer = of("peer", &["rank_or_null", "rank_or_any"])?;
            format!("let {n} = {v}::datatype_or_null(CX.name, \"{n}\", {n}, {count}, {peer})?;")
        }
        "out" if differs => format!("{safety}let {n} = unsafe {{ {v}::count_out(CX.name, \"{n}\", {n}) }}?;"),
        "out" => format!("{safety}let {n} = unsafe {{ {v}::out(CX.name, \"{n}\", {n}) }}?;"),
        "out_or_null" if differs => {
            format!("{safety}let {n} = unsafe {{ {v}::count_out_or_null(CX.name, \"{n}\", {n}) }};")
        }
        "out_or_null" => format!("{safety}let {n} = unsafe {{ {v}::out_or_null({n}) }};"),
        "status" => format!("{safety}let {n} = unsafe {{ {v}::StatusOut::new({n}) }};"),
        "statuses" => {
            let len = of("len", &["count", "nonneg"])?;
            format!("{safety}let {n} = unsafe {{ {v}::Statuses::new({n}, {len}) }};")
        }
        "nonnull" => format!("let {n} = {v}::nonnull_ptr(CX.name, \"{n}\", {n})?;"),
        "string" => format!("{safety}let {n} = unsafe {{ {v}::string(CX.name, \"{n}\", {n}) }}?;"),
        "string_out" => format!(
            "{safety}let {n} = unsafe {{ {v}::string_out(CX.name, \"{n}\", {n}, c::{} as usize) }}?;",
            role.opt("max").unwrap()
        ),
        "array" => {
            let len = of("len", &["count", "nonneg"])?;
            let f = if differs { "counts" } else { "array" };
            format!("{safety}let {n} = unsafe {{ {v}::{f}(CX.name, \"{n}\", {n}, {len}) }}?;")
        }
        "array_out" => {
            let len = of("len", &["count", "nonneg"])?;
            format!("{safety}let {n} = unsafe {{ {v}::array_out(CX.name, \"{n}\", {n}, {len}) }}?;")
        }
        "buf" => {
            let count = of("count", &["count"])?;
            let dt = of("datatype", &["datatype", "datatype_committed", "datatype_or_null"])?;
            format!("{v}::buf(CX.name, \"{n}\", {n}, {count}, {dt}.layout())?;")
        }
        "rank" | "rank_or_null" | "rank_or_any" => {
            let set = of("in", &["comm", "intracomm", "group", "win"])?;
            let (null_ok, any_ok) = (role.kind != "rank", role.kind == "rank_or_any");
            format!("let {n} = {v}::rank(CX.name, \"{n}\", {n}, &{set}, {null_ok}, {any_ok})?;")
        }
        "root" => format!("let {n} = {v}::root(CX.name, {n}, &{})?;", of("in", &["comm", "intracomm"])?),
        other => unreachable!("role {other} is known to parse_role"),
    };
    Ok(Some(line))
}

/// The parameters whose converted values the check of `p` uses (those its options name).
fn deps<'a>(fam: &'a Family, p: &Param) -> Vec<&'a str> {
    let Some(r) = fam.role(&p.name) else { return Vec::new() };
    r.opts.iter().filter(|(k, _)| k != "max").map(|(_, v)| v.as_str()).collect()
}

/// The order of the conversions: the independent ones in prototype order, then each role that
/// uses other parameters once those are converted (a buffer after its datatype, a datatype
/// that may be null after the rank it depends on).
fn conversion_order<'a>(fam: &Family, present: &[&'a Param]) -> Result<Vec<&'a Param>, String> {
    let mut done: Vec<&Param> = present.iter().copied().filter(|p| deps(fam, p).is_empty()).collect();
    while done.len() < present.len() {
        let ready = present.iter().copied().find(|p| {
            !done.iter().any(|d| d.name == p.name) && deps(fam, p).iter().all(|n| done.iter().any(|d| d.name == *n))
        });
        match ready {
            Some(p) => done.push(p),
            None => return Err(format!("{}: the roles' options name each other in a circle", fam.name)),
        }
    }
    Ok(done)
}

fn emit(
    fam: &Family,
    f: &Function,
    large: bool,
    member: usize,
    params: &[Param],
    out: &mut String,
) -> Result<(), String> {
    let short = f.name.trim_start_matches("MPI_");
    let decl = f.params.iter().map(|p| format!("{}: {}", p.name, rust_type(&p.ctype))).collect::<Vec<_>>().join(", ");
    let needs_lib = fam.roles.iter().any(|(_, r)| LOOKUP_ROLES.contains(&r.kind.as_str()));
    if needs_lib && !fam.has("lib") {
        return Err(format!("{}: a role looks up handles in the library; add flag lib", fam.name));
    }
    // Errors go to the window's handler when a window is an argument, else to the first
    // communicator argument's handler, else MPI_COMM_WORLD's.
    let win = f.params.iter().find(|p| p.ctype.trim() == "MPI_Win").map(|p| p.name.clone());
    let handler = if fam.has("self") {
        "c::MPI_COMM_SELF".to_string()
    } else {
        f.params
            .iter()
            .find(|p| p.ctype.trim() == "MPI_Comm")
            .map(|p| p.name.clone())
            .unwrap_or_else(|| "c::MPI_COMM_WORLD".to_string())
    };
    writeln!(out, "#[no_mangle]\npub unsafe extern \"C\" fn PMPI_{short}({decl}) -> c_int {{").unwrap();
    writeln!(out, "const CX: crate::validate::Call = crate::validate::Call::new(\"{}\", {large});", f.name).unwrap();
    if fam.has("express") {
        let raw = f.params.iter().map(|p| p.name.as_str()).collect::<Vec<_>>().join(", ");
        // `p2p::send::<0>` has the express path `p2p::send_express::<0>`.
        let (path, generics) =
            fam.imp.split_once("::<").map_or((fam.imp.as_str(), String::new()), |(a, g)| (a, format!("::<{g}")));
        writeln!(out, "if let Some(rc) = crate::{path}_express{generics}(CX, {raw}) {{ return rc; }}").unwrap();
    }
    if fam.has("completion") {
        writeln!(out, "crate::errors::guard_at(|comm_out| {{").unwrap();
    } else if let Some(w) = &win {
        writeln!(out, "crate::errors::guard_win({w}, || {{").unwrap();
    } else {
        writeln!(out, "crate::errors::guard({handler}, || {{").unwrap();
    }
    if fam.has("lib") {
        writeln!(out, "let l = crate::state::lib(CX.name)?;").unwrap();
    }
    let present: Vec<&Param> = params.iter().filter(|p| p.types[member].is_some()).collect();
    for p in conversion_order(fam, &present)? {
        if let Some(line) = convert(fam, p, params)? {
            writeln!(out, "{line}").unwrap();
        }
    }
    let bundles = bundles(fam);
    for (name, ty, parts) in &bundles {
        writeln!(out, "let {name} = {ty}::new({});", parts.join(", ")).unwrap();
    }
    let mut args = vec!["CX".to_string()];
    if fam.has("lib") {
        args.push("l".into());
    }
    for p in params {
        if let Some((name, _, parts)) = bundles.iter().find(|b| b.2.contains(&p.name.as_str())) {
            // The bundle goes where its first part would.
            if params.iter().find(|q| parts.contains(&q.name.as_str())).is_some_and(|q| q.name == p.name) {
                args.push(name.to_string());
            }
            continue;
        }
        let optional = p.types.iter().any(Option::is_none);
        args.push(match (optional, p.types[member].is_some()) {
            (false, _) => p.name.clone(),
            (true, true) => format!("Some({})", p.name),
            (true, false) => "None".into(),
        });
    }
    if fam.has("completion") {
        args.push("comm_out".into());
    }
    writeln!(out, "crate::{}({})\n}})\n}}", fam.imp, args.join(", ")).unwrap();
    Ok(())
}

/// The entry points of every family in `table`, and the names they define.
pub fn generate(fns: &[Function], table: &[Family]) -> Result<(String, BTreeSet<String>), String> {
    let mut out = String::new();
    let mut names = BTreeSet::new();
    for fam in table {
        let (ms, params) = members(fam, fns)?;
        let bundle_parts: Vec<&str> = bundles(fam).into_iter().flat_map(|b| b.2).collect();
        let is_param = |p: &str| params.iter().any(|q| q.name == p);
        if let Some((p, _)) = fam.roles.iter().find(|(p, r)| !is_param(p) && !BUNDLES.iter().any(|b| b.0 == r.kind)) {
            return Err(format!("{}: no parameter {p}", fam.name));
        }
        if let Some(p) = bundle_parts
            .iter()
            .find(|p| !is_param(p) || params.iter().any(|q| q.name == **p && q.types.iter().any(Option::is_none)))
        {
            return Err(format!("{}: a bundle's part {p} is not a parameter of every member", fam.name));
        }
        for (i, (f, large)) in ms.iter().enumerate() {
            if !names.insert(f.name.clone()) {
                return Err(format!("{}: listed twice", f.name));
            }
            emit(fam, f, *large, i, &params, &mut out)?;
        }
    }
    Ok((out, names))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::data::parse_functions;

    fn fns() -> Vec<Function> {
        parse_functions(
            "int\tMPI_Type_vector\tint count, int blocklength, int stride, MPI_Datatype oldtype, MPI_Datatype *newtype\n\
             int\tMPI_Type_vector_c\tMPI_Count count, MPI_Count blocklength, MPI_Count stride, MPI_Datatype oldtype, MPI_Datatype *newtype\n\
             int\tMPI_Pack_size\tint incount, MPI_Datatype datatype, MPI_Comm comm, int *size\n\
             int\tMPI_Pack_size_c\tMPI_Count incount, MPI_Datatype datatype, MPI_Comm comm, MPI_Count *size\n\
             int\tMPI_Type_get_envelope\tMPI_Datatype datatype, int *num_integers, int *combiner\n\
             int\tMPI_Type_get_envelope_c\tMPI_Datatype datatype, MPI_Count *num_integers, MPI_Count *num_large_counts, int *combiner\n",
        )
    }

    #[test]
    fn twins_widen_counts_and_share_one_implementation() {
        let t = parse_table("MPI_Type_vector\tdatatype::vector\tlib\tcount:count newtype:out\n").unwrap();
        let (code, names) = generate(&fns(), &t).unwrap();
        assert_eq!(names.len(), 2);
        assert!(code.contains("fn PMPI_Type_vector(count: c_int, blocklength: c_int"));
        assert!(code.contains("fn PMPI_Type_vector_c(count: i64, blocklength: i64"));
        assert!(code.contains("Call::new(\"MPI_Type_vector_c\", true)"));
        assert!(code.contains("let blocklength = crate::validate::wide(blocklength);"));
        assert!(code.contains("crate::validate::count(CX.name, \"count\", count)?;"));
        assert!(code.contains("crate::validate::out(CX.name, \"newtype\", newtype)"));
        assert!(code.contains("crate::datatype::vector(CX, l, count, blocklength, stride, oldtype, newtype)"));
    }

    #[test]
    fn differing_out_pointers_become_count_outputs_and_missing_ones_options() {
        let t = parse_table(
            "MPI_Pack_size\tdatatype::pack_size\tlib\tincount:count datatype:datatype comm:comm size:out\n\
             MPI_Type_get_envelope\tdatatype::envelope\t-\tnum_integers:out num_large_counts:out combiner:out\n",
        )
        .unwrap();
        let (code, _) = generate(&fns(), &t).unwrap();
        assert!(code.contains("crate::errors::guard(comm, ||"));
        assert!(code.contains("count_out(CX.name, \"size\", size)"));
        assert!(code.contains("crate::validate::out(CX.name, \"combiner\", combiner)"));
        assert!(code.contains("crate::datatype::envelope(CX, datatype, num_integers, None, combiner)"));
        assert!(
            code.contains("crate::datatype::envelope(CX, datatype, num_integers, Some(num_large_counts), combiner)")
        );
    }

    #[test]
    fn an_express_path_comes_before_every_check() {
        let t =
            parse_table("MPI_Pack_size\tdatatype::pack_size\tlib,express\tincount:count comm:comm size:out\n").unwrap();
        let (code, _) = generate(&fns(), &t).unwrap();
        let express = code.find("crate::datatype::pack_size_express(CX, incount, datatype, comm, size)").unwrap();
        assert!(express < code.find("guard").unwrap());
    }

    #[test]
    fn bundles_take_the_place_of_their_first_part_and_checks_follow_their_dependencies() {
        let fns = parse_functions(
            "int\tMPI_Send\tconst void *buf, int count, MPI_Datatype datatype, int dest, int tag, MPI_Comm comm\n",
        );
        let row = "MPI_Send\tp2p::send::<0>\tlib,express\tbuf:buf(count=count,datatype=datatype) count:count \
                   datatype:datatype_or_null(count=count,peer=dest) dest:rank_or_null(in=comm) tag:tag comm:comm \
                   msg:message(buf=buf,count=count,datatype=datatype,peer=dest,tag=tag)\n";
        let (code, _) = generate(&fns, &parse_table(row).unwrap()).unwrap();
        assert!(code.contains("crate::p2p::send_express::<0>(CX, buf, count, datatype, dest, tag, comm)"));
        let at = |s: &str| code.find(s).unwrap_or_else(|| panic!("{s} not in {code}"));
        assert!(at("let dest = ") < at("let datatype = ") && at("let datatype = ") < at("validate::buf("));
        assert!(code.contains("let msg = crate::validate::Message::new(buf, count, datatype, dest, tag);"));
        assert!(code.contains("crate::p2p::send::<0>(CX, l, msg, comm)"));
    }

    #[test]
    fn completion_calls_report_on_the_communicator_the_implementation_finds() {
        let fns = parse_functions("int\tMPI_Wait\tMPI_Request *request, MPI_Status *status\n");
        let t = parse_table("MPI_Wait\trequest::wait\tlib,completion\trequest:out status:status\n").unwrap();
        let (code, _) = generate(&fns, &t).unwrap();
        assert!(code.contains("crate::errors::guard_at(|comm_out|"));
        assert!(code.contains("crate::validate::StatusOut::new(status)"));
        assert!(code.contains("crate::request::wait(CX, l, request, status, comm_out)"));
    }

    #[test]
    fn mistakes_in_the_table_are_reported() {
        let bad = |row: &str| generate(&fns(), &parse_table(row)?).map(|_| ());
        assert!(bad("MPI_Type_vector\tdatatype::vector\t-\tcount:size\n").unwrap_err().contains("unknown role"));
        assert!(bad("MPI_Type_vector\tdatatype::vector\t-\tnope:count\n").unwrap_err().contains("no parameter nope"));
        assert!(bad("MPI_Pack_size\tdatatype::pack_size\t-\tcomm:comm size:out\n").unwrap_err().contains("flag lib"));
        assert!(bad("MPI_Pack_size\tdatatype::pack_size\tlib\tcomm:comm\n").unwrap_err().contains("give it a role"));
        assert!(bad("MPI_Type_vector\tx::y\t-\tnewtype:array(len=stride)\n").unwrap_err().contains("must have role"));
    }
}
