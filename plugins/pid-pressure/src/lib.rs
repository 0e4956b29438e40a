//! The kubelet's `PIDPressureCondition` setter. As the kubelet's
//! `pidlimit.Stats` does, the limit is the smaller of
//! `/proc/sys/kernel/pid_max` and `/proc/sys/kernel/threads-max`, and the
//! tasks in use are the total of `/proc/loadavg`'s fourth field (or, when that
//! cannot be read, the process directories of `/proc`). There is PID pressure
//! when the PIDs available (limit - in use) are below `pidAvailable` (default
//! `10%` of the limit, or a count).
//!
//! Like the kubelet: a missing condition is created; the heartbeat is set on
//! every run; the transition time changes only on a flip; a new condition,
//! or a flip to True or False, records `NodeHasInsufficientPID` or `NodeHasSufficientPID`.
//! When an input cannot be read the status is Unknown, with the no-pressure
//! reason and a message naming the input.
use nodestatus_sdk::pressure::PressureCondition;
pub use nodestatus_sdk::pressure::{Outcome, Threshold};
use nodestatus_sdk::{Metadata, Node, Result, Setter, host};

/// The condition type.
pub const CONDITION: &str = "PIDPressure";
const PID_MAX: &str = "/proc/sys/kernel/pid_max";
const THREADS_MAX: &str = "/proc/sys/kernel/threads-max";
const LOADAVG: &str = "/proc/loadavg";

/// The plugin's config.
#[derive(serde::Deserialize, Debug, Clone, PartialEq, Eq)]
#[serde(default, rename_all = "camelCase")]
pub struct Config {
    /// Pressure below this many available PIDs: a count or a percentage of
    /// the limit.
    pub pid_available: String,
}

impl Default for Config {
    fn default() -> Self {
        Self {
            pid_available: "10%".into(),
        }
    }
}

/// The condition's reasons, messages and events.
pub const PRESSURE: PressureCondition = PressureCondition {
    condition: CONDITION,
    pressure_reason: "KubeletHasInsufficientPID",
    pressure_message: "kubelet has insufficient PID available",
    pressure_event: "NodeHasInsufficientPID",
    ok_reason: "KubeletHasSufficientPID",
    ok_message: "kubelet has sufficient PID available",
    ok_event: "NodeHasSufficientPID",
};

/// A number alone in a file (`pid_max`, `threads-max`).
pub fn parse_number(path: &str, text: &str) -> std::result::Result<u64, String> {
    text.trim()
        .parse()
        .map_err(|_| format!("{path} does not hold a number: {:?}", text.trim()))
}

/// The task limit: the smaller of `pid_max` and `threads-max`, either of
/// which may be missing (not both).
pub fn max_tasks(
    pid_max: std::result::Result<&str, String>,
    threads_max: std::result::Result<&str, String>,
) -> std::result::Result<u64, String> {
    let a = pid_max.and_then(|t| parse_number(PID_MAX, t));
    let b = threads_max.and_then(|t| parse_number(THREADS_MAX, t));
    match (a, b) {
        (Ok(a), Ok(b)) => Ok(a.min(b)),
        (Ok(a), Err(_)) => Ok(a),
        (Err(_), Ok(b)) => Ok(b),
        (Err(e), Err(_)) => Err(e),
    }
}

/// The kernel's task count: `/proc/loadavg`'s `running/total` total.
pub fn loadavg_tasks(text: &str) -> std::result::Result<u64, String> {
    text.split_whitespace()
        .nth(3)
        .and_then(|f| f.split_once('/'))
        .and_then(|(_, total)| total.parse().ok())
        .ok_or_else(|| format!("{LOADAVG} has no running/total field: {:?}", text.trim()))
}

/// Counts the process directories (all digits) among `/proc`'s entries.
pub fn count_processes<'a>(names: impl IntoIterator<Item = &'a str>) -> u64 {
    names
        .into_iter()
        .filter(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
        .count() as u64
}

/// The condition for this limit and task count (or the errors reading them).
pub fn evaluate(
    max: std::result::Result<u64, String>,
    in_use: std::result::Result<u64, String>,
    config: &Config,
) -> Result<Outcome> {
    let threshold = Threshold::parse("pidAvailable", &config.pid_available)?;
    let max = match max {
        Ok(m) => m,
        Err(e) => return Ok(PRESSURE.unknown(format!("cannot read the PID limit: {e}"))),
    };
    let in_use = match in_use {
        Ok(n) => n,
        Err(e) => return Ok(PRESSURE.unknown(format!("cannot count the tasks in use: {e}"))),
    };
    let available = u128::from(max.saturating_sub(in_use));
    Ok(PRESSURE.outcome(available < threshold.amount(max.into())))
}

fn read(path: &str) -> std::result::Result<String, String> {
    host::read_file(path).map_err(|e| e.to_string())
}

/// The setter (its [`Setter`](nodestatus_sdk::Setter) implementation is
/// what the component exports).
pub struct PidPressure;

impl Setter for PidPressure {
    fn metadata() -> Metadata {
        Metadata::new("pid-pressure", env!("CARGO_PKG_VERSION"))
            .description(
                "the kubelet's PIDPressure condition, from the kernel's task limits and count",
            )
            .path("/proc")
    }

    fn set(node: &mut Node) -> Result<()> {
        let config: Config = host::config()?;
        let (pid_max, threads_max) = (read(PID_MAX), read(THREADS_MAX));
        let max = max_tasks(
            pid_max.as_deref().map_err(Clone::clone),
            threads_max.as_deref().map_err(Clone::clone),
        );
        let in_use = read(LOADAVG).and_then(|t| loadavg_tasks(&t)).or_else(|e| {
            host::debug(&format!("{e}; counting /proc instead"));
            let entries = std::fs::read_dir("/proc").map_err(|e2| {
                format!(
                    "{e}; cannot list /proc: {}",
                    host::file_error("/proc", &e2).reason()
                )
            })?;
            let names: Vec<String> = entries
                .filter_map(|d| d.ok()?.file_name().into_string().ok())
                .collect();
            Ok::<u64, String>(count_processes(names.iter().map(String::as_str)))
        });
        let outcome = evaluate(max, in_use, &config)?;
        PRESSURE.set(node, &outcome);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use nodestatus_sdk::ConditionStatus;

    /// The development machine's `/proc/loadavg`, `pid_max` (32768) and
    /// `threads-max` (192731).
    const LOADAVG_FIXTURE: &str = include_str!("../tests/fixtures/loadavg");
    const PID_MAX_FIXTURE: &str = include_str!("../tests/fixtures/pid_max");
    const THREADS_MAX_FIXTURE: &str = include_str!("../tests/fixtures/threads-max");

    fn max() -> u64 {
        max_tasks(Ok(PID_MAX_FIXTURE), Ok(THREADS_MAX_FIXTURE)).unwrap()
    }

    fn in_use() -> u64 {
        loadavg_tasks(LOADAVG_FIXTURE).unwrap()
    }

    fn cfg(t: &str) -> Config {
        Config {
            pid_available: t.into(),
        }
    }

    #[test]
    fn inputs_are_parsed() {
        assert_eq!(max(), 32768);
        assert_eq!(max_tasks(Err("x".into()), Ok("100\n")).unwrap(), 100);
        assert!(max_tasks(Err("x".into()), Err("y".into())).is_err());
        assert_eq!(in_use(), 119);
        assert!(loadavg_tasks("0.1 0.2 0.3").is_err());
        assert_eq!(count_processes(["1", "42", "self", "sys", "net", "9x"]), 2);
    }

    #[test]
    fn true_and_false_across_the_threshold() {
        let o = evaluate(Ok(max()), Ok(in_use()), &Config::default()).unwrap();
        assert_eq!(o.status, ConditionStatus::False);
        assert_eq!(o.reason, "KubeletHasSufficientPID");
        assert_eq!(o.message, "kubelet has sufficient PID available");
        // 10% of 32768 is 3276: pressure once fewer than 3276 remain.
        let at = evaluate(Ok(32768), Ok(32768 - 3276), &Config::default()).unwrap();
        assert_eq!(at.status, ConditionStatus::False);
        let o = evaluate(Ok(32768), Ok(32768 - 3275), &Config::default()).unwrap();
        assert_eq!(o.status, ConditionStatus::True);
        assert_eq!(o.reason, "KubeletHasInsufficientPID");
        assert_eq!(o.message, "kubelet has insufficient PID available");
        // A count threshold.
        let avail = max() - in_use();
        assert_eq!(
            evaluate(Ok(max()), Ok(in_use()), &cfg(&avail.to_string()))
                .unwrap()
                .status,
            ConditionStatus::False
        );
        assert_eq!(
            evaluate(Ok(max()), Ok(in_use()), &cfg(&(avail + 1).to_string()))
                .unwrap()
                .status,
            ConditionStatus::True
        );
        // More tasks than the limit: none available.
        assert_eq!(
            evaluate(Ok(100), Ok(200), &Config::default())
                .unwrap()
                .status,
            ConditionStatus::True
        );
    }

    #[test]
    fn unknown_on_missing_input_and_errors_on_bad_config() {
        let o = evaluate(
            Err(format!("cannot read {PID_MAX}: denied")),
            Ok(1),
            &Config::default(),
        )
        .unwrap();
        assert_eq!(o.status, ConditionStatus::Unknown);
        assert_eq!(o.reason, "KubeletHasSufficientPID");
        assert!(o.message.contains(PID_MAX), "{}", o.message);
        let o = evaluate(
            Ok(1),
            Err(format!("cannot read {LOADAVG}: denied")),
            &Config::default(),
        )
        .unwrap();
        assert_eq!(o.status, ConditionStatus::Unknown);
        assert!(o.message.contains(LOADAVG), "{}", o.message);
        assert!(evaluate(Ok(1), Ok(1), &cfg("many")).is_err());
    }

    #[test]
    fn transition_time_kept_until_a_flip() {
        let ok = evaluate(Ok(max()), Ok(in_use()), &Config::default()).unwrap();
        let low = evaluate(Ok(max()), Ok(max() - 10), &Config::default()).unwrap();
        let unknown = evaluate(Err("gone".into()), Ok(in_use()), &Config::default()).unwrap();
        PRESSURE.assert_kubelet_transitions(&ok, &low, &unknown);
    }
}

nodestatus_sdk::export!(PidPressure);
