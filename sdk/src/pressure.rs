//! The kubelet's pressure conditions (`MemoryPressure`, `DiskPressure`,
//! `PIDPressure`): eviction thresholds, and setting the condition with the
//! kubelet's event when the condition appears or flips.
//!
//! A pressure setter describes its condition once as a [`PressureCondition`],
//! decides with its own inputs whether the node is under pressure, and lets
//! the description build the [`Outcome`] and [`apply`](PressureCondition::apply)
//! it:
//!
//! ```
//! use nodestatus_sdk::Node;
//! use nodestatus_sdk::pressure::{PressureCondition, Threshold};
//!
//! const PRESSURE: PressureCondition = PressureCondition {
//!     condition: "MemoryPressure",
//!     pressure_reason: "KubeletHasInsufficientMemory",
//!     pressure_message: "kubelet has insufficient memory available",
//!     pressure_event: "NodeHasInsufficientMemory",
//!     ok_reason: "KubeletHasSufficientMemory",
//!     ok_message: "kubelet has sufficient memory available",
//!     ok_event: "NodeHasSufficientMemory",
//! };
//!
//! let threshold = Threshold::parse("memoryAvailable", "10%").unwrap();
//! let (available, total) = (512u128, 1024u128);
//! let outcome = PRESSURE.outcome(available < threshold.amount(total));
//! let mut node = Node::named("n1");
//! // A new condition records its event, as the kubelet does.
//! assert_eq!(
//!     PRESSURE.apply(&mut node, &outcome, "2026-01-01T00:00:00Z"),
//!     Some(("NodeHasSufficientMemory", "Node n1 status is now: NodeHasSufficientMemory".into()))
//! );
//! ```
use crate::{ConditionStatus, Node, Quantity, Result};

/// An eviction threshold: an amount, or a percentage of a total.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Threshold {
    /// An amount: bytes, inodes or a count.
    Absolute(u128),
    /// Percent of the total, between 0 and 100.
    Percent(f64),
}

impl Threshold {
    /// Parses a quantity (`100Mi`, `5Gi`, `1k`, `1000`) or a percentage
    /// (`10%`). An error names `field`, the config field it came from.
    pub fn parse(field: &str, spec: &str) -> Result<Self, String> {
        if let Some(p) = Self::percentage(spec) {
            return p.map(Self::Percent).map_err(|e| format!("{field}: {e}"));
        }
        let spec = spec.trim();
        let q = Quantity::parse(spec).map_err(|e| format!("{field}: {e}"))?;
        u128::try_from(q.as_units_ceil())
            .map(Self::Absolute)
            .map_err(|_| format!("{field}: {spec:?} is negative"))
    }

    /// The percentage of a threshold written `N%` (space around it is
    /// ignored), between 0 and 100: `None` when `spec` is not a percentage,
    /// an error when it is one out of that range or not a number. For a
    /// caller that computes the amount its own way (machine-info, in float32
    /// as the kubelet's allocatable does).
    pub fn percentage(spec: &str) -> Option<Result<f64, String>> {
        let spec = spec.trim();
        let p = spec.strip_suffix('%')?;
        Some(
            p.trim()
                .parse::<f64>()
                .ok()
                .filter(|v| (0.0..=100.0).contains(v))
                .ok_or_else(|| format!("{spec:?} is not a percentage between 0% and 100%")),
        )
    }

    /// The threshold's amount for this total (the total matters only for a
    /// percentage; the fraction is dropped).
    pub fn amount(self, total: u128) -> u128 {
        match self {
            Self::Absolute(n) => n,
            Self::Percent(p) => (total as f64 * p / 100.0) as u128,
        }
    }
}

/// What a pressure condition should say.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Outcome {
    /// True under pressure, False without, Unknown when an input is missing.
    pub status: ConditionStatus,
    /// The condition's reason.
    pub reason: &'static str,
    /// The condition's message.
    pub message: String,
}

/// One of the kubelet's pressure conditions: its type, and the reasons,
/// messages and events it uses with and without pressure.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PressureCondition {
    /// The condition type, e.g. `MemoryPressure`.
    pub condition: &'static str,
    /// The reason under pressure, e.g. `KubeletHasInsufficientMemory`.
    pub pressure_reason: &'static str,
    /// The message under pressure.
    pub pressure_message: &'static str,
    /// The event when the condition appears with, or flips to, pressure,
    /// e.g. `NodeHasInsufficientMemory`.
    pub pressure_event: &'static str,
    /// The reason without pressure, e.g. `KubeletHasSufficientMemory`; also
    /// the reason of an Unknown status.
    pub ok_reason: &'static str,
    /// The message without pressure.
    pub ok_message: &'static str,
    /// The event when the condition appears without, or flips to no,
    /// pressure, e.g. `NodeHasSufficientMemory`.
    pub ok_event: &'static str,
}

impl PressureCondition {
    /// True with the pressure reason and message, or False with the
    /// no-pressure ones.
    pub fn outcome(&self, under_pressure: bool) -> Outcome {
        if under_pressure {
            Outcome {
                status: ConditionStatus::True,
                reason: self.pressure_reason,
                message: self.pressure_message.into(),
            }
        } else {
            Outcome {
                status: ConditionStatus::False,
                reason: self.ok_reason,
                message: self.ok_message.into(),
            }
        }
    }

    /// Unknown, as the kubelet says when an input cannot be read: the
    /// no-pressure reason, and `message` (which should name the input).
    pub fn unknown(&self, message: String) -> Outcome {
        Outcome {
            status: ConditionStatus::Unknown,
            reason: self.ok_reason,
            message,
        }
    }

    /// Sets the condition at `now` (heartbeat always, transition time only
    /// on a flip); returns the event to record, `(reason, message)`, when the
    /// status becomes True or False: a new condition (the kubelet's setter
    /// starts a missing one at Unknown and records the event for its first
    /// status), or a flip from another status. None for Unknown, which the
    /// kubelet's setters never write.
    pub fn apply(&self, node: &mut Node, o: &Outcome, now: &str) -> Option<(&'static str, String)> {
        let t = node.set_condition_at(self.condition, o.status, o.reason, &o.message, now);
        let event = match o.status {
            ConditionStatus::True => self.pressure_event,
            ConditionStatus::False => self.ok_event,
            ConditionStatus::Unknown => return None,
        };
        t.flipped.then(|| {
            (
                event,
                format!("Node {} status is now: {event}", node.name()),
            )
        })
    }

    /// What a pressure setter does with its outcome: [`apply`](Self::apply)
    /// it now, and record the event, if any, as a Normal event (the
    /// kubelet's type for these). Returns that event.
    pub fn set(&self, node: &mut Node, o: &Outcome) -> Option<(&'static str, String)> {
        let event = self.apply(node, o, &crate::condition_time());
        if let Some((reason, message)) = &event {
            crate::host::record_event(crate::EventType::Normal, reason, message);
        }
        event
    }
}

impl PressureCondition {
    /// For a pressure setter's tests: asserts the kubelet's transition rules
    /// with this condition's reasons and events, on outcomes the setter
    /// computed (`ok` without pressure, `pressure` with, `unknown` for a
    /// missing input). Panics with the first rule broken:
    /// - a new condition records the kubelet's event; the heartbeat moves on
    ///   every pass and the transition time only on a flip;
    /// - a flip to pressure, and back, records the kubelet's event;
    /// - a flip to Unknown moves the transition time and records no event;
    /// - the setter's part is the one condition, over a node that holds
    ///   others.
    pub fn assert_kubelet_transitions(&self, ok: &Outcome, pressure: &Outcome, unknown: &Outcome) {
        const T: [&str; 5] = [
            "2026-01-01T00:00:00Z",
            "2026-01-01T00:00:10Z",
            "2026-01-01T00:00:20Z",
            "2026-01-01T00:00:30Z",
            "2026-01-01T00:00:40Z",
        ];
        let mut node = Node::named("n1");
        let times = |node: &Node| {
            let c = node
                .condition(self.condition)
                .expect("the condition is set");
            (
                c.status,
                c.reason,
                c.last_heartbeat_time,
                c.last_transition_time,
            )
        };
        let s = |x: &str| Some(x.to_owned());

        assert_eq!(
            self.apply(&mut node, ok, T[0]).map(|e| e.0),
            Some(self.ok_event),
            "a new condition records its event"
        );
        assert_eq!(self.apply(&mut node, ok, T[1]), None, "no flip");
        assert_eq!(
            times(&node),
            ("False".into(), s(self.ok_reason), s(T[1]), s(T[0]))
        );

        let event = format!("Node n1 status is now: {}", self.pressure_event);
        assert_eq!(
            self.apply(&mut node, pressure, T[2]),
            Some((self.pressure_event, event))
        );
        assert_eq!(
            times(&node),
            ("True".into(), s(self.pressure_reason), s(T[2]), s(T[2]))
        );

        assert_eq!(
            self.apply(&mut node, ok, T[3]).map(|e| e.0),
            Some(self.ok_event)
        );

        assert_eq!(
            self.apply(&mut node, unknown, T[4]),
            None,
            "Unknown has no event"
        );
        assert_eq!(
            times(&node),
            ("Unknown".into(), s(self.ok_reason), s(T[4]), s(T[4]))
        );

        let mut node = Node::parse(
            r#"{"metadata":{"name":"n1","labels":{"a":"b"}},"status":{"conditions":[{"type":"Other","status":"True"}],"capacity":{"cpu":"1"}}}"#,
        )
        .expect("a node");
        self.apply(&mut node, ok, T[0]);
        let part = node.part();
        let types: Vec<_> = part["status"]["conditions"]
            .as_array()
            .map(|l| l.iter().map(|c| c["type"].clone()).collect())
            .unwrap_or_default();
        assert_eq!(
            (part.as_object().map(|p| p.len()), types),
            (Some(1), vec![serde_json::Value::from(self.condition)]),
            "the part is the one condition: {part}"
        );
        assert_eq!(part["status"].as_object().map(|s| s.len()), Some(1));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // The memory plugin's, by field kind.
    const MEMORY: PressureCondition = PressureCondition {
        condition: "MemoryPressure",
        ok_reason: "KubeletHasSufficientMemory",
        pressure_reason: "KubeletHasInsufficientMemory",
        ok_message: "kubelet has sufficient memory available",
        pressure_message: "kubelet has insufficient memory available",
        ok_event: "NodeHasSufficientMemory",
        pressure_event: "NodeHasInsufficientMemory",
    };

    #[test]
    fn the_transition_check_passes_the_rules_and_catches_a_wrong_outcome() {
        let (ok, low) = (MEMORY.outcome(false), MEMORY.outcome(true));
        let unknown = MEMORY.unknown("gone".into());
        MEMORY.assert_kubelet_transitions(&ok, &low, &unknown);
        let swapped = std::panic::catch_unwind(|| {
            MEMORY.assert_kubelet_transitions(&low, &ok, &unknown);
        });
        assert!(swapped.is_err(), "outcomes the wrong way round must fail");
    }

    #[test]
    fn threshold_parses_quantities_and_percentages() {
        assert_eq!(
            Threshold::parse("f", "100Mi"),
            Ok(Threshold::Absolute(100 * 1024 * 1024))
        );
        assert_eq!(
            Threshold::parse("f", "5Gi"),
            Ok(Threshold::Absolute(5 << 30))
        );
        assert_eq!(
            Threshold::parse("f", "100k"),
            Ok(Threshold::Absolute(100_000))
        );
        assert_eq!(Threshold::parse("f", "1000"), Ok(Threshold::Absolute(1000)));
        // Rounded up to a whole unit.
        assert_eq!(Threshold::parse("f", "1500m"), Ok(Threshold::Absolute(2)));
        assert_eq!(Threshold::parse("f", " 10% "), Ok(Threshold::Percent(10.0)));
        assert_eq!(Threshold::parse("f", "7.5 %"), Ok(Threshold::Percent(7.5)));
        assert_eq!(Threshold::parse("f", "0%"), Ok(Threshold::Percent(0.0)));
        assert_eq!(Threshold::parse("f", "100%"), Ok(Threshold::Percent(100.0)));
    }

    #[test]
    fn bad_thresholds_are_errors_naming_the_field() {
        for bad in [
            "lots", "ten", "many", "-1Mi", "120%", "101%", "-1%", "x%", "",
        ] {
            let e = Threshold::parse("memoryAvailable", bad).unwrap_err();
            assert!(e.starts_with("memoryAvailable: "), "{bad}: {e}");
        }
        assert_eq!(
            Threshold::parse("pidAvailable", "-1"),
            Err("pidAvailable: \"-1\" is negative".into())
        );
        assert_eq!(
            Threshold::parse("nodefsAvailable", "101%"),
            Err("nodefsAvailable: \"101%\" is not a percentage between 0% and 100%".into())
        );
    }

    #[test]
    fn percentages_apart_from_quantities() {
        assert_eq!(Threshold::percentage(" 10% "), Some(Ok(10.0)));
        assert_eq!(Threshold::percentage("7.5 %"), Some(Ok(7.5)));
        assert_eq!(Threshold::percentage("100Mi"), None);
        assert_eq!(Threshold::percentage("10"), None);
        assert_eq!(
            Threshold::percentage(" 150% "),
            Some(Err(
                "\"150%\" is not a percentage between 0% and 100%".into()
            ))
        );
        assert_eq!(
            Threshold::percentage("x%"),
            Some(Err("\"x%\" is not a percentage between 0% and 100%".into()))
        );
    }

    #[test]
    fn set_applies_now_and_returns_the_event() {
        let mut node = Node::named("n1");
        let before = crate::time::now();
        assert_eq!(
            MEMORY.set(&mut node, &MEMORY.outcome(false)),
            Some((
                "NodeHasSufficientMemory",
                "Node n1 status is now: NodeHasSufficientMemory".into()
            ))
        );
        let c = node.condition(MEMORY.condition).unwrap();
        let heartbeat = c.last_heartbeat_time.unwrap();
        assert!(
            heartbeat >= before && heartbeat <= crate::time::now(),
            "{heartbeat}"
        );
        assert_eq!(MEMORY.set(&mut node, &MEMORY.outcome(false)), None);
        assert_eq!(
            MEMORY.set(&mut node, &MEMORY.outcome(true)).map(|e| e.0),
            Some("NodeHasInsufficientMemory")
        );
    }

    #[test]
    fn threshold_amount() {
        assert_eq!(Threshold::Absolute(42).amount(1000), 42);
        assert_eq!(Threshold::Absolute(42).amount(0), 42);
        assert_eq!(Threshold::Percent(10.0).amount(32768), 3276);
        assert_eq!(Threshold::Percent(50.0).amount(0), 0);
        assert_eq!(Threshold::Percent(100.0).amount(1000), 1000);
    }

    #[test]
    fn outcomes() {
        assert_eq!(
            MEMORY.outcome(true),
            Outcome {
                status: ConditionStatus::True,
                reason: "KubeletHasInsufficientMemory",
                message: "kubelet has insufficient memory available".into(),
            }
        );
        assert_eq!(
            MEMORY.outcome(false),
            Outcome {
                status: ConditionStatus::False,
                reason: "KubeletHasSufficientMemory",
                message: "kubelet has sufficient memory available".into(),
            }
        );
        assert_eq!(
            MEMORY.unknown("cannot read /proc/meminfo".into()),
            Outcome {
                status: ConditionStatus::Unknown,
                reason: "KubeletHasSufficientMemory",
                message: "cannot read /proc/meminfo".into(),
            }
        );
    }

    #[test]
    fn events_when_a_condition_appears_or_flips() {
        let (ok, low, gone) = (
            MEMORY.outcome(false),
            MEMORY.outcome(true),
            MEMORY.unknown("gone".into()),
        );
        // (outcome, now, event, status after, transition time after)
        let steps = [
            (
                &ok,
                "00:00",
                Some("NodeHasSufficientMemory"),
                "False",
                "00:00",
            ),
            (&ok, "00:10", None, "False", "00:00"),
            (
                &low,
                "00:20",
                Some("NodeHasInsufficientMemory"),
                "True",
                "00:20",
            ),
            (&low, "00:25", None, "True", "00:20"),
            (
                &ok,
                "00:30",
                Some("NodeHasSufficientMemory"),
                "False",
                "00:30",
            ),
            (&gone, "00:40", None, "Unknown", "00:40"),
            (
                &low,
                "00:50",
                Some("NodeHasInsufficientMemory"),
                "True",
                "00:50",
            ),
        ];
        let mut node = Node::named("n1");
        for (o, now, event, status, transition) in steps {
            let at = |t: &str| format!("2026-01-01T00:{t}Z");
            let expected = event.map(|e| (e, format!("Node n1 status is now: {e}")));
            assert_eq!(MEMORY.apply(&mut node, o, &at(now)), expected, "{now}");
            let c = node.condition(MEMORY.condition).unwrap();
            assert_eq!(
                (c.status.as_str(), c.reason.as_deref(), c.message.as_deref()),
                (status, Some(o.reason), Some(o.message.as_str())),
                "{now}"
            );
            assert_eq!(c.last_heartbeat_time, Some(at(now)), "{now}");
            assert_eq!(c.last_transition_time, Some(at(transition)), "{now}");
        }
        // A new condition that starts under pressure records the pressure
        // event (the kubelet's setter: Unknown at first, then True).
        let mut fresh = Node::named("n2");
        assert_eq!(
            MEMORY.apply(&mut fresh, &low, "2026-01-01T00:00:00Z"),
            Some((
                "NodeHasInsufficientMemory",
                "Node n2 status is now: NodeHasInsufficientMemory".into()
            ))
        );
        // A new condition that starts Unknown (an input cannot be read)
        // records nothing; its first True or False then does.
        let mut unread = Node::named("n3");
        assert_eq!(
            MEMORY.apply(&mut unread, &gone, "2026-01-01T00:00:00Z"),
            None
        );
        assert_eq!(
            MEMORY
                .apply(&mut unread, &ok, "2026-01-01T00:00:10Z")
                .map(|e| e.0),
            Some("NodeHasSufficientMemory")
        );
    }
}
