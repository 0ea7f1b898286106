//! The planner's exported manifests against the real Kueue and KEDA CRD schemas
//! (`kube-double/crds/`, copied with their source in its README), checked as the Kubernetes
//! API double checks what it is sent: the structural schema and the Kueue kinds' CEL rules.
//! It lives here, beside the double, so the pure `shared` crate depends on no test server.

use std::collections::BTreeMap;

use serde_json::Value;
use shared::kueue::KueueVersion;
use shared::planning::{self, manifests, scenario::Scenario};

fn scenario(name: &str) -> Scenario {
    let path = format!(
        "{}/../shared/scenarios/{name}.json",
        env!("CARGO_MANIFEST_DIR")
    );
    let text = std::fs::read_to_string(&path).unwrap_or_else(|err| panic!("{path}: {err}"));
    planning::parse_scenario(&text).unwrap_or_else(|err| panic!("{path}: {err:?}"))
}

fn crd(name: &str) -> Value {
    let path = format!(
        "{}/kube-double/crds/{name}.json",
        env!("CARGO_MANIFEST_DIR")
    );
    serde_json::from_str(&std::fs::read_to_string(&path).expect("crd")).expect("json")
}

/// The API server's checks, as the Kubernetes API double makes them: the CRD's structural
/// schema and the CEL rules of the Kueue kinds.
fn validate(schema: &Value, value: &Value, path: &str, errors: &mut Vec<String>) {
    let mut causes = Vec::new();
    kube_double::schema::validate(schema, value, "", &mut causes);
    if let (Some(kind), Some(version)) = (
        value["kind"].as_str(),
        value["apiVersion"]
            .as_str()
            .and_then(|v| v.rsplit('/').next()),
    ) {
        causes.extend(kube_double::schema::cel(kind, version, value, None));
    }
    errors.extend(
        causes
            .into_iter()
            .map(|c| format!("{path} {}: {}", c.field, c.message)),
    );
}

fn crd_for(kind: &str) -> &'static str {
    match kind {
        "ResourceFlavor" => "resourceflavor",
        "Cohort" => "cohort",
        "ClusterQueue" => "clusterqueue",
        "LocalQueue" => "localqueue",
        "WorkloadPriorityClass" => "workloadpriorityclass",
        "ScaledObject" => "scaledobject",
        other => panic!("no CRD for {other}"),
    }
}

fn check_export(s: &Scenario, version: KueueVersion) -> usize {
    let mut checked = 0;
    for file in manifests::export(s, &shared::planning::isolation_plan(s), version) {
        // The YAML text says exactly what the objects say.
        let parsed: Vec<Value> = serde_yaml::Deserializer::from_str(&file.yaml)
            .map(|doc| {
                serde_yaml::from_value::<Value>(serde::Deserialize::deserialize(doc).expect("yaml"))
                    .expect("value")
            })
            .collect();
        assert_eq!(parsed, file.objects, "{}", file.name);
        for object in &file.objects {
            let kind = object["kind"].as_str().expect("kind");
            let schema = crd(crd_for(kind));
            let (group, v) = object["apiVersion"]
                .as_str()
                .expect("apiVersion")
                .split_once('/')
                .expect("group/version");
            assert_eq!(group, schema["group"].as_str().expect("group"));
            let version_schema = &schema["versions"][v];
            assert!(version_schema.is_object(), "{kind} has no version {v}");
            let mut errors = Vec::new();
            validate(version_schema, object, kind, &mut errors);
            assert!(
                errors.is_empty(),
                "{kind} {} {v}: {errors:#?}",
                object["metadata"]["name"]
            );
            checked += 1;
        }
    }
    checked
}

#[test]
fn exported_manifests_validate_against_the_real_crds() {
    for name in ["startup-40", "aws-300", "bank-10000", "no-own-model"] {
        let s = scenario(name);
        let v2 = check_export(&s, KueueVersion::V1beta2);
        let v1 = check_export(&s, KueueVersion::V1beta1);
        assert_eq!(v1, v2);
        assert!(v2 > 2 * s.teams.len(), "{name}: {v2} objects");
    }
    // v1beta1 uses `cohort`, v1beta2 `cohortName`.
    let s = scenario("aws-300");
    let v1 = manifests::export(
        &s,
        &shared::planning::isolation_plan(&s),
        KueueVersion::V1beta1,
    );
    assert!(v1[0].yaml.contains("cohort: \"gpufleet\"") && !v1[0].yaml.contains("cohortName"));
    let v2 = manifests::export(
        &s,
        &shared::planning::isolation_plan(&s),
        KueueVersion::V1beta2,
    );
    assert!(v2[0].yaml.contains("cohortName: \"gpufleet\""));
    assert!(
        v2[1].yaml.contains("kind: \"ScaledObject\"")
            && v2[1].yaml.contains("type: \"prometheus\"")
    );
    // Two flavors of one model: the queues list both in one resource group.
    let mut two = scenario("startup-40");
    let mut b = two.fleet[0].clone();
    b.flavor = format!("{}-b", b.flavor);
    two.fleet.push(b);
    assert!(check_export(&two, KueueVersion::V1beta2) > 0);
    // Without a cohort: no borrowing or lending limits at all.
    let mut solo = scenario("startup-40");
    solo.quota.cohort = false;
    assert_eq!(
        check_export(&solo, KueueVersion::V1beta2),
        check_export(&scenario("startup-40"), KueueVersion::V1beta2) - 1
    );
}

#[test]
fn approved_quota_renders_to_objects_the_real_crds_accept() {
    use shared::{
        common::day::Day,
        kueue::{Taint, TaintEffect, Toleration, TolerationOperator},
        quota::{Approved, Flavor, FlavorSettings, QuotaLine, QuotaSpec, QuotaWorld, TeamQueue},
    };
    let today = Day::parse("2026-12-01").expect("day");
    let flavor = |name: &str, mig: &[(&str, u32)]| Flavor {
        name: name.into(),
        gpu_model: "H100-SXM5-80GB".into(),
        pools: vec![name.into()],
        gpus: 16,
        settings: FlavorSettings {
            node_labels: BTreeMap::from([("gpufleet.io/pool".into(), name.into())]),
            node_taints: vec![Taint {
                key: "nvidia.com/gpu".into(),
                value: String::new(),
                effect: TaintEffect::NoSchedule,
            }],
            tolerations: vec![Toleration {
                key: "nvidia.com/gpu".into(),
                operator: TolerationOperator::Exists,
                value: String::new(),
                effect: Some(TaintEffect::NoSchedule),
            }],
            mig_layout: mig.iter().map(|(p, n)| ((*p).to_owned(), *n)).collect(),
            sharing: None,
        },
        version: 1,
        product_label: None,
    };
    let team = |name: &str, cohort: Option<&str>| TeamQueue {
        team: name.into(),
        namespace: format!("team-{name}"),
        cluster_queue: format!("{name}-cq"),
        local_queue: format!("{name}-lq"),
        cohort: cohort.map(str::to_owned),
    };
    let mut spec = QuotaSpec::blank(
        &[
            flavor("whole", &[]),
            flavor("sliced", &[("1g.10gb", 3), ("2g.20gb", 2)]),
        ],
        today,
    );
    spec.justification = "training".into();
    for line in &mut spec.lines {
        line.nominal = 4;
        line.borrowing_limit = Some(2);
        line.lending_limit = Some(1);
    }
    let world = QuotaWorld {
        flavors: vec![
            flavor("whole", &[]),
            flavor("sliced", &[("1g.10gb", 3), ("2g.20gb", 2)]),
        ],
        teams: vec![
            team("research", Some("gpufleet")),
            team("solo", None),
            team("idle", Some("gpufleet")),
        ],
        approved: vec![
            Approved {
                id: 1,
                team: "research".into(),
                order: 1,
                spec: spec.clone(),
            },
            Approved {
                id: 2,
                team: "solo".into(),
                order: 2,
                spec: QuotaSpec {
                    lines: vec![QuotaLine {
                        flavor: "whole".into(),
                        resource: "nvidia.com/gpu".into(),
                        nominal: 2,
                        borrowing_limit: None,
                        lending_limit: None,
                    }],
                    ..spec.clone()
                },
            },
        ],
        // idle's queue held after its budget ran out: `stopPolicy: Hold`, in both versions' enum
        held: vec!["idle".into()],
    };
    for version in [KueueVersion::V1beta2, KueueVersion::V1beta1] {
        let objects = world.kueue_setup(today).objects(version);
        // 2 flavors, 1 cohort, 3 × (ClusterQueue + LocalQueue), training and inference
        // priorities with inference above.
        assert_eq!(objects.len(), 11);
        assert_eq!(objects[9]["metadata"]["name"], "priority-10");
        assert_eq!(objects[10]["metadata"]["name"], "priority-100");
        for object in &objects {
            let kind = object["kind"].as_str().expect("kind");
            let schema = crd(crd_for(kind));
            let v = version.api_version().rsplit('/').next().expect("version");
            let mut errors = Vec::new();
            validate(&schema["versions"][v], object, kind, &mut errors);
            assert!(errors.is_empty(), "{kind}: {errors:#?}\n{object:#}");
        }
        // The sliced flavor's group covers both MIG resources, in every queue.
        let research = &objects[3];
        assert_eq!(research["metadata"]["name"], "research-cq");
        assert_eq!(
            research["spec"]["resourceGroups"][1]["coveredResources"],
            serde_json::json!(["nvidia.com/mig-1g.10gb", "nvidia.com/mig-2g.20gb"])
        );
        let solo = &objects[5];
        assert!(!solo.to_string().contains("borrowingLimit"), "{solo}");
        assert_eq!(objects[7]["metadata"]["name"], "idle-cq");
        assert_eq!(objects[7]["spec"]["stopPolicy"], "Hold");
        assert!(research["spec"].get("stopPolicy").is_none());
        assert_eq!(
            objects[4]["metadata"],
            serde_json::json!({"name": "research-lq", "namespace": "team-research"})
        );
    }
    // Kueue's rule on the approved quota: research holds 4 whole GPUs, and its borrowing limit
    // of 2 borrows nothing, as no other queue of its cohort holds whole GPUs to lend (Kueue's
    // "maximum capacity"; the flavor's own toleration covers its taint); its MIG pods land on
    // the sliced flavor; idle, with no quota in force, admits nothing.
    use shared::kueue::PodRequest;
    let setup = world.kueue_setup(today);
    let pod = |team: &str, resource: &str, n: i64| PodRequest {
        namespace: format!("team-{team}"),
        queue_name: Some(format!("{team}-lq")),
        requests: vec![(resource.to_owned(), n), ("cpu".to_owned(), 4_000)],
        node_selector: BTreeMap::new(),
        tolerations: Vec::new(),
    };
    let admits = |team: &str, resource: &str, n: i64| {
        setup.admits(
            &pod(team, resource, n),
            &shared::kueue::ManagerConfig::accelerators_only(),
        )
    };
    assert_eq!(
        admits("research", "nvidia.com/gpu", 4),
        Ok("whole".to_owned())
    );
    assert!(
        admits("research", "nvidia.com/gpu", 5).is_err(),
        "4 nominal, none to borrow"
    );
    assert_eq!(
        admits("research", "nvidia.com/mig-1g.10gb", 1),
        Ok("sliced".to_owned())
    );
    assert!(admits("idle", "nvidia.com/gpu", 1).is_err());
    assert_eq!(admits("solo", "nvidia.com/gpu", 2), Ok("whole".to_owned()));
    assert!(
        admits("solo", "nvidia.com/gpu", 3).is_err(),
        "no cohort: nominal only"
    );

    // The check the Cluster page shows: each team's pod for each resource of its quota starts
    // (the flavors select the platform team's own pool label, which GPU Feature Discovery does
    // not write, so any node of the pool carries it); idle holds no quota.
    use shared::kueue::Admissible;
    let subjects = |w: &QuotaWorld| {
        w.admission(today)
            .into_iter()
            .map(|v| (v.subject, v.admissible))
            .collect::<Vec<_>>()
    };
    assert_eq!(
        subjects(&world),
        [
            (
                "research 1 nvidia.com/gpu on whole".to_owned(),
                Admissible::Yes
            ),
            (
                "research 1 nvidia.com/mig-1g.10gb on sliced".to_owned(),
                Admissible::Yes
            ),
            (
                "research 1 nvidia.com/mig-2g.20gb on sliced".to_owned(),
                Admissible::Yes
            ),
            ("solo 1 nvidia.com/gpu on whole".to_owned(), Admissible::Yes),
        ]
    );
    // A team's declared largest job is checked too, on whole GPUs (not on MIG slices): 4 fits
    // research's 4 nominal, 5 never can (Kueue admits a job whole).
    for (largest, admissible) in [(4, Admissible::Yes), (5, Admissible::Never)] {
        let mut declared = world.clone();
        declared.approved[0].spec.largest_job_gpus = Some(largest);
        let verdicts = subjects(&declared);
        assert_eq!(verdicts.len(), 5, "{verdicts:#?}");
        assert_eq!(
            verdicts[1],
            (
                format!("research {largest} nvidia.com/gpu on whole (its largest job)"),
                admissible
            ),
            "{verdicts:#?}"
        );
    }
    // A flavor that names its model by the catalogue's name selects nodes no GFD labels so
    // (an H100 SXM5 is NVIDIA-H100-80GB-HBM3); one that shares by HAMi asks for per-vGPU
    // memory these queues do not cover.
    let first_never = |w: &QuotaWorld, why: &str| {
        let verdicts = w.admission(today);
        assert_eq!(
            verdicts[0].admissible,
            Admissible::Never,
            "{:?}",
            verdicts[0]
        );
        assert!(verdicts[0].message.contains(why), "{:?}", verdicts[0]);
    };
    let mut named = world.clone();
    named.flavors[0].settings.node_labels =
        BTreeMap::from([("nvidia.com/gpu.product".into(), "H100-SXM5-80GB".into())]);
    first_never(&named, "NVIDIA-H100-80GB-HBM3");
    let mut hami = world.clone();
    hami.flavors[0].settings.sharing = Some(shared::fleet::sharing::Mechanism::HamiFractions);
    first_never(&hami, "resource nvidia.com/gpumem unavailable");
}
