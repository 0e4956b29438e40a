//! The kubelet's `MemoryPressureCondition` setter. There is memory pressure
//! when `MemAvailable` of `/proc/meminfo` is below `memoryAvailable` (the
//! kubelet's hard eviction threshold `memory.available`, default `100Mi`; a
//! percentage is of `MemTotal`).
//!
//! Like the kubelet: a missing condition is created; the heartbeat is set on
//! every run; the transition time changes only on a flip; a new condition,
//! or a flip to True or False, records `NodeHasInsufficientMemory` or
//! `NodeHasSufficientMemory`. When `/proc/meminfo` cannot be read the status
//! is Unknown, with the no-pressure reason and a message naming the input.
use nodestatus_sdk::pressure::PressureCondition;
pub use nodestatus_sdk::pressure::{Outcome, Threshold};
use nodestatus_sdk::{Metadata, Node, Result, Setter, host};

/// The condition type.
pub const CONDITION: &str = "MemoryPressure";
const MEMINFO: &str = "/proc/meminfo";

/// The plugin's config.
#[derive(serde::Deserialize, Debug, Clone, PartialEq, Eq)]
#[serde(default, rename_all = "camelCase")]
pub struct Config {
    /// Pressure below this: a quantity (`100Mi`) or a percentage of MemTotal.
    pub memory_available: String,
}

impl Default for Config {
    fn default() -> Self {
        Self {
            memory_available: "100Mi".into(),
        }
    }
}

/// The condition's reasons, messages and events.
pub const PRESSURE: PressureCondition = PressureCondition {
    condition: CONDITION,
    pressure_reason: "KubeletHasInsufficientMemory",
    pressure_message: "kubelet has insufficient memory available",
    pressure_event: "NodeHasInsufficientMemory",
    ok_reason: "KubeletHasSufficientMemory",
    ok_message: "kubelet has sufficient memory available",
    ok_event: "NodeHasSufficientMemory",
};

/// The condition for this `/proc/meminfo` (or the error reading it).
pub fn evaluate(meminfo: std::result::Result<&str, String>, config: &Config) -> Result<Outcome> {
    let threshold = Threshold::parse("memoryAvailable", &config.memory_available)?;
    let meminfo = match meminfo {
        Ok(m) => m,
        Err(e) => return Ok(PRESSURE.unknown(format!("cannot read {MEMINFO}: {e}"))),
    };
    let Some(available) = host::meminfo_field(meminfo, "MemAvailable") else {
        return Ok(PRESSURE.unknown(format!("{MEMINFO} has no MemAvailable")));
    };
    let total = match threshold {
        Threshold::Absolute(_) => 0,
        Threshold::Percent(_) => match host::meminfo_field(meminfo, "MemTotal") {
            Some(t) => t,
            None => return Ok(PRESSURE.unknown(format!("{MEMINFO} has no MemTotal"))),
        },
    };
    Ok(PRESSURE.outcome(u128::from(available) < threshold.amount(total.into())))
}

/// The setter (its [`Setter`](nodestatus_sdk::Setter) implementation is
/// what the component exports).
pub struct MemoryPressure;

impl Setter for MemoryPressure {
    fn metadata() -> Metadata {
        Metadata::new("memory-pressure", env!("CARGO_PKG_VERSION"))
            .description("the kubelet's MemoryPressure condition, from /proc/meminfo")
            .path("/proc")
    }

    fn set(node: &mut Node) -> Result<()> {
        let config: Config = host::config()?;
        let text = host::read_file(MEMINFO).map_err(|e| e.reason());
        let outcome = evaluate(text.as_deref().map_err(Clone::clone), &config)?;
        PRESSURE.set(node, &outcome);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use nodestatus_sdk::ConditionStatus;

    /// `/proc/meminfo` of the development machine: MemTotal 24684096 kB,
    /// MemAvailable 22830212 kB.
    const MEMINFO_FIXTURE: &str = include_str!("../tests/fixtures/meminfo");
    const AVAILABLE_KB: u64 = 22_830_212;

    fn cfg(t: &str) -> Config {
        Config {
            memory_available: t.into(),
        }
    }

    #[test]
    fn fixture_is_read() {
        assert_eq!(
            host::meminfo_field(MEMINFO_FIXTURE, "MemAvailable"),
            Some(AVAILABLE_KB * 1024)
        );
    }

    #[test]
    fn true_and_false_across_the_threshold() {
        let at = format!("{}Ki", AVAILABLE_KB);
        let above = format!("{}Ki", AVAILABLE_KB + 1);
        let o = evaluate(Ok(MEMINFO_FIXTURE), &Config::default()).unwrap();
        assert_eq!(o.status, ConditionStatus::False);
        assert_eq!(o.reason, "KubeletHasSufficientMemory");
        assert_eq!(o.message, "kubelet has sufficient memory available");
        // available == threshold: not below it.
        let o = evaluate(Ok(MEMINFO_FIXTURE), &cfg(&at)).unwrap();
        assert_eq!(o.status, ConditionStatus::False);
        let o = evaluate(Ok(MEMINFO_FIXTURE), &cfg(&above)).unwrap();
        assert_eq!(o.status, ConditionStatus::True);
        assert_eq!(o.reason, "KubeletHasInsufficientMemory");
        assert_eq!(o.message, "kubelet has insufficient memory available");
        // 22830212 / 24684096 = 92.5%
        assert_eq!(
            evaluate(Ok(MEMINFO_FIXTURE), &cfg("92%")).unwrap().status,
            ConditionStatus::False
        );
        assert_eq!(
            evaluate(Ok(MEMINFO_FIXTURE), &cfg("93%")).unwrap().status,
            ConditionStatus::True
        );
    }

    #[test]
    fn unknown_on_missing_input() {
        let o = evaluate(Err("No such file or directory".into()), &Config::default()).unwrap();
        assert_eq!(o.status, ConditionStatus::Unknown);
        assert_eq!(o.reason, "KubeletHasSufficientMemory");
        assert!(o.message.contains("/proc/meminfo"), "{}", o.message);
        let o = evaluate(Ok("MemTotal: 1 kB\n"), &Config::default()).unwrap();
        assert_eq!(o.status, ConditionStatus::Unknown);
        assert!(o.message.contains("MemAvailable"));
    }

    #[test]
    fn bad_threshold_is_an_error() {
        for bad in ["lots", "-1Mi", "120%"] {
            assert!(evaluate(Ok(MEMINFO_FIXTURE), &cfg(bad)).is_err(), "{bad}");
        }
    }

    #[test]
    fn transition_time_kept_until_a_flip() {
        let ok = evaluate(Ok(MEMINFO_FIXTURE), &Config::default()).unwrap();
        let low = evaluate(Ok(MEMINFO_FIXTURE), &cfg("1Ti")).unwrap();
        let unknown = evaluate(Err("gone".into()), &Config::default()).unwrap();
        PRESSURE.assert_kubelet_transitions(&ok, &low, &unknown);
    }
}

nodestatus_sdk::export!(MemoryPressure);
