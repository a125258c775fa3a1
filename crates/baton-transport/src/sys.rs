//! Small system facts the core needs, behind safe functions.

/// This machine's host name ("localhost" if it cannot be read).
pub fn hostname() -> String {
    let mut buf = [0u8; 256];
    // SAFETY: buffer and length match; gethostname NUL-terminates within it on success.
    let ok = unsafe { libc::gethostname(buf.as_mut_ptr() as *mut libc::c_char, buf.len()) } == 0;
    let end = buf.iter().position(|&b| b == 0).unwrap_or(0);
    if ok && end > 0 {
        String::from_utf8_lossy(&buf[..end]).into_owned()
    } else {
        "localhost".to_string()
    }
}
