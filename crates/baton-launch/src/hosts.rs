//! Host lists, rank placement and the shape of the proxy tree.
//!
//! [`HostSpec`] is one host as the user wrote it (`-hosts`, `-hostfile`);
//! [`place`] maps ranks to hosts (block or cyclic, honouring slots and
//! `-ppn`); [`split_subtree`] decides which proxy starts which hosts.
//! Everything here is pure so it can be tested without processes.

use std::collections::HashMap;

/// A host and its slot count (`None`: not given, counts as 1).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HostSpec {
    pub name: String,
    pub slots: Option<u32>,
}

/// How ranks are laid out over the hosts' slots.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Mapping {
    /// Fill each host's slots in turn (`--map-by slot`, the default).
    #[default]
    Block,
    /// One rank per host in turn (`--map-by node`, `-rr`).
    Cyclic,
}

fn bad_slots(spec: &str, what: &str) -> String {
    format!("invalid slot count in host '{spec}': {what} (expected a positive number)")
}

fn parse_slots(spec: &str, n: &str) -> Result<u32, String> {
    match n.parse::<u32>() {
        Ok(v) if v > 0 => Ok(v),
        _ => Err(bad_slots(spec, n)),
    }
}

fn check_name(name: &str, spec: &str) -> Result<(), String> {
    if name.is_empty() || name.chars().any(|c| c.is_whitespace() || c.is_control() || c == ',') {
        return Err(format!("invalid host name in '{spec}'"));
    }
    Ok(())
}

/// `host` or `host:N` (Hydra). IPv6 addresses work in brackets: `[::1]:2`.
pub fn parse_host(spec: &str) -> Result<HostSpec, String> {
    let (name, slots) = match spec.rsplit_once(':') {
        Some((h, n)) if !h.is_empty() && (!h.contains(':') || h.ends_with(']')) => (h, Some(parse_slots(spec, n)?)),
        _ => (spec, None),
    };
    check_name(name, spec)?;
    Ok(HostSpec { name: name.to_owned(), slots })
}

/// A comma-separated `-hosts` list.
pub fn parse_host_list(list: &str) -> Result<Vec<HostSpec>, String> {
    let hosts: Vec<HostSpec> = list.split(',').filter(|h| !h.is_empty()).map(parse_host).collect::<Result<_, _>>()?;
    if hosts.is_empty() {
        return Err("empty host list".into());
    }
    Ok(hosts)
}

/// A host file: one host per line as `host`, `host:N` or `host slots=N`
/// (Open MPI's `max_slots=N` is accepted and ignored); `#` starts a comment.
pub fn parse_hostfile(text: &str, file: &str) -> Result<Vec<HostSpec>, String> {
    let mut hosts = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let line = line.split('#').next().unwrap_or("");
        let mut words = line.split_whitespace();
        let Some(first) = words.next() else { continue };
        let at = |e: String| format!("{file}:{}: {e}", i + 1);
        let mut host = parse_host(first).map_err(at)?;
        for w in words {
            match w.split_once('=') {
                Some(("slots", n)) => host.slots = Some(parse_slots(first, n).map_err(at)?),
                Some(("max_slots" | "max-slots", _)) => {}
                _ => return Err(at(format!("unknown word '{w}' (expected slots=N)"))),
            }
        }
        hosts.push(host);
    }
    if hosts.is_empty() {
        return Err(format!("host file '{file}' lists no host"));
    }
    Ok(hosts)
}

/// Merges repeated names (their slots add up, as when a host file lists a
/// host once per slot), keeping the order of first appearance.
pub fn merge(hosts: &[HostSpec]) -> Vec<HostSpec> {
    let mut out: Vec<HostSpec> = Vec::new();
    let mut at: HashMap<&str, usize> = HashMap::new();
    for h in hosts {
        match at.get(h.name.as_str()) {
            Some(&i) => {
                let s = out[i].slots.unwrap_or(1).saturating_add(h.slots.unwrap_or(1));
                out[i].slots = Some(s);
            }
            None => {
                at.insert(&h.name, out.len());
                out.push(h.clone());
            }
        }
    }
    out
}

/// Slots of each host: `-ppn` overrides the list, a host without a count has 1.
pub fn slots(hosts: &[HostSpec], ppn: Option<u32>) -> Vec<u32> {
    hosts.iter().map(|h| ppn.or(h.slots).unwrap_or(1)).collect()
}

/// The host index of each of `size` ranks. When there are more ranks than
/// slots the layout starts over with the first host (oversubscription).
pub fn place(size: u32, slots: &[u32], mapping: Mapping) -> Vec<usize> {
    let mut out = Vec::with_capacity(size as usize);
    if slots.is_empty() {
        return out;
    }
    while out.len() < size as usize {
        let left = size as usize - out.len();
        match mapping {
            Mapping::Block => {
                for (h, &s) in slots.iter().enumerate() {
                    let take = (s as usize).min(size as usize - out.len());
                    out.extend(std::iter::repeat(h).take(take));
                }
            }
            Mapping::Cyclic => {
                // One pass fills every slot once, visiting hosts in turn and
                // skipping those already full.
                let mut used = vec![0u32; slots.len()];
                let pass: u64 = slots.iter().map(|&s| u64::from(s)).sum();
                let mut placed = 0usize;
                while placed < left && (placed as u64) < pass {
                    for (h, &s) in slots.iter().enumerate() {
                        if used[h] < s && placed < left {
                            used[h] += 1;
                            out.push(h);
                            placed += 1;
                        }
                    }
                }
            }
        }
    }
    out
}

/// Placement of `n` more processes when `used` of each host's `slots` are
/// taken by processes still running: the free slots first, in `mapping`
/// order, then, once every slot is taken, the layout of [`place`] from the
/// start (oversubscription). Returns host indexes.
pub fn place_free(n: u32, slots: &[u32], used: &[u32], mapping: Mapping) -> Vec<usize> {
    let free: Vec<u32> = slots.iter().zip(used).map(|(&s, &u)| s.saturating_sub(u)).collect();
    let total_free: u64 = free.iter().map(|&f| u64::from(f)).sum();
    let first = u64::from(n).min(total_free) as u32;
    let mut out = if first > 0 { place(first, &free, mapping) } else { Vec::new() };
    out.extend(place(n - first, slots, mapping));
    out
}

/// Divides the hosts of a subtree (without its root) among at most
/// `fanout` children: consecutive, near-equal chunks whose first host is
/// the child and the rest that child's own subtree. Depth is therefore
/// about log_fanout(hosts).
pub fn split_subtree(nodes: &[u32], fanout: usize) -> Vec<(u32, Vec<u32>)> {
    let n = nodes.len();
    let k = fanout.max(1).min(n);
    let mut out = Vec::with_capacity(k);
    let mut start = 0;
    for i in 0..k {
        let len = n / k + usize::from(i < n % k);
        let chunk = &nodes[start..start + len];
        out.push((chunk[0], chunk[1..].to_vec()));
        start += len;
    }
    out
}

/// `ranks 0-3,7,9-10` or `rank 5`: a rank list, sorted and compact.
pub fn rank_ranges(ranks: &[u32]) -> String {
    let mut v: Vec<usize> = ranks.iter().map(|&r| r as usize).collect();
    v.sort_unstable();
    v.dedup();
    let word = if v.len() == 1 { "rank" } else { "ranks" };
    format!("{word} {}", ranges(&v))
}

/// `0-3,7,9-10`: sorted numbers with each run of consecutive ones written
/// as its ends, as the kernel writes CPU lists.
pub fn ranges(sorted: &[usize]) -> String {
    let mut parts = Vec::new();
    let mut i = 0;
    while i < sorted.len() {
        let mut j = i;
        while j + 1 < sorted.len() && sorted[j + 1] == sorted[j] + 1 {
            j += 1;
        }
        parts.push(if i == j { sorted[i].to_string() } else { format!("{}-{}", sorted[i], sorted[j]) });
        i = j + 1;
    }
    parts.join(",")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn h(name: &str, slots: Option<u32>) -> HostSpec {
        HostSpec { name: name.into(), slots }
    }

    #[test]
    fn host_specs() {
        assert_eq!(parse_host("a").unwrap(), h("a", None));
        assert_eq!(parse_host("a:4").unwrap(), h("a", Some(4)));
        assert_eq!(parse_host("[fd00::1]:2").unwrap(), h("[fd00::1]", Some(2)));
        assert_eq!(parse_host("fd00::1").unwrap(), h("fd00::1", None));
        assert!(parse_host("a:0").is_err());
        assert!(parse_host("a:x").is_err());
        assert!(parse_host("").is_err());
        assert_eq!(parse_host_list("a,b:2,").unwrap(), [h("a", None), h("b", Some(2))]);
        assert!(parse_host_list(",").is_err());
    }

    #[test]
    fn host_files() {
        let text = "# cluster\n\nn1 slots=4 max_slots=8\nn2:2 # two\n  n3\nn1\n";
        let hosts = parse_hostfile(text, "f").unwrap();
        assert_eq!(hosts, [h("n1", Some(4)), h("n2", Some(2)), h("n3", None), h("n1", None)]);
        assert_eq!(merge(&hosts), [h("n1", Some(5)), h("n2", Some(2)), h("n3", None)]);
        let e = parse_hostfile("n1\nn2 cpus=3\n", "hf").unwrap_err();
        assert!(e.starts_with("hf:2: unknown word 'cpus=3'"), "{e}");
        assert!(parse_hostfile("n1 slots=0\n", "hf").unwrap_err().contains("hf:1"));
        assert!(parse_hostfile("# nothing\n", "hf").is_err());
    }

    #[test]
    fn block_and_cyclic_placement() {
        assert_eq!(place(5, &[2, 2, 2], Mapping::Block), [0, 0, 1, 1, 2]);
        assert_eq!(place(5, &[2, 2, 2], Mapping::Cyclic), [0, 1, 2, 0, 1]);
        // Uneven slots: cyclic skips a full host.
        assert_eq!(place(6, &[1, 3, 2], Mapping::Cyclic), [0, 1, 2, 1, 2, 1]);
        // Oversubscription wraps around.
        assert_eq!(place(7, &[2, 1], Mapping::Block), [0, 0, 1, 0, 0, 1, 0]);
        assert_eq!(place(5, &[1, 1], Mapping::Cyclic), [0, 1, 0, 1, 0]);
        assert_eq!(slots(&[h("a", Some(4)), h("b", None)], None), [4, 1]);
        assert_eq!(slots(&[h("a", Some(4)), h("b", None)], Some(2)), [2, 2]);
        assert_eq!(place(6, &slots(&[h("a", Some(4)), h("b", None)], Some(2)), Mapping::Block), [0, 0, 1, 1, 0, 0]);
    }

    #[test]
    fn placement_on_free_slots() {
        // Host 0 is full, host 1 has one slot left, host 2 two.
        let (slots, used) = ([2, 2, 2], [2, 1, 0]);
        assert_eq!(place_free(3, &slots, &used, Mapping::Block), [1, 2, 2]);
        assert_eq!(place_free(3, &slots, &used, Mapping::Cyclic), [1, 2, 2]);
        // All free slots taken: the rest is laid out as on empty hosts.
        assert_eq!(place_free(5, &slots, &used, Mapping::Block), [1, 2, 2, 0, 0]);
        assert_eq!(place_free(5, &slots, &used, Mapping::Cyclic), [1, 2, 2, 0, 1]);
        assert_eq!(place_free(4, &[3, 3, 3], &[1, 1, 0], Mapping::Block), [0, 0, 1, 1]);
        assert_eq!(place_free(4, &[3, 3, 3], &[1, 1, 0], Mapping::Cyclic), [0, 1, 2, 0]);
        // More processes than slots were ever free.
        assert_eq!(place_free(3, &[1, 1], &[5, 5], Mapping::Block), [0, 1, 0]);
        assert!(place_free(0, &[1], &[0], Mapping::Block).is_empty());
    }

    #[test]
    fn tree_shape() {
        assert_eq!(split_subtree(&[1, 2, 3], 2), [(1, vec![2]), (3, vec![])]);
        assert_eq!(split_subtree(&[1, 2], 8), [(1, vec![]), (2, vec![])]);
        assert!(split_subtree(&[], 2).is_empty());
        // 100 hosts with fan-out 4: every host appears exactly once and the
        // depth stays logarithmic.
        fn walk(nodes: &[u32], f: usize, depth: usize, seen: &mut Vec<u32>, max: &mut usize) {
            *max = (*max).max(depth);
            for (c, sub) in split_subtree(nodes, f) {
                seen.push(c);
                walk(&sub, f, depth + 1, seen, max);
            }
        }
        let all: Vec<u32> = (0..100).collect();
        let (mut seen, mut depth) = (Vec::new(), 0);
        walk(&all, 4, 0, &mut seen, &mut depth);
        seen.sort_unstable();
        assert_eq!(seen, all);
        assert!(depth <= 4, "depth {depth}");
    }

    #[test]
    fn ranges() {
        assert_eq!(rank_ranges(&[3, 0, 1, 2, 7, 9, 10]), "ranks 0-3,7,9-10");
        assert_eq!(rank_ranges(&[5]), "rank 5");
    }
}
