//! `POST /api/plan/evaluate` and `gpufleet plan evaluate|export|bench`: the same JSON as the
//! library, bad scenarios refused with field paths (422 / exit status 2).

use std::process::Command;

use crate::common::{login, router, send, user};
use axum::http::{Method, StatusCode, header};
use shared::{ApiError, ErrorCode, accounts::Role, planning};
use sqlx::PgPool;

fn example(name: &str) -> std::path::PathBuf {
    std::path::PathBuf::from(format!(
        "{}/../shared/scenarios/{name}.json",
        env!("CARGO_MANIFEST_DIR")
    ))
}

fn gpufleet(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_gpufleet"))
        .args(args)
        .output()
        .expect("gpufleet runs")
}

#[sqlx::test(migrator = "backend::MIGRATOR")]
async fn the_api_and_the_cli_give_the_library_s_answer(pool: PgPool) {
    user(&pool, "alex", &[Role::Approver], &[]).await;
    let router = router(pool);
    let session = login(&router, "alex", crate::common::PASSWORD).await;
    let text = std::fs::read_to_string(example("aws-300")).expect("example");
    let mut request =
        crate::common::request(Method::POST, "/api/plan/evaluate", Some(&session), None);
    *request.body_mut() = axum::body::Body::from(text.clone());
    request.headers_mut().insert(
        header::CONTENT_TYPE,
        "application/json".parse().expect("header"),
    );
    let reply = send(&router, request).await;
    assert_eq!(reply.status, StatusCode::OK, "{}", reply.text());
    let want =
        planning::evaluate(&planning::parse_scenario(&text).expect("parses")).expect("evaluates");
    assert_eq!(reply.text(), serde_json::to_string(&want).expect("json"));

    prints(
        &[
            "plan",
            "evaluate",
            example("aws-300").to_str().expect("utf-8"),
        ],
        &want,
    );
}

/// `gpufleet args` succeeds and prints `want` as pretty JSON.
fn prints(args: &[&str], want: &impl serde::Serialize) {
    let out = gpufleet(args);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let printed = String::from_utf8(out.stdout).expect("utf-8");
    assert_eq!(
        printed.trim_end(),
        serde_json::to_string_pretty(want).expect("json")
    );
}

/// `gpufleet plan suggest-quotas` prints the library's suggestion (the page's worker calls the
/// same function), and refuses a bad scenario with exit status 2.
#[test]
fn the_cli_suggests_the_library_s_quotas() {
    let path = example("startup-40");
    let text = std::fs::read_to_string(&path).expect("example");
    let want =
        planning::suggest_quotas(&planning::parse_scenario(&text).expect("parses")).expect("valid");
    prints(
        &["plan", "suggest-quotas", path.to_str().expect("utf-8")],
        &want,
    );
    // By hand (see shared::planning::suggest's tests): all 40 cards in somebody's quota, the chat's
    // 15-replica peak in product's.
    assert_eq!(want.flavors[0].nominal_suggested_gpus, 40);
    assert!(want.teams[1].lines[0].suggested.nominal_gpus >= 15);

    let missing = gpufleet(&["plan", "suggest-quotas", "/nonexistent/scenario.json"]);
    assert_eq!(missing.status.code(), Some(2));
}

/// `POST /api/plan/evaluate` with `body`, as `session`.
async fn evaluate_via_api(
    router: &axum::Router,
    session: &crate::common::Session,
    body: serde_json::Value,
) -> crate::common::Reply {
    send(
        router,
        crate::common::request(
            Method::POST,
            "/api/plan/evaluate",
            Some(session),
            Some(body),
        ),
    )
    .await
}

#[sqlx::test(migrator = "backend::MIGRATOR")]
async fn bad_scenarios_get_422_with_paths_and_exit_2(pool: PgPool) {
    user(&pool, "alex", &[Role::Approver], &[]).await;
    let router = router(pool);
    let session = login(&router, "alex", crate::common::PASSWORD).await;
    let mut scenario: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(example("startup-40")).expect("example"))
            .expect("json");
    scenario["teams"][1]["workloads"][0]["gpus_per_job"] = 0.into();
    scenario["fleet"][0]["count"] = 0.into();
    let reply = evaluate_via_api(&router, &session, scenario.clone()).await;
    assert_eq!(reply.status, StatusCode::UNPROCESSABLE_ENTITY);
    let err: ApiError = reply.json();
    assert_eq!(err.code, ErrorCode::Invalid);
    let paths: Vec<&str> = err.fields.iter().map(|f| f.path.as_str()).collect();
    assert_eq!(
        paths,
        ["fleet[0].count", "teams[1].workloads[0].gpus_per_job"]
    );

    let broken = evaluate_via_api(&router, &session, serde_json::json!({"version": 1})).await;
    assert_eq!(broken.status, StatusCode::UNPROCESSABLE_ENTITY);
    assert!(
        broken.json::<ApiError>().fields[0]
            .message
            .contains("missing field")
    );

    let dir = std::env::temp_dir().join(format!("gpufleet-plan-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("dir");
    let file = dir.join("bad.json");
    std::fs::write(&file, scenario.to_string()).expect("write");
    let out = gpufleet(&["plan", "evaluate", file.to_str().expect("utf-8")]);
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("fleet[0].count: must be between 1 and 1,000,000"),
        "{stderr}"
    );
    assert!(
        stderr.contains("teams[1].workloads[0].gpus_per_job"),
        "{stderr}"
    );
    // A mistyped field (a string for a count) names its path, in the API and the CLI.
    let mut typo = scenario.clone();
    typo["fleet"][0]["count"] = "forty".into();
    let reply = evaluate_via_api(&router, &session, typo.clone()).await;
    assert_eq!(reply.status, StatusCode::UNPROCESSABLE_ENTITY);
    let err: ApiError = reply.json();
    assert_eq!(err.fields.len(), 1);
    assert_eq!(err.fields[0].path, "fleet[0].count");
    assert!(
        err.fields[0].message.contains("whole number"),
        "{:?}",
        err.fields
    );
    std::fs::write(&file, typo.to_string()).expect("write");
    let out = gpufleet(&["plan", "evaluate", file.to_str().expect("utf-8")]);
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("fleet[0].count: "), "{stderr}");
    assert!(!stderr.contains("line 1 column"), "{stderr}");
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn export_writes_kueue_and_keda_yaml() {
    let dir = std::env::temp_dir().join(format!("gpufleet-export-{}", std::process::id()));
    let scenario = example("aws-300");
    let export = |version: &str| {
        let args = [
            "plan",
            "export",
            scenario.to_str().expect("utf-8"),
            "--out",
            dir.to_str().expect("utf-8"),
        ];
        gpufleet(&[&args[..], &["--kueue-version", version]].concat())
    };
    let kueue = || std::fs::read_to_string(dir.join("kueue.yaml")).expect("kueue.yaml");
    let out = export("v1beta2");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        kueue().contains("apiVersion: \"kueue.x-k8s.io/v1beta2\"")
            && kueue().contains("kind: \"ClusterQueue\"")
    );
    let keda = std::fs::read_to_string(dir.join("keda-scaledobjects.yaml")).expect("keda yaml");
    assert!(keda.contains("kind: \"ScaledObject\""));
    // The check beside them: aws-300's five classes each start where the export puts them.
    let check = std::fs::read_to_string(dir.join("admission-check.txt")).expect("check");
    assert!(
        check.contains("foundation/eval starts: admitted on flavor h200"),
        "{check}"
    );
    assert!(
        check.ends_with("# 5 starts\n# 0 starts unlike the plan\n# 0 never starts\n"),
        "{check}"
    );
    assert!(export("v1beta1").status.success());
    assert!(kueue().contains("cohort: \"gpufleet\""));
    assert_eq!(export("v2").status.code(), Some(2));
    let _ = std::fs::remove_dir_all(dir);
}

/// Saved scenarios: every planner sees them; the owner or an admin replaces or deletes;
/// anyone may duplicate into their own; bad ones are refused with paths; an older version
/// stored by an earlier build opens migrated.
#[sqlx::test(migrator = "backend::MIGRATOR")]
async fn planners_save_open_replace_duplicate_and_delete_scenarios(pool: PgPool) {
    use shared::planning::saved::{SavedScenario, SavedSummary};
    user(&pool, "alex", &[Role::Approver], &[]).await;
    user(&pool, "bea", &[Role::Approver], &[]).await;
    user(&pool, "ada", &[Role::Admin], &[]).await;
    let router = router(pool.clone());
    let (alex, bea, ada) = (
        login(&router, "alex", crate::common::PASSWORD).await,
        login(&router, "bea", crate::common::PASSWORD).await,
        login(&router, "ada", crate::common::PASSWORD).await,
    );
    let scenario: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(example("aws-300")).expect("example"))
            .expect("json");
    let call = |method: Method,
                uri: String,
                who: &crate::common::Session,
                body: Option<serde_json::Value>| {
        let router = router.clone();
        let request = crate::common::request(method, &uri, Some(who), body);
        async move { send(&router, request).await }
    };

    let saved = call(
        Method::POST,
        "/api/scenarios".into(),
        &alex,
        Some(serde_json::json!({"name": "  AWS, as today ", "scenario": scenario})),
    )
    .await;
    assert_eq!(saved.status, StatusCode::CREATED, "{}", saved.text());
    let saved: SavedScenario = saved.json();
    assert_eq!(saved.summary.name, "AWS, as today");
    // a name with a character that does not show is refused, naming it
    let hidden = call(
        Method::POST,
        "/api/scenarios".into(),
        &alex,
        Some(serde_json::json!({"name": "AWS\u{2028}today", "scenario": scenario})),
    )
    .await;
    assert_eq!(
        hidden.status,
        StatusCode::UNPROCESSABLE_ENTITY,
        "{}",
        hidden.text()
    );
    assert!(hidden.text().contains("U+2028"), "{}", hidden.text());
    assert_eq!(saved.summary.owner, "alex");
    assert_eq!(
        saved.summary.version,
        shared::planning::scenario::SCENARIO_VERSION
    );
    assert_eq!(saved.migrated_from, None);
    assert!(
        saved.summary.created_at.ends_with('Z'),
        "{}",
        saved.summary.created_at
    );
    let want: shared::planning::scenario::Scenario =
        serde_json::from_value(scenario.clone()).expect("scenario");
    assert_eq!(saved.scenario, want);
    let id = saved.summary.id;

    // Another planner sees it and opens it by id.
    let list: Vec<SavedSummary> = call(Method::GET, "/api/scenarios".into(), &bea, None)
        .await
        .json();
    assert_eq!(list.iter().map(|s| s.id).collect::<Vec<_>>(), [id]);
    let opened: SavedScenario = call(Method::GET, format!("/api/scenarios/{id}"), &bea, None)
        .await
        .json();
    assert_eq!(opened, saved);

    // Only the owner or an admin replaces or deletes it; the refusal says what to do.
    let renamed = serde_json::json!({"name": "AWS, tuned", "scenario": scenario});
    let refused = call(
        Method::PUT,
        format!("/api/scenarios/{id}"),
        &bea,
        Some(renamed.clone()),
    )
    .await;
    assert_eq!(refused.status, StatusCode::FORBIDDEN);
    assert!(refused.json::<ApiError>().message.contains("duplicate it"));
    let refused = call(Method::DELETE, format!("/api/scenarios/{id}"), &bea, None).await;
    assert_eq!(refused.status, StatusCode::FORBIDDEN);
    let replaced = call(
        Method::PUT,
        format!("/api/scenarios/{id}"),
        &alex,
        Some(renamed),
    )
    .await;
    assert_eq!(replaced.status, StatusCode::OK);
    assert_eq!(replaced.json::<SavedScenario>().summary.name, "AWS, tuned");
    let by_admin = serde_json::json!({"name": "AWS, audited", "scenario": scenario});
    let replaced = call(
        Method::PUT,
        format!("/api/scenarios/{id}"),
        &ada,
        Some(by_admin),
    )
    .await;
    assert_eq!(replaced.status, StatusCode::OK);

    // A duplicate is the caller's own.
    let copy = call(
        Method::POST,
        format!("/api/scenarios/{id}/duplicate"),
        &bea,
        None,
    )
    .await;
    assert_eq!(copy.status, StatusCode::CREATED);
    let copy: SavedScenario = copy.json();
    assert_eq!(copy.summary.name, "AWS, audited (copy)");
    assert_eq!(copy.summary.owner, "bea");
    assert_eq!(copy.scenario, want);

    // A bad one is refused with its paths, and nothing is stored.
    let mut bad = scenario.clone();
    bad["fleet"][0]["count"] = 0.into();
    let refused = call(
        Method::POST,
        "/api/scenarios".into(),
        &alex,
        Some(serde_json::json!({"name": "", "scenario": bad})),
    )
    .await;
    assert_eq!(refused.status, StatusCode::UNPROCESSABLE_ENTITY);
    let paths: Vec<String> = refused
        .json::<ApiError>()
        .fields
        .into_iter()
        .map(|f| f.path)
        .collect();
    assert_eq!(paths, ["name", "scenario.fleet[0].count"]);
    let mut typo = scenario.clone();
    typo["fleet"][0]["count"] = "forty".into();
    let refused = call(
        Method::POST,
        "/api/scenarios".into(),
        &alex,
        Some(serde_json::json!({"name": "typo", "scenario": typo})),
    )
    .await;
    assert_eq!(refused.status, StatusCode::UNPROCESSABLE_ENTITY);
    assert_eq!(
        refused.json::<ApiError>().fields[0].path,
        "scenario.fleet[0].count"
    );
    let count: i64 = sqlx::query_scalar("select count(*) from scenarios")
        .fetch_one(&pool)
        .await
        .expect("count");
    assert_eq!(count, 2);

    // A version 1 scenario stored by an earlier build opens as the current version, and says so.
    let mut v1 = scenario.clone();
    v1["version"] = 1.into();
    v1["fleet"][0]["mem_gib"] = 80.into();
    v1["fleet"][0]["vendor"] = "nvidia".into();
    let old: i64 = sqlx::query_scalar(
        "insert into scenarios (name, owner_id, schema_version, body)
         select 'from 2026-11', id, 1, $1::text::jsonb from users where username = 'alex'
         returning id",
    )
    .bind(v1.to_string())
    .fetch_one(&pool)
    .await
    .expect("insert");
    let opened: SavedScenario = call(Method::GET, format!("/api/scenarios/{old}"), &bea, None)
        .await
        .json();
    assert_eq!(opened.migrated_from, Some(1));
    assert_eq!(opened.summary.version, 1);
    assert_eq!(opened.scenario, want);

    // Deleted by its owner: gone, and an id that names nothing is 404 in JSON.
    let deleted = call(Method::DELETE, format!("/api/scenarios/{id}"), &alex, None).await;
    assert_eq!(deleted.status, StatusCode::NO_CONTENT);
    for uri in [
        format!("/api/scenarios/{id}"),
        "/api/scenarios/latest".to_owned(),
    ] {
        let gone = call(Method::GET, uri, &alex, None).await;
        assert_eq!(gone.status, StatusCode::NOT_FOUND);
        assert_eq!(gone.json::<ApiError>().code, ErrorCode::NotFound);
    }
}
