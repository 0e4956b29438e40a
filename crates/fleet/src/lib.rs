//! Simulated machines for `nodestatus simulate`: a fleet of N nodes in one
//! process, each with facts of its own, so that the real setters make N
//! different, realistic nodes.
//!
//! A [`Template`] says how the machines vary; [`Fleet::create`] draws each
//! [`Machine`] from it with a seeded random source (the same seed, the same
//! fleet) and writes its files beneath a directory of its own:
//!
//! | file | read by | varies |
//! |---|---|---|
//! | `proc/meminfo` | machine-info, memory-pressure | `MemTotal` by shape; `MemAvailable` under 100Mi while the node is under pressure |
//! | `proc/loadavg`, `proc/sys/kernel/{pid_max,threads-max}` | pid-pressure | no |
//! | `proc/net/route` | node-address | the default route on `eth0` |
//! | `sys/kernel/mm/hugepages/` | machine-info | empty (no huge pages) |
//! | `var/lib/kubelet/` | machine-info, disk-pressure (`statvfs`) | no: the real disk beneath it |
//!
//! The kernel facts (hostname = the node's name, CPUs by shape, machine and
//! boot ids) and one interface `eth0` with the node's own IP
//! (`10.128.0.0/9`) come from [`FactSource::rooted`], which also reads every
//! granted path beneath the machine's directory instead of `/`.
//!
//! Each node gets the labels [`SIMULATED_LABEL`]`=true`, a zone, a region
//! and an instance type, and the taint [`SIMULATED_LABEL`]`=true:NoSchedule`
//! (as kwok marks its nodes), so no real pod lands on it.
//!
//! A chosen fraction of the nodes ([`Template::flapping`], spread evenly
//! over the fleet) flips between memory pressure and none every
//! [`Template::flap_period`], each at its own phase: [`Fleet::flap`]
//! rewrites their `meminfo` on that schedule, and the memory-pressure
//! setter reports the change at the node's next pass.
//!
//! [`Agents`] holds the fleet's running agents for the plugin sources that
//! `simulate` runs once for the whole process (the registry puller, the live
//! config): each node's config derived from the file's, and each node told
//! of a pull as its own puller would tell it.

mod agents;

pub use agents::Agents;

use std::collections::BTreeMap;
use std::net::{IpAddr, Ipv4Addr};
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::Duration;

use rand::{Rng, SeedableRng};
use tokio_util::sync::CancellationToken;

use nodestatus_engine::agent::Random;
use nodestatus_engine::config::{Config, Taint};
use nodestatus_runtime::facts::{FactSource, IpAddress, NetworkInterface, SystemInfo};

/// Node `i`'s place in `[0, 1)`: the i-th of the golden-ratio sequence,
/// so that the first k nodes, whatever k, are spread evenly. Its lease
/// renewals take this phase in the period; the plugin sources' events come
/// this far into one update period ([`Agents`]).
pub fn spread(i: usize) -> f64 {
    (i as f64 * 0.618_033_988_749_895).fract()
}

/// The label (and taint key) of every simulated node.
pub const SIMULATED_LABEL: &str = "nodestatus.io/simulated";
/// The region label's value.
pub const REGION: &str = "simulated";
/// `MemAvailable` of a node under memory pressure: under the kubelet's
/// default hard eviction threshold (`memory.available` 100Mi).
pub const PRESSURE_AVAILABLE_KIB: u64 = 50 * 1024;

/// Errors making a fleet.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A setting of the template is out of range.
    #[error("{field}: {message}")]
    Invalid {
        /// The flag.
        field: &'static str,
        /// Why.
        message: String,
    },
    /// A machine's files could not be written.
    #[error("writing the simulated machine's {path}")]
    Write {
        /// The file.
        path: PathBuf,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
}

/// Convenience alias.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// A machine shape: CPUs, memory and the instance type that names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Shape {
    /// `node.kubernetes.io/instance-type`.
    pub instance_type: &'static str,
    /// Logical CPUs.
    pub cpus: u32,
    /// Memory in GiB.
    pub memory_gib: u64,
}

/// The shapes a machine is drawn from, equally likely.
pub const SHAPES: &[Shape] = &[
    Shape {
        instance_type: "sim.small",
        cpus: 2,
        memory_gib: 8,
    },
    Shape {
        instance_type: "sim.medium",
        cpus: 4,
        memory_gib: 16,
    },
    Shape {
        instance_type: "sim.large",
        cpus: 8,
        memory_gib: 32,
    },
    Shape {
        instance_type: "sim.xlarge",
        cpus: 16,
        memory_gib: 64,
    },
];

/// The zones, by node index.
pub const ZONES: &[&str] = &["simulated-a", "simulated-b", "simulated-c"];

/// How the machines of a fleet vary.
#[derive(Debug, Clone)]
pub struct Template {
    /// How many nodes.
    pub nodes: usize,
    /// Node `i` is named `<prefix>-<i>` (zero-padded to the width of the
    /// largest index).
    pub name_prefix: String,
    /// The seed of every random draw (shapes, ids, flap phases, jitter).
    pub seed: u64,
    /// The fraction of nodes, in `[0, 1]`, whose memory pressure flips.
    pub flapping: f64,
    /// How long a flapping node stays in each state.
    pub flap_period: Duration,
    /// How long after the start the flapping begins (before it, every
    /// node is steady).
    pub flap_from: Duration,
}

impl Template {
    /// Checks the settings; every error names the flag.
    pub fn validate(&self) -> Result<()> {
        let invalid = |field, message: &str| {
            Err(Error::Invalid {
                field,
                message: message.to_owned(),
            })
        };
        if self.nodes == 0 || self.nodes > 1_000_000 {
            return invalid("--nodes", "must be between 1 and 1000000");
        }
        if !(0.0..=1.0).contains(&self.flapping) {
            return invalid("--flapping", "must be a fraction between 0 and 1");
        }
        if self.flap_period < Duration::from_secs(1) {
            return invalid("--flap-period", "must be at least 1s");
        }
        if let Err(m) =
            nodestatus_apimachinery::names::dns1123_subdomain(&format!("{}-0", self.name_prefix))
        {
            return invalid("--name-prefix", &m);
        }
        Ok(())
    }

    /// The name of node `i`.
    pub fn name(&self, i: usize) -> String {
        let width = (self.nodes.saturating_sub(1)).to_string().len().max(4);
        format!("{}-{i:0width$}", self.name_prefix)
    }

    /// How many nodes flap: the fraction of the fleet, rounded up.
    pub fn flapping_count(&self) -> usize {
        (self.flapping * self.nodes as f64).ceil() as usize
    }

    /// Whether node `i` flaps: exactly [`Self::flapping_count`] nodes do,
    /// spread evenly over the indices.
    pub fn flaps(&self, i: usize) -> bool {
        let k = self.flapping_count();
        k > 0 && (i * k) % self.nodes < k
    }
}

/// One simulated machine.
#[derive(Debug)]
pub struct Machine {
    /// Its index in the fleet.
    pub index: usize,
    /// The node's name (and hostname).
    pub name: String,
    /// Where its files are.
    pub dir: PathBuf,
    /// Its shape.
    pub shape: Shape,
    /// Its zone.
    pub zone: &'static str,
    /// Its IP on `eth0`.
    pub ip: Ipv4Addr,
    /// Whether its memory pressure flips.
    pub flaps: bool,
    /// Where in the flap period it starts, in `[0, 1)`.
    pub phase: f64,
    system: SystemInfo,
    /// The pressure its files say now.
    pressure: Mutex<bool>,
}

impl Machine {
    /// The facts its setters read.
    pub fn facts(&self) -> FactSource {
        FactSource::rooted(
            self.dir.clone(),
            self.system.clone(),
            vec![
                NetworkInterface {
                    name: "lo".into(),
                    up: true,
                    loopback: true,
                    addresses: vec![IpAddress {
                        address: IpAddr::V4(Ipv4Addr::LOCALHOST),
                        prefix_len: 8,
                    }],
                },
                NetworkInterface {
                    name: "eth0".into(),
                    up: true,
                    loopback: false,
                    addresses: vec![IpAddress {
                        address: IpAddr::V4(self.ip),
                        prefix_len: 9,
                    }],
                },
            ],
        )
    }

    /// Its labels: simulated, zone, region, instance type.
    pub fn labels(&self) -> BTreeMap<String, String> {
        [
            (SIMULATED_LABEL, "true"),
            ("topology.kubernetes.io/zone", self.zone),
            ("topology.kubernetes.io/region", REGION),
            ("node.kubernetes.io/instance-type", self.shape.instance_type),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .collect()
    }

    /// The node's settings: `base` with its name, its labels and the
    /// simulated taint added.
    pub fn config(&self, base: &Config) -> Config {
        let mut cfg = base.clone();
        cfg.node_name = self.name.clone();
        cfg.hostname_override = None;
        cfg.node_labels.extend(self.labels());
        let taint = simulated_taint();
        if !cfg.register_with_taints.contains(&taint) {
            cfg.register_with_taints.push(taint);
        }
        // A simulated machine has no container runtime: the one that
        // answers at the default socket is the host's, and every node would
        // report it (and change when it comes or goes). An endpoint the
        // operator names is used as named.
        if cfg.container_runtime_defaulted {
            cfg.container_runtime_endpoint = None;
        }
        cfg
    }

    /// Whether it is under memory pressure `elapsed` after the fleet
    /// started.
    pub fn pressure_at(&self, elapsed: Duration, template: &Template) -> bool {
        if !self.flaps || elapsed < template.flap_from {
            return false;
        }
        let since = elapsed - template.flap_from;
        let periods = since.as_secs_f64() / template.flap_period.as_secs_f64() + self.phase;
        (periods.floor() as u64) % 2 == 1
    }

    /// Writes its files, with memory pressure or not.
    pub fn write(&self, pressure: bool) -> Result<()> {
        let file = |rel: &str, text: &str| -> Result<()> {
            let path = self.dir.join(rel);
            let write = || {
                if let Some(parent) = path.parent() {
                    std::fs::create_dir_all(parent)?;
                }
                // Written aside and renamed, so that a pass never reads half
                // a file; not flushed: the machine is written anew at each
                // start.
                nodestatus_files::replace(&path, text.as_bytes())
            };
            write().map_err(|source| Error::Write {
                path: path.clone(),
                source,
            })
        };
        let dir = |rel: &str| -> Result<()> {
            let path = self.dir.join(rel);
            std::fs::create_dir_all(&path).map_err(|source| Error::Write { path, source })
        };
        file("proc/meminfo", &self.meminfo(pressure))?;
        file("proc/loadavg", "0.42 0.37 0.31 2/412 81234\n")?;
        file("proc/sys/kernel/pid_max", "4194304\n")?;
        file(
            "proc/sys/kernel/threads-max",
            &format!("{}\n", 7_900 * self.shape.memory_gib),
        )?;
        // The default route on eth0, gateway the first address of the /9.
        file(
            "proc/net/route",
            "Iface\tDestination\tGateway \tFlags\tRefCnt\tUse\tMetric\tMask\t\tMTU\tWindow\tIRTT\n\
             eth0\t00000000\t0100800A\t0003\t0\t0\t100\t00000000\t0\t0\t0\n\
             eth0\t0000800A\t00000000\t0001\t0\t0\t100\t0000807F\t0\t0\t0\n",
        )?;
        file("proc/net/ipv6_route", "")?;
        dir("sys/kernel/mm/hugepages")?;
        dir("var/lib/kubelet")?;
        *self.pressure.lock().expect("pressure lock") = pressure;
        Ok(())
    }

    /// Whether its files say memory pressure now.
    pub fn pressure(&self) -> bool {
        *self.pressure.lock().expect("pressure lock")
    }

    fn meminfo(&self, pressure: bool) -> String {
        let total = self.shape.memory_gib * 1024 * 1024;
        let available = if pressure {
            PRESSURE_AVAILABLE_KIB
        } else {
            total * 7 / 10
        };
        let free = available / 2;
        format!(
            "MemTotal:       {total:>8} kB\nMemFree:        {free:>8} kB\nMemAvailable:   {available:>8} kB\n\
             Buffers:        {:>8} kB\nCached:         {:>8} kB\nSwapCached:            0 kB\n\
             SwapTotal:             0 kB\nSwapFree:              0 kB\nHugePages_Total:       0\n\
             HugePages_Free:        0\nHugepagesize:       2048 kB\n",
            total / 50,
            available / 3,
        )
    }
}

/// The taint of every simulated node: `nodestatus.io/simulated=true:NoSchedule`.
pub fn simulated_taint() -> Taint {
    Taint {
        key: SIMULATED_LABEL.into(),
        value: "true".into(),
        effect: "NoSchedule".into(),
    }
}

/// The machines of a fleet.
#[derive(Debug)]
pub struct Fleet {
    /// How they vary.
    pub template: Template,
    /// The machines, by index.
    pub machines: Vec<Machine>,
}

impl Fleet {
    /// Draws the machines of `template` and writes their files beneath
    /// `dir` (one directory each, named after the node).
    pub fn create(template: Template, dir: &Path) -> Result<Self> {
        template.validate()?;
        let mut rng = rand::rngs::StdRng::seed_from_u64(template.seed);
        let mut machines = Vec::with_capacity(template.nodes);
        for i in 0..template.nodes {
            let name = template.name(i);
            let shape = SHAPES[rng.random_range(0..SHAPES.len())];
            let id = |rng: &mut rand::rngs::StdRng| format!("{:032x}", rng.random::<u128>());
            let machine_id = id(&mut rng);
            let uuid = |hex: String| {
                format!(
                    "{}-{}-{}-{}-{}",
                    &hex[..8],
                    &hex[8..12],
                    &hex[12..16],
                    &hex[16..20],
                    &hex[20..]
                )
            };
            let system = SystemInfo {
                hostname: name.clone(),
                kernel_release: "6.1.0-simulated-amd64".into(),
                kernel_version: "#1 SMP PREEMPT_DYNAMIC nodestatus simulate".into(),
                machine: "x86_64".into(),
                os_release: "PRETTY_NAME=\"nodestatus simulated node\"\nNAME=\"nodestatus\"\nID=nodestatus-simulated\n".into(),
                system_uuid: uuid(id(&mut rng)),
                boot_id: uuid(id(&mut rng)),
                machine_id,
                cpus: shape.cpus,
            };
            let ip = Ipv4Addr::from(u32::from(Ipv4Addr::new(10, 128, 0, 0)) + i as u32 + 2);
            let m = Machine {
                index: i,
                dir: dir.join(&name),
                name,
                shape,
                zone: ZONES[i % ZONES.len()],
                ip,
                flaps: template.flaps(i),
                phase: rng.random::<f64>(),
                system,
                pressure: Mutex::new(false),
            };
            m.write(m.pressure_at(Duration::ZERO, &template))?;
            machines.push(m);
        }
        Ok(Self { template, machines })
    }

    /// The random source of node `i`'s jitter: its own stream, from the
    /// fleet's seed.
    pub fn random(&self, i: usize) -> SeededRandom {
        SeededRandom::new(
            self.template
                .seed
                .wrapping_mul(0x9E37_79B9_7F4A_7C15)
                .wrapping_add(i as u64 + 1),
        )
    }

    /// Rewrites the files of each flapping machine whose pressure changed,
    /// once a second, until `cancel`. Returns how many flips it wrote.
    pub async fn flap(&self, cancel: CancellationToken) -> usize {
        let started = tokio::time::Instant::now();
        let mut flips = 0;
        let mut tick = tokio::time::interval(Duration::from_secs(1));
        loop {
            tokio::select! {
                _ = cancel.cancelled() => return flips,
                _ = tick.tick() => {}
            }
            flips += self.flap_at(started.elapsed());
        }
    }

    /// Writes the files of each flapping machine whose pressure at
    /// `elapsed` differs from its files'. Returns how many it wrote.
    pub fn flap_at(&self, elapsed: Duration) -> usize {
        let mut flips = 0;
        for m in self.machines.iter().filter(|m| m.flaps) {
            let p = m.pressure_at(elapsed, &self.template);
            if p != m.pressure() {
                match m.write(p) {
                    Ok(()) => flips += 1,
                    Err(e) => tracing::warn!("{e}"),
                }
            }
        }
        flips
    }
}

/// A seeded random source: each simulated node's jitter is its own
/// stream, and a run with the same seed draws the same.
pub struct SeededRandom(Mutex<rand::rngs::StdRng>);

impl SeededRandom {
    /// A stream from `seed`.
    pub fn new(seed: u64) -> Self {
        Self(Mutex::new(rand::rngs::StdRng::seed_from_u64(seed)))
    }
}

impl Random for SeededRandom {
    fn unit(&self) -> f64 {
        self.0.lock().expect("rng lock").random::<f64>()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn template(nodes: usize, flapping: f64) -> Template {
        Template {
            nodes,
            name_prefix: "sim".into(),
            seed: 7,
            flapping,
            flap_period: Duration::from_secs(60),
            flap_from: Duration::ZERO,
        }
    }

    /// The host's container runtime, at the default socket, is not a
    /// simulated machine's; one the operator names is.
    #[test]
    fn a_simulated_machine_asks_no_runtime_unless_one_is_named() {
        let parse = |yaml: &str| {
            nodestatus_engine::config::ConfigFile::parse(yaml, Path::new("test.yaml"))
                .and_then(nodestatus_engine::config::ConfigFile::validate)
                .unwrap()
        };
        let dir = tempfile::tempdir().unwrap();
        let fleet = Fleet::create(template(1, 0.0), dir.path()).unwrap();
        let machine = &fleet.machines[0];
        let default = parse("{}");
        assert!(
            default.cri_client().is_some(),
            "the default asks the host's"
        );
        assert!(machine.config(&default).cri_client().is_none());
        let named = parse("containerRuntimeEndpoint: unix:///run/simulated.sock\n");
        assert_eq!(
            machine.config(&named).container_runtime_endpoint.as_deref(),
            Some("unix:///run/simulated.sock")
        );
    }

    #[test]
    fn exactly_the_fraction_flaps_spread_over_the_fleet() {
        for (n, f, k) in [
            (100, 0.01, 1),
            (1000, 0.01, 10),
            (200, 0.05, 10),
            (7, 0.5, 4),
        ] {
            let t = template(n, f);
            let flapping: Vec<usize> = (0..n).filter(|&i| t.flaps(i)).collect();
            assert_eq!(flapping.len(), k, "{n} nodes, {f}");
        }
        assert!((0..50).all(|i| !template(50, 0.0).flaps(i)));
        // Spread: no two of 10 flapping nodes out of 1000 are neighbours.
        let t = template(1000, 0.01);
        let idx: Vec<usize> = (0..1000).filter(|&i| t.flaps(i)).collect();
        assert!(idx.windows(2).all(|w| w[1] - w[0] >= 90), "{idx:?}");
    }

    #[test]
    fn names_sort_in_index_order() {
        let t = template(12_000, 0.0);
        assert_eq!(t.name(7), "sim-00007");
        assert_eq!(template(100, 0.0).name(7), "sim-0007");
    }

    #[test]
    fn a_bad_template_names_its_flag() {
        let mut t = template(0, 0.0);
        assert!(t.validate().unwrap_err().to_string().starts_with("--nodes"));
        t.nodes = 3;
        t.flapping = 1.5;
        assert!(
            t.validate()
                .unwrap_err()
                .to_string()
                .starts_with("--flapping")
        );
        t.flapping = 0.1;
        t.name_prefix = "Bad_Prefix".into();
        assert!(
            t.validate()
                .unwrap_err()
                .to_string()
                .starts_with("--name-prefix")
        );
    }

    #[test]
    fn machines_differ_and_flapping_ones_flip_on_their_schedule() {
        let dir = std::env::temp_dir().join(format!("ns-fleet-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let fleet = Fleet::create(template(40, 0.1), &dir).unwrap();
        let shapes: std::collections::BTreeSet<_> = fleet
            .machines
            .iter()
            .map(|m| m.shape.instance_type)
            .collect();
        assert!(shapes.len() > 1, "one shape for every machine: {shapes:?}");
        let ids: std::collections::BTreeSet<_> = fleet
            .machines
            .iter()
            .map(|m| m.system.machine_id.clone())
            .collect();
        assert_eq!(ids.len(), 40);
        let m = &fleet.machines[0];
        assert!(m.flaps);
        let meminfo = std::fs::read_to_string(m.dir.join("proc/meminfo")).unwrap();
        assert!(meminfo.contains(&format!(
            "MemTotal:       {:>8} kB",
            m.shape.memory_gib << 20
        )));
        // Over two periods a flapping node flips twice, a steady one never.
        let period = fleet.template.flap_period;
        let t = &fleet.template;
        let mut flips = 0;
        for s in 1..=120 {
            flips += fleet.flap_at(Duration::from_secs(s));
        }
        let flapping = fleet.machines.iter().filter(|m| m.flaps).count();
        assert_eq!(flapping, 4);
        assert!((flapping..=flapping * 2).contains(&flips), "{flips}");
        assert!(!fleet.machines[1].pressure_at(period * 3, t));
        let mut later = t.clone();
        later.flap_from = period * 10;
        assert!((0..600).all(|s| !m.pressure_at(Duration::from_secs(s), &later)));
        let pressured = fleet
            .machines
            .iter()
            .find(|m| m.pressure())
            .map(|m| std::fs::read_to_string(m.dir.join("proc/meminfo")).unwrap());
        if let Some(text) = pressured {
            assert!(text.contains(&format!("MemAvailable:   {PRESSURE_AVAILABLE_KIB:>8} kB")));
        }
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn the_seed_makes_the_same_fleet_and_each_node_its_own_jitter() {
        let dir = std::env::temp_dir().join(format!("ns-fleet-seed-{}", std::process::id()));
        let a = Fleet::create(template(5, 0.0), &dir.join("a")).unwrap();
        let b = Fleet::create(template(5, 0.0), &dir.join("b")).unwrap();
        for (x, y) in a.machines.iter().zip(&b.machines) {
            assert_eq!(x.system.machine_id, y.system.machine_id);
            assert_eq!(x.shape, y.shape);
        }
        let draws: Vec<f64> = (0..5).map(|i| a.random(i).unit()).collect();
        assert_eq!(
            draws,
            (0..5).map(|i| b.random(i).unit()).collect::<Vec<_>>()
        );
        let distinct: std::collections::BTreeSet<u64> = draws.iter().map(|d| d.to_bits()).collect();
        assert_eq!(distinct.len(), 5, "{draws:?}");
        let _ = std::fs::remove_dir_all(&dir);
    }
}
