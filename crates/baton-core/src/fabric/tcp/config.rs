//! [`TcpConfig`]: the `BATON_TCP_*` settings; [`Congestion`]: which congestion control a lane
//! runs; [`choose_addr`]: the address to listen on.

use baton_transport::sys::{interface_addrs, routable, IfAddr};
use std::net::{IpAddr, Ipv4Addr};
use std::time::Duration;

/// Settings read once from the environment (documented in the README).
#[derive(Clone, Debug)]
pub struct TcpConfig {
    /// `BATON_TCP_EAGER_MAX`: largest message sent eagerly.
    pub eager_max: usize,
    /// `BATON_TCP_CHUNK`: payload of one streamed data frame.
    pub chunk: usize,
    /// `BATON_TCP_STRIPES`: bulk lanes per peer, which carry the streamed data of large
    /// messages (round robin); 0: that data goes on lane 0 with everything else.
    pub stripes: usize,
    /// `BATON_TCP_IF`: interfaces, subnets or addresses to listen on, in order of preference.
    pub iface: Option<String>,
    /// `BATON_TCP_CONNECT_TIMEOUT` (seconds): how long opening a connection may take.
    pub connect_timeout: Duration,
    /// `BATON_TCP_CONGESTION`: the congestion control lane 0 runs.
    pub congestion: Congestion,
    /// `BATON_TCP_BULK_CONGESTION`: the congestion control the bulk lanes run.
    pub bulk_congestion: Congestion,
    /// `BATON_TCP_COALESCE`: largest eager message of a burst that may wait for the next
    /// progress pass to leave with the others (0: each leaves at once).
    pub coalesce: usize,
}

/// Which congestion control algorithm a connection runs (`BATON_TCP_CONGESTION` for lane 0,
/// `BATON_TCP_BULK_CONGESTION` for the bulk lanes).
///
/// Neither kind of algorithm suits all of an MPI job's traffic, hence the two kinds of lane.
/// A pacing algorithm (BBR) spaces a connection's packets at the rate it has measured, and a
/// connection that carries bursts between idle gaps is measured low: large transfers then
/// crawl, and flip between a fast and a slow mode from run to run. Cubic and reno do not pace,
/// but they grow the congestion window only while a connection fills it, and the kernel sends
/// at most half the window in one go when nothing is in flight: cubic keeps a small window on a
/// connection that only carried small messages, so a mid-size message leaves in two parts, the
/// second after the receiver acknowledged the first. BBR sets its window from its model
/// instead. So lane 0, which carries the small and mid-size messages, keeps the system's
/// choice, and the bulk lanes, whose transfers fill any window, run `unpaced` (figures:
/// docs/PERFORMANCE.md, TCP).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Congestion {
    /// `system` (lane 0's default): whatever the system gives each connection.
    System,
    /// `unpaced` (the bulk lanes' default): a connection whose algorithm paces (`bbr...`)
    /// switches to cubic, or to reno where cubic is not allowed; any other choice stays.
    Unpaced,
    /// A name: that algorithm (a warning, once, when the kernel refuses it).
    Named(String),
}

impl Congestion {
    pub(super) fn from_setting(v: Option<&str>, default: Congestion) -> Congestion {
        match v.map(str::trim) {
            None | Some("") => default,
            Some("system") => Congestion::System,
            Some("unpaced") => Congestion::Unpaced,
            Some(name) => Congestion::Named(name.to_string()),
        }
    }

    /// The algorithms to try, in order, for a connection that runs `current`.
    pub fn candidates(&self, current: &str) -> Vec<&str> {
        match self {
            Congestion::Unpaced if current.starts_with("bbr") => vec!["cubic", "reno"],
            Congestion::Named(name) if name != current => vec![name.as_str()],
            _ => Vec::new(),
        }
    }
}

impl TcpConfig {
    pub fn from_env() -> TcpConfig {
        // The registry's ranges bound each value (a chunk of 4 KiB to 1 MiB, at most 16 stripes).
        TcpConfig {
            eager_max: baton_settings::TCP_EAGER_MAX.get(),
            chunk: baton_settings::TCP_CHUNK.get(),
            stripes: baton_settings::TCP_STRIPES.get() as usize,
            iface: baton_settings::TCP_IF.value(),
            connect_timeout: baton_settings::TCP_CONNECT_TIMEOUT.get(),
            congestion: Congestion::from_setting(Some(&baton_settings::TCP_CONGESTION.get()), Congestion::System),
            bulk_congestion: Congestion::from_setting(
                Some(&baton_settings::TCP_BULK_CONGESTION.get()),
                Congestion::Unpaced,
            ),
            coalesce: baton_settings::TCP_COALESCE.get(),
        }
    }

    /// Connections per peer: lane 0 and the bulk lanes.
    pub fn lanes(&self) -> usize {
        1 + self.stripes
    }

    /// The lanes streamed data goes on: the first, and how many.
    pub(super) fn bulk_lanes(&self) -> (usize, usize) {
        if self.stripes == 0 {
            (0, 1)
        } else {
            (1, self.stripes)
        }
    }

    /// The longest payload a peer with the same settings sends in one frame.
    pub fn max_payload(&self) -> usize {
        self.eager_max.max(self.chunk)
    }
}

/// The address to listen on. `BATON_TCP_IF` decides when set; otherwise loopback when every
/// process of the job is on this host, else the first routable address (IPv4 first).
pub fn choose_addr(cfg: &TcpConfig, all_local: bool) -> Result<IpAddr, String> {
    let addrs: Vec<IfAddr> = interface_addrs().into_iter().filter(|a| a.up).collect();
    if let Some(list) = &cfg.iface {
        for spec in list.split(',').map(str::trim).filter(|s| !s.is_empty()) {
            if let Some(a) = addrs.iter().find(|a| a.matches(spec)) {
                return Ok(a.addr);
            }
        }
        let have: Vec<String> = addrs.iter().map(|a| format!("{} {}", a.name, a.addr)).collect();
        return Err(format!("BATON_TCP_IF={list} matches no interface of this host (it has: {})", have.join(", ")));
    }
    if all_local {
        return Ok(IpAddr::V4(Ipv4Addr::LOCALHOST));
    }
    let pick = addrs
        .iter()
        .find(|a| a.addr.is_ipv4() && routable(&a.addr))
        .or_else(|| addrs.iter().find(|a| routable(&a.addr)));
    Ok(pick.map(|a| a.addr).unwrap_or(IpAddr::V4(Ipv4Addr::LOCALHOST)))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The system's choice stays by default; `unpaced` replaces only a pacing algorithm, and
    /// prefers cubic; a name is used as given.
    #[test]
    fn the_congestion_setting_replaces_only_what_it_says() {
        let system = Congestion::from_setting(None, Congestion::System);
        assert_eq!(system, Congestion::from_setting(Some(" system "), Congestion::Unpaced));
        assert!(system.candidates("bbr").is_empty() && system.candidates("reno").is_empty());
        let unpaced = Congestion::from_setting(Some("unpaced"), Congestion::System);
        assert_eq!(unpaced, Congestion::from_setting(Some(""), Congestion::Unpaced));
        assert_eq!(unpaced.candidates("bbr"), ["cubic", "reno"]);
        assert_eq!(unpaced.candidates("bbr3"), ["cubic", "reno"]);
        assert!(unpaced.candidates("cubic").is_empty() && unpaced.candidates("dctcp").is_empty());
        let reno = Congestion::from_setting(Some("reno"), Congestion::System);
        assert_eq!(reno.candidates("bbr"), ["reno"]);
        assert_eq!(reno.candidates("cubic"), ["reno"]);
        assert!(reno.candidates("reno").is_empty());
    }
}
