//! The kubelet's `NodeAddress` setter: `status.addresses` is the node's
//! InternalIP (two for dual stack), then its Hostname.
//!
//! The IP is chosen as the kubelet does without a cloud provider:
//! 1. `nodeIP` from the config (one IP, or two of different families);
//! 2. `hostnameOverride` when it is itself an IP;
//! 3. the address of the interface that holds the default route
//!    (`/proc/net/route`, then `/proc/net/ipv6_route`), as the kubelet's
//!    `ChooseHostInterface` does;
//! 4. failing that, the first global IPv4 (then IPv6) address of an interface
//!    that is up and not loopback.
//!
//! Loopback, link-local, multicast and unspecified IPs are never used.
use std::net::IpAddr;

use nodestatus_sdk::host::{self, NetworkInterface};
use nodestatus_sdk::{Metadata, Node, Result, Setter};

/// The plugin's config.
#[derive(serde::Deserialize, Default, Debug, Clone, PartialEq, Eq)]
#[serde(default, rename_all = "camelCase")]
pub struct Config {
    /// Replaces the kernel's hostname in the Hostname address.
    pub hostname_override: Option<String>,
    /// One IP, or two comma-separated IPs of different families.
    #[serde(rename = "nodeIP")]
    pub node_ip: Option<String>,
}

/// Why an IP may not be a node IP, if it may not.
pub fn unusable(ip: &IpAddr) -> Option<&'static str> {
    if ip.is_loopback() {
        Some("loopback")
    } else if ip.is_unspecified() {
        Some("unspecified")
    } else if ip.is_multicast() {
        Some("multicast")
    } else if match ip {
        IpAddr::V4(v4) => v4.is_link_local(),
        IpAddr::V6(v6) => (v6.segments()[0] & 0xffc0) == 0xfe80,
    } {
        Some("link-local")
    } else {
        None
    }
}

/// Parses and checks `nodeIP`: one IP or two of different families, none of
/// them loopback, link-local, multicast or unspecified, and each configured
/// on an interface of this host (when the host lists any).
pub fn parse_node_ips(s: &str, interfaces: &[NetworkInterface]) -> Result<Vec<IpAddr>, String> {
    let ips = s
        .split(',')
        .map(|p| {
            p.trim()
                .parse::<IpAddr>()
                .map_err(|_| format!("nodeIP: {:?} is not an IP address", p.trim()))
        })
        .collect::<Result<Vec<_>, _>>()?;
    if ips.len() > 2 || (ips.len() == 2 && ips[0].is_ipv4() == ips[1].is_ipv4()) {
        return Err(format!(
            "nodeIP: {s:?}: give one IP, or two of different families for dual stack"
        ));
    }
    for ip in &ips {
        if let Some(why) = unusable(ip) {
            return Err(format!("nodeIP: {ip} is {why}, which a node IP may not be"));
        }
        let known = interfaces
            .iter()
            .flat_map(|i| &i.addresses)
            .any(|a| a.address.parse::<IpAddr>().ok() == Some(*ip));
        if !interfaces.is_empty() && !known {
            return Err(format!(
                "nodeIP: {ip} is not found in the host's network interfaces"
            ));
        }
    }
    Ok(ips)
}

/// The interfaces that hold an IPv4 default route, from `/proc/net/route`.
pub fn default_route_ifaces_v4(route: &str) -> Vec<String> {
    route
        .lines()
        .skip(1)
        .filter_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            // Iface Destination Gateway Flags RefCnt Use Metric Mask ...
            let (iface, dest, flags, mask) = (f.first()?, f.get(1)?, f.get(3)?, f.get(7)?);
            let flags = u32::from_str_radix(flags, 16).ok()?;
            (*dest == "00000000" && *mask == "00000000" && flags & 1 != 0)
                .then(|| iface.to_string())
        })
        .collect()
}

/// The interfaces that hold an IPv6 default route, from
/// `/proc/net/ipv6_route` (reject routes, such as the kernel's `lo` one, are
/// skipped).
pub fn default_route_ifaces_v6(route: &str) -> Vec<String> {
    const RTF_UP: u32 = 0x1;
    const RTF_REJECT: u32 = 0x200;
    route
        .lines()
        .filter_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            // dest dest_len src src_len next_hop metric refcnt use flags iface
            if f.len() < 10 {
                return None;
            }
            let flags = u32::from_str_radix(f[8], 16).ok()?;
            (f[0].bytes().all(|b| b == b'0')
                && f[1] == "00"
                && flags & RTF_UP != 0
                && flags & RTF_REJECT == 0)
                .then(|| f[9].to_owned())
        })
        .collect()
}

/// The first usable address of `family` (true: IPv4) on an interface.
fn global_ip(iface: &NetworkInterface, v4: bool) -> Option<IpAddr> {
    if !iface.up || iface.loopback {
        return None;
    }
    iface
        .addresses
        .iter()
        .filter_map(|a| a.address.parse::<IpAddr>().ok())
        .find(|ip| ip.is_ipv4() == v4 && unusable(ip).is_none())
}

/// Chooses the node IP when none is configured: the default route's
/// interface first (IPv4, then IPv6), then any interface that is up.
pub fn choose_ip(
    interfaces: &[NetworkInterface],
    route_v4: Option<&str>,
    route_v6: Option<&str>,
) -> Option<IpAddr> {
    let by_name = |name: &str| interfaces.iter().find(|i| i.name == name);
    for (route, v4) in [
        (route_v4.map(default_route_ifaces_v4), true),
        (route_v6.map(default_route_ifaces_v6), false),
    ] {
        for name in route.unwrap_or_default() {
            if let Some(ip) = by_name(&name).and_then(|i| global_ip(i, v4)) {
                return Some(ip);
            }
        }
    }
    [true, false]
        .into_iter()
        .find_map(|v4| interfaces.iter().find_map(|i| global_ip(i, v4)))
}

/// The hostname the kubelet reports: the override or the kernel's, trimmed
/// and lowercased.
pub fn hostname(config: &Config, kernel_hostname: &str) -> String {
    config
        .hostname_override
        .as_deref()
        .map(str::trim)
        .filter(|h| !h.is_empty())
        .unwrap_or(kernel_hostname.trim())
        .to_lowercase()
}

/// The node's addresses, InternalIP(s) then Hostname.
pub fn addresses(
    config: &Config,
    kernel_hostname: &str,
    interfaces: &[NetworkInterface],
    route_v4: Option<&str>,
    route_v6: Option<&str>,
) -> Result<Vec<(&'static str, String)>, String> {
    let host = hostname(config, kernel_hostname);
    if host.is_empty() {
        return Err("the node has no hostname and no hostnameOverride is configured".into());
    }
    let ips = match config.node_ip.as_deref().map(str::trim) {
        Some(s) if !s.is_empty() => parse_node_ips(s, interfaces)?,
        _ => match host.parse::<IpAddr>() {
            Ok(ip) => {
                if let Some(why) = unusable(&ip) {
                    return Err(format!(
                        "hostnameOverride: {ip} is {why}, which a node IP may not be"
                    ));
                }
                vec![ip]
            }
            Err(_) => vec![choose_ip(interfaces, route_v4, route_v6).ok_or(
                "cannot find a node IP: no interface that is up has a global IPv4 or IPv6 address; set nodeIP",
            )?],
        },
    };
    let mut out: Vec<(&'static str, String)> = ips
        .iter()
        .map(|ip| ("InternalIP", ip.to_string()))
        .collect();
    out.push(("Hostname", host));
    Ok(out)
}

/// The setter (its [`Setter`](nodestatus_sdk::Setter) implementation is
/// what the component exports).
pub struct NodeAddress;

impl Setter for NodeAddress {
    fn metadata() -> Metadata {
        Metadata::new("node-address", env!("CARGO_PKG_VERSION"))
            .description("the kubelet's NodeAddress setter: InternalIP(s) and Hostname")
            .path("/proc")
    }

    fn set(node: &mut Node) -> Result<()> {
        let config: Config = host::config()?;
        let read = |p: &str| match host::read_file(p) {
            Ok(s) => Some(s),
            Err(e) => {
                host::debug(&format!("{e}; choosing without routes"));
                None
            }
        };
        let (route_v4, route_v6) = if config.node_ip.is_some() {
            (None, None)
        } else {
            (read("/proc/net/route"), read("/proc/net/ipv6_route"))
        };
        let list = addresses(
            &config,
            &host::system_info().hostname,
            &host::network_interfaces(),
            route_v4.as_deref(),
            route_v6.as_deref(),
        )?;
        let pairs: Vec<(&str, &str)> = list.iter().map(|(t, a)| (*t, a.as_str())).collect();
        node.set_addresses(&pairs);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use nodestatus_sdk::host::IpAddress;

    const ROUTE: &str = include_str!("../tests/fixtures/route");
    const IPV6_ROUTE: &str = include_str!("../tests/fixtures/ipv6_route");

    fn iface(name: &str, up: bool, loopback: bool, addrs: &[&str]) -> NetworkInterface {
        NetworkInterface {
            name: name.into(),
            up,
            loopback,
            addresses: addrs
                .iter()
                .map(|a| IpAddress {
                    address: (*a).into(),
                    prefix_len: 24,
                })
                .collect(),
        }
    }

    /// This machine's interfaces (`ip -br addr`).
    fn machine() -> Vec<NetworkInterface> {
        vec![
            iface("lo", true, true, &["127.0.0.1", "::1"]),
            iface("ifb0", false, false, &[]),
            iface("ifb1", false, false, &[]),
            iface(
                "eth0",
                true,
                false,
                &["192.0.2.2", "fd00::2", "fe80::fc:ff:fe00:1"],
            ),
        ]
    }

    fn cfg(ip: Option<&str>, host: Option<&str>) -> Config {
        Config {
            node_ip: ip.map(Into::into),
            hostname_override: host.map(Into::into),
        }
    }

    #[test]
    fn default_routes_are_read_from_proc() {
        assert_eq!(default_route_ifaces_v4(ROUTE), vec!["eth0"]);
        assert_eq!(default_route_ifaces_v6(IPV6_ROUTE), vec!["eth0"]);
    }

    #[test]
    fn chooses_the_default_route_interface() {
        let mut ifs = machine();
        // An up bridge listed first is not chosen over the default route's.
        ifs.insert(1, iface("docker0", true, false, &["172.17.0.1"]));
        let a = addresses(&cfg(None, None), "VM", &ifs, Some(ROUTE), Some(IPV6_ROUTE)).unwrap();
        assert_eq!(
            a,
            vec![
                ("InternalIP", "192.0.2.2".into()),
                ("Hostname", "vm".into())
            ]
        );
        // Without routes: the first up, non-loopback interface with IPv4.
        let a = addresses(&cfg(None, None), "vm", &ifs, None, None).unwrap();
        assert_eq!(a[0], ("InternalIP", "172.17.0.1".into()));
    }

    #[test]
    fn falls_back_to_ipv6_and_skips_link_local() {
        let ifs = vec![
            iface("lo", true, true, &["127.0.0.1", "::1"]),
            iface("eth1", false, false, &["10.0.0.9"]),
            iface("eth0", true, false, &["169.254.1.1", "fe80::1", "fd00::2"]),
        ];
        let a = addresses(&cfg(None, None), "vm", &ifs, None, None).unwrap();
        assert_eq!(a[0], ("InternalIP", "fd00::2".into()));
        let none = vec![iface("lo", true, true, &["127.0.0.1"])];
        assert!(addresses(&cfg(None, None), "vm", &none, None, None).is_err());
    }

    #[test]
    fn node_ip_is_used_and_validated() {
        let ifs = machine();
        let a = addresses(
            &cfg(Some("192.0.2.2, fd00::2"), Some("Worker-1")),
            "vm",
            &ifs,
            None,
            None,
        )
        .unwrap();
        assert_eq!(
            a,
            vec![
                ("InternalIP", "192.0.2.2".into()),
                ("InternalIP", "fd00::2".into()),
                ("Hostname", "worker-1".into()),
            ]
        );
        for bad in [
            "127.0.0.1",
            "169.254.0.5",
            "fe80::fc:ff:fe00:1",
            "224.0.0.1",
            "0.0.0.0",
            "::",
            "192.0.2.2,192.0.2.3",
            "10.9.9.9",
            "nope",
        ] {
            assert!(
                addresses(&cfg(Some(bad), None), "vm", &ifs, None, None).is_err(),
                "{bad}"
            );
        }
    }

    #[test]
    fn an_ip_hostname_override_is_the_node_ip() {
        let a = addresses(&cfg(None, Some("192.0.2.2")), "vm", &machine(), None, None).unwrap();
        assert_eq!(
            a,
            vec![
                ("InternalIP", "192.0.2.2".into()),
                ("Hostname", "192.0.2.2".into())
            ]
        );
    }

    #[test]
    fn sets_the_node_addresses() {
        let mut node = Node::named("vm");
        let list = addresses(&cfg(None, None), "vm", &machine(), Some(ROUTE), None).unwrap();
        let pairs: Vec<(&str, &str)> = list.iter().map(|(t, a)| (*t, a.as_str())).collect();
        node.set_addresses(&pairs);
        let v = node.status("addresses").unwrap();
        assert_eq!(v[0]["type"], "InternalIP");
        assert_eq!(v[1]["address"], "vm");
        // Its part is the one field, the whole list.
        let part = node.part();
        assert_eq!(&part["status"]["addresses"], v);
        assert_eq!(part.as_object().unwrap().len(), 1);
        assert_eq!(part["status"].as_object().unwrap().len(), 1);
    }
}

nodestatus_sdk::export!(NodeAddress);
