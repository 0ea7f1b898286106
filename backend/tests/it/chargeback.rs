//! Chargeback statements over a real PostgreSQL: usage minute rows (written as the ingest writes
//! them) for one day of the demo fleet, a rate that changes that day, and the statement through
//! the API (JSON and CSV) and the CLI, for each role, against hand-computed figures.
//!
//! The demo fleet: h100-shared 64 H100s at 860 cents per GPU-hour, h200-train 96 H200s at 791,
//! rtx-inference 32 RTX PRO 6000s at 414, h100-mig 8 H100s (split into MIG instances) at 860
//! (the models' prices), teams research and search.

use std::collections::BTreeMap;

use crate::common::{PASSWORD, login, request, router, send, user};
use axum::http::{Method, StatusCode};
use backend::usage;
use serde_json::{Value, json};
use shared::{
    accounts::Role,
    chargeback::{Statement, TeamLine},
    common::utc::{DAY_MS, MINUTE_MS, parse_rfc3339},
    usage::{DeviceMinute, UsageKey, Window},
};
use sqlx::PgPool;

const GPU_MIN: i64 = 60_000_000;

/// 2026-11-10, all day: research holds 8 H100s, 75% busy, every minute observed; search holds
/// 4 RTX PRO 6000s from 00:00 to 12:00, 25% busy, one of the four never reporting to DCGM.
/// DCGM sees every other GPU idle, with no pod (namespace ''), as dcgm-exporter reports them.
/// Kueue's quota on the H100s: research 6, search 4 (using none), so research borrows 2 GPUs
/// all day and search lends them.
async fn usage_day(pool: &PgPool) {
    let day = parse_rfc3339("2026-11-10T00:00:00Z").expect("day");
    let window = Window::new(day, day + DAY_MS).expect("window");
    let key = |minute: i64, ns: &str, flavor: &str| UsageKey {
        minute_ms: day + minute * MINUTE_MS,
        namespace: ns.to_owned(),
        cluster_queue: String::new(),
        flavor: flavor.to_owned(),
    };
    let mut allocated = BTreeMap::new();
    let mut devices = BTreeMap::new();
    let mut lending = BTreeMap::new();
    for m in 0..1440 {
        allocated.insert(key(m, "team-research", "h100-shared"), 8 * GPU_MIN);
        allocated.insert(key(m, "team-search", "h100-shared"), 0);
        for (ns, nominal, borrowed, lent) in [("team-research", 6, 2, 0), ("team-search", 4, 0, 2)]
        {
            lending.insert(
                key(m, ns, "h100-shared"),
                shared::usage::Lending {
                    nominal_gpu_us: nominal * GPU_MIN,
                    borrowed_gpu_us: borrowed * GPU_MIN,
                    lent_gpu_us: lent * GPU_MIN,
                },
            );
        }
        devices.insert(
            key(m, "team-research", "h100-shared"),
            DeviceMinute {
                busy_gpu_us: 6 * GPU_MIN,
                observed_gpu_us: 8 * GPU_MIN,
                fb_used_mib: 8 * 40_000,
            },
        );
        let rtx_idle = if m < 720 { 28 } else { 31 };
        for (flavor, gpus) in [
            ("h100-shared", 56),
            ("h200-train", 96),
            ("h100-mig", 8),
            ("rtx-inference", rtx_idle),
        ] {
            devices.insert(
                key(m, "", flavor),
                DeviceMinute {
                    busy_gpu_us: 0,
                    observed_gpu_us: gpus * GPU_MIN,
                    fb_used_mib: 0,
                },
            );
        }
        if m < 720 {
            allocated.insert(key(m, "team-search", "rtx-inference"), 4 * GPU_MIN);
            devices.insert(
                key(m, "team-search", "rtx-inference"),
                DeviceMinute {
                    busy_gpu_us: GPU_MIN,
                    observed_gpu_us: 3 * GPU_MIN,
                    fb_used_mib: 3 * 20_000,
                },
            );
        }
    }
    usage::db::store_window(pool, window, &allocated, &lending, &devices)
        .await
        .expect("usage rows");
}

fn line<'a>(statement: &'a Statement, team: &str) -> &'a TeamLine {
    statement
        .teams
        .iter()
        .find(|t| t.team == team)
        .unwrap_or_else(|| panic!("no line for {team}"))
}

#[sqlx::test(migrator = "backend::MIGRATOR")]
async fn a_days_statement_to_the_cent_for_each_role(pool: PgPool) {
    backend::fleet::load_demo(&pool).await.expect("demo fleet");
    user(&pool, "fiona", &[Role::Finance], &[]).await;
    user(&pool, "ada", &[Role::Admin], &[]).await;
    user(&pool, "rita", &[Role::Requester], &["research"]).await;
    user(&pool, "nora", &[Role::Requester], &[]).await;
    usage_day(&pool).await;
    let app = router(pool.clone());
    let (fiona, ada, rita, nora) = (
        login(&app, "fiona", PASSWORD).await,
        login(&app, "ada", PASSWORD).await,
        login(&app, "rita", PASSWORD).await,
        login(&app, "nora", PASSWORD).await,
    );

    // rtx-inference costs 500 cents from the statement's day on (it was the model's 414)
    let set = send(
        &app,
        request(
            Method::PUT,
            "/api/chargeback/rates/rtx-inference",
            Some(&ada),
            Some(json!({"effective_from": "2026-11-10", "cents_per_gpu_hour": 500})),
        ),
    )
    .await;
    assert_eq!(set.status, StatusCode::OK, "{}", set.text());
    // a slipped decimal point on the H200s (791 cents): $79.10 asks first, naming both
    // comparisons (the catalogue's price is the rate it follows), and is set once confirmed
    let typo = json!({"effective_from": "2026-11-11", "cents_per_gpu_hour": 7_910});
    let path = "/api/chargeback/rates/h200-train";
    let asked = send(
        &app,
        request(Method::PUT, path, Some(&ada), Some(typo.clone())),
    )
    .await;
    assert_eq!(asked.status, StatusCode::CONFLICT, "{}", asked.text());
    let body: Value = asked.json();
    assert_eq!(body["code"], "confirmation_required");
    assert_eq!(
        body["message"],
        "$79.10 per GPU-hour for h200-train from 2026-11-11 is 10.0× the catalogue's price of its model ($7.91): a slipped decimal point? Send it again confirmed if it is meant."
    );
    let mut confirmed = typo.clone();
    confirmed["confirm"] = json!(true);
    let set = send(
        &app,
        request(Method::PUT, path, Some(&ada), Some(confirmed)),
    )
    .await;
    assert_eq!(set.status, StatusCode::OK, "{}", set.text());
    // the command line asks the same, by its flag
    let args = [
        "chargeback",
        "set-rate",
        "h200-train",
        "--from",
        "2026-11-12",
        "--cents-per-gpu-hour",
        "79",
    ];
    let refused = crate::common::gpufleet(&pool, &args, None);
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert_eq!(refused.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("is 1/100 of the rate it follows ($79.10) and 1/10 of the catalogue's price of its model ($7.91)")
            && stderr.contains("(--confirm)"),
        "{stderr}"
    );
    let confirmed = crate::common::gpufleet(&pool, &[&args[..], &["--confirm"]].concat(), None);
    assert!(
        confirmed.status.success(),
        "{}",
        String::from_utf8_lossy(&confirmed.stderr)
    );
    for (who, body, status) in [
        (
            &fiona,
            json!({"effective_from": "2026-11-10", "cents_per_gpu_hour": 1}),
            StatusCode::FORBIDDEN,
        ),
        (
            &ada,
            json!({"effective_from": "2026-11-10", "cents_per_gpu_hour": -1}),
            StatusCode::UNPROCESSABLE_ENTITY,
        ),
        (
            &ada,
            json!({"effective_from": "10/11/2026", "cents_per_gpu_hour": 1}),
            StatusCode::UNPROCESSABLE_ENTITY,
        ),
    ] {
        let reply = send(
            &app,
            request(
                Method::PUT,
                "/api/chargeback/rates/rtx-inference",
                Some(who),
                Some(body),
            ),
        )
        .await;
        assert_eq!(reply.status, status, "{}", reply.text());
    }
    let missing = send(
        &app,
        request(
            Method::PUT,
            "/api/chargeback/rates/no-such-flavor",
            Some(&ada),
            Some(json!({"effective_from": "2026-11-10", "cents_per_gpu_hour": 1})),
        ),
    )
    .await;
    assert_eq!(missing.status, StatusCode::NOT_FOUND);
    let audited: i64 = sqlx::query_scalar(
        "select count(*) from audit_log where action = 'set rate' and subject = 'flavor rtx-inference'",
    )
    .fetch_one(&pool)
    .await
    .expect("audit");
    assert_eq!(audited, 1);

    let path = "/api/chargeback/statement?from=2026-11-10&to=2026-11-10&idle=allocation";
    let reply = send(&app, request(Method::GET, path, Some(&fiona), None)).await;
    assert_eq!(reply.status, StatusCode::OK, "{}", reply.text());
    let s: Statement = reply.json();
    let (research, search) = (line(&s, "research"), line(&s, "search"));
    // research: 8 GPUs × 24 h = 192 GPU-h × 860 = 165,120; busy 144 GPU-h = 123,840
    assert_eq!(research.allocated_gpu_hours.to_string(), "192.000000");
    assert_eq!(research.cost_by_allocation_cents, 165_120);
    assert_eq!(research.cost_by_use_cents, 123_840);
    assert_eq!(research.utilisation_pct.as_deref(), Some("75.00"));
    // search: 4 × 12 h = 48 GPU-h × 500 = 24,000; busy 12 GPU-h = 6,000; 36 idle, 12 of
    // them never observed (one of four GPUs)
    assert_eq!(search.cost_by_allocation_cents, 24_000);
    assert_eq!(search.cost_by_use_cents, 6_000);
    assert_eq!(search.idle_gpu_hours.to_string(), "36.000000");
    assert_eq!(
        search.unobserved_allocated_gpu_hours.to_string(),
        "12.000000"
    );
    let fleet = s.fleet.clone().expect("finance sees the fleet");
    // capacity: 1,536 H100-h × 860 + 2,304 H200-h × 791 + 768 RTX-h × 500 + 192 MIG H100-h × 860
    //         = 1,320,960 + 1,822,464 + 384,000 + 165,120 = 3,692,544
    assert_eq!(fleet.capacity_cost_cents, 3_692_544);
    // unallocated: (1,536 − 192) × 860 + 2,304 × 791 + (768 − 48) × 500 + 192 × 860
    //            = 1,155,840 + 1,822,464 + 360,000 + 165,120 = 3,503,424
    assert_eq!(fleet.unallocated_cost_cents, 3_503_424);
    // unobserved: the RTX that never reported, 24 GPU-h × 500 = 12,000, the platform's
    assert_eq!(fleet.unobserved_gpu_hours.to_string(), "24.000000");
    assert_eq!(fleet.unobserved_cost_cents, 12_000);
    // idle pool: 3,692,544 − 12,000 − (123,840 + 6,000) = 3,550,704, shared 192 : 48
    // (0.8 : 0.2) → 2,840,563.2 and 710,140.8
    assert_eq!(fleet.idle_pool_cents, 3_550_704);
    assert_eq!(
        (research.idle_share_cents, search.idle_share_cents),
        (2_840_563, 710_141)
    );
    // each team's own idle: research 48 GPU-h × 860 = 41,280; search 36 × 500 = 18,000
    assert_eq!(
        (research.idle_cost_cents, search.idle_cost_cents),
        (41_280, 18_000)
    );
    // charges 123,840 + 2,840,563.2 = 2,964,403.2; 6,000 + 710,140.8 = 716,140.8; the
    // platform keeps the unobserved 12,000
    assert_eq!(
        (research.charge_cents, search.charge_cents),
        (2_964_403, 716_141)
    );
    assert_eq!(fleet.platform_cents, 12_000);
    assert_eq!(research.borrowed_gpu_hours.to_string(), "48.000000");
    assert_eq!(search.lent_gpu_hours.to_string(), "48.000000");
    assert_eq!(
        research.lending_fee_cents, 0,
        "no lending credit unless asked"
    );

    // a 50% lending credit: 48 GPU-hours lent × $8.60 × 50% = $206.40 from research to search
    let lent: Statement = send(
        &app,
        request(
            Method::GET,
            &format!("{path}&lend_credit=50"),
            Some(&fiona),
            None,
        ),
    )
    .await
    .json();
    let (research_lent, search_lent) = (line(&lent, "research"), line(&lent, "search"));
    assert_eq!(lent.lend_credit_pct, 50);
    assert_eq!(
        (
            research_lent.lending_fee_cents,
            search_lent.lending_credit_cents
        ),
        (20_640, 20_640)
    );
    assert_eq!(
        (research_lent.charge_cents, search_lent.charge_cents),
        (2_964_403 + 20_640, 716_141 - 20_640)
    );
    let bad = send(
        &app,
        request(
            Method::GET,
            &format!("{path}&lend_credit=150"),
            Some(&fiona),
            None,
        ),
    )
    .await;
    assert_eq!(bad.status, StatusCode::UNPROCESSABLE_ENTITY);
    assert!(bad.text().contains("lend_credit"), "{}", bad.text());

    // separate: the teams pay their use, the platform the rest (3,550,704 + 12,000)
    let separate: Statement = send(
        &app,
        request(
            Method::GET,
            "/api/chargeback/statement?from=2026-11-10&to=2026-11-10&idle=separate",
            Some(&fiona),
            None,
        ),
    )
    .await
    .json();
    assert_eq!(line(&separate, "research").charge_cents, 123_840);
    assert_eq!(
        separate.fleet.as_ref().map(|f| f.platform_cents),
        Some(3_562_704)
    );

    // CSV: by format=csv and by Accept, the same figures as the JSON
    let csv = send(
        &app,
        request(
            Method::GET,
            &format!("{path}&format=csv"),
            Some(&fiona),
            None,
        ),
    )
    .await;
    assert_eq!(csv.status, StatusCode::OK);
    assert_eq!(
        csv.headers[axum::http::header::CONTENT_TYPE],
        "text/csv; charset=utf-8"
    );
    let mut accept = request(Method::GET, path, Some(&fiona), None);
    accept.headers_mut().insert(
        axum::http::header::ACCEPT,
        "text/csv".parse().expect("header"),
    );
    assert_eq!(send(&app, accept).await.text(), csv.text());
    let text = csv.text();
    let rows: Vec<Vec<&str>> = text
        .split("\r\n")
        .filter(|l| !l.is_empty())
        .map(|l| l.split(',').collect())
        .collect();
    let header = &rows[0];
    let column = |name: &str| {
        header
            .iter()
            .position(|h| *h == name)
            .unwrap_or_else(|| panic!("{name}"))
    };
    let research_row = rows
        .iter()
        .find(|r| r[column("team")] == "research")
        .expect("research row");
    assert_eq!(
        research_row[column("allocated_gpu_hours")],
        research.allocated_gpu_hours.to_string()
    );
    assert_eq!(
        research_row[column("cost_by_use_cents")],
        research.cost_by_use_cents.to_string()
    );
    assert_eq!(
        research_row[column("charge_cents")],
        research.charge_cents.to_string()
    );
    let charged: i64 = rows[1..]
        .iter()
        .map(|r| r[column("charge_cents")].parse::<i64>().expect("cents"))
        .sum();
    assert!(
        (charged - fleet.capacity_cost_cents).abs() <= 2,
        "{charged}"
    );

    // a requester sees their own team's line and no fleet figures; without a team, nothing
    let mine: Value = send(&app, request(Method::GET, path, Some(&rita), None))
        .await
        .json();
    assert_eq!(mine["teams"].as_array().map(Vec::len), Some(1));
    assert_eq!(mine["teams"][0]["team"], "research");
    assert_eq!(mine["teams"][0]["charge_cents"], 2_964_403);
    assert!(mine["fleet"].is_null());
    let none = send(&app, request(Method::GET, path, Some(&nora), None)).await;
    assert_eq!(none.status, StatusCode::FORBIDDEN);
    let visitor = send(&app, request(Method::GET, path, None, None)).await;
    assert_eq!(visitor.status, StatusCode::UNAUTHORIZED);

    // bad queries: 422 naming each field
    let bad = send(
        &app,
        request(
            Method::GET,
            "/api/chargeback/statement?from=2026-11-31&to=2026-11-10&idle=weighted",
            Some(&fiona),
            None,
        ),
    )
    .await;
    assert_eq!(bad.status, StatusCode::UNPROCESSABLE_ENTITY);
    let body: Value = bad.json();
    let paths: Vec<&str> = body["fields"]
        .as_array()
        .expect("fields")
        .iter()
        .filter_map(|f| f["path"].as_str())
        .collect();
    assert_eq!(paths, vec!["from", "idle"]);

    // by day: one day here, equal to the period
    let by_day: Statement = send(
        &app,
        request(Method::GET, &format!("{path}&by=day"), Some(&fiona), None),
    )
    .await
    .json();
    assert_eq!(by_day.days.len(), 1);
    assert_eq!(line(&by_day, "search"), search);

    // the drill-down: research's 1,440 minute rows of the day, each from Kueue and DCGM,
    // adding up to the statement's figures
    let drill: shared::chargeback::Drill = send(
        &app,
        request(
            Method::GET,
            "/api/chargeback/drill?team=research&day=2026-11-10",
            Some(&rita),
            None,
        ),
    )
    .await
    .json();
    assert_eq!(drill.minutes.len(), 1440);
    assert!(drill.minutes.iter().all(|m| m.sources == ["kueue", "dcgm"]));
    let allocated: i128 = drill
        .minutes
        .iter()
        .filter_map(|m| m.allocated_gpu_microseconds)
        .map(i128::from)
        .sum();
    assert_eq!(allocated, research.allocated_gpu_hours.microseconds());
    assert_eq!(drill.minutes[0].minute, "2026-11-10T00:00:00Z");
    assert_eq!(drill.rollups.len(), 1);
    assert_eq!(drill.rollups[0].busy_gpu_hours, research.busy_gpu_hours);
    // its one flavor's day at the day's rate is the statement's cost by allocation
    assert_eq!(
        drill.rollups[0].allocated_cents,
        Some(research.cost_by_allocation_cents)
    );
    assert!(!drill.closed);
    let theirs = send(
        &app,
        request(
            Method::GET,
            "/api/chargeback/drill?team=search&day=2026-11-10",
            Some(&rita),
            None,
        ),
    )
    .await;
    assert_eq!(theirs.status, StatusCode::FORBIDDEN);
    let unknown = send(
        &app,
        request(
            Method::GET,
            "/api/chargeback/drill?team=nobody&day=2026-11-10",
            Some(&fiona),
            None,
        ),
    )
    .await;
    assert_eq!(unknown.status, StatusCode::NOT_FOUND);
    let bad = send(
        &app,
        request(
            Method::GET,
            "/api/chargeback/drill?day=11/10",
            Some(&fiona),
            None,
        ),
    )
    .await;
    assert_eq!(bad.status, StatusCode::UNPROCESSABLE_ENTITY);

    // the CLI prints the same CSV
    cli_prints(&pool, "csv", &text);
    let out = crate::common::gpufleet(
        &pool,
        &[
            "chargeback",
            "statement",
            "--from",
            "2026-11-10",
            "--to",
            "2026-11-09",
            "--idle-share",
            "weighted",
            "--lend-credit-pct",
            "150",
        ],
        None,
    );
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("--lend-credit-pct: \"150\": a whole percentage of the rate, 0 to 100"),
        "{stderr}"
    );
    assert!(
        stderr.contains("--idle-share: \"weighted\": allocation, use, even or separate"),
        "{stderr}"
    );
    assert!(
        stderr.contains("--to: 2026-11-09 is before 2026-11-10"),
        "{stderr}"
    );
}

/// Closing November freezes it: the database refuses changes to its figures, a rate set later
/// and a late ingest leave its statement as it was, the late ingest shows as an adjustment in
/// December, and only an admin reopens it, with a reason, audited.
#[sqlx::test(migrator = "backend::MIGRATOR")]
async fn a_closed_month_never_changes(pool: PgPool) {
    backend::fleet::load_demo(&pool).await.expect("demo fleet");
    user(&pool, "fiona", &[Role::Finance], &[]).await;
    user(&pool, "ada", &[Role::Admin], &[]).await;
    usage_day(&pool).await;
    let app = router(pool.clone());
    let (fiona, ada) = (
        login(&app, "fiona", PASSWORD).await,
        login(&app, "ada", PASSWORD).await,
    );
    let post = |path: &str, who, body| request(Method::POST, path, Some(who), body);
    let november = "/api/chargeback/statement?from=2026-11-01&to=2026-11-30";
    // fiona closes November with `body`
    let close = |body: Value| {
        let request = post("/api/chargeback/months/2026-11/close", &fiona, Some(body));
        send(&app, request)
    };

    // not before the ingest has passed the month's end
    let early = close(json!({})).await;
    assert_eq!(early.status, StatusCode::CONFLICT, "{}", early.text());
    assert!(
        early.text().contains("only up to nothing yet"),
        "{}",
        early.text()
    );
    sqlx::query("update usage_sources set watermark = '2026-12-01T00:00:00Z' where source in ('kueue', 'dcgm')")
        .execute(&pool)
        .await
        .expect("watermarks");
    let current = send(
        &app,
        post(
            "/api/chargeback/months/2099-01/close",
            &fiona,
            Some(json!({})),
        ),
    )
    .await;
    assert_eq!(current.status, StatusCode::CONFLICT);
    assert!(
        current.text().contains("2099-01 has not ended"),
        "{}",
        current.text()
    );
    let bad = send(
        &app,
        post(
            "/api/chargeback/months/2026-13/close",
            &fiona,
            Some(json!({})),
        ),
    )
    .await;
    assert_eq!(bad.status, StatusCode::UNPROCESSABLE_ENTITY);

    // search served two models that day (by serving time 3/4 and 1/4 of its cost): a closed
    // month keeps their tokens and serving time
    let day = parse_rfc3339("2026-11-10T00:00:00Z").expect("day");
    let search_id: i64 = sqlx::query_scalar("select id from teams where name = 'search'")
        .fetch_one(&pool)
        .await
        .expect("search");
    let served = [("llama-8b", 3), ("llama-1b", 1)]
        .into_iter()
        .map(|(model, decode_s)| {
            (
                shared::usage::TokenKey {
                    minute_ms: day,
                    namespace: "team-search".to_owned(),
                    model: model.to_owned(),
                },
                shared::usage::Tokens {
                    prompt: 1_000,
                    generation: 100,
                    prefill_us: 0,
                    decode_us: decode_s * 1_000_000,
                },
            )
        })
        .collect();
    let mut tx = pool.begin().await.expect("tx");
    usage::db::write_tokens(
        &mut tx,
        Window::new(day, day + MINUTE_MS).expect("w"),
        &served,
        &[("team-search".to_owned(), search_id)].into(),
    )
    .await
    .expect("token rows");
    tx.commit().await.expect("commit");
    let before: Statement = send(&app, request(Method::GET, november, Some(&fiona), None))
        .await
        .json();
    let shares: Vec<(&str, i64)> = before
        .models
        .iter()
        .map(|m| (m.model.as_str(), m.share_of_team_ppm))
        .collect();
    assert_eq!(shares, [("llama-1b", 250_000), ("llama-8b", 750_000)]);
    // Only the 10th was measured: the other 29 days (200 GPUs × 24 h = 4,800 GPU-h a day) and
    // the RTX that never reported on the 10th (24 GPU-h) had no DCGM sample, 139,224 GPU-h. At
    // the models' prices a day is 64 × 24 × 860 + 96 × 24 × 791 + 32 × 24 × 414 + 8 × 24 × 860
    // = 3,626,496 cents; 29 days = 105,168,384, + 24 × 414 = 105,178,320 cents. Closing asks
    // for that figure, and refuses another.
    let unobserved = before
        .fleet
        .as_ref()
        .map(|f| f.unobserved_gpu_hours.to_string());
    assert_eq!(unobserved.as_deref(), Some("139224.000000"));
    let asked = close(json!({})).await;
    assert_eq!(asked.status, StatusCode::CONFLICT, "{}", asked.text());
    let body: Value = asked.json();
    assert_eq!(body["code"], "confirmation_required");
    assert!(
        body["message"].as_str().unwrap_or_default().contains(
            "2026-11 has 139224.00 GPU-hours ($1,051,783.20) on 30 day(s) (2026-11-01 … 2026-11-30) of capacity with no DCGM sample"
        ),
        "{body}"
    );
    let wrong = close(json!({"accept_unobserved_gpu_hours": "139223.000000"})).await;
    assert_eq!(wrong.status, StatusCode::CONFLICT, "{}", wrong.text());
    let closed = close(json!({"accept_unobserved_gpu_hours": "139224.000000"})).await;
    assert_eq!(closed.status, StatusCode::OK, "{}", closed.text());
    let months: Value = closed.json();
    assert_eq!(months[0]["month"], "2026-11");
    assert_eq!(months[0]["closed_by"], "fiona");
    let again = close(json!({})).await;
    assert_eq!(again.status, StatusCode::CONFLICT);
    assert!(
        again.text().contains("2026-11 is closed already"),
        "{}",
        again.text()
    );

    // the database itself refuses changes to the frozen figures
    for sql in [
        "update chargeback_closed_usage set busy_gpu_microseconds = 0",
        "delete from chargeback_closed_usage",
        "delete from chargeback_closed_months",
        "truncate chargeback_closed_usage",
        "insert into chargeback_closed_usage values ('2026-11-01', '2026-11-02', 'x', 'y', 1, 1, 1)",
        "update chargeback_closed_rates set cents_per_gpu_hour = 1",
    ] {
        let err = sqlx::query(sql).execute(&pool).await.expect_err(sql);
        assert!(err.to_string().contains("closed"), "{sql}: {err}");
    }

    // a rate dated in the closed month would show nowhere in it and price December instead:
    // refused in words, and so is removing one; a late ingest on the 20th: November stays
    let rate = |method: Method, uri: &str, body: Option<Value>| {
        send(&app, request(method, uri, Some(&ada), body))
    };
    let refused = rate(
        Method::PUT,
        "/api/chargeback/rates/h100-shared",
        Some(json!({"effective_from": "2026-11-15", "cents_per_gpu_hour": 1_000})),
    )
    .await;
    assert_eq!(refused.status, StatusCode::CONFLICT, "{}", refused.text());
    assert!(
        refused
            .text()
            .contains("2026-11 is closed: its figures are frozen, so a rate dated 2026-11-15 would change nothing in it"),
        "{}",
        refused.text()
    );
    let refused = rate(
        Method::DELETE,
        "/api/chargeback/rates/h100-shared/2026-11-01",
        None,
    )
    .await;
    assert_eq!(refused.status, StatusCode::CONFLICT, "{}", refused.text());
    // in an open month: set, corrected (the same day), removed; each audited with its figures
    for (method, body) in [
        (
            Method::PUT,
            Some(json!({"effective_from": "2026-12-05", "cents_per_gpu_hour": 1_000})),
        ),
        (
            Method::PUT,
            Some(json!({"effective_from": "2026-12-05", "cents_per_gpu_hour": 950})),
        ),
    ] {
        let reply = rate(method, "/api/chargeback/rates/h100-shared", body).await;
        assert_eq!(reply.status, StatusCode::OK, "{}", reply.text());
    }
    let removed = rate(
        Method::DELETE,
        "/api/chargeback/rates/h100-shared/2026-12-05",
        None,
    )
    .await;
    assert_eq!(removed.status, StatusCode::OK, "{}", removed.text());
    assert!(
        !removed
            .json::<Vec<shared::chargeback::Rate>>()
            .iter()
            .any(|r| r.effective_from.to_string() == "2026-12-05")
    );
    for (uri, status) in [
        (
            "/api/chargeback/rates/h100-shared/2026-12-05",
            StatusCode::NOT_FOUND,
        ),
        (
            "/api/chargeback/rates/h100-shared/2026-13-01",
            StatusCode::UNPROCESSABLE_ENTITY,
        ),
    ] {
        assert_eq!(
            rate(Method::DELETE, uri, None).await.status,
            status,
            "{uri}"
        );
    }
    let audited: Vec<(String, Option<Value>, Option<Value>)> = sqlx::query_as(
        "select action, before, after from audit_log where subject = 'flavor h100-shared' order by id",
    )
    .fetch_all(&pool)
    .await
    .expect("audit");
    let cents = |v: &Option<Value>| v.as_ref().map(|v| v["cents_per_gpu_hour"].clone());
    let audited: Vec<(&str, Option<Value>, Option<Value>)> = audited
        .iter()
        .map(|(a, b, c)| (a.as_str(), cents(b), cents(c)))
        .collect();
    assert_eq!(
        audited,
        [
            ("set rate", None, Some(json!(1_000))),
            ("correct rate", Some(json!(1_000)), Some(json!(950))),
            ("remove rate", Some(json!(950)), None),
        ]
    );
    let late_day = parse_rfc3339("2026-11-20T00:00:00Z").expect("day");
    let late = BTreeMap::from([(
        UsageKey {
            minute_ms: late_day,
            namespace: "team-research".to_owned(),
            cluster_queue: String::new(),
            flavor: "h100-shared".to_owned(),
        },
        60 * GPU_MIN,
    )]);
    let mut tx = pool.begin().await.expect("tx");
    usage::db::write_allocation(
        &mut tx,
        Window::new(late_day, late_day + MINUTE_MS).expect("w"),
        &late,
        &BTreeMap::new(),
        &BTreeMap::new(),
    )
    .await
    .expect("late ingest");
    tx.commit().await.expect("commit");
    let after: Statement = send(&app, request(Method::GET, november, Some(&fiona), None))
        .await
        .json();
    assert_eq!(after.teams, before.teams);
    assert_eq!(after.models, before.models);
    assert_eq!(after.fleet, before.fleet);
    assert_eq!(after.closed_months, vec!["2026-11".to_owned()]);
    assert!(after.adjustments.is_empty());

    // December carries the late minute: 60 GPU-minutes = 1 GPU-hour at November's frozen 860
    let december: Statement = send(
        &app,
        request(
            Method::GET,
            "/api/chargeback/statement?from=2026-12-01&to=2026-12-01",
            Some(&fiona),
            None,
        ),
    )
    .await
    .json();
    assert_eq!(december.adjustments.len(), 1, "{:?}", december.adjustments);
    let adjustment = &december.adjustments[0];
    assert_eq!(
        (adjustment.month.as_str(), adjustment.team.as_str()),
        ("2026-11", "research")
    );
    assert_eq!(adjustment.allocated_gpu_hours.to_string(), "1.000000");
    assert_eq!(adjustment.cost_by_allocation_cents, 860);
    assert_eq!(adjustment.cost_by_use_cents, 0);

    // only an admin reopens, and says why
    let refused = send(
        &app,
        post(
            "/api/chargeback/months/2026-11/reopen",
            &fiona,
            Some(json!({"reason": "x"})),
        ),
    )
    .await;
    assert_eq!(refused.status, StatusCode::FORBIDDEN);
    let no_reason = send(
        &app,
        post(
            "/api/chargeback/months/2026-11/reopen",
            &ada,
            Some(json!({"reason": " "})),
        ),
    )
    .await;
    assert_eq!(no_reason.status, StatusCode::UNPROCESSABLE_ENTITY);
    let reopened = send(
        &app,
        post(
            "/api/chargeback/months/2026-11/reopen",
            &ada,
            Some(json!({"reason": "late DCGM data from rack 7"})),
        ),
    )
    .await;
    assert_eq!(reopened.status, StatusCode::OK, "{}", reopened.text());
    let audit: Vec<(String, String, Value)> = sqlx::query_as(
        "select action, actor, after from audit_log where kind = 'chargeback_month' order by id",
    )
    .fetch_all(&pool)
    .await
    .expect("audit");
    assert_eq!(audit.len(), 2);
    assert_eq!(
        (audit[0].0.as_str(), audit[0].1.as_str()),
        ("close", "fiona")
    );
    assert_eq!(
        (audit[1].0.as_str(), audit[1].1.as_str()),
        ("reopen", "ada")
    );
    assert_eq!(audit[1].2["reason"], "late DCGM data from rack 7");
    // open again, November is priced live, and a rate dated in it is taken: 193 GPU-h of
    // research at the new 1,000 (193 × 860 = 165,980 before it)
    let set = send(
        &app,
        request(
            Method::PUT,
            "/api/chargeback/rates/h100-shared",
            Some(&ada),
            Some(json!({"effective_from": "2026-11-01", "cents_per_gpu_hour": 1_000})),
        ),
    )
    .await;
    assert_eq!(set.status, StatusCode::OK, "{}", set.text());
    let live: Statement = send(&app, request(Method::GET, november, Some(&fiona), None))
        .await
        .json();
    assert_eq!(line(&live, "research").cost_by_allocation_cents, 193_000);
    assert!(live.closed_months.is_empty());
    assert_eq!(audit[0].2["unobserved_gpu_hours"], "139224.000000");

    // the command line asks for the same figure, by its flag
    let refused = crate::common::gpufleet(&pool, &["chargeback", "close", "2026-11"], None);
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert_eq!(refused.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("--accept-unobserved-gpu-hours 139224.000000"),
        "{stderr}"
    );
    let closed = crate::common::gpufleet(
        &pool,
        &[
            "chargeback",
            "close",
            "2026-11",
            "--accept-unobserved-gpu-hours",
            "139224.000000",
        ],
        None,
    );
    assert!(
        closed.status.success(),
        "{}",
        String::from_utf8_lossy(&closed.stderr)
    );
}

/// Rates are part of inventory as code: a file sets them, export writes them back, a second
/// apply changes nothing, and a file without them removes them.
#[sqlx::test(migrator = "backend::MIGRATOR")]
async fn rates_travel_with_the_inventory_file(pool: PgPool) {
    use backend::{audit::Actor, fleet::inventory};
    backend::fleet::load_demo(&pool).await.expect("demo fleet");
    let current = crate::common::stored_inventory(&pool).await;
    let mut wanted = current.clone();
    let flavor = wanted
        .flavors
        .iter_mut()
        .find(|f| f.name == "h100-shared")
        .expect("h100-shared");
    flavor.rates = vec![shared::inventory::RateEntry {
        effective_from: shared::common::day::Day::parse("2026-12-01").expect("day"),
        cents_per_gpu_hour: 900,
    }];
    assert_eq!(
        crate::common::inventory_applied(&pool, &wanted).await,
        ["change flavor h100-shared: rates [] → [900 from 2026-12-01]"]
    );
    let rates = backend::chargeback::db::rates(&pool).await.expect("rates");
    assert!(rates.iter().any(|r| r.flavor == "h100-shared"
        && r.effective_from.to_string() == "2026-12-01"
        && r.cents_per_gpu_hour == 900));
    inventory::apply(&pool, &current, Actor::Console, false)
        .await
        .expect("apply");
    let rates = backend::chargeback::db::rates(&pool).await.expect("rates");
    assert!(
        rates
            .iter()
            .all(|r| r.effective_from.to_string() == "1970-01-01")
    );
}

#[sqlx::test(migrator = "backend::MIGRATOR")]
async fn a_period_reaching_into_the_future_is_priced_up_to_now(pool: PgPool) {
    backend::fleet::load_demo(&pool).await.expect("demo fleet");
    user(&pool, "fiona", &[Role::Finance], &[]).await;
    let app = router(pool.clone());
    let fiona = login(&app, "fiona", PASSWORD).await;
    let now_ms = || backend::clock::now_ms();
    let today = shared::common::day::Day::of_unix_seconds(now_ms() / 1000);
    let midnight = i64::from(today.days_since_epoch()) * DAY_MS;
    // Yesterday, today and the next five days: 200 GPUs for a whole day, then up to now.
    let path = format!(
        "/api/chargeback/statement?from={}&to={}",
        today.plus(-1),
        today.plus(5)
    );
    let before = now_ms();
    let reply = send(&app, request(Method::GET, &path, Some(&fiona), None)).await;
    let after = now_ms();
    assert_eq!(reply.status, StatusCode::OK, "{}", reply.text());
    let statement: Statement = reply.json();
    let capacity = statement
        .fleet
        .as_ref()
        .expect("the fleet line")
        .capacity_gpu_hours
        .microseconds();
    let priced = |until: i64| 200 * i128::from(DAY_MS + (until - midnight)) * 1_000;
    assert!(
        priced(before) <= capacity && capacity <= priced(after),
        "{capacity} µs of capacity, between {} and {}",
        priced(before),
        priced(after)
    );
    assert!(
        statement
            .notes
            .iter()
            .any(|n| n.starts_with("The period reaches past now")),
        "{:?}",
        statement.notes
    );
}

/// FinOps FOCUS 1.2 from the API, on [`usage_day`]'s figures at the demo's rates (H100 860,
/// RTX 414 cents a GPU-hour): by use, research's row is 144 busy GPU-hours = $1,238.40 and
/// search's 12 = $49.68, then each team's idle share; by allocation 192 GPU-hours = $1,651.20
/// and 48 = $198.72. Each team's rows add up to the statement's charge (by use) or its cost by
/// allocation; a requester gets their own team's rows; a basis without FOCUS is refused.
#[sqlx::test(migrator = "backend::MIGRATOR")]
async fn the_focus_export_adds_up_to_the_statement(pool: PgPool) {
    backend::fleet::load_demo(&pool).await.expect("demo fleet");
    user(&pool, "fiona", &[Role::Finance], &[]).await;
    user(&pool, "rita", &[Role::Requester], &["research"]).await;
    usage_day(&pool).await;
    let app = router(pool.clone());
    let (fiona, rita) = (
        login(&app, "fiona", PASSWORD).await,
        login(&app, "rita", PASSWORD).await,
    );
    let path = "/api/chargeback/statement?from=2026-11-10&to=2026-11-10";
    let statement: Statement = send(&app, request(Method::GET, path, Some(&fiona), None))
        .await
        .json();
    let focus = |who, basis: &'static str| {
        let app = app.clone();
        async move {
            let uri = format!("{path}&format=focus&basis={basis}");
            let reply = send(&app, request(Method::GET, &uri, Some(who), None)).await;
            assert_eq!(reply.status, StatusCode::OK, "{}", reply.text());
            assert_eq!(
                reply.headers[axum::http::header::CONTENT_DISPOSITION],
                "attachment; filename=\"gpufleet-focus-2026-11-10-2026-11-10.csv\""
            );
            reply.text()
        }
    };
    // (team, category, cost, quantity) of each row; the CSV's fields hold no commas but Tags
    let rows = |text: &str| -> Vec<(String, String, i64, String)> {
        let lines: Vec<Vec<&str>> = text
            .split("\r\n")
            .filter(|l| !l.is_empty())
            .map(|l| l.split(',').collect())
            .collect();
        let at = |name: &str| {
            lines[0]
                .iter()
                .position(|h| *h == name)
                .unwrap_or_else(|| panic!("{name}"))
        };
        lines[1..]
            .iter()
            .map(|l| {
                let cents = (l[at("BilledCost")].parse::<f64>().expect("cost") * 100.0).round();
                (
                    l[at("SubAccountName")].to_owned(),
                    l[at("ChargeCategory")].to_owned(),
                    cents as i64,
                    l[at("PricingQuantity")].to_owned(),
                )
            })
            .collect()
    };
    let by_use_text = focus(&fiona, "use").await;
    let by_use = rows(&by_use_text);
    // the CLI prints the same rows (use is the default basis)
    cli_prints(&pool, "focus", &by_use_text);
    let usage: Vec<_> = by_use.iter().filter(|r| r.1 == "Usage").cloned().collect();
    assert_eq!(
        usage,
        [
            (
                "research".into(),
                "Usage".into(),
                123_840,
                "144.000000".into()
            ),
            ("search".into(), "Usage".into(), 4_968, "12.000000".into()),
        ]
    );
    let by_allocation = rows(&focus(&fiona, "allocation").await);
    assert_eq!(
        by_allocation,
        [
            (
                "research".into(),
                "Usage".into(),
                165_120,
                "192.000000".into()
            ),
            ("search".into(), "Usage".into(), 19_872, "48.000000".into()),
        ]
    );
    let sum = |rows: &[(String, String, i64, String)], team: &str| -> i64 {
        rows.iter().filter(|r| r.0 == team).map(|r| r.2).sum()
    };
    for team in ["research", "search"] {
        let line = line(&statement, team);
        assert_eq!(sum(&by_use, team), line.charge_cents, "{team}");
        assert_eq!(
            sum(&by_allocation, team),
            line.cost_by_allocation_cents,
            "{team}"
        );
    }
    // in every idle mode, with a lending credit, a team's rows are its charge to the cent
    for idle in ["allocation", "use", "even", "separate"] {
        let chosen = format!("{path}&idle={idle}&lend_credit=37");
        let statement: Statement = send(&app, request(Method::GET, &chosen, Some(&fiona), None))
            .await
            .json();
        let uri = format!("{chosen}&format=focus");
        let text = send(&app, request(Method::GET, &uri, Some(&fiona), None))
            .await
            .text();
        for team in ["research", "search"] {
            assert_eq!(
                sum(&rows(&text), team),
                line(&statement, team).charge_cents,
                "{team}, idle by {idle}"
            );
        }
    }
    let mine = rows(&focus(&rita, "use").await);
    assert!(!mine.is_empty() && mine.iter().all(|r| r.0 == "research"));
    let refused = send(
        &app,
        request(
            Method::GET,
            &format!("{path}&format=csv&basis=use"),
            Some(&fiona),
            None,
        ),
    )
    .await;
    assert_eq!(refused.status, StatusCode::UNPROCESSABLE_ENTITY);
    assert!(refused.text().contains("basis"), "{}", refused.text());
}

/// `gpufleet chargeback statement` for 2026-11-10 in `format` prints `expected`, as the API did.
fn cli_prints(pool: &PgPool, format: &str, expected: &str) {
    let args = [
        "chargeback",
        "statement",
        "--from",
        "2026-11-10",
        "--to",
        "2026-11-10",
        "--format",
        format,
    ];
    let out = crate::common::gpufleet(pool, &args, None);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(String::from_utf8_lossy(&out.stdout), expected);
}
