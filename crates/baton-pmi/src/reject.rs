//! Logging refused connections without letting whoever makes them flood the log.
//!
//! [`RejectLog`] counts rejections per source address (the port changes with every
//! connection, so it is left out). The first rejection from an address is shown in full; after
//! that a line comes only when the address's count reaches 10, 100, 1000, ..., and
//! [`RejectLog::summary`] gives the counts not yet shown, for the end of the process. Past
//! [`MAX_ADDRS`] distinct addresses the rest are counted together, so many addresses cannot
//! flood the log either. The lines are for stderr: a few per address, however many connections.

use std::collections::BTreeMap;
use std::net::{IpAddr, SocketAddr};

/// Addresses counted one by one; the others share one count.
pub const MAX_ADDRS: usize = 64;

#[derive(Debug, Default)]
struct Count {
    seen: u64,
    shown: u64,
}

/// Rejection counts by source address (`None`: the addresses past [`MAX_ADDRS`]).
#[derive(Debug, Default)]
pub struct RejectLog {
    counts: BTreeMap<Option<IpAddr>, Count>,
}

impl RejectLog {
    pub const fn new() -> RejectLog {
        RejectLog { counts: BTreeMap::new() }
    }

    /// Records a rejected connection from `peer`. Returns the line to show, if any: `first()`
    /// for the first from its address, a count when the count reaches a power of ten. `what`
    /// names the connections in those count lines ("unauthenticated bootstrap connections").
    pub fn note(&mut self, peer: SocketAddr, what: &str, first: impl FnOnce() -> String) -> Option<String> {
        let ip = peer.ip();
        let key = if self.counts.contains_key(&Some(ip)) || self.counts.len() < MAX_ADDRS { Some(ip) } else { None };
        let c = self.counts.entry(key).or_default();
        c.seen += 1;
        let n = c.seen;
        if n == 1 {
            c.shown = 1;
            let line = first();
            return Some(match key {
                Some(_) => format!("{line} (more from {ip} are counted, not shown)"),
                None => format!("{line} (from more than {MAX_ADDRS} addresses: the rest are counted together)"),
            });
        }
        if n >= 10 && is_power_of_ten(n) {
            c.shown = n;
            return Some(format!("rejected {n} {what} {} so far", from(key)));
        }
        None
    }

    /// One line per address with rejections not shown yet (`what` as for [`RejectLog::note`]),
    /// after which they count as shown.
    pub fn summary(&mut self, what: &str) -> Vec<String> {
        let mut out = Vec::new();
        for (key, c) in self.counts.iter_mut().filter(|(_, c)| c.seen > c.shown) {
            out.push(format!("rejected {} {what} {} in all", c.seen, from(*key)));
            c.shown = c.seen;
        }
        out
    }
}

fn from(key: Option<IpAddr>) -> String {
    match key {
        Some(ip) => format!("from {ip}"),
        None => "from other addresses".to_owned(),
    }
}

fn is_power_of_ten(mut n: u64) -> bool {
    while n >= 10 && n % 10 == 0 {
        n /= 10;
    }
    n == 1
}

#[cfg(test)]
mod tests {
    use super::*;

    fn addr(i: u32, port: u16) -> SocketAddr {
        SocketAddr::new(IpAddr::V4(std::net::Ipv4Addr::from(0x0a00_0000 + i)), port)
    }

    #[test]
    fn one_line_per_address_then_powers_of_ten_then_the_rest_at_the_end() {
        let mut log = RejectLog::new();
        let mut lines = Vec::new();
        for i in 0..1234u16 {
            lines.extend(log.note(addr(1, i), "connections", || format!("rejected a connection from port {i}")));
        }
        assert_eq!(
            lines,
            [
                "rejected a connection from port 0 (more from 10.0.0.1 are counted, not shown)",
                "rejected 10 connections from 10.0.0.1 so far",
                "rejected 100 connections from 10.0.0.1 so far",
                "rejected 1000 connections from 10.0.0.1 so far",
            ]
        );
        lines.extend(log.note(addr(2, 1), "connections", || "first of 10.0.0.2".into()));
        assert_eq!(lines.len(), 5);
        assert_eq!(log.summary("connections"), ["rejected 1234 connections from 10.0.0.1 in all"]);
        assert!(log.summary("connections").is_empty(), "a summary is given once");
    }

    #[test]
    fn many_addresses_share_one_count() {
        let mut log = RejectLog::new();
        let shown: Vec<String> =
            (0..MAX_ADDRS as u32 + 50).filter_map(|i| log.note(addr(i, 9), "c", || format!("first {i}"))).collect();
        // One line per counted address, one for the first of the rest, one at ten of the rest.
        assert_eq!(shown.len(), MAX_ADDRS + 2, "{shown:?}");
        assert!(shown[MAX_ADDRS].starts_with(&format!("first {MAX_ADDRS} (from more than {MAX_ADDRS} addresses")));
        assert_eq!(shown[MAX_ADDRS + 1], "rejected 10 c from other addresses so far");
        assert_eq!(log.summary("c"), ["rejected 50 c from other addresses in all"]);
    }
}
