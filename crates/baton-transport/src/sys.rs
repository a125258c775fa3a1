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

/// An address of one of this host's network interfaces.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct IfAddr {
    pub name: String,
    pub addr: std::net::IpAddr,
    /// Length of the network prefix (from the netmask).
    pub prefix: u8,
    pub up: bool,
    pub loopback: bool,
}

impl IfAddr {
    /// Whether `spec` (an interface name, a subnet `ADDR/BITS` or an address) names this
    /// address: the syntax of `BATON_TCP_IF` and of mpiexec's `-iface`.
    pub fn matches(&self, spec: &str) -> bool {
        use std::net::IpAddr;
        if spec == self.name {
            return true;
        }
        if let Some((net, bits)) = spec.split_once('/') {
            let (Ok(net), Ok(bits)) = (net.parse::<IpAddr>(), bits.parse::<u32>()) else { return false };
            return match (net, self.addr) {
                (IpAddr::V4(n), IpAddr::V4(x)) if bits <= 32 => {
                    let mask = if bits == 0 { 0 } else { u32::MAX << (32 - bits) };
                    u32::from(n) & mask == u32::from(x) & mask
                }
                (IpAddr::V6(n), IpAddr::V6(x)) if bits <= 128 => {
                    let mask = if bits == 0 { 0 } else { u128::MAX << (128 - bits) };
                    u128::from(n) & mask == u128::from(x) & mask
                }
                _ => false,
            };
        }
        spec.parse::<IpAddr>().is_ok_and(|ip| ip == self.addr)
    }
}

/// Whether another host can dial `ip` as it is. Loopback cannot; link-local IPv6 needs a scope
/// (an interface index of the dialling host), so it is never chosen either.
pub fn routable(ip: &std::net::IpAddr) -> bool {
    match ip {
        std::net::IpAddr::V4(v) => !v.is_loopback() && !v.is_link_local(),
        std::net::IpAddr::V6(v) => !v.is_loopback() && !is_link_local_v6(v),
    }
}

/// fe80::/10 (`Ipv6Addr::is_unicast_link_local` is not stable at our minimum Rust).
pub fn is_link_local_v6(v: &std::net::Ipv6Addr) -> bool {
    (v.segments()[0] & 0xffc0) == 0xfe80
}

/// Every IPv4 and IPv6 address of this host's interfaces, in the kernel's order.
pub fn interface_addrs() -> Vec<IfAddr> {
    use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
    // Reads an address out of a sockaddr of either family.
    //
    // SAFETY (for callers): `sa` must be null or point to a sockaddr of the size its family
    // implies, as getifaddrs guarantees.
    unsafe fn ip_of(sa: *const libc::sockaddr) -> Option<IpAddr> {
        if sa.is_null() {
            return None;
        }
        // SAFETY: non-null, and getifaddrs fills a sockaddr_in / sockaddr_in6 per family.
        unsafe {
            match (*sa).sa_family as i32 {
                libc::AF_INET => {
                    let a = &*(sa as *const libc::sockaddr_in);
                    Some(IpAddr::V4(Ipv4Addr::from(u32::from_be(a.sin_addr.s_addr))))
                }
                libc::AF_INET6 => {
                    let a = &*(sa as *const libc::sockaddr_in6);
                    Some(IpAddr::V6(Ipv6Addr::from(a.sin6_addr.s6_addr)))
                }
                _ => None,
            }
        }
    }
    let mut out = Vec::new();
    let mut head: *mut libc::ifaddrs = std::ptr::null_mut();
    // SAFETY: getifaddrs allocates a list that we walk read-only and free once below.
    if unsafe { libc::getifaddrs(&mut head) } != 0 {
        return out;
    }
    let mut p = head;
    while !p.is_null() {
        // SAFETY: `p` is a node of the list getifaddrs returned, alive until freeifaddrs.
        let ifa = unsafe { &*p };
        // SAFETY: the address fields come from getifaddrs (see `ip_of`).
        if let Some(addr) = unsafe { ip_of(ifa.ifa_addr) } {
            // SAFETY: as above; the netmask has the family of the address.
            let prefix = match unsafe { ip_of(ifa.ifa_netmask) } {
                Some(IpAddr::V4(m)) => u32::from(m).count_ones() as u8,
                Some(IpAddr::V6(m)) => u128::from(m).count_ones() as u8,
                None => 0,
            };
            // SAFETY: ifa_name is a NUL-terminated string owned by the list.
            let name = unsafe { std::ffi::CStr::from_ptr(ifa.ifa_name) }.to_string_lossy().into_owned();
            let flags = ifa.ifa_flags;
            out.push(IfAddr {
                name,
                addr,
                prefix,
                up: flags & libc::IFF_UP as u32 != 0,
                loopback: flags & libc::IFF_LOOPBACK as u32 != 0,
            });
        }
        p = ifa.ifa_next;
    }
    // SAFETY: `head` came from getifaddrs and is freed exactly once.
    unsafe { libc::freeifaddrs(head) };
    out
}

/// Names the machine (kernel instance) this process runs on: the kernel's boot id. Processes
/// in different network namespaces or containers of one machine share it, which is what matters
/// when they compete for its cores. `None` when the kernel does not say.
pub fn machine_id() -> Option<String> {
    let id = std::fs::read_to_string("/proc/sys/kernel/random/boot_id").ok()?;
    let id: String = id.trim().chars().filter(|c| c.is_ascii_hexdigit()).collect();
    (!id.is_empty()).then_some(id)
}

/// The CPUs the calling thread may run on, in ascending order (empty if the kernel will not say).
pub fn allowed_cpus() -> Vec<usize> {
    // SAFETY: cpu_set_t is plain bits; zeroed is the empty set.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    // SAFETY: the pointer and size describe `set`, which lives across the call.
    if unsafe { libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set) } != 0 {
        return Vec::new();
    }
    // SAFETY: CPU_ISSET only reads `set` at an index below CPU_SETSIZE.
    (0..libc::CPU_SETSIZE as usize).filter(|&c| unsafe { libc::CPU_ISSET(c, &set) }).collect()
}

/// The CPU the calling thread runs on now (a hint: it may move right after).
pub fn current_cpu() -> Option<usize> {
    // SAFETY: no arguments; returns -1 on failure.
    let c = unsafe { libc::sched_getcpu() };
    (c >= 0).then_some(c as usize)
}

fn cpu_set(cpus: &[usize]) -> libc::cpu_set_t {
    // SAFETY: cpu_set_t is plain bits; zeroed is the empty set.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    for &c in cpus.iter().filter(|&&c| c < libc::CPU_SETSIZE as usize) {
        // SAFETY: `c` is below CPU_SETSIZE, checked above.
        unsafe { libc::CPU_SET(c, &mut set) };
    }
    set
}

/// Moves the calling thread onto `cpu`, then lets it run on any of `allowed` again: the
/// scheduler keeps a thread where it is until its load balancer or a wake-up has a reason to move
/// it, so this places the thread without pinning it.
pub fn place_on_cpu(cpu: usize, allowed: &[usize]) {
    let size = std::mem::size_of::<libc::cpu_set_t>();
    // SAFETY: pointer and size describe a live cpu_set_t; pid 0 is the calling thread. Setting a
    // one-CPU mask migrates the thread before the call returns.
    unsafe { libc::sched_setaffinity(0, size, &cpu_set(&[cpu])) };
    // SAFETY: as above; restores the mask the thread had.
    unsafe { libc::sched_setaffinity(0, size, &cpu_set(allowed)) };
}

/// Waits up to `ms` milliseconds for `fd` to become readable (or to have a connection to
/// accept). Returns whether it is.
pub fn wait_readable(fd: std::os::fd::RawFd, ms: i32) -> bool {
    let mut pfd = libc::pollfd { fd, events: libc::POLLIN, revents: 0 };
    // SAFETY: one valid pollfd for the duration of the call; an invalid fd only yields POLLNVAL.
    let n = unsafe { libc::poll(&mut pfd, 1, ms) };
    n > 0 && pfd.revents & libc::POLLIN != 0
}

/// Runs `f` on the connected socket `fd`, which the caller keeps owning (`MPI_Comm_join`):
/// the view is never closed here. Fails if `fd` is not an open socket.
pub fn with_borrowed_socket<R>(
    fd: std::os::fd::RawFd,
    f: impl FnOnce(&mut std::net::TcpStream) -> R,
) -> std::io::Result<R> {
    use std::os::fd::FromRawFd;
    let mut ty: libc::c_int = 0;
    let mut len = std::mem::size_of::<libc::c_int>() as libc::socklen_t;
    // SAFETY: getsockopt writes at most `len` bytes into `ty`; a bad fd yields an error.
    let rc = unsafe {
        libc::getsockopt(fd, libc::SOL_SOCKET, libc::SO_TYPE, (&mut ty as *mut libc::c_int).cast(), &mut len)
    };
    if rc != 0 {
        return Err(std::io::Error::last_os_error());
    }
    if ty != libc::SOCK_STREAM {
        return Err(std::io::Error::other("not a stream socket"));
    }
    // SAFETY: `fd` is an open stream socket (checked above); ManuallyDrop keeps this borrowed
    // view from closing the application's descriptor.
    let mut sock = std::mem::ManuallyDrop::new(unsafe { std::net::TcpStream::from_raw_fd(fd) });
    Ok(f(&mut sock))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ifa(name: &str, addr: &str) -> IfAddr {
        IfAddr { name: name.into(), addr: addr.parse().unwrap(), prefix: 24, up: true, loopback: false }
    }

    #[test]
    fn interface_specs() {
        let a = ifa("veth1", "10.77.0.3");
        assert!(a.matches("veth1"));
        assert!(a.matches("10.77.0.0/24"));
        assert!(a.matches("10.77.0.3"));
        assert!(a.matches("0.0.0.0/0"));
        assert!(!a.matches("10.78.0.0/16"));
        assert!(!a.matches("10.77.0.0/33"));
        assert!(!a.matches("eth0"));
        assert!(!a.matches("fd77::/64"));
        let b = ifa("veth1", "fd77::3");
        assert!(b.matches("fd77::/64"));
        assert!(b.matches("fd77::3"));
        assert!(!b.matches("fd78::/64"));
        assert!(!b.matches("10.77.0.0/24"));
        assert!(!routable(&"fe80::1".parse().unwrap()));
        assert!(!routable(&"febf::1".parse().unwrap()));
        assert!(routable(&"fec0::1".parse().unwrap()));
        assert!(!routable(&"::1".parse().unwrap()));
        assert!(!routable(&"127.0.0.1".parse().unwrap()));
        assert!(!routable(&"169.254.3.4".parse().unwrap()));
        assert!(routable(&"10.0.0.1".parse().unwrap()));
    }

    #[test]
    fn loopback_is_listed() {
        assert!(interface_addrs().iter().any(|a| a.loopback && a.addr.is_loopback()));
    }
}
