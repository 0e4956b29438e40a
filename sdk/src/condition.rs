//! Node conditions.

use std::fmt;

/// `True`, `False` or `Unknown`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ConditionStatus {
    /// The condition holds.
    True,
    /// It does not.
    False,
    /// It cannot be told.
    Unknown,
}

impl ConditionStatus {
    /// The API's spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::True => "True",
            Self::False => "False",
            Self::Unknown => "Unknown",
        }
    }

    /// `True` when `b`, else `False`.
    pub fn from_bool(b: bool) -> Self {
        if b { Self::True } else { Self::False }
    }
}

impl fmt::Display for ConditionStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl std::str::FromStr for ConditionStatus {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "True" => Ok(Self::True),
            "False" => Ok(Self::False),
            "Unknown" => Ok(Self::Unknown),
            _ => Err(format!("{s:?} is not True, False or Unknown")),
        }
    }
}

/// A node condition as the API has it.
#[derive(Debug, Clone, PartialEq, Eq, serde::Deserialize, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Condition {
    /// `Ready`, `MemoryPressure`, ...
    #[serde(rename = "type")]
    pub type_: String,
    /// `True`, `False` or `Unknown`.
    pub status: String,
    /// Last time the condition was reported.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_heartbeat_time: Option<String>,
    /// Last time the status changed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_transition_time: Option<String>,
    /// UpperCamelCase reason.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// Human-readable message.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
}

/// What [`crate::Node::set_condition`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Transition {
    /// The status before, `None` for a new condition.
    pub previous: Option<ConditionStatus>,
    /// The status now.
    pub current: ConditionStatus,
    /// Whether the status changed (a new condition counts as a change).
    pub flipped: bool,
}
