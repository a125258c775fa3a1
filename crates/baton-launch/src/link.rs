//! The connections of the launcher tree (mpiexec ↔ proxies, proxy ↔ child
//! proxies).
//!
//! A child connects to its parent's listening port, passes the HMAC
//! handshake of [`baton_pmi::auth`] with the job's launcher secret and
//! introduces itself with [`TreeMsg::ProxyHello`]. From then on each side
//! holds a [`Link`] (the writing half, shared by the threads that send)
//! and a reader thread that turns frames into [`LinkEvent`]s on the owner's
//! event channel. Both sides send [`TreeMsg::Ping`] every
//! [`HEARTBEAT_INTERVAL`]; a reader that sees nothing for the heartbeat
//! timeout, an error, or end of file reports the link closed. Writes have
//! the same timeout, so a peer behind a dead link cannot block a sender
//! for longer either.

use baton_transport::sys::{interface_addrs, is_link_local_v6, routable, IfAddr};
use std::io;
use std::net::{IpAddr, Ipv4Addr, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::mpsc::Sender;
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use baton_pmi::auth::{client_handshake, server_handshake, Secret};
use baton_pmi::tree::TreeMsg;
use baton_pmi::wire;

use crate::{sys, Event};

/// How often each side of a link proves it is alive.
pub const HEARTBEAT_INTERVAL: Duration = Duration::from_millis(500);
/// A connecting peer gets this long to authenticate and say who it is.
const AUTH_TIMEOUT: Duration = Duration::from_secs(5);
/// Per address tried when a proxy connects to its parent.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(3);
/// Unauthenticated connections handled at once; more are closed at once,
/// so a flood cannot exhaust threads.
const MAX_PENDING_AUTH: usize = 256;

/// What the link threads report to the owner's event loop.
pub enum LinkEvent {
    /// A child proxy authenticated and said which host it serves.
    Up { node: u32, stream: TcpStream },
    /// A message from the child proxy of `node`.
    Msg { node: u32, msg: TreeMsg },
    /// The link to the child proxy of `node` ended.
    Closed { node: u32, reason: String },
    /// A connection to the listening port failed authentication.
    Rejected { peer: SocketAddr, reason: String },
    /// A message from the parent.
    FromParent(TreeMsg),
    /// The link to the parent ended.
    ParentClosed(String),
}

/// The sending half of a tree connection.
pub struct Link {
    stream: Mutex<TcpStream>,
    /// A second handle, so the link can be shut down while a writer holds
    /// the lock (blocked on a dead peer).
    ctl: TcpStream,
    closed: AtomicBool,
}

impl Link {
    pub fn new(stream: TcpStream, heartbeat_timeout: Duration) -> io::Result<Arc<Link>> {
        stream.set_nodelay(true)?;
        stream.set_write_timeout(Some(heartbeat_timeout))?;
        let ctl = stream.try_clone()?;
        Ok(Arc::new(Link { stream: Mutex::new(stream), ctl, closed: AtomicBool::new(false) }))
    }

    pub fn send(&self, msg: &TreeMsg) -> bool {
        self.send_payload(&msg.encode())
    }

    /// Sends an encoded [`TreeMsg`]; on failure the link is shut down (its
    /// reader then reports it closed) and `false` returned.
    pub fn send_payload(&self, payload: &[u8]) -> bool {
        if self.closed.load(Ordering::Relaxed) {
            return false;
        }
        let mut s = self.stream.lock().unwrap();
        if wire::write_frame(&mut *s, payload).is_err() {
            drop(s);
            self.close();
            return false;
        }
        true
    }

    pub fn close(&self) {
        self.closed.store(true, Ordering::Relaxed);
        let _ = self.ctl.shutdown(std::net::Shutdown::Both);
    }

    pub fn is_closed(&self) -> bool {
        self.closed.load(Ordering::Relaxed)
    }
}

/// Starts the reader of a link (`child` names the peer's node; `None`
/// means the peer is our parent) and its heartbeat.
pub fn start(
    stream: &TcpStream,
    link: &Arc<Link>,
    child: Option<u32>,
    heartbeat_timeout: Duration,
    tx: Sender<Event>,
) -> io::Result<()> {
    let mut reader = stream.try_clone()?;
    reader.set_read_timeout(Some(heartbeat_timeout))?;
    let rlink = Arc::clone(link);
    thread::Builder::new().name("link-read".into()).spawn(move || {
        let reason = read_loop(&mut reader, child, heartbeat_timeout, &tx);
        rlink.close();
        let ev = match child {
            Some(node) => LinkEvent::Closed { node, reason },
            None => LinkEvent::ParentClosed(reason),
        };
        let _ = tx.send(Event::Link(ev));
    })?;
    let hlink = Arc::clone(link);
    thread::Builder::new().name("link-beat".into()).spawn(move || {
        let ping = TreeMsg::Ping.encode();
        while !hlink.is_closed() {
            thread::sleep(HEARTBEAT_INTERVAL);
            hlink.send_payload(&ping);
        }
    })?;
    Ok(())
}

/// Reads frames until the link fails; returns why.
fn read_loop(r: &mut TcpStream, child: Option<u32>, timeout: Duration, tx: &Sender<Event>) -> String {
    let mut last = Instant::now();
    loop {
        let payload = match wire::read_frame(r) {
            Ok(Some(p)) => p,
            Ok(None) => return "the connection was closed".into(),
            Err(e) => {
                if last.elapsed() >= timeout {
                    return format!("no message for {:.1} s", last.elapsed().as_secs_f64());
                }
                return e.to_string().trim_start_matches("bootstrap: ").to_owned();
            }
        };
        last = Instant::now();
        let msg = match TreeMsg::decode(&payload) {
            Ok(TreeMsg::Ping) => continue,
            Ok(m) => m,
            Err(e) => return format!("malformed message: {}", e.to_string().trim_start_matches("bootstrap: ")),
        };
        let ev = match child {
            Some(node) => LinkEvent::Msg { node, msg },
            None => LinkEvent::FromParent(msg),
        };
        if tx.send(Event::Link(ev)).is_err() {
            return "shutting down".into();
        }
    }
}

/// Accepts child proxies on `listener` for the life of the process.
pub fn start_listener(listener: TcpListener, secret: Secret, tx: Sender<Event>) -> io::Result<()> {
    let pending = Arc::new(AtomicUsize::new(0));
    thread::Builder::new().name("tree-accept".into()).spawn(move || {
        for conn in listener.incoming() {
            let Ok(stream) = conn else { continue };
            // A dual-stack listener sees IPv4 peers as ::ffff:a.b.c.d; logs show them as IPv4.
            let peer = stream
                .peer_addr()
                .map(|p| SocketAddr::new(p.ip().to_canonical(), p.port()))
                .unwrap_or_else(|_| SocketAddr::from(([0, 0, 0, 0], 0)));
            if pending.fetch_add(1, Ordering::SeqCst) >= MAX_PENDING_AUTH {
                pending.fetch_sub(1, Ordering::SeqCst);
                let reason = "too many connections authenticating at once".to_owned();
                let _ = tx.send(Event::Link(LinkEvent::Rejected { peer, reason }));
                continue;
            }
            let (tx, secret, pending) = (tx.clone(), secret.clone(), Arc::clone(&pending));
            let spawned = thread::Builder::new().name("tree-auth".into()).spawn(move || {
                let ev = match authenticate_child(&stream, &secret) {
                    Ok(node) => LinkEvent::Up { node, stream },
                    Err(reason) => LinkEvent::Rejected { peer, reason },
                };
                pending.fetch_sub(1, Ordering::SeqCst);
                let _ = tx.send(Event::Link(ev));
            });
            if spawned.is_err() {
                // Out of threads: dropping the connection is all we can do.
                continue;
            }
        }
    })?;
    Ok(())
}

fn authenticate_child(stream: &TcpStream, secret: &Secret) -> Result<u32, String> {
    let mut s = stream;
    s.set_read_timeout(Some(AUTH_TIMEOUT)).map_err(|e| e.to_string())?;
    s.set_write_timeout(Some(AUTH_TIMEOUT)).map_err(|e| e.to_string())?;
    let strip = |e: baton_pmi::PmiError| e.to_string().trim_start_matches("bootstrap: ").to_owned();
    server_handshake(&mut s, secret).map_err(strip)?;
    match wire::read_frame(&mut s).map_err(strip)?.map(|p| TreeMsg::decode(&p)) {
        Some(Ok(TreeMsg::ProxyHello { node })) => Ok(node),
        Some(Ok(other)) => Err(format!("expected a proxy hello, got {other:?}")),
        Some(Err(e)) => Err(strip(e)),
        None => Err("closed before saying which host it serves".into()),
    }
}

/// Connects a proxy to its parent, trying `addrs` in order.
pub fn connect_parent(addrs: &[SocketAddr], secret: &Secret, node: u32) -> Result<TcpStream, String> {
    let mut errors = Vec::new();
    for addr in addrs {
        let attempt = (|| -> Result<TcpStream, String> {
            let mut s = TcpStream::connect_timeout(addr, CONNECT_TIMEOUT).map_err(|e| sys::describe_io_error(&e))?;
            s.set_read_timeout(Some(AUTH_TIMEOUT)).map_err(|e| e.to_string())?;
            s.set_write_timeout(Some(AUTH_TIMEOUT)).map_err(|e| e.to_string())?;
            client_handshake(&mut s, secret).map_err(|e| e.to_string())?;
            wire::write_frame(&mut s, &TreeMsg::ProxyHello { node }.encode()).map_err(|e| e.to_string())?;
            Ok(s)
        })();
        match attempt {
            Ok(s) => return Ok(s),
            Err(e) => errors.push(format!("{addr}: {e}")),
        }
    }
    Err(errors.join("; "))
}

/// The addresses a child should try to reach a listener on `port`, in order: those that
/// `iface` selects when given (a comma-separated list of interface names, subnets
/// `ADDR/BITS` or addresses, as `BATON_TCP_IF`), else every routable address, IPv4 ones
/// first; loopback when there is none.
pub fn advertised_addrs(iface: Option<&str>, port: u16) -> Result<Vec<SocketAddr>, String> {
    let all: Vec<IfAddr> = interface_addrs().into_iter().filter(|a| a.up).collect();
    Ok(choose_advertised(&all, iface)?.into_iter().map(|ip| SocketAddr::new(ip, port)).collect())
}

fn choose_advertised(all: &[IfAddr], iface: Option<&str>) -> Result<Vec<IpAddr>, String> {
    let picked: Vec<IpAddr> = match iface {
        Some(list) => {
            // Link-local IPv6 would need the dialling host's scope: never advertised.
            let usable = |a: &&IfAddr| !matches!(a.addr, IpAddr::V6(v) if is_link_local_v6(&v));
            let specs = list.split(',').map(str::trim).filter(|s| !s.is_empty());
            let picked: Vec<IpAddr> = specs
                .flat_map(|spec| all.iter().filter(move |a| a.matches(spec)).filter(usable))
                .map(|a| a.addr)
                .collect();
            if picked.is_empty() {
                let have: Vec<String> = all.iter().map(|a| format!("{} {}", a.name, a.addr)).collect();
                return Err(format!("'{list}' matches no usable address of this host (it has: {})", have.join(", ")));
            }
            picked
        }
        None => {
            let ok = all.iter().map(|a| a.addr).filter(routable);
            ok.clone().filter(IpAddr::is_ipv4).chain(ok.filter(IpAddr::is_ipv6)).collect()
        }
    };
    let mut out = Vec::with_capacity(picked.len());
    for ip in picked {
        if !out.contains(&ip) {
            out.push(ip);
        }
    }
    if out.is_empty() {
        out.push(IpAddr::V4(Ipv4Addr::LOCALHOST));
    }
    Ok(out)
}

/// Parses `--parent a:p,b:p`.
pub fn parse_addrs(list: &str) -> Result<Vec<SocketAddr>, String> {
    list.split(',')
        .filter(|s| !s.is_empty())
        .map(|s| s.parse().map_err(|_| format!("invalid address '{s}'")))
        .collect::<Result<Vec<_>, _>>()
        .and_then(|v| if v.is_empty() { Err("no parent address".into()) } else { Ok(v) })
}

/// `BATON_HEARTBEAT_TIMEOUT` in seconds (fractions allowed; checked at start-up, see `main`).
/// Its least value is two heartbeats: below that a healthy link would be declared dead.
pub fn heartbeat_timeout_from_env() -> Result<Duration, String> {
    Ok(baton_settings::HEARTBEAT_TIMEOUT.get())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ifa(name: &str, addr: &str) -> IfAddr {
        let addr: IpAddr = addr.parse().unwrap();
        IfAddr { name: name.into(), addr, prefix: 24, up: true, loopback: addr.is_loopback() }
    }

    #[test]
    fn advertised_addresses() {
        let all = [
            ifa("lo", "127.0.0.1"),
            ifa("lo", "::1"),
            ifa("eth0", "fe80::1"),
            ifa("eth0", "fd77::1"),
            ifa("eth0", "10.77.0.1"),
            ifa("eth1", "192.168.5.9"),
        ];
        let ips = |v: &[&str]| v.iter().map(|s| s.parse::<IpAddr>().unwrap()).collect::<Vec<_>>();
        // By default: routable ones, IPv4 first, never loopback or link-local.
        assert_eq!(choose_advertised(&all, None).unwrap(), ips(&["10.77.0.1", "192.168.5.9", "fd77::1"]));
        // A name: all its usable addresses, in the kernel's order.
        assert_eq!(choose_advertised(&all, Some("eth0")).unwrap(), ips(&["fd77::1", "10.77.0.1"]));
        assert_eq!(choose_advertised(&all, Some("lo")).unwrap(), ips(&["127.0.0.1", "::1"]));
        // Subnets and addresses, in the order given, without repeats.
        assert_eq!(choose_advertised(&all, Some("fd77::/64")).unwrap(), ips(&["fd77::1"]));
        assert_eq!(
            choose_advertised(&all, Some("192.168.0.0/16, eth0,10.77.0.1")).unwrap(),
            ips(&["192.168.5.9", "fd77::1", "10.77.0.1"])
        );
        let err = choose_advertised(&all, Some("eth7")).unwrap_err();
        assert!(err.contains("'eth7' matches no usable address") && err.contains("eth1 192.168.5.9"), "{err}");
        assert!(choose_advertised(&all, Some("fe80::/10")).is_err());
        // Nothing routable: loopback, for a job that turns out to be on this host only.
        assert_eq!(choose_advertised(&all[..3], None).unwrap(), ips(&["127.0.0.1"]));
    }

    /// The setting cannot declare a link dead between two heartbeats.
    #[test]
    fn heartbeat_timeout_spans_two_heartbeats() {
        let baton_settings::Kind::Seconds { min, .. } = baton_settings::HEARTBEAT_TIMEOUT.meta.kind else { panic!() };
        assert!(min >= 2.0 * HEARTBEAT_INTERVAL.as_secs_f64());
    }

    #[test]
    fn parent_lists_take_ipv6() {
        let v = parse_addrs("10.0.0.1:5,[fd77::254]:6").unwrap();
        assert_eq!(v[1], "[fd77::254]:6".parse::<SocketAddr>().unwrap());
        assert!(parse_addrs("").is_err());
    }
}
