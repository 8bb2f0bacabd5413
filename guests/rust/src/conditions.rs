//! Status conditions in the shape of `metav1.Condition`. The helpers agree with those of
//! `k8s.io/apimachinery/pkg/api/meta` (checked against its vectors in `guests/vectors`), except
//! that setting a condition gives an empty `reason` one.
//!
//! ```
//! use kubewasm_guest::conditions::{set_condition, Condition, ConditionStatus};
//!
//! let mut conditions: Vec<Condition> = Vec::new();
//! set_condition(&mut conditions, "Ready", ConditionStatus::True, "ChildrenApplied", "", Some(2));
//! assert_eq!(conditions[0].status, ConditionStatus::True);
//! ```

use std::time::{SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};

/// The status of a condition.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum ConditionStatus {
    /// The condition holds.
    True,
    /// The condition does not hold.
    False,
    /// The controller cannot tell.
    Unknown,
}

impl From<bool> for ConditionStatus {
    fn from(holds: bool) -> Self {
        if holds {
            ConditionStatus::True
        } else {
            ConditionStatus::False
        }
    }
}

/// One condition, serialised like `metav1.Condition`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Condition {
    /// The condition's type, CamelCase (`Ready`).
    #[serde(rename = "type")]
    pub type_: String,
    /// Whether it holds.
    pub status: ConditionStatus,
    /// The `metadata.generation` the condition was computed from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    /// When `status` last changed (RFC 3339, seconds).
    #[serde(default)]
    pub last_transition_time: String,
    /// Machine-readable CamelCase reason for the last transition.
    #[serde(default)]
    pub reason: String,
    /// Human-readable details (may be empty).
    #[serde(default)]
    pub message: String,
}

/// The condition of type `type_`, if present.
pub fn find_condition<'a>(conditions: &'a [Condition], type_: &str) -> Option<&'a Condition> {
    conditions.iter().find(|c| c.type_ == type_)
}

/// Adds or updates the condition of type `type_`; returns whether anything changed.
///
/// `lastTransitionTime` is set to now when the condition is new or its status changes, and is
/// kept otherwise (so re-applying the same status is a no-op for the API server). An empty
/// `reason` becomes `Unspecified`, since the API requires one.
pub fn set_condition(
    conditions: &mut Vec<Condition>,
    type_: &str,
    status: ConditionStatus,
    reason: &str,
    message: &str,
    observed_generation: Option<i64>,
) -> bool {
    set_status_condition(
        conditions,
        Condition {
            type_: type_.to_owned(),
            status,
            observed_generation,
            last_transition_time: String::new(),
            reason: reason.to_owned(),
            message: message.to_owned(),
        },
    )
}

/// Adds `condition`, or updates the condition of its type; returns whether anything changed.
///
/// As in `meta.SetStatusCondition`, `lastTransitionTime` is kept while the status holds (so
/// re-applying the same status is a no-op for the API server); when the condition is new or its
/// status changes, it becomes the one in `condition`, or now when that is empty. An empty
/// `reason` becomes `Unspecified`, since the API requires one.
pub fn set_status_condition(conditions: &mut Vec<Condition>, mut condition: Condition) -> bool {
    if condition.reason.is_empty() {
        condition.reason = "Unspecified".to_owned();
    }
    if condition.last_transition_time.is_empty() {
        condition.last_transition_time = now_rfc3339();
    }
    let Some(existing) = conditions.iter_mut().find(|c| c.type_ == condition.type_) else {
        conditions.push(condition);
        return true;
    };
    if existing.status == condition.status && !existing.last_transition_time.is_empty() {
        condition.last_transition_time = existing.last_transition_time.clone();
    }
    let changed = *existing != condition;
    *existing = condition;
    changed
}

/// Whether the condition of type `type_` is present with status `True`.
pub fn is_condition_true(conditions: &[Condition], type_: &str) -> bool {
    is_condition_present_and_equal(conditions, type_, ConditionStatus::True)
}

/// Whether the condition of type `type_` is present with status `False`.
pub fn is_condition_false(conditions: &[Condition], type_: &str) -> bool {
    is_condition_present_and_equal(conditions, type_, ConditionStatus::False)
}

/// Whether the condition of type `type_` is present with this status.
pub fn is_condition_present_and_equal(
    conditions: &[Condition],
    type_: &str,
    status: ConditionStatus,
) -> bool {
    find_condition(conditions, type_).is_some_and(|c| c.status == status)
}

/// Removes the condition of type `type_`; returns whether it was present.
pub fn remove_condition(conditions: &mut Vec<Condition>, type_: &str) -> bool {
    let before = conditions.len();
    conditions.retain(|c| c.type_ != type_);
    conditions.len() != before
}

/// The current time as RFC 3339 in UTC with second precision, as Kubernetes prints
/// `metav1.Time` (`2024-05-01T12:00:00Z`). Uses the WASI wall clock inside a guest.
pub fn now_rfc3339() -> String {
    rfc3339(SystemTime::now())
}

/// `time` as RFC 3339 in UTC with second precision; times before 1970 print as the epoch.
pub fn rfc3339(time: SystemTime) -> String {
    let secs = time.duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs());
    let (days, rem) = (secs / 86_400, secs % 86_400);
    let (year, month, day) = civil_from_days(days);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}Z",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

/// Proleptic Gregorian date of a day count since 1970-01-01 (Howard Hinnant's algorithm).
fn civil_from_days(days: u64) -> (u64, u64, u64) {
    let z = days + 719_468;
    let era = z / 146_097;
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + u64::from(month <= 2);
    (year, month, day)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn formats_rfc3339() {
        assert_eq!(rfc3339(UNIX_EPOCH), "1970-01-01T00:00:00Z");
        assert_eq!(
            rfc3339(UNIX_EPOCH + Duration::from_secs(951_782_400)),
            "2000-02-29T00:00:00Z"
        );
        assert_eq!(
            rfc3339(UNIX_EPOCH + Duration::from_millis(1_714_564_800_999)),
            "2024-05-01T12:00:00Z"
        );
        assert_eq!(
            rfc3339(UNIX_EPOCH + Duration::from_secs(4_102_444_799)),
            "2099-12-31T23:59:59Z"
        );
        assert_eq!(now_rfc3339().len(), 20);
    }

    #[test]
    fn keeps_transition_time_while_status_holds() {
        let mut conditions = vec![Condition {
            type_: "Ready".into(),
            status: ConditionStatus::True,
            observed_generation: Some(1),
            last_transition_time: "2020-01-01T00:00:00Z".into(),
            reason: "Ok".into(),
            message: String::new(),
        }];
        assert!(!set_condition(
            &mut conditions,
            "Ready",
            ConditionStatus::True,
            "Ok",
            "",
            Some(1)
        ));
        assert!(set_condition(
            &mut conditions,
            "Ready",
            true.into(),
            "Ok",
            "newer",
            Some(2)
        ));
        assert_eq!(conditions[0].last_transition_time, "2020-01-01T00:00:00Z");
        assert_eq!(conditions[0].observed_generation, Some(2));
        assert!(set_condition(
            &mut conditions,
            "Ready",
            false.into(),
            "",
            "",
            Some(2)
        ));
        assert_ne!(conditions[0].last_transition_time, "2020-01-01T00:00:00Z");
        assert_eq!(conditions[0].reason, "Unspecified");
        assert!(set_condition(
            &mut conditions,
            "Synced",
            ConditionStatus::Unknown,
            "Wait",
            "",
            None
        ));
        assert_eq!(conditions.len(), 2);
        assert_eq!(
            find_condition(&conditions, "Synced").unwrap().status,
            ConditionStatus::Unknown
        );
        assert!(remove_condition(&mut conditions, "Synced"));
        assert!(!remove_condition(&mut conditions, "Synced"));
    }

    #[test]
    fn round_trips_api_json() {
        let json = serde_json::json!({"type": "Ready", "status": "False", "observedGeneration": 4,
            "lastTransitionTime": "2024-05-01T12:00:00Z", "reason": "Failed", "message": "m"});
        let condition: Condition = serde_json::from_value(json.clone()).unwrap();
        assert_eq!(condition.status, ConditionStatus::False);
        assert_eq!(serde_json::to_value(condition).unwrap(), json);
    }
}
