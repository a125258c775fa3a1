//! The name service of `MPI_Publish_name`, `MPI_Lookup_name` and `MPI_Unpublish_name`: one
//! file per service in a directory private to the user, so that jobs of separate `mpiexec`
//! runs find each other on one host (or on every host that shares the directory).
//!
//! The directory is `BATON_NAME_DIR`, else `$XDG_RUNTIME_DIR/baton-names`, else
//! `/tmp/baton-names-UID`. It must belong to the user and be closed to others, since a port
//! name carries its secret. A file holds the publisher's host and pid, the service name and the
//! port name, the two names in hex: the standard leaves the port string to the application, so
//! any string (spaces at either end, line breaks) must come back from a lookup byte for byte. A
//! name left behind by a process that died on this host counts as unpublished.

use crate::error::{MpiError, Result};
use baton_abi::consts as c;
use std::fs;
use std::io::{ErrorKind, Write};
use std::os::unix::fs::{DirBuilderExt, MetadataExt, PermissionsExt};
use std::path::PathBuf;

fn err(class: i32, call: &str, why: impl std::fmt::Display) -> MpiError {
    MpiError::new(class, format!("{call}: {why}"))
}

fn my_uid() -> Option<u32> {
    fs::metadata("/proc/self").ok().map(|m| m.uid())
}

/// The directory, created private if missing and checked if present.
fn dir(call: &str) -> Result<PathBuf> {
    let uid = my_uid().unwrap_or(0);
    let d = match baton_settings::NAME_DIR.value() {
        Some(d) => d,
        None => match std::env::var_os("XDG_RUNTIME_DIR").filter(|v| !v.is_empty()) {
            Some(x) => PathBuf::from(x).join("baton-names"),
            None => PathBuf::from(format!("/tmp/baton-names-{uid}")),
        },
    };
    match fs::DirBuilder::new().recursive(true).mode(0o700).create(&d) {
        Ok(()) => {}
        Err(e) => {
            return Err(err(c::MPI_ERR_OTHER, call, format!("cannot create the name directory {}: {e}", d.display())))
        }
    }
    let m = fs::symlink_metadata(&d).map_err(|e| err(c::MPI_ERR_OTHER, call, format!("{}: {e}", d.display())))?;
    if !m.is_dir() || m.uid() != uid || m.permissions().mode() & 0o022 != 0 {
        return Err(err(
            c::MPI_ERR_OTHER,
            call,
            format!(
                "the name directory {} is not a directory of this user closed to others (see BATON_NAME_DIR)",
                d.display()
            ),
        ));
    }
    Ok(d)
}

/// The file of `service`: its name in hex, or a hash of a long name (the file says which).
fn file_of(d: &std::path::Path, service: &str) -> PathBuf {
    let b = service.as_bytes();
    if b.len() <= 100 {
        d.join(hex(service))
    } else {
        let h = crate::comm::hash_words(&b.iter().map(|&x| x as u64).collect::<Vec<_>>());
        d.join(format!("h{h:016x}"))
    }
}

fn hex(s: &str) -> String {
    s.bytes().map(|x| format!("{x:02x}")).collect()
}

/// The string of [`hex`]'s output; None for anything else.
fn unhex(h: &str) -> Option<String> {
    if !h.len().is_multiple_of(2) {
        return None;
    }
    let bytes =
        (0..h.len()).step_by(2).map(|i| u8::from_str_radix(h.get(i..i + 2)?, 16).ok()).collect::<Option<Vec<u8>>>()?;
    String::from_utf8(bytes).ok()
}

fn host() -> String {
    std::env::var(baton_settings::protocol::NODE.name)
        .ok()
        .filter(|s| !s.is_empty())
        .unwrap_or_else(baton_transport::sys::hostname)
}

/// (service, port) of a file, unless it was left by a process that died on this host.
fn read_live(f: &std::path::Path) -> Option<(String, String)> {
    let text = fs::read_to_string(f).ok()?;
    let mut lines = text.lines();
    let owner = lines.next()?;
    let service = unhex(lines.next()?)?;
    let port = unhex(lines.next()?)?;
    if let Some((h, pid)) = owner.split_once(' ') {
        if h == host() && !std::path::Path::new(&format!("/proc/{pid}")).exists() {
            let _ = fs::remove_file(f);
            return None;
        }
    }
    Some((service, port))
}

pub fn publish(service: &str, port: &str) -> Result<()> {
    let call = "MPI_Publish_name";
    if service.is_empty() {
        return Err(err(c::MPI_ERR_ARG, call, "service_name is empty"));
    }
    let d = dir(call)?;
    let f = file_of(&d, service);
    if let Some((s, _)) = read_live(&f) {
        if s == service {
            return Err(err(c::MPI_ERR_SERVICE, call, format!("service '{service}' is already published")));
        }
    }
    // Written whole under a private name, then linked into place: readers never see a partial
    // file, and of two publishers only one link succeeds.
    let tmp = d.join(format!(
        ".tmp-{}-{:x}",
        std::process::id(),
        crate::comm::mix(f.as_os_str().len() as u64 ^ std::process::id() as u64)
    ));
    let body = format!("{} {}\n{}\n{}\n", host(), std::process::id(), hex(service), hex(port));
    let write = || -> std::io::Result<()> {
        let mut o = fs::OpenOptions::new().write(true).create_new(true).mode_600().open(&tmp)?;
        o.write_all(body.as_bytes())
    };
    let _ = fs::remove_file(&tmp);
    write().map_err(|e| err(c::MPI_ERR_OTHER, call, format!("cannot write {}: {e}", tmp.display())))?;
    let linked = fs::hard_link(&tmp, &f);
    let _ = fs::remove_file(&tmp);
    match linked {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == ErrorKind::AlreadyExists => {
            Err(err(c::MPI_ERR_SERVICE, call, format!("service '{service}' is already published")))
        }
        Err(e) => Err(err(c::MPI_ERR_OTHER, call, format!("cannot publish in {}: {e}", d.display()))),
    }
}

pub fn lookup(service: &str) -> Result<String> {
    let call = "MPI_Lookup_name";
    let d = dir(call)?;
    match read_live(&file_of(&d, service)) {
        Some((s, port)) if s == service => Ok(port),
        _ => Err(err(c::MPI_ERR_NAME, call, format!("service '{service}' is not published"))),
    }
}

pub fn unpublish(service: &str, port: &str) -> Result<()> {
    let call = "MPI_Unpublish_name";
    let d = dir(call)?;
    let f = file_of(&d, service);
    match read_live(&f) {
        Some((s, p)) if s == service => {
            if p != port {
                return Err(err(
                    c::MPI_ERR_SERVICE,
                    call,
                    format!("service '{service}' is published with another port"),
                ));
            }
            fs::remove_file(&f)
                .map_err(|e| err(c::MPI_ERR_SERVICE, call, format!("cannot remove {}: {e}", f.display())))
        }
        _ => Err(err(c::MPI_ERR_SERVICE, call, format!("service '{service}' is not published"))),
    }
}

/// `OpenOptions` with mode 0600 (the file holds a secret).
trait Mode600 {
    fn mode_600(&mut self) -> &mut Self;
}

impl Mode600 for fs::OpenOptions {
    fn mode_600(&mut self) -> &mut Self {
        use std::os::unix::fs::OpenOptionsExt;
        self.mode(0o600)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn publish_lookup_unpublish() {
        // Settings are read once per process, so the test uses whatever directory is in effect
        // (BATON_NAME_DIR or the default) and names of its own.
        let d = dir("test").unwrap();
        let pid = std::process::id();
        let svc = format!("svc one {pid}");
        let svc = svc.as_str();
        assert_eq!(lookup(svc).unwrap_err().class, c::MPI_ERR_NAME);
        publish(svc, "baton-port:1.2.3.4:5:ab").unwrap();
        assert_eq!(publish(svc, "x").unwrap_err().class, c::MPI_ERR_SERVICE);
        assert_eq!(lookup(svc).unwrap(), "baton-port:1.2.3.4:5:ab");
        let long = format!("{pid}{}", "s".repeat(300));
        publish(&long, "p2").unwrap();
        assert_eq!(lookup(&long).unwrap(), "p2");
        unpublish(&long, "p2").unwrap();
        assert_eq!(unpublish(svc, "other").unwrap_err().class, c::MPI_ERR_SERVICE);
        unpublish(svc, "baton-port:1.2.3.4:5:ab").unwrap();
        assert_eq!(unpublish(svc, "baton-port:1.2.3.4:5:ab").unwrap_err().class, c::MPI_ERR_SERVICE);
        assert_eq!(lookup(svc).unwrap_err().class, c::MPI_ERR_NAME);
        // Any port string comes back as published, and unpublishing takes that same string.
        for port in [" padded port ", "two\nlines\r\n", "", "\u{e9}t\u{e9}"] {
            publish(svc, port).unwrap();
            assert_eq!(lookup(svc).unwrap(), port);
            if port.trim() != port {
                assert_eq!(unpublish(svc, port.trim()).unwrap_err().class, c::MPI_ERR_SERVICE, "{port:?}");
            }
            unpublish(svc, port).unwrap();
        }
        // Left behind by a process that no longer exists: gone.
        let stale = format!("stale {pid}");
        let f = file_of(&d, &stale);
        fs::write(&f, format!("{} 999999999\n{}\n{}\n", host(), hex(&stale), hex("port"))).unwrap();
        assert_eq!(lookup(&stale).unwrap_err().class, c::MPI_ERR_NAME);
        let _ = fs::remove_file(&f);
    }
}
