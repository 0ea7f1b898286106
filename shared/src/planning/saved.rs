//! Saved planning scenarios: what the API stores, lists and returns, and reading a scenario
//! saved by an older build (its schema version migrated on read).
//!
//! Invariants: a saved scenario is valid when saved; a stored one of an older version opens as
//! the current version, and says which version it came from.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::{
    common::error::FieldError,
    planning::scenario::{SCENARIO_VERSION, Scenario},
};

pub const MAX_NAME_CHARS: usize = 100;

/// The body of `POST /api/scenarios` and `PUT /api/scenarios/{id}`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ScenarioSave {
    pub name: String,
    pub scenario: Scenario,
}

impl ScenarioSave {
    /// The name's rule and the scenario's, each field named by its path (`scenario.fleet[0]…`).
    pub fn validate(&self) -> Result<(), Vec<FieldError>> {
        let mut errors = Vec::new();
        let name = self.name.trim();
        if name.is_empty() || name.chars().count() > MAX_NAME_CHARS {
            errors.push(FieldError {
                path: "name".into(),
                message: format!("give a name of 1 to {MAX_NAME_CHARS} characters"),
            });
        }
        if let Err(fields) = self.scenario.validate() {
            errors.extend(fields.into_iter().map(|f| FieldError {
                path: format!("scenario.{}", f.path),
                message: f.message,
            }));
        }
        if errors.is_empty() {
            Ok(())
        } else {
            Err(errors)
        }
    }
}

/// One saved scenario in the list.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SavedSummary {
    pub id: i64,
    pub name: String,
    /// The username of who saved it.
    pub owner: String,
    /// The schema version it is stored in.
    pub version: u32,
    /// RFC 3339, UTC.
    pub created_at: String,
    pub updated_at: String,
}

/// One saved scenario, opened.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SavedScenario {
    #[serde(flatten)]
    pub summary: SavedSummary,
    pub scenario: Scenario,
    /// The version it was stored in, when that was older than this build's (migrated on read).
    pub migrated_from: Option<u32>,
}

/// Reads a stored scenario of any version this build knows, as the current version.
/// Version 1 carried each accelerator's `mem_gib`, `vendor` and `mig`; version 2 takes them from
/// the catalogue. Versions 1 and 2 stated the quota's preemption as two switches
/// (`reclaim_within_cohort`: `Any` or `Never`; `preempt_lower_priority`: `LowerPriority` or
/// `Never`); version 3 names Kueue's values.
pub fn read_stored(mut value: Value) -> Result<(Scenario, Option<u32>), FieldError> {
    let version = value
        .get("version")
        .and_then(Value::as_u64)
        .and_then(|v| u32::try_from(v).ok())
        .ok_or_else(|| FieldError {
            path: "version".into(),
            message: "a stored scenario without a version".into(),
        })?;
    if version > SCENARIO_VERSION {
        return Err(FieldError {
            path: "version".into(),
            message: format!(
                "saved by a newer build (version {version}); this build reads up to {SCENARIO_VERSION}"
            ),
        });
    }
    if version == 1 {
        drop_catalogue_fields(&mut value);
    }
    if version <= 2 {
        name_preemption_policies(&mut value);
    }
    value["version"] = SCENARIO_VERSION.into();
    let scenario = crate::common::error::from_json::<Scenario>(&value.to_string())
        .map_err(|err| err.into_field_error())?;
    Ok((scenario, (version < SCENARIO_VERSION).then_some(version)))
}

/// Version 1 to 2: each accelerator's memory, vendor and MIG come from the catalogue.
fn drop_catalogue_fields(value: &mut Value) {
    let Some(fleet) = value.get_mut("fleet").and_then(Value::as_array_mut) else {
        return;
    };
    for accelerator in fleet.iter_mut().filter_map(Value::as_object_mut) {
        for gone in ["mem_gib", "vendor", "mig"] {
            accelerator.remove(gone);
        }
    }
}

/// Version 2 to 3: the quota's two preemption switches become Kueue's values.
fn name_preemption_policies(value: &mut Value) {
    let Some(quota) = value.get_mut("quota").and_then(Value::as_object_mut) else {
        return;
    };
    let switches = [
        ("reclaim_within_cohort", "reclaim_within_cohort", "Any"),
        (
            "preempt_lower_priority",
            "within_cluster_queue",
            "LowerPriority",
        ),
    ];
    for (switch, policy, on) in switches {
        let Some(was) = quota.remove(switch) else {
            continue;
        };
        let is = match was {
            Value::Bool(true) => on.into(),
            Value::Bool(false) => "Never".into(),
            // Anything else is left for the scenario's own check to name.
            other => other,
        };
        quota.insert(policy.into(), is);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{
        kueue::{Reclaim, WithinQueue},
        planning::scenario::bench_scenario,
    };

    #[test]
    fn a_version_1_scenario_opens_as_the_current_version() {
        let mut v1 = serde_json::to_value(bench_scenario()).expect("json");
        v1["version"] = 1.into();
        v1["quota"]["reclaim_within_cohort"] = true.into();
        v1["quota"]["preempt_lower_priority"] = true.into();
        v1["quota"]
            .as_object_mut()
            .expect("quota")
            .remove("within_cluster_queue");
        v1["fleet"][0]["mem_gib"] = 80.into();
        v1["fleet"][0]["vendor"] = "nvidia".into();
        v1["fleet"][0]["mig"] = true.into();
        let (scenario, from) = read_stored(v1).expect("migrates");
        assert_eq!(from, Some(1));
        assert_eq!(scenario, bench_scenario());
        let (same, from) =
            read_stored(serde_json::to_value(bench_scenario()).expect("json")).expect("reads");
        assert_eq!((same, from), (bench_scenario(), None));
    }

    #[test]
    fn a_version_2_scenario_has_its_switches_read_as_kueue_values() {
        let mut v2 = serde_json::to_value(bench_scenario()).expect("json");
        v2["version"] = 2.into();
        v2["quota"] = serde_json::json!({"cohort": true, "queueing": "strict_fifo",
            "reclaim_within_cohort": false, "preempt_lower_priority": true});
        let (scenario, from) = read_stored(v2.clone()).expect("migrates");
        assert_eq!(from, Some(2));
        assert_eq!(scenario.quota.reclaim_within_cohort, Reclaim::Never);
        assert_eq!(
            scenario.quota.within_cluster_queue,
            WithinQueue::LowerPriority
        );
        v2["quota"]["reclaim_within_cohort"] = true.into();
        v2["quota"]["preempt_lower_priority"] = false.into();
        let (scenario, _) = read_stored(v2.clone()).expect("migrates");
        assert_eq!(scenario.quota.reclaim_within_cohort, Reclaim::Any);
        assert_eq!(scenario.quota.within_cluster_queue, WithinQueue::Never);
        v2["quota"]["reclaim_within_cohort"] = "sometimes".into();
        let error = read_stored(v2).expect_err("not a switch");
        assert!(error.path.contains("reclaim_within_cohort"), "{error:?}");
    }

    #[test]
    fn a_newer_or_unversioned_scenario_is_refused_in_words() {
        let mut newer = serde_json::to_value(bench_scenario()).expect("json");
        newer["version"] = (SCENARIO_VERSION + 1).into();
        assert!(
            read_stored(newer)
                .expect_err("newer")
                .message
                .contains("newer build")
        );
        assert_eq!(
            read_stored(serde_json::json!({"name": "x"}))
                .expect_err("no version")
                .path,
            "version"
        );
    }

    #[test]
    fn names_and_scenarios_are_checked_with_paths() {
        let mut save = ScenarioSave {
            name: "  ".into(),
            scenario: bench_scenario(),
        };
        save.scenario.fleet[0].count = 0;
        let paths: Vec<String> = save
            .validate()
            .expect_err("invalid")
            .into_iter()
            .map(|f| f.path)
            .collect();
        assert_eq!(paths, ["name", "scenario.fleet[0].count"]);
        save.name = "x".repeat(MAX_NAME_CHARS + 1);
        save.scenario = bench_scenario();
        assert!(save.validate().is_err());
        save.name = "bank, tuned".into();
        assert!(save.validate().is_ok());
    }
}
