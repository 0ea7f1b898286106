//! Budgets (issue 32, point 5): set and removed by finance or admins, audited; each team's burn
//! and forecast; one alert per breach (the highest threshold crossed, a forecast's covered by
//! the burn's), once per budget; the webhook receives each alert once, after
//! retries, and an alert is never lost while it cannot be sent.
//!
//! Figures by hand: research is allocated 10 H100 GPU-hours on each of 2026-11-01 to 11-09 at
//! the demo's $8.60: $774.00. On 2026-11-10 at 00:00 (9 of November's 30 days gone) a $1,000.00
//! budget by allocation is 77.40% used and forecast at $774.00 × 30 / 9 = $2,580.00, 258.00%:
//! the forecast is past 80% and 100%, the burn past neither.

use std::sync::{Arc, Mutex};

use axum::http::{Method, StatusCode};
use backend::chargeback::budget::{self, Webhook};
use serde_json::{Value, json};
use shared::{
    accounts::Role,
    chargeback::budget::{Budgets, Crossing},
    common::day::Day,
};
use sqlx::PgPool;

use crate::common::{PASSWORD, login, request, router, send, user};

/// 2026-11-10T00:00:00Z.
pub const NOV_10: i64 = 1_794_268_800_000;

async fn november(pool: &PgPool) {
    backend::fleet::load_demo(pool).await.expect("demo fleet");
    research_burns_november(pool).await;
}

/// research allocated 10 H100 GPU-hours ($86.00 at the demo's rate) on each of 2026-11-01 to
/// 11-09: $774.00 by 2026-11-10.
pub async fn research_burns_november(pool: &PgPool) {
    research_burns_november_on(pool, "h100-shared").await;
}

/// [`research_burns_november`] on `flavor`.
pub async fn research_burns_november_on(pool: &PgPool, flavor: &str) {
    sqlx::query(
        "insert into usage_rollups (grain, period, namespace, cluster_queue, flavor, team_id,
             allocated_gpu_microseconds, busy_gpu_microseconds, observed_gpu_microseconds,
             fb_used_mib_minutes, minutes)
         select 'day', d, t.namespace, '', $1, t.id, 10 * 3600000000::bigint,
                5 * 3600000000::bigint, 10 * 3600000000::bigint, 0, 1440
         from generate_series('2026-11-01'::timestamptz, '2026-11-09', interval '1 day') d,
              teams t where t.name = 'research'",
    )
    .bind(flavor)
    .execute(pool)
    .await
    .expect("rollups");
}

#[sqlx::test(migrator = "backend::MIGRATOR")]
async fn budgets_burn_forecast_and_alert_once(pool: PgPool) {
    november(&pool).await;
    for (name, roles, teams) in [
        ("fiona", vec![Role::Finance], vec![]),
        ("paul", vec![Role::Approver], vec![]),
        ("rita", vec![Role::Requester], vec!["research"]),
    ] {
        user(&pool, name, &roles, &teams).await;
    }
    let app = router(pool.clone());
    let fiona = login(&app, "fiona", PASSWORD).await;
    let rita = login(&app, "rita", PASSWORD).await;
    let paul = login(&app, "paul", PASSWORD).await;
    let put = |who, path: &str, body: Value| {
        send(&app, request(Method::PUT, path, Some(who), Some(body)))
    };

    // set by finance, audited; refused to others and for bad input, with the field named
    let reply = put(
        &fiona,
        "/api/chargeback/budgets/research/2026-11",
        json!({"limit_cents": 100_000}),
    )
    .await;
    assert_eq!(reply.status, StatusCode::OK, "{}", reply.text());
    let reply = put(
        &fiona,
        "/api/chargeback/budgets/search/2026-11",
        json!({"limit_gpu_hours": 100, "basis": "use", "thresholds_pct": [50, 90]}),
    )
    .await;
    assert_eq!(reply.status, StatusCode::OK, "{}", reply.text());
    for (who, path, body, status, field) in [
        (
            &rita,
            "research/2026-11",
            json!({"limit_cents": 1}),
            StatusCode::FORBIDDEN,
            "",
        ),
        (
            &paul,
            "research/2026-11",
            json!({"limit_cents": 1}),
            StatusCode::FORBIDDEN,
            "",
        ),
        (
            &fiona,
            "research/2026-11",
            json!({}),
            StatusCode::UNPROCESSABLE_ENTITY,
            "limit_cents",
        ),
        (
            &fiona,
            "research/11-2026",
            json!({"limit_cents": 1}),
            StatusCode::UNPROCESSABLE_ENTITY,
            "month",
        ),
        (
            &fiona,
            "nobody/2026-11",
            json!({"limit_cents": 1}),
            StatusCode::NOT_FOUND,
            "",
        ),
        (
            &fiona,
            "research/2026-11",
            json!({"limit_cents": 1, "thresholds_pct": [0]}),
            StatusCode::UNPROCESSABLE_ENTITY,
            "thresholds_pct",
        ),
    ] {
        let reply = put(who, &format!("/api/chargeback/budgets/{path}"), body).await;
        assert_eq!(reply.status, status, "{path}: {}", reply.text());
        assert!(reply.text().contains(field), "{}", reply.text());
    }
    let audited: i64 = sqlx::query_scalar(
        "select count(*) from audit_log where kind = 'budget' and action = 'set budget'",
    )
    .fetch_one(&pool)
    .await
    .expect("audit");
    assert_eq!(audited, 2);

    // read back: November has ended, so its forecast is its burn
    let reply = send(
        &app,
        request(
            Method::GET,
            "/api/chargeback/budgets?month=2026-11",
            Some(&paul),
            None,
        ),
    )
    .await;
    assert_eq!(reply.status, StatusCode::OK, "{}", reply.text());
    let all: Budgets = reply.json();
    let research = &all.lines[0];
    assert_eq!(
        (research.team.as_str(), research.cost_by_allocation_cents),
        ("research", 77_400)
    );
    assert_eq!(
        (research.spent_pct.as_str(), research.forecast_pct.as_str()),
        ("77.40", "77.40")
    );
    assert_eq!(all.lines[1].team, "search");
    // a requester sees their own team's
    let mine: Budgets = send(
        &app,
        request(
            Method::GET,
            "/api/chargeback/budgets?month=2026-11",
            Some(&rita),
            None,
        ),
    )
    .await
    .json();
    assert_eq!(mine.lines.len(), 1);
    assert_eq!(mine.lines[0].team, "research");

    // on November 10: the forecast crosses 80% and 100% at once: one alert, past 100%, raised
    // once however often evaluated
    let month = Day::of_unix_seconds(NOV_10 / 1000).first_of_month();
    let on_10th = budget::read(&pool, month, NOV_10).await.expect("read");
    assert_eq!(on_10th.lines[0].forecast_cost_by_allocation_cents, 258_000);
    assert_eq!(on_10th.lines[0].forecast_pct, "258.00");
    let raised = |alerts| budget::Raised { alerts, holds: 0 };
    assert_eq!(
        budget::evaluate(&pool, NOV_10).await.expect("evaluate"),
        raised(1)
    );
    assert_eq!(
        budget::evaluate(&pool, NOV_10).await.expect("again"),
        raised(0)
    );
    // a budget set anew may alert again: $700.00 is past 100% already (110.57%): one alert,
    // the burn past 100%, which covers the forecast past 100% too
    put(
        &fiona,
        "/api/chargeback/budgets/research/2026-11",
        json!({"limit_cents": 70_000}),
    )
    .await;
    // and its burn is past the whole budget: a hold of research's queue is proposed (the
    // cluster's tests follow it to the ClusterQueue)
    assert_eq!(
        budget::evaluate(&pool, NOV_10).await.expect("anew"),
        budget::Raised {
            alerts: 1,
            holds: 1
        }
    );

    // the webhook: down at first (never lost), then failing once, then taking every alert once
    let dead =
        Webhook::new("http://127.0.0.1:9/hook", std::time::Duration::from_secs(2)).expect("a URL");
    assert_eq!(budget::deliver(&pool, &dead).await.expect("deliver"), 0);
    let waiting: i64 = sqlx::query_scalar(
        "select count(*) from budget_alerts where delivered_at is null and last_error like 'cannot reach%'",
    )
    .fetch_one(&pool)
    .await
    .expect("waiting");
    assert_eq!(waiting, 2);
    let due_now = || async {
        sqlx::query("update budget_alerts set next_attempt_at = now() where delivered_at is null")
            .execute(&pool)
            .await
            .expect("due");
    };
    due_now().await;
    let (url, received) = receiver().await;
    let hook = Webhook::new(&url, std::time::Duration::from_secs(5)).expect("a URL");
    assert_eq!(budget::deliver(&pool, &hook).await.expect("deliver"), 1);
    due_now().await;
    assert_eq!(budget::deliver(&pool, &hook).await.expect("retry"), 1);
    assert_eq!(
        budget::deliver(&pool, &hook).await.expect("nothing left"),
        0
    );
    let taken: Vec<Value> = received
        .lock()
        .expect("lock")
        .iter()
        .filter(|(status, _)| *status == 200)
        .map(|(_, body)| body.clone())
        .collect();
    assert_eq!(taken.len(), 2);
    let mut keys: Vec<(String, String, u64)> = taken
        .iter()
        .map(|b| {
            (
                b["limit"].as_str().unwrap_or_default().to_owned(),
                b["crossing"].as_str().unwrap_or_default().to_owned(),
                b["threshold_pct"].as_u64().unwrap_or_default(),
            )
        })
        .collect();
    keys.sort();
    keys.dedup();
    assert_eq!(keys.len(), 2, "each alert taken once");
    assert!(
        taken.iter().any(|b| b["text"]
            == "gpufleet: research is forecast to use 258.00% of its 2026-11 budget of $1,000.00 (by allocation), past 100%."),
        "{taken:?}"
    );
    assert!(
        taken.iter().any(|b| b["text"]
            == "gpufleet: research has used 110.57% of its 2026-11 budget of $700.00 (by allocation), past 100%. A hold of its ClusterQueue is proposed for an approver to confirm."),
        "{taken:?}"
    );
    // the page's list shows them delivered
    let all: Budgets = send(
        &app,
        request(
            Method::GET,
            "/api/chargeback/budgets?month=2026-11",
            Some(&fiona),
            None,
        ),
    )
    .await
    .json();
    assert_eq!(all.alerts.len(), 2);
    assert!(all.alerts.iter().all(|a| a.delivered_at.is_some()));
    assert!(
        all.alerts
            .iter()
            .any(|a| a.crossing == Crossing::Actual && a.threshold_pct == 100)
    );

    // removed by finance, audited
    let reply = send(
        &app,
        request(
            Method::DELETE,
            "/api/chargeback/budgets/search/2026-11",
            Some(&fiona),
            None,
        ),
    )
    .await;
    assert_eq!(reply.status, StatusCode::OK, "{}", reply.text());
    let left: Budgets = reply.json();
    assert_eq!(left.lines.len(), 1);

    // the CLI sets one (audited as the console's) and prints the month's
    let cli = |args: &[&str]| {
        let args: Vec<&str> = ["chargeback"]
            .into_iter()
            .chain(args.iter().copied())
            .collect();
        crate::common::gpufleet(&pool, &args, None)
    };
    let out = cli(&[
        "set-budget",
        "search",
        "--month",
        "2026-11",
        "--gpu-hours",
        "40",
        "--thresholds-pct",
        "50,100",
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let out = cli(&["set-budget", "search", "--month", "2026-11", "--cents", "0"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--cents: whole cents"));
    let out = cli(&["budgets", "--month", "2026-11"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let printed: Budgets = serde_json::from_slice(&out.stdout).expect("JSON");
    let search = printed
        .lines
        .iter()
        .find(|l| l.team == "search")
        .expect("search");
    assert_eq!(search.budget.thresholds_pct, [50, 100]);
}

/// A webhook receiver on a free port that answers its first POST 500 and the rest 200,
/// keeping (status, body) of each.
async fn receiver() -> (String, Arc<Mutex<Vec<(u16, Value)>>>) {
    let received: Arc<Mutex<Vec<(u16, Value)>>> = Arc::default();
    let seen = received.clone();
    let app = axum::Router::new().route(
        "/hook",
        axum::routing::post(move |axum::Json(body): axum::Json<Value>| {
            let seen = seen.clone();
            async move {
                let mut seen = seen.lock().expect("lock");
                let status = if seen.is_empty() { 500 } else { 200 };
                seen.push((status, body));
                StatusCode::from_u16(status).unwrap_or(StatusCode::OK)
            }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("a port");
    let url = format!("http://{}/hook", listener.local_addr().expect("address"));
    tokio::spawn(async move { axum::serve(listener, app).await });
    (url, received)
}

/// Budgets travel with the inventory file: a team's list replaces its budgets (audited with
/// the import), the export prints them with their defaults, applying the export again changes
/// nothing, and a bad entry is refused naming its path.
#[sqlx::test(migrator = "backend::MIGRATOR")]
async fn budgets_travel_with_the_inventory_file(pool: PgPool) {
    use backend::{audit::Actor, fleet::inventory};
    use shared::inventory::BudgetEntry;
    november(&pool).await;
    let current = crate::common::stored_inventory(&pool).await;
    let mut wanted = current.clone();
    let research = wanted
        .teams
        .iter_mut()
        .find(|t| t.name == "research")
        .expect("research");
    research.budgets = vec![BudgetEntry {
        month: "2026-11".into(),
        limit_cents: Some(100_000),
        limit_gpu_hours: None,
        basis: None,
        thresholds_pct: None,
    }];
    assert_eq!(
        crate::common::inventory_applied(&pool, &wanted).await,
        [
            "change team research: budgets [] → [2026-11 100000 cents by allocation alerting at [80, 100]%]"
        ]
    );
    let month = Day::parse("2026-11-01").expect("day");
    let read = budget::read(&pool, month, NOV_10).await.expect("read");
    assert_eq!(read.lines.len(), 1);
    assert_eq!(read.lines[0].spent_pct, "77.40");
    let exported = crate::common::stored_inventory(&pool).await;
    let budgets = &exported
        .teams
        .iter()
        .find(|t| t.name == "research")
        .expect("research")
        .budgets;
    assert_eq!(budgets[0].basis.as_deref(), Some("allocation"));
    assert_eq!(budgets[0].thresholds_pct, Some(vec![80, 100]));
    let mut bad = exported.clone();
    bad.teams[0].budgets = vec![BudgetEntry {
        month: "November".into(),
        limit_cents: None,
        limit_gpu_hours: Some(0),
        basis: None,
        thresholds_pct: None,
    }];
    let err = inventory::apply(&pool, &bad, Actor::Console, true)
        .await
        .expect_err("refused");
    let backend::error::Error::Invalid(fields) = err else {
        panic!("{err:?}")
    };
    let paths: Vec<&str> = fields.iter().map(|f| f.path.as_str()).collect();
    assert_eq!(
        paths,
        [
            "teams[0].budgets[0].month",
            "teams[0].budgets[0].limit_gpu_hours"
        ]
    );
    // the file without them takes them away
    inventory::apply(&pool, &current, Actor::Console, false)
        .await
        .expect("apply");
    assert!(
        budget::read(&pool, month, NOV_10)
            .await
            .expect("read")
            .lines
            .is_empty()
    );
}
