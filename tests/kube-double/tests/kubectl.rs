//! A second, independent client proves the double speaks the real protocol: `kubectl`, through
//! an ordinary kubeconfig, applies the planner's exported manifests server-side, gets and diffs
//! them, and is refused in the API server's own words where the schema or a field manager
//! says no. `kubectl` must be installed (Debian: `kubectl`; `./dev test` says how); this test
//! fails, never skips, without it.

use std::{
    path::{Path, PathBuf},
    process::{Command, Output},
};

use kube_double::KubeDouble;
use shared::{kueue::KueueVersion, planning::manifests};

fn kubectl(kubeconfig: &Path, args: &[&str]) -> Output {
    let program = std::env::var("KUBECTL").unwrap_or_else(|_| "kubectl".to_owned());
    Command::new(&program)
        .arg("--kubeconfig")
        .arg(kubeconfig)
        .args(args)
        .output()
        .unwrap_or_else(|err| {
            panic!("cannot run {program} ({err}): install kubectl (apt-get install kubectl) or set KUBECTL")
        })
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("gpufleet-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("scratch dir");
    dir
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_applies_gets_and_diffs_the_exported_manifests_through_the_double() {
    let double = KubeDouble::start().await.expect("double");
    let dir = scratch("kubectl");
    let kubeconfig = dir.join("kubeconfig");
    double.write_kubeconfig(&kubeconfig).expect("kubeconfig");
    let manifests_dir = dir.join("manifests");
    std::fs::create_dir_all(&manifests_dir).expect("dir");
    let text_of = |p: &str| std::fs::read_to_string(p).expect("scenario");
    let scenario = shared::planning::parse_scenario(&text_of(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../shared/scenarios/aws-300.json"
    )))
    .expect("scenario");
    let files = manifests::export(
        &scenario,
        &shared::planning::isolation_plan(&scenario),
        KueueVersion::V1beta2,
    );
    for file in &files {
        for object in &file.objects {
            if let Some(ns) = object["metadata"]["namespace"].as_str() {
                double.create_namespace(ns);
            }
        }
        std::fs::write(manifests_dir.join(&file.name), &file.yaml).expect("write");
    }
    let dir_arg = manifests_dir.to_str().expect("utf-8 path");
    let objects: usize = files.iter().map(|f| f.objects.len()).sum();

    // Server-side apply of every exported object.
    let applied = tokio::task::block_in_place(|| {
        kubectl(&kubeconfig, &["apply", "--server-side", "-f", dir_arg])
    });
    assert!(applied.status.success(), "{}", text(&applied.stderr));
    let out = text(&applied.stdout);
    assert_eq!(
        out.lines()
            .filter(|l| l.ends_with("serverside-applied"))
            .count(),
        objects,
        "{out}"
    );
    assert!(out.contains("clusterqueue.kueue.x-k8s.io/"), "{out}");
    let queue = double
        .object("ClusterQueue", None, &double.names("ClusterQueue")[0])
        .expect("stored");
    assert_eq!(
        queue["metadata"]["managedFields"][0]["manager"], "kubectl",
        "{queue:#}"
    );
    assert_eq!(queue["metadata"]["managedFields"][0]["operation"], "Apply");

    // get: names, a table, YAML.
    let names = tokio::task::block_in_place(|| {
        kubectl(
            &kubeconfig,
            &["get", "clusterqueues.kueue.x-k8s.io", "-o", "name"],
        )
    });
    assert!(names.status.success(), "{}", text(&names.stderr));
    let mut listed: Vec<String> = text(&names.stdout)
        .lines()
        .map(|l| {
            l.trim_start_matches("clusterqueue.kueue.x-k8s.io/")
                .to_owned()
        })
        .collect();
    listed.sort();
    let mut stored = double.names("ClusterQueue");
    stored.sort();
    assert_eq!(listed, stored);
    let table = tokio::task::block_in_place(|| {
        kubectl(&kubeconfig, &["get", "clusterqueues.kueue.x-k8s.io"])
    });
    assert!(table.status.success(), "{}", text(&table.stderr));
    assert!(
        text(&table.stdout).starts_with("NAME"),
        "{}",
        text(&table.stdout)
    );

    // diff: nothing to change, then one change. Kueue's create webhook stored each quota as a
    // quantity string ("8"), so the file's numbers differ from it until applied once more (as
    // `kubectl diff` after `kubectl apply` shows on a real kube-apiserver with Kueue v0.17.0).
    let again = tokio::task::block_in_place(|| {
        kubectl(&kubeconfig, &["apply", "--server-side", "-f", dir_arg])
    });
    assert!(again.status.success(), "{}", text(&again.stderr));
    let same = tokio::task::block_in_place(|| {
        kubectl(&kubeconfig, &["diff", "--server-side", "-f", dir_arg])
    });
    assert_eq!(
        same.status.code(),
        Some(0),
        "{}{}",
        text(&same.stdout),
        text(&same.stderr)
    );
    let kueue_yaml = manifests_dir.join("kueue.yaml");
    let original = std::fs::read_to_string(&kueue_yaml).expect("read");
    let first_cq = original
        .find("kind: \"ClusterQueue\"")
        .expect("a ClusterQueue");
    let at = first_cq + original[first_cq..].find("nominalQuota: ").expect("quota");
    let end = at + original[at..].find('\n').expect("line end");
    let changed = format!("{}nominalQuota: 12345{}", &original[..at], &original[end..]);
    std::fs::write(&kueue_yaml, &changed).expect("write");
    let differs = tokio::task::block_in_place(|| {
        kubectl(&kubeconfig, &["diff", "--server-side", "-f", dir_arg])
    });
    assert_eq!(differs.status.code(), Some(1), "{}", text(&differs.stderr));
    assert!(
        text(&differs.stdout).contains("+        nominalQuota: 12345")
            && text(&differs.stdout).contains("-        nominalQuota: "),
        "{}",
        text(&differs.stdout)
    );
    std::fs::write(&kueue_yaml, &original).expect("restore");

    // Refusals in the API server's words: a schema rule (CEL) and another manager's field.
    let bad = dir.join("bad.yaml");
    std::fs::write(
        &bad,
        "apiVersion: kueue.x-k8s.io/v1beta2\nkind: ClusterQueue\nmetadata:\n  name: bad\nspec:\n  \
         resourceGroups:\n  - coveredResources: [\"nvidia.com/gpu\"]\n    flavors:\n    - name: h100\n      \
         resources:\n      - name: nvidia.com/gpu\n        nominalQuota: 8\n        borrowingLimit: 4\n",
    )
    .expect("write");
    let refused = tokio::task::block_in_place(|| {
        kubectl(
            &kubeconfig,
            &["apply", "--server-side", "-f", bad.to_str().expect("path")],
        )
    });
    assert!(!refused.status.success());
    assert!(
        text(&refused.stderr).contains(
            // kubectl's rendering of the server's 422 Status (kind, name, causes).
            "The ClusterQueue \"bad\" is invalid: spec: Invalid value: borrowingLimit must be nil when cohort is empty"
        ),
        "{}",
        text(&refused.stderr)
    );
    assert!(double.object("ClusterQueue", None, "bad").is_none());

    let name = &stored[0];
    let patched = tokio::task::block_in_place(|| {
        kubectl(
            &kubeconfig,
            &[
                "patch",
                "clusterqueue.kueue.x-k8s.io",
                name,
                "--type",
                "merge",
                "-p",
                r#"{"spec":{"queueingStrategy":"StrictFIFO"}}"#,
            ],
        )
    });
    assert!(patched.status.success(), "{}", text(&patched.stderr));
    let again = tokio::task::block_in_place(|| {
        kubectl(&kubeconfig, &["apply", "--server-side", "-f", dir_arg])
    });
    assert!(!again.status.success());
    assert!(
        text(&again.stderr)
            .contains("Apply failed with 1 conflict: conflict with \"kubectl-patch\""),
        "{}",
        text(&again.stderr)
    );
    assert!(
        text(&again.stderr).contains(".spec.queueingStrategy"),
        "{}",
        text(&again.stderr)
    );
    let forced = tokio::task::block_in_place(|| {
        kubectl(
            &kubeconfig,
            &["apply", "--server-side", "--force-conflicts", "-f", dir_arg],
        )
    });
    assert!(forced.status.success(), "{}", text(&forced.stderr));
    let _ = std::fs::remove_dir_all(&dir);
}
