//! `POST /api/packing/replay` and `gpufleet packing replay`: uploaded openb CSVs in, the replay's
//! figures out, the same as the library's; bad CSVs refused with the line and column.

use std::process::Command;

use crate::common::{login, router, send, user};
use axum::{
    body::Body,
    http::{Method, Request, StatusCode, header},
};
use shared::{
    ApiError, ErrorCode,
    accounts::Role,
    packing::{Policy, csv, protocol},
};
use sqlx::PgPool;

fn fixture(name: &str) -> String {
    let path = format!(
        "{}/../shared/tests/fixtures/openb/{name}",
        env!("CARGO_MANIFEST_DIR")
    );
    std::fs::read_to_string(&path).unwrap_or_else(|err| panic!("{path}: {err}"))
}

const BOUNDARY: &str = "gpufleet-test-boundary";

fn multipart(parts: &[(&str, &str)]) -> Vec<u8> {
    let mut body = String::new();
    for (name, value) in parts {
        body.push_str(&format!(
            "--{BOUNDARY}\r\nContent-Disposition: form-data; name=\"{name}\"; filename=\"{name}.csv\"\r\nContent-Type: text/csv\r\n\r\n{value}\r\n"
        ));
    }
    body.push_str(&format!("--{BOUNDARY}--\r\n"));
    body.into_bytes()
}

fn upload(session: &crate::common::Session, parts: &[(&str, &str)]) -> Request<Body> {
    let mut request =
        crate::common::request(Method::POST, "/api/packing/replay", Some(session), None);
    *request.body_mut() = Body::from(multipart(parts));
    request.headers_mut().insert(
        header::CONTENT_TYPE,
        format!("multipart/form-data; boundary={BOUNDARY}")
            .parse()
            .expect("header"),
    );
    request
}

#[sqlx::test(migrator = "backend::MIGRATOR")]
async fn the_api_replays_uploaded_csvs_like_the_library(pool: PgPool) {
    user(&pool, "alex", &[Role::Approver], &[]).await;
    let router = router(pool);
    let session = login(&router, "alex", crate::common::PASSWORD).await;
    let (nodes, pods) = (
        fixture("openb_node_list_gpu_node.csv"),
        fixture("openb_pod_list_default.csv"),
    );
    let reply = send(
        &router,
        upload(
            &session,
            &[
                ("nodes", &nodes),
                ("pods", &pods),
                ("policy", "best_fit"),
                ("seed", "7"),
            ],
        ),
    )
    .await;
    assert_eq!(reply.status, StatusCode::OK, "{}", reply.text());
    let want = protocol::replay(
        &csv::parse_nodes(&nodes).expect("nodes"),
        &csv::parse_pods(&pods).expect("pods"),
        Policy::BestFit,
        7,
        1.3,
    )
    .expect("replay");
    // Byte for byte the JSON the library's result serialises to.
    assert_eq!(reply.text(), serde_json::to_string(&want).expect("json"));
    assert_eq!(want.gpus, 6212);
}

#[sqlx::test(migrator = "backend::MIGRATOR")]
async fn bad_uploads_name_the_line_column_and_problem(pool: PgPool) {
    user(&pool, "alex", &[Role::Approver], &[]).await;
    let router = router(pool);
    let session = login(&router, "alex", crate::common::PASSWORD).await;
    let nodes = "sn,cpu_milli,memory_mib,gpu,model\nn1,8000,1024,2,T4\n";
    let pods = "name,cpu_milli,memory_mib,num_gpu,gpu_milli\np1,1000,0,1,500\np2,1000,0,1,1500\n";
    let reply = send(
        &router,
        upload(
            &session,
            &[("nodes", nodes), ("pods", pods), ("policy", "magic")],
        ),
    )
    .await;
    assert_eq!(reply.status, StatusCode::UNPROCESSABLE_ENTITY);
    let err: ApiError = reply.json();
    assert_eq!(err.code, ErrorCode::Invalid);
    let fields: Vec<(String, String)> = err
        .fields
        .into_iter()
        .map(|f| (f.path, f.message))
        .collect();
    assert_eq!(
        fields[0],
        (
            "pods".to_owned(),
            "line 3, column gpu_milli: 1500 is outside 0..=1000".to_owned()
        )
    );
    assert_eq!(fields[1].0, "policy");
    assert!(
        fields[1].1.contains("unknown policy \"magic\""),
        "{}",
        fields[1].1
    );

    let reply = send(&router, upload(&session, &[("nodes", nodes)])).await;
    let err: ApiError = reply.json();
    assert_eq!(err.fields[0].path, "pods");
    assert_eq!(err.fields[0].message, "missing file");
}

#[test]
fn the_cli_prints_the_same_json_and_exits_2_on_bad_input() {
    let dir = std::env::temp_dir().join(format!("gpufleet-pack-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("dir");
    let nodes = dir.join("nodes.csv");
    let pods = dir.join("pods.csv");
    std::fs::write(&nodes, fixture("openb_node_list_gpu_node.csv")).expect("write");
    std::fs::write(&pods, fixture("openb_pod_list_default.csv")).expect("write");
    let run = |pods: &std::path::Path| {
        Command::new(env!("CARGO_BIN_EXE_gpufleet"))
            .args([
                "packing",
                "replay",
                "--policy",
                "fgd",
                "--seed",
                "42",
                "--inflate",
                "1.3",
                "--nodes",
            ])
            .arg(&nodes)
            .arg("--pods")
            .arg(pods)
            .output()
            .expect("gpufleet runs")
    };
    let out = run(&pods);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let want = protocol::replay(
        &csv::parse_nodes(&fixture("openb_node_list_gpu_node.csv")).expect("nodes"),
        &csv::parse_pods(&fixture("openb_pod_list_default.csv")).expect("pods"),
        Policy::Fgd,
        42,
        1.3,
    )
    .expect("replay");
    // The library's result, byte for byte (plus the line end the CLI prints).
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).trim_end(),
        serde_json::to_string_pretty(&want).expect("json")
    );

    let broken = dir.join("broken.csv");
    std::fs::write(
        &broken,
        "name,cpu_milli,memory_mib,num_gpu,gpu_milli\np1,lots,0,1,500\n",
    )
    .expect("write");
    let out = run(&broken);
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("broken.csv: line 2, column cpu_milli: \"lots\" is not a whole number"),
        "{stderr}"
    );
    let _ = std::fs::remove_dir_all(dir);
}

#[sqlx::test(migrator = "backend::MIGRATOR")]
async fn mig_layouts_over_the_api_and_their_refusals(pool: PgPool) {
    user(&pool, "alex", &[Role::Approver], &[]).await;
    backend::fleet::load_demo(&pool).await.expect("demo fleet");
    let router = router(pool);
    let session = login(&router, "alex", crate::common::PASSWORD).await;
    let ask = |body: serde_json::Value| {
        crate::common::request(Method::POST, "/api/packing/mig", Some(&session), Some(body))
    };
    // The demo fleet's H200 pool gets a layout by the model name the inventory gives it.
    let fleet: shared::fleet::Fleet = send(
        &router,
        crate::common::request(Method::GET, "/api/fleet", Some(&session), None),
    )
    .await
    .json();
    let h200 = fleet
        .pools
        .iter()
        .find(|p| p.name == "h200-train")
        .map(|p| p.gpu_model.clone())
        .expect("the demo fleet has an H200 pool");
    let reply = send(
        &router,
        ask(serde_json::json!({"gpu_model": h200, "groups": [
            {"name": "llama-70b", "mem_mib": 65_000, "replicas": 2},
            {"name": "embedder", "mem_mib": 16_384, "replicas": 5}
        ]})),
    )
    .await;
    assert_eq!(reply.status, StatusCode::OK, "{}", reply.text());
    let plan: shared::packing::mig::MigPlan = reply.json();
    assert_eq!(plan.gpus.len(), 2);
    assert!(
        plan.mig_parted_yaml.contains("\"3g.71gb\": 2")
            && plan.mig_parted_yaml.contains("\"1g.18gb\": 5")
    );

    let reply = send(&router, ask(serde_json::json!({"gpu_model": "H200-SXM-141GB", "groups": [
        {"name": "ok", "mem_mib": 1000, "replicas": 1}, {"name": "whale", "mem_mib": 300_000, "replicas": 1}]}))).await;
    assert_eq!(reply.status, StatusCode::UNPROCESSABLE_ENTITY);
    let err: ApiError = reply.json();
    assert_eq!(err.fields[0].path, "groups[1].mem_mib");
    assert!(
        err.fields[0]
            .message
            .contains("the largest H200-SXM-141GB profile offers 143360 MiB"),
        "{}",
        err.fields[0].message
    );

    let reply = send(&router, ask(serde_json::json!({"gpu_model": "L40S-48GB", "groups": [{"name": "a", "mem_mib": 1, "replicas": 1}]}))).await;
    let err: ApiError = reply.json();
    assert_eq!(err.fields[0].path, "gpu_model");
    assert!(err.fields[0].message.starts_with("L40S-48GB has no MIG"));

    // A name the catalogue does not know is refused with the names it does.
    let reply = send(&router, ask(serde_json::json!({"gpu_model": "H200-141GB", "groups": [{"name": "a", "mem_mib": 1, "replicas": 1}]}))).await;
    assert_eq!(reply.status, StatusCode::UNPROCESSABLE_ENTITY);
    let err: ApiError = reply.json();
    assert_eq!(err.fields[0].path, "gpu_model");
    assert!(
        err.fields[0].message.contains("known models: ")
            && err.fields[0].message.contains("H200-SXM-141GB"),
        "{}",
        err.fields[0].message
    );
}
