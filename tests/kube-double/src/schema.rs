//! The real CRD schemas, read the way the API server reads them: structural validation of the
//! OpenAPI v3 subset CRDs use, the CEL rules of the Kueue kinds (checked one by one: no CEL
//! interpreter here), and the field sets server-side apply tracks (list types and map types
//! decide what one field is).

use std::collections::BTreeSet;

use serde_json::{Map, Value};

/// One CRD: its group, kind, scope and the `openAPIV3Schema` of each served version.
#[derive(Debug, Clone)]
pub struct Crd {
    pub group: String,
    pub kind: String,
    pub namespaced: bool,
    pub versions: Map<String, Value>,
}

impl Crd {
    /// The resource's plural name, as Kubernetes derives it for these kinds.
    pub fn plural(&self) -> String {
        let lower = self.kind.to_lowercase();
        if lower.ends_with('s') {
            format!("{lower}es")
        } else {
            format!("{lower}s")
        }
    }

    pub fn schema(&self, version: &str) -> Option<&Value> {
        self.versions.get(version)
    }
}

macro_rules! crd_file {
    ($name:literal) => {
        include_str!(concat!("../crds/", $name, ".json"))
    };
}

/// The Kueue CRDs (v0.19.2; the console only reads Workloads, which tests write as Kueue
/// would) and KEDA's ScaledObject (v2.20.2), from `tests/kube-double/crds/` (see its
/// README for the source).
pub fn crds() -> Vec<Crd> {
    [
        crd_file!("resourceflavor"),
        crd_file!("cohort"),
        crd_file!("clusterqueue"),
        crd_file!("localqueue"),
        crd_file!("workloadpriorityclass"),
        crd_file!("workload"),
        crd_file!("scaledobject"),
    ]
    .iter()
    .map(|text| {
        let v: Value = serde_json::from_str(text).unwrap_or(Value::Null);
        Crd {
            group: v["group"].as_str().unwrap_or_default().to_owned(),
            kind: v["kind"].as_str().unwrap_or_default().to_owned(),
            namespaced: v["scope"] == "Namespaced",
            versions: v["versions"].as_object().cloned().unwrap_or_default(),
        }
    })
    .collect()
}

/// One reason the API server refuses an object, in its own words.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cause {
    /// `FieldValueInvalid`, `FieldValueRequired`, `FieldValueNotSupported`, …
    pub reason: &'static str,
    pub field: String,
    pub message: String,
}

impl Cause {
    fn new(reason: &'static str, field: &str, message: String) -> Self {
        Self {
            reason,
            field: field.to_owned(),
            message,
        }
    }
}

fn type_name(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(n) if n.is_f64() => "number",
        Value::Number(_) => "integer",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

/// Go's quoting of a value in a message: strings quoted, the rest as JSON.
fn shown(value: &Value) -> String {
    match value {
        Value::String(s) => format!("{s:?}"),
        other => other.to_string(),
    }
}

/// A structural OpenAPI v3 check of the subset CRDs use (type, properties, required, items,
/// enum, pattern, minimum, maximum, maxItems, minItems, maxLength, minLength,
/// additionalProperties, x-kubernetes-int-or-string, x-kubernetes-preserve-unknown-fields).
/// Unknown fields are refused, as the API server does under strict field validation.
/// `path` is the field path so far (`spec.resourceGroups[0]`); the object's root is `""`.
/// Structural defaulting, as the API server does for a CRD: each property missing from an
/// object whose schema gives a `default` gets it, then its properties are defaulted in turn
/// (so `flavorFungibility: {}` gains `whenCanBorrow: MayStopSearch`), and so are list items.
pub fn default(schema: &Value, value: &mut Value) {
    match value {
        Value::Object(map) => {
            let Some(properties) = schema.get("properties").and_then(Value::as_object) else {
                return;
            };
            for (key, property) in properties {
                if let (None, Some(default)) = (map.get(key), property.get("default")) {
                    map.insert(key.clone(), default.clone());
                }
                if let Some(child) = map.get_mut(key) {
                    self::default(property, child);
                }
            }
        }
        Value::Array(items) => {
            if let Some(item) = schema.get("items") {
                items.iter_mut().for_each(|v| self::default(item, v));
            }
        }
        _ => {}
    }
}

pub fn validate(schema: &Value, value: &Value, path: &str, causes: &mut Vec<Cause>) {
    let Some(schema) = schema.as_object() else {
        return;
    };
    let here = if path.is_empty() { "<root>" } else { path };
    if schema.get("x-kubernetes-int-or-string") == Some(&Value::Bool(true)) {
        if !(value.is_i64() || value.is_u64() || value.is_string()) {
            causes.push(Cause::new(
                "FieldValueInvalid",
                here,
                format!(
                    "Invalid value: {:?}: {here} in body must be of type integer,string: {:?}",
                    type_name(value),
                    type_name(value)
                ),
            ));
            return;
        }
    } else {
        let kind = schema.get("type").and_then(Value::as_str);
        let type_ok = match kind {
            Some("object") => value.is_object(),
            Some("array") => value.is_array(),
            Some("string") => value.is_string(),
            Some("integer") => value.is_i64() || value.is_u64(),
            Some("number") => value.is_number(),
            Some("boolean") => value.is_boolean(),
            _ => true,
        };
        if !type_ok {
            causes.push(Cause::new(
                "FieldValueTypeInvalid",
                here,
                format!(
                    "Invalid value: {:?}: {here} in body must be of type {}: {:?}",
                    type_name(value),
                    kind.unwrap_or_default(),
                    type_name(value)
                ),
            ));
            return;
        }
    }
    if let Some(options) = schema.get("enum").and_then(Value::as_array)
        && !options.contains(value)
    {
        let supported: Vec<String> = options.iter().map(shown).collect();
        causes.push(Cause::new(
            "FieldValueNotSupported",
            here,
            format!(
                "Unsupported value: {}: supported values: {}",
                shown(value),
                supported.join(", ")
            ),
        ));
    }
    if let Some(n) = value.as_f64() {
        if let Some(min) = schema.get("minimum").and_then(Value::as_f64)
            && n < min
        {
            causes.push(Cause::new(
                "FieldValueInvalid",
                here,
                format!("Invalid value: {value}: {here} in body should be greater than or equal to {min}"),
            ));
        }
        if let Some(max) = schema.get("maximum").and_then(Value::as_f64)
            && n > max
        {
            causes.push(Cause::new(
                "FieldValueInvalid",
                here,
                format!(
                    "Invalid value: {value}: {here} in body should be less than or equal to {max}"
                ),
            ));
        }
    }
    if let Some(s) = value.as_str() {
        let len = s.chars().count() as u64;
        if let Some(max) = schema.get("maxLength").and_then(Value::as_u64)
            && len > max
        {
            causes.push(Cause::new(
                "FieldValueTooLong",
                here,
                format!("Too long: may not be more than {max} bytes"),
            ));
        }
        if let Some(min) = schema.get("minLength").and_then(Value::as_u64)
            && len < min
        {
            causes.push(Cause::new(
                "FieldValueInvalid",
                here,
                format!("Invalid value: {s:?}: {here} in body should be at least {min} chars long"),
            ));
        }
        if let Some(pattern) = schema.get("pattern").and_then(Value::as_str) {
            let matches = regex::Regex::new(pattern).map(|re| re.is_match(s));
            if matches == Ok(false) {
                causes.push(Cause::new(
                    "FieldValueInvalid",
                    here,
                    format!("Invalid value: {s:?}: {here} in body should match '{pattern}'"),
                ));
            }
        }
    }
    if let Some(items) = value.as_array() {
        let len = items.len() as u64;
        if let Some(max) = schema.get("maxItems").and_then(Value::as_u64)
            && len > max
        {
            causes.push(Cause::new(
                "FieldValueTooMany",
                here,
                format!("Too many: {len}: must have at most {max} items"),
            ));
        }
        if let Some(min) = schema.get("minItems").and_then(Value::as_u64)
            && len < min
        {
            causes.push(Cause::new(
                "FieldValueInvalid",
                here,
                format!("Invalid value: {len}: {here} in body should have at least {min} items"),
            ));
        }
        if let Some(item_schema) = schema.get("items") {
            for (i, item) in items.iter().enumerate() {
                validate(item_schema, item, &format!("{path}[{i}]"), causes);
            }
        }
    }
    if let Some(map) = value.as_object() {
        for key in schema
            .get("required")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
        {
            if !map.contains_key(key) {
                causes.push(Cause::new(
                    "FieldValueRequired",
                    &join(path, key),
                    "Required value".to_owned(),
                ));
            }
        }
        let properties = schema.get("properties").and_then(Value::as_object);
        let preserve =
            schema.get("x-kubernetes-preserve-unknown-fields") == Some(&Value::Bool(true));
        for (key, v) in map {
            match (
                properties.and_then(|p| p.get(key)),
                schema.get("additionalProperties"),
            ) {
                (Some(sub), _) => validate(sub, v, &join(path, key), causes),
                (None, Some(extra)) if extra.is_object() => {
                    validate(extra, v, &join(path, key), causes)
                }
                (None, _) if preserve || properties.is_none() => {}
                (None, _) => causes.push(Cause::new(
                    "FieldValueInvalid",
                    &format!(".{}", join(path, key)),
                    "field not declared in schema".to_owned(),
                )),
            }
        }
    }
}

fn join(path: &str, key: &str) -> String {
    if path.is_empty() {
        key.to_owned()
    } else {
        format!("{path}.{key}")
    }
}

/// The CEL rules (`x-kubernetes-validations`) of the Kueue kinds, each checked by hand with the
/// CRD's own message. `old` is the stored object on an update (transition rules).
///
/// Checked: ClusterQueue "borrowingLimit must be nil when cohort is empty" (`cohortName` in
/// v1beta2, `cohort` in v1beta1), "flavors must have the same number of resources as the
/// coveredResources" (ClusterQueue and Cohort), the preemption rule on `reclaimWithinCohort:
/// Never`, the flavorFungibility preference rule; ResourceFlavor's taint effects, its two
/// toleration rules and "at least one nodeLabel is required when topology is set"; LocalQueue
/// "field is immutable" on `spec.clusterQueue`. Not checked: ResourceFlavor's nodeLabels
/// immutability under a topology (gpufleet sets no topology).
pub fn cel(kind: &str, version: &str, object: &Value, old: Option<&Value>) -> Vec<Cause> {
    let spec = &object["spec"];
    let mut causes = Vec::new();
    // As kube-apiserver 1.36 words a CEL rule's failure: a scalar's value is shown, an object's
    // or a list's is not (`Invalid value: borrowingLimit must be nil …`), as the real server
    // answers in backend/tests/it/real_cluster.rs.
    let mut fail = |field: &str, scalar: Option<&Value>, message: &str| {
        let shown = scalar.map_or_else(String::new, |v| format!("{v}: "));
        causes.push(Cause::new(
            "FieldValueInvalid",
            field,
            format!("Invalid value: {shown}{message}"),
        ));
    };
    let groups = spec["resourceGroups"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    if kind == "ClusterQueue" || kind == "Cohort" {
        for (i, group) in groups.iter().enumerate() {
            let covered = group["coveredResources"].as_array().map_or(0, Vec::len);
            let flavors = group["flavors"].as_array().cloned().unwrap_or_default();
            if flavors
                .iter()
                .any(|f| f["resources"].as_array().map_or(0, Vec::len) != covered)
            {
                fail(
                    &format!("spec.resourceGroups[{i}]"),
                    None,
                    "flavors must have the same number of resources as the coveredResources",
                );
            }
        }
    }
    match kind {
        "Workload" => {
            // Kueue v0.19.2's rule on the Workload type (workload_types.go).
            let status = &object["status"];
            let reserved = status["conditions"].as_array().is_some_and(|c| {
                c.iter()
                    .any(|c| c["type"] == "QuotaReserved" && c["status"] == "True")
            });
            let sets = |v: &Value| v.as_array().map_or(0, Vec::len);
            if reserved
                && status.get("admission").is_some()
                && sets(&spec["podSets"]) != sets(&status["admission"]["podSetAssignments"])
            {
                fail(
                    "",
                    None,
                    "podSetAssignments must have the same number of podSets as the spec",
                );
            }
        }
        "ClusterQueue" => {
            let cohort = if version == "v1beta1" {
                "cohort"
            } else {
                "cohortName"
            };
            let borrows = groups.iter().any(|g| {
                g["flavors"].as_array().into_iter().flatten().any(|f| {
                    f["resources"]
                        .as_array()
                        .into_iter()
                        .flatten()
                        .any(|r| r.get("borrowingLimit").is_some())
                })
            });
            if spec.get(cohort).is_none() && borrows {
                fail(
                    "spec",
                    None,
                    "borrowingLimit must be nil when cohort is empty",
                );
            }
            let preemption = &spec["preemption"];
            if preemption["reclaimWithinCohort"] == "Never"
                && preemption.get("borrowWithinCohort").is_some()
                && preemption["borrowWithinCohort"]["policy"] != "Never"
            {
                fail(
                    "spec.preemption",
                    None,
                    "reclaimWithinCohort=Never and borrowWithinCohort.Policy!=Never",
                );
            }
            let fungibility = &spec["flavorFungibility"];
            if fungibility.get("preference").is_some()
                && !(fungibility["whenCanBorrow"] == "TryNextFlavor"
                    && fungibility["whenCanPreempt"] == "TryNextFlavor")
            {
                fail(
                    "spec.flavorFungibility",
                    None,
                    "preference can only be set when both whenCanBorrow and whenCanPreempt are TryNextFlavor",
                );
            }
        }
        "ResourceFlavor" => {
            let effects = ["NoSchedule", "PreferNoSchedule", "NoExecute"];
            let taints = spec["nodeTaints"].as_array().cloned().unwrap_or_default();
            if taints
                .iter()
                .any(|t| !effects.iter().any(|e| t["effect"] == *e))
            {
                fail(
                    "spec.nodeTaints",
                    None,
                    "supported taint effect values: 'NoSchedule', 'PreferNoSchedule', 'NoExecute'",
                );
            }
            let tolerations = spec["tolerations"].as_array().cloned().unwrap_or_default();
            if tolerations
                .iter()
                .any(|t| t.get("key").is_none() && t["operator"] != "Exists")
            {
                fail(
                    "spec.tolerations",
                    None,
                    "operator must be Exists when 'key' is empty, which means 'match all values and all keys'",
                );
            }
            if tolerations
                .iter()
                .any(|t| t.get("tolerationSeconds").is_some() && t["effect"] != "NoExecute")
            {
                fail(
                    "spec.tolerations",
                    None,
                    "effect must be 'NoExecute' when 'tolerationSeconds' is set",
                );
            }
            if spec.get("topologyName").is_some()
                && spec["nodeLabels"].as_object().is_none_or(Map::is_empty)
            {
                fail(
                    "spec",
                    None,
                    "at least one nodeLabel is required when topology is set",
                );
            }
        }
        "LocalQueue" => {
            if let Some(old) = old
                && old["spec"]["clusterQueue"] != spec["clusterQueue"]
            {
                fail(
                    "spec.clusterQueue",
                    Some(&spec["clusterQueue"]),
                    "field is immutable",
                );
            }
        }
        _ => {}
    }
    causes
}

/// One step of a managed field's path: a field name, a list item by its map keys
/// (`{"name":"h200"}`), or a set member by its value.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub enum Step {
    Field(String),
    Key(String),
    Member(String),
}

pub type FieldPath = Vec<Step>;

/// What server-side apply counts as the fields of `object`: leaves, atomic lists and maps as
/// one field each, items of map-lists by their keys (with a path for the item itself), the
/// metadata's labels and annotations; never identity (`apiVersion`, `kind`, name, namespace)
/// or status (a subresource).
pub fn fields(schema: &Value, object: &Value) -> BTreeSet<FieldPath> {
    let mut out = BTreeSet::new();
    let Some(map) = object.as_object() else {
        return out;
    };
    for (key, value) in map {
        let sub = &schema["properties"][key];
        match key.as_str() {
            "apiVersion" | "kind" | "status" => {}
            "metadata" => {
                // finalizers: a set (listType=set in ObjectMeta), each member owned alone
                for finalizer in value["finalizers"].as_array().into_iter().flatten() {
                    out.insert(vec![
                        Step::Field("metadata".into()),
                        Step::Field("finalizers".into()),
                        Step::Member(finalizer.to_string()),
                    ]);
                }
                for part in ["labels", "annotations"] {
                    if let Some(entries) = value.get(part).and_then(Value::as_object) {
                        for name in entries.keys() {
                            out.insert(vec![
                                Step::Field("metadata".into()),
                                Step::Field(part.into()),
                                Step::Field(name.clone()),
                            ]);
                        }
                    }
                }
            }
            _ => walk(sub, value, &mut vec![Step::Field(key.clone())], &mut out),
        }
    }
    out
}

fn walk(schema: &Value, value: &Value, path: &mut FieldPath, out: &mut BTreeSet<FieldPath>) {
    match value {
        Value::Object(map)
            if !map.is_empty()
                && schema.get("x-kubernetes-map-type") != Some(&Value::from("atomic")) =>
        {
            for (key, v) in map {
                let sub = schema["properties"]
                    .get(key)
                    .or_else(|| schema.get("additionalProperties"))
                    .unwrap_or(&Value::Null);
                path.push(Step::Field(key.clone()));
                walk(sub, v, path, out);
                path.pop();
            }
        }
        Value::Array(items) if schema["x-kubernetes-list-type"] == "map" => {
            let keys: Vec<&str> = schema["x-kubernetes-list-map-keys"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(Value::as_str)
                .collect();
            for item in items {
                path.push(Step::Key(item_key(&keys, item)));
                out.insert(path.clone());
                walk(&schema["items"], item, path, out);
                path.pop();
            }
        }
        Value::Array(items) if schema["x-kubernetes-list-type"] == "set" => {
            for item in items {
                path.push(Step::Member(item.to_string()));
                out.insert(path.clone());
                path.pop();
            }
        }
        _ => {
            out.insert(path.clone());
        }
    }
}

fn item_key(keys: &[&str], item: &Value) -> String {
    let key: Map<String, Value> = keys
        .iter()
        .map(|k| ((*k).to_owned(), item[*k].clone()))
        .collect();
    Value::Object(key).to_string()
}

fn matches(step: &Step, item: &Value) -> bool {
    match step {
        Step::Key(key) => serde_json::from_str::<Map<String, Value>>(key)
            .is_ok_and(|key| key.iter().all(|(k, v)| item.get(k) == Some(v))),
        Step::Member(member) => serde_json::from_str::<Value>(member).is_ok_and(|m| m == *item),
        Step::Field(_) => false,
    }
}

/// The value at `path`, if there is one.
pub fn get<'a>(value: &'a Value, path: &[Step]) -> Option<&'a Value> {
    let Some((step, rest)) = path.split_first() else {
        return Some(value);
    };
    let next = match step {
        Step::Field(name) => value.get(name)?,
        _ => value.as_array()?.iter().find(|item| matches(step, item))?,
    };
    get(next, rest)
}

/// Writes `new` at `path`, making the maps and list items on the way.
pub fn set(value: &mut Value, path: &[Step], new: Value) {
    let Some((step, rest)) = path.split_first() else {
        *value = new;
        return;
    };
    let next = match step {
        Step::Field(name) => {
            if !value.is_object() {
                *value = Value::Object(Map::new());
            }
            let Some(map) = value.as_object_mut() else {
                return;
            };
            map.entry(name.clone()).or_insert(Value::Null)
        }
        _ => {
            if !value.is_array() {
                *value = Value::Array(Vec::new());
            }
            let Some(items) = value.as_array_mut() else {
                return;
            };
            let at = match items.iter().position(|item| matches(step, item)) {
                Some(at) => at,
                None => {
                    items.push(match step {
                        Step::Key(key) => serde_json::from_str(key).unwrap_or(Value::Null),
                        Step::Member(member) => serde_json::from_str(member).unwrap_or(Value::Null),
                        Step::Field(_) => Value::Null,
                    });
                    items.len() - 1
                }
            };
            &mut items[at]
        }
    };
    set(next, rest, new);
}

/// Removes the field or list item at `path`, if it is there.
pub fn remove(value: &mut Value, path: &[Step]) {
    let Some((step, rest)) = path.split_first() else {
        return;
    };
    if rest.is_empty() {
        match step {
            Step::Field(name) => {
                if let Some(map) = value.as_object_mut() {
                    map.remove(name);
                }
            }
            _ => {
                if let Some(items) = value.as_array_mut() {
                    items.retain(|item| !matches(step, item));
                }
            }
        }
        return;
    }
    let next = match step {
        Step::Field(name) => value.get_mut(name),
        _ => value
            .as_array_mut()
            .and_then(|items| items.iter_mut().find(|item| matches(step, item))),
    };
    if let Some(next) = next {
        remove(next, rest);
    }
}

/// A path as the API server writes it in conflict messages: `.spec.resourceGroups`,
/// `.spec.flavors[name="h200"]`.
pub fn display(path: &[Step]) -> String {
    let mut out = String::new();
    for step in path {
        match step {
            Step::Field(name) => {
                out.push('.');
                out.push_str(name);
            }
            Step::Key(key) => {
                let key: Map<String, Value> = serde_json::from_str(key).unwrap_or_default();
                let parts: Vec<String> = key.iter().map(|(k, v)| format!("{k}={v}")).collect();
                out.push_str(&format!("[{}]", parts.join(",")));
            }
            Step::Member(member) => out.push_str(&format!("[={member}]")),
        }
    }
    out
}

/// `fieldsV1` as the API server stores it in `managedFields`.
pub fn fields_v1(fields: &BTreeSet<FieldPath>) -> Value {
    let mut root = Value::Object(Map::new());
    for path in fields {
        let mut node = &mut root;
        for step in path {
            let key = match step {
                Step::Field(name) => format!("f:{name}"),
                Step::Key(key) => format!("k:{key}"),
                Step::Member(member) => format!("v:{member}"),
            };
            // A keyed list item has a `.` of its own; a set member is a leaf (as the API
            // server writes `"v:\"x\"": {}`).
            let is_item = matches!(step, Step::Key(_));
            let Some(map) = node.as_object_mut() else {
                break;
            };
            node = map.entry(key).or_insert_with(|| Value::Object(Map::new()));
            if is_item && let Some(item) = node.as_object_mut() {
                item.entry(".").or_insert_with(|| Value::Object(Map::new()));
            }
        }
    }
    root
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn cluster_queue() -> (Crd, Value) {
        let crd = crds()
            .into_iter()
            .find(|c| c.kind == "ClusterQueue")
            .expect("crd");
        let object = json!({
            "apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ClusterQueue",
            "metadata": {"name": "research"},
            "spec": {"cohortName": "gpufleet", "resourceGroups": [{
                "coveredResources": ["nvidia.com/gpu"],
                "flavors": [{"name": "h200", "resources": [{"name": "nvidia.com/gpu", "nominalQuota": 48}]}]
            }]}
        });
        (crd, object)
    }

    #[test]
    fn plural_names_follow_kubernetes() {
        let plurals: Vec<String> = crds().iter().map(Crd::plural).collect();
        assert_eq!(
            plurals,
            [
                "resourceflavors",
                "cohorts",
                "clusterqueues",
                "localqueues",
                "workloadpriorityclasses",
                "workloads",
                "scaledobjects"
            ]
        );
    }

    #[test]
    fn resource_groups_are_one_atomic_field() {
        let (crd, object) = cluster_queue();
        let set = fields(crd.schema("v1beta2").expect("v1beta2"), &object);
        let shown: Vec<String> = set.iter().map(|p| display(p)).collect();
        assert_eq!(shown, [".spec.cohortName", ".spec.resourceGroups"]);
        assert_eq!(
            fields_v1(&set),
            json!({"f:spec": {"f:cohortName": {}, "f:resourceGroups": {}}})
        );
    }

    #[test]
    fn map_lists_are_tracked_item_by_item() {
        let schema = json!({"properties": {"spec": {"properties": {"items": {
            "type": "array", "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["name"],
            "items": {"properties": {"name": {"type": "string"}, "size": {"type": "integer"}}}
        }}}}});
        let object = json!({"spec": {"items": [{"name": "a", "size": 1}]}});
        let set = fields(&schema, &object);
        let shown: Vec<String> = set.iter().map(|p| display(p)).collect();
        assert_eq!(
            shown,
            [
                ".spec.items[name=\"a\"]",
                ".spec.items[name=\"a\"].name",
                ".spec.items[name=\"a\"].size"
            ]
        );
        let mut copy = object.clone();
        let size = set.iter().last().expect("size");
        assert_eq!(get(&object, size), Some(&json!(1)));
        set_and_remove(&mut copy, size);
    }

    fn set_and_remove(value: &mut Value, path: &FieldPath) {
        set(value, path, json!(2));
        assert_eq!(value["spec"]["items"][0]["size"], 2);
        remove(value, &path[..3]);
        assert_eq!(value["spec"]["items"], json!([]));
        set(value, path, json!(3));
        assert_eq!(value["spec"]["items"], json!([{"name": "a", "size": 3}]));
    }

    #[test]
    fn the_schema_refuses_what_the_api_server_refuses() {
        let (crd, mut object) = cluster_queue();
        let schema = crd.schema("v1beta2").expect("v1beta2");
        let mut causes = Vec::new();
        validate(schema, &object, "", &mut causes);
        assert_eq!(causes, []);
        object["spec"]["queueingStrategy"] = json!("Random");
        object["spec"]["cohort"] = json!("old-field");
        object["spec"]["resourceGroups"][0]["flavors"][0]["resources"][0]["nominalQuota"] =
            json!("48 GPUs");
        validate(schema, &object, "", &mut causes);
        let text: Vec<String> = causes
            .iter()
            .map(|c| format!("{}: {}", c.field, c.message))
            .collect();
        assert_eq!(
            text,
            [
                ".spec.cohort: field not declared in schema",
                "spec.queueingStrategy: Unsupported value: \"Random\": supported values: \"StrictFIFO\", \"BestEffortFIFO\"",
                "spec.resourceGroups[0].flavors[0].resources[0].nominalQuota: Invalid value: \"48 GPUs\": spec.resourceGroups[0].flavors[0].resources[0].nominalQuota in body should match '^(\\+|-)?(([0-9]+(\\.[0-9]*)?)|(\\.[0-9]+))(([KMGTPE]i)|[numkMGTPE]|([eE](\\+|-)?(([0-9]+(\\.[0-9]*)?)|(\\.[0-9]+))))?$'",
            ]
        );
    }

    #[test]
    fn each_cel_rule_we_rely_on_is_checked() {
        let (_, mut object) = cluster_queue();
        assert_eq!(cel("ClusterQueue", "v1beta2", &object, None), []);
        object["spec"]["resourceGroups"][0]["flavors"][0]["resources"][0]["borrowingLimit"] =
            json!(8);
        assert_eq!(cel("ClusterQueue", "v1beta2", &object, None), []);
        object["spec"]
            .as_object_mut()
            .expect("spec")
            .remove("cohortName");
        let causes = cel("ClusterQueue", "v1beta2", &object, None);
        assert_eq!(
            causes[0].message,
            "Invalid value: borrowingLimit must be nil when cohort is empty"
        );
        object["spec"]["resourceGroups"][0]["coveredResources"] = json!(["nvidia.com/gpu", "cpu"]);
        assert_eq!(cel("ClusterQueue", "v1beta2", &object, None).len(), 2);
        let flavor = json!({"spec": {"nodeTaints": [{"key": "k", "effect": "Sometimes"}],
            "tolerations": [{"operator": "Equal"}, {"key": "k", "tolerationSeconds": 5, "effect": "NoSchedule"}]}});
        assert_eq!(cel("ResourceFlavor", "v1beta2", &flavor, None).len(), 3);
        let old = json!({"spec": {"clusterQueue": "a"}});
        let new = json!({"spec": {"clusterQueue": "b"}});
        assert_eq!(
            cel("LocalQueue", "v1beta2", &new, Some(&old))[0].message,
            "Invalid value: \"b\": field is immutable"
        );
        assert_eq!(cel("LocalQueue", "v1beta2", &old, Some(&old)), []);
    }
}
