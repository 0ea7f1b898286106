//! Quota requests against a real PostgreSQL through the real router: the life cycle and its
//! illegal moves, four eyes, concurrent approvals, capacity rules at approval, bad input that
//! writes nothing, the append-only audit log, flavor and queue edits.
//!
//! The fleet is the demo inventory's (backend/demo/inventory.yaml): flavors h200-train (12
//! nodes × 8 = 96 GPUs), h100-shared (8 × 8 = 64), rtx-inference (4 × 8 = 32) and h100-mig
//! (1 × 8, as 56 `1g.10gb` MIG instances), one per pool, and the teams research and search.

use crate::common::{PASSWORD, Reply, Session, login, request, router, send, user};
use axum::{Router, http::Method, http::StatusCode};
use serde_json::{Value, json};
use shared::{
    ApiError, ErrorCode,
    accounts::Role,
    audit::Page,
    chargeback::worth::{InUse, Review},
    quota::{QuotaRequest, QuotaWorld, RequestView, State},
};
use sqlx::PgPool;

struct World {
    router: Router,
    rita: Session,
    alex: Session,
    anna: Session,
    ada: Session,
    fiona: Session,
}

async fn world(pool: &PgPool) -> World {
    // The demo inventory: its fleet and the teams research and search.
    backend::fleet::load_demo(pool).await.expect("demo fleet");
    user(pool, "rita", &[Role::Requester], &["research"]).await;
    user(pool, "sam", &[Role::Requester], &["search"]).await;
    user(pool, "alex", &[Role::Approver], &[]).await;
    user(pool, "anna", &[Role::Approver], &[]).await;
    user(pool, "ada", &[Role::Admin], &[]).await;
    user(pool, "fiona", &[Role::Finance], &[]).await;
    let router = router(pool.clone());
    World {
        rita: login(&router, "rita", PASSWORD).await,
        alex: login(&router, "alex", PASSWORD).await,
        anna: login(&router, "anna", PASSWORD).await,
        ada: login(&router, "ada", PASSWORD).await,
        fiona: login(&router, "fiona", PASSWORD).await,
        router,
    }
}

fn spec(lines: Value) -> Value {
    json!({
        "lines": lines,
        "checkpoint_interval_min": 20,
        "justification": "pre-training of the 8B model",
        "starts_on": "2026-01-01",
    })
}

fn h100(nominal: i64) -> Value {
    json!([{"flavor": "h100-shared", "resource": "nvidia.com/gpu", "nominal": nominal}])
}

async fn call(w: &World, method: Method, uri: &str, who: &Session, body: Option<Value>) -> Reply {
    send(&w.router, request(method, uri, Some(who), body)).await
}

/// Creates a draft for `team` as `who`; its id.
async fn draft(w: &World, who: &Session, team: &str, lines: Value) -> i64 {
    let reply = call(
        w,
        Method::POST,
        &format!("/api/quota/teams/{team}/requests"),
        who,
        Some(json!({"spec": spec(lines)})),
    )
    .await;
    assert_eq!(reply.status, StatusCode::CREATED, "{}", reply.text());
    reply.json::<RequestView>().request.id
}

async fn act(w: &World, who: &Session, team: &str, id: i64, verb: &str, version: i32) -> Reply {
    let body = if matches!(verb, "submit" | "withdraw") {
        json!({"version": version})
    } else {
        json!({"version": version, "comment": format!("{verb}: fits the plan")})
    };
    call(
        w,
        Method::POST,
        &format!("/api/quota/teams/{team}/requests/{id}/{verb}"),
        who,
        Some(body),
    )
    .await
}

async fn show(w: &World, team: &str, id: i64) -> RequestView {
    let reply = call(
        w,
        Method::GET,
        &format!("/api/quota/teams/{team}/requests/{id}"),
        &w.ada,
        None,
    )
    .await;
    assert_eq!(reply.status, StatusCode::OK, "{}", reply.text());
    reply.json()
}

async fn count(pool: &PgPool, table: &str) -> i64 {
    sqlx::query_scalar::<_, i64>(&format!("select count(*) from {table}"))
        .fetch_one(pool)
        .await
        .expect("count")
}

fn error(reply: &Reply) -> ApiError {
    reply.json()
}

#[sqlx::test(migrator = "backend::MIGRATOR")]
async fn a_request_goes_from_draft_to_approved_and_counts(pool: PgPool) {
    let w = world(&pool).await;
    let reply = call(&w, Method::GET, "/api/quota/world", &w.rita, None).await;
    let before: QuotaWorld = reply.json();
    let gpus: Vec<(&str, i64)> = before
        .flavors
        .iter()
        .map(|f| (f.name.as_str(), f.gpus))
        .collect();
    assert_eq!(
        gpus,
        [
            ("h100-mig", 8),
            ("h100-shared", 64),
            ("h200-train", 96),
            ("rtx-inference", 32)
        ]
    );
    let research = before.team("research").expect("team");
    assert_eq!(
        (
            research.cluster_queue.as_str(),
            research.local_queue.as_str(),
            research.namespace.as_str(),
            research.cohort.as_deref()
        ),
        ("research", "research", "team-research", Some("gpufleet"))
    );

    let id = draft(&w, &w.rita, "research", h100(16)).await;
    // The draft is edited from the version it was read at: 1, then 2.
    let edit =
        |version: i32, nominal: i64| json!({"version": version, "spec": spec(h100(nominal))});
    let uri = format!("/api/quota/teams/research/requests/{id}");
    let reply = call(&w, Method::PUT, &uri, &w.rita, Some(edit(1, 24))).await;
    assert_eq!(reply.status, StatusCode::OK, "{}", reply.text());
    let reply = call(&w, Method::PUT, &uri, &w.rita, Some(edit(1, 32))).await;
    assert_eq!(reply.status, StatusCode::CONFLICT, "a stale version");
    assert!(error(&reply).message.contains("version 1, it is at 2"));
    assert_eq!(
        act(&w, &w.rita, "research", id, "submit", 2).await.status,
        StatusCode::OK
    );

    // The approver sees the impact and the ClusterQueue before and after.
    let view = show(&w, "research", id).await;
    assert_eq!(view.request.state, State::Submitted);
    assert_eq!(view.checked.errors, vec![]);
    let h100_impact = view
        .impact
        .iter()
        .find(|i| i.flavor == "h100-shared")
        .expect("h100");
    assert_eq!(
        (
            h100_impact.capacity,
            h100_impact.before.nominal_total,
            h100_impact.after.nominal_total
        ),
        (64, 0, 24)
    );
    assert!(
        view.queue_now_yaml.contains("nominalQuota: 0"),
        "{}",
        view.queue_now_yaml
    );
    assert!(
        view.queue_after_yaml.contains("nominalQuota: 24"),
        "{}",
        view.queue_after_yaml
    );

    let reply = act(&w, &w.alex, "research", id, "approve", 3).await;
    assert_eq!(reply.status, StatusCode::OK, "{}", reply.text());
    let approved: RequestView = reply.json();
    assert_eq!(approved.request.state, State::Approved);
    assert!(approved.request.in_force);
    assert_eq!(approved.request.decided_by.as_deref(), Some("alex"));
    assert_eq!(
        approved.request.comment.as_deref(),
        Some("approve: fits the plan")
    );

    let after: QuotaWorld = call(&w, Method::GET, "/api/quota/world", &w.rita, None)
        .await
        .json();
    assert_eq!(after.approved.len(), 1);
    assert_eq!(after.approved[0].spec.lines[0].nominal, 24);
    // Why research asked is for research and the readers; sam (search) sees the quota only.
    assert_eq!(
        after.approved[0].spec.justification,
        "pre-training of the 8B model"
    );
    let sam = login(&w.router, "sam", PASSWORD).await;
    let seen: QuotaWorld = call(&w, Method::GET, "/api/quota/world", &sam, None)
        .await
        .json();
    assert_eq!(seen.approved[0].spec.lines[0].nominal, 24);
    assert_eq!(seen.approved[0].spec.justification, "");

    // The team's history, and the audit trail of every step with who took it.
    let history: Vec<QuotaRequest> = call(
        &w,
        Method::GET,
        "/api/quota/teams/research/requests",
        &w.rita,
        None,
    )
    .await
    .json();
    assert_eq!(history.len(), 1);
    let page: Page = call(
        &w,
        Method::GET,
        "/api/quota/audit?team=research",
        &w.fiona,
        None,
    )
    .await
    .json();
    let steps: Vec<(&str, &str)> = page
        .entries
        .iter()
        .rev()
        .map(|e| (e.actor.as_str(), e.action.as_str()))
        .collect();
    assert_eq!(
        steps,
        [
            ("rita", "create"),
            ("rita", "edit"),
            ("rita", "submit"),
            ("alex", "approve")
        ]
    );
    let approve = &page.entries[0];
    assert_eq!(
        approve.before.as_ref().expect("before")["state"],
        "submitted"
    );
    assert_eq!(approve.after.as_ref().expect("after")["state"], "approved");
    assert_eq!(
        approve.after.as_ref().expect("after")["comment"],
        "approve: fits the plan"
    );
}

#[sqlx::test(migrator = "backend::MIGRATOR")]
async fn illegal_moves_are_refused_and_change_nothing(pool: PgPool) {
    let w = world(&pool).await;
    let id = draft(&w, &w.rita, "research", h100(8)).await;
    // A draft cannot be decided on.
    for verb in ["approve", "reject", "revoke"] {
        let reply = act(&w, &w.alex, "research", id, verb, 1).await;
        assert_eq!(
            reply.status,
            StatusCode::CONFLICT,
            "{verb}: {}",
            reply.text()
        );
    }
    assert_eq!(
        act(&w, &w.rita, "research", id, "submit", 1).await.status,
        StatusCode::OK
    );
    // Submitted: no more edits, no second submit, no revoke.
    let reply = call(
        &w,
        Method::PUT,
        &format!("/api/quota/teams/research/requests/{id}"),
        &w.rita,
        Some(json!({"version": 2, "spec": spec(h100(9))})),
    )
    .await;
    assert_eq!(reply.status, StatusCode::CONFLICT);
    assert_eq!(
        error(&reply).message,
        "a submitted request cannot be edited"
    );
    assert_eq!(
        act(&w, &w.rita, "research", id, "submit", 2).await.status,
        StatusCode::CONFLICT
    );
    assert_eq!(
        act(&w, &w.alex, "research", id, "revoke", 2).await.status,
        StatusCode::CONFLICT
    );
    // A decision needs a comment.
    let reply = call(
        &w,
        Method::POST,
        &format!("/api/quota/teams/research/requests/{id}/reject"),
        &w.alex,
        Some(json!({"version": 2, "comment": "  "})),
    )
    .await;
    assert_eq!(reply.status, StatusCode::UNPROCESSABLE_ENTITY);
    assert_eq!(error(&reply).fields[0].path, "comment");
    assert_eq!(
        act(&w, &w.alex, "research", id, "reject", 2).await.status,
        StatusCode::OK
    );
    // Rejected is final.
    for verb in ["approve", "revoke", "reject"] {
        assert_eq!(
            act(&w, &w.anna, "research", id, verb, 3).await.status,
            StatusCode::CONFLICT,
            "{verb}"
        );
    }
    // Another team's path does not reach the request.
    assert_eq!(
        act(&w, &w.alex, "search", id, "approve", 3).await.status,
        StatusCode::NOT_FOUND
    );
    assert_eq!(
        show(&w, "research", id).await.request.state,
        State::Rejected
    );
    // The demo's import, then create, submit, reject: the refused moves left no trace.
    assert_eq!(count(&pool, "audit_log").await, 4);
}

/// A team takes a submitted request back: a draft again, out of the approvers' inbox, edited
/// and submitted anew; an approver cannot withdraw it, a draft cannot be withdrawn, and each
/// step is audited.
#[sqlx::test(migrator = "backend::MIGRATOR")]
async fn a_submitted_request_is_withdrawn_to_a_draft(pool: PgPool) {
    let w = world(&pool).await;
    let id = draft(&w, &w.rita, "research", h100(8)).await;
    assert_eq!(
        act(&w, &w.rita, "research", id, "submit", 1).await.status,
        StatusCode::OK
    );
    let inbox = || {
        call(
            &w,
            Method::GET,
            "/api/quota/requests?state=submitted",
            &w.alex,
            None,
        )
    };
    assert_eq!(inbox().await.json::<Vec<QuotaRequest>>().len(), 1);
    // the approvers decide; withdrawing is the team's
    assert_eq!(
        act(&w, &w.alex, "research", id, "withdraw", 2).await.status,
        StatusCode::FORBIDDEN
    );
    let withdrawn = act(&w, &w.rita, "research", id, "withdraw", 2).await;
    assert_eq!(withdrawn.status, StatusCode::OK, "{}", withdrawn.text());
    let request = withdrawn.json::<RequestView>().request;
    assert_eq!((request.state, request.version), (State::Draft, 3));
    assert_eq!(request.submitted_at, None);
    assert_eq!(inbox().await.json::<Vec<QuotaRequest>>().len(), 0);
    // a draft is not withdrawn, nor decided on
    assert_eq!(
        act(&w, &w.rita, "research", id, "withdraw", 3).await.status,
        StatusCode::CONFLICT
    );
    assert_eq!(
        act(&w, &w.alex, "research", id, "approve", 3).await.status,
        StatusCode::CONFLICT
    );
    // edited and submitted again, then approved by someone who never wrote it
    let edited = call(
        &w,
        Method::PUT,
        &format!("/api/quota/teams/research/requests/{id}"),
        &w.rita,
        Some(json!({"version": 3, "spec": spec(h100(6))})),
    )
    .await;
    assert_eq!(edited.status, StatusCode::OK, "{}", edited.text());
    assert_eq!(
        act(&w, &w.rita, "research", id, "submit", 4).await.status,
        StatusCode::OK
    );
    assert_eq!(
        act(&w, &w.alex, "research", id, "approve", 5).await.status,
        StatusCode::OK
    );
    let actions: Vec<String> =
        sqlx::query_scalar("select action from audit_log where kind = 'quota_request' order by id")
            .fetch_all(&pool)
            .await
            .expect("audit");
    assert_eq!(
        actions,
        ["create", "submit", "withdraw", "edit", "submit", "approve"]
    );
}

#[sqlx::test(migrator = "backend::MIGRATOR")]
async fn whoever_wrote_or_submitted_a_request_cannot_approve_it(pool: PgPool) {
    let w = world(&pool).await;
    // An admin may request for any team, but not approve their own request.
    let id = draft(&w, &w.ada, "search", h100(8)).await;
    assert_eq!(
        act(&w, &w.ada, "search", id, "submit", 1).await.status,
        StatusCode::OK
    );
    let reply = act(&w, &w.ada, "search", id, "approve", 2).await;
    assert_eq!(reply.status, StatusCode::FORBIDDEN);
    assert!(error(&reply).message.contains("four eyes"));
    assert_eq!(
        act(&w, &w.alex, "search", id, "approve", 2).await.status,
        StatusCode::OK
    );
    // The database holds the same rule: no approval by the request's author.
    let refused = sqlx::query("update quota_requests set decided_by = created_by where id = $1")
        .bind(id)
        .execute(&pool)
        .await;
    assert!(refused.is_err(), "the four-eyes check constraint");
}

/// Four eyes holds for every decision (docs/api.md: `403` for whoever drafted, edited or
/// submitted it): the author may not reject their request nor revoke it once approved.
#[sqlx::test(migrator = "backend::MIGRATOR")]
async fn whoever_wrote_a_request_cannot_reject_or_revoke_it(pool: PgPool) {
    let w = world(&pool).await;
    let id = draft(&w, &w.ada, "search", h100(8)).await;
    assert_eq!(
        act(&w, &w.ada, "search", id, "submit", 1).await.status,
        StatusCode::OK
    );
    let reply = act(&w, &w.ada, "search", id, "reject", 2).await;
    assert_eq!(reply.status, StatusCode::FORBIDDEN, "{}", reply.text());
    assert!(error(&reply).message.contains("four eyes"));
    assert_eq!(
        act(&w, &w.alex, "search", id, "approve", 2).await.status,
        StatusCode::OK
    );
    let reply = act(&w, &w.ada, "search", id, "revoke", 3).await;
    assert_eq!(reply.status, StatusCode::FORBIDDEN, "{}", reply.text());
    assert_eq!(
        act(&w, &w.alex, "search", id, "revoke", 3).await.status,
        StatusCode::OK
    );
}

#[sqlx::test(migrator = "backend::MIGRATOR")]
async fn whoever_edited_a_request_cannot_approve_it(pool: PgPool) {
    let w = world(&pool).await;
    // Mia approves and is a member of research; Ada is an admin. Each rewrites one of Rita's
    // drafts (1 GPU → 20), Rita submits, and the editor may not approve what they wrote.
    user(
        &pool,
        "mia",
        &[Role::Approver, Role::Requester],
        &["research"],
    )
    .await;
    let mia = login(&w.router, "mia", PASSWORD).await;
    for (editor, other) in [(&mia, &w.alex), (&w.ada, &w.anna)] {
        let id = draft(&w, &w.rita, "research", h100(1)).await;
        let uri = format!("/api/quota/teams/research/requests/{id}");
        let rewrite = json!({"version": 1, "spec": spec(h100(20))});
        let reply = call(&w, Method::PUT, &uri, editor, Some(rewrite)).await;
        assert_eq!(reply.status, StatusCode::OK, "{}", reply.text());
        assert_eq!(
            act(&w, &w.rita, "research", id, "submit", 2).await.status,
            StatusCode::OK
        );
        let reply = act(&w, editor, "research", id, "approve", 3).await;
        assert_eq!(reply.status, StatusCode::FORBIDDEN, "{}", reply.text());
        assert!(error(&reply).message.contains("edited"), "{}", reply.text());
        // The database holds the same rule for every writer, not only the drafter.
        let refused = sqlx::query(
            "update quota_requests set state = 'approved', approval_order = nextval('quota_approval_order'),
                    decided_by = (select id from users where username = $2) where id = $1",
        )
        .bind(id)
        .bind(if std::ptr::eq(editor, &mia) { "mia" } else { "ada" })
        .execute(&pool)
        .await;
        assert!(refused.is_err(), "the writers' four-eyes constraint");
        // Someone who wrote no version approves it.
        let reply = act(&w, other, "research", id, "approve", 3).await;
        assert_eq!(reply.status, StatusCode::OK, "{}", reply.text());
        // The next one supersedes it; revoke it so the loop's second draft starts clean.
        let reply = act(&w, other, "research", id, "revoke", 4).await;
        assert_eq!(reply.status, StatusCode::OK, "{}", reply.text());
    }
}

#[sqlx::test(migrator = "backend::MIGRATOR")]
async fn two_approvals_at_once_one_wins_the_other_gets_409(pool: PgPool) {
    let w = world(&pool).await;
    let id = draft(&w, &w.rita, "research", h100(8)).await;
    assert_eq!(
        act(&w, &w.rita, "research", id, "submit", 1).await.status,
        StatusCode::OK
    );
    let (a, b) = tokio::join!(
        act(&w, &w.alex, "research", id, "approve", 2),
        act(&w, &w.anna, "research", id, "approve", 2)
    );
    let mut statuses = [a.status, b.status];
    statuses.sort();
    assert_eq!(
        statuses,
        [StatusCode::OK, StatusCode::CONFLICT],
        "{} / {}",
        a.text(),
        b.text()
    );
    let approvals =
        sqlx::query_scalar::<_, i64>("select count(*) from audit_log where action = 'approve'")
            .fetch_one(&pool)
            .await
            .expect("count");
    assert_eq!(approvals, 1);
}

#[sqlx::test(migrator = "backend::MIGRATOR")]
async fn capacity_is_checked_again_at_approval(pool: PgPool) {
    let w = world(&pool).await;
    // Each fits the 64 H100s alone (40, 30); together they would hold 70.
    let first = draft(&w, &w.rita, "research", h100(40)).await;
    let second = draft(&w, &w.ada, "search", h100(30)).await;
    assert_eq!(
        act(&w, &w.rita, "research", first, "submit", 1)
            .await
            .status,
        StatusCode::OK
    );
    assert_eq!(
        act(&w, &w.ada, "search", second, "submit", 1).await.status,
        StatusCode::OK
    );
    assert_eq!(
        act(&w, &w.alex, "research", first, "approve", 2)
            .await
            .status,
        StatusCode::OK
    );
    // The inbox shows the second with the problem before anyone decides.
    let view = show(&w, "search", second).await;
    assert_eq!(view.checked.errors.len(), 1, "{:?}", view.checked);
    let reply = act(&w, &w.alex, "search", second, "approve", 2).await;
    assert_eq!(reply.status, StatusCode::UNPROCESSABLE_ENTITY);
    let err = error(&reply);
    assert_eq!(err.fields[0].path, "spec.lines[0].nominal");
    assert!(
        err.fields[0].message.contains("would add up to 70")
            && err.fields[0].message.contains("capacity of 64"),
        "{}",
        err.fields[0].message
    );
    assert_eq!(
        show(&w, "search", second).await.request.state,
        State::Submitted
    );
}

#[sqlx::test(migrator = "backend::MIGRATOR")]
async fn a_later_approval_supersedes_and_a_revocation_ends_the_quota(pool: PgPool) {
    let w = world(&pool).await;
    let first = draft(&w, &w.rita, "research", h100(16)).await;
    act(&w, &w.rita, "research", first, "submit", 1).await;
    assert_eq!(
        act(&w, &w.alex, "research", first, "approve", 2)
            .await
            .status,
        StatusCode::OK
    );
    // 16 + 48 would be 64: the new one replaces the old, it does not add to it.
    let second = draft(&w, &w.rita, "research", h100(60)).await;
    act(&w, &w.rita, "research", second, "submit", 1).await;
    let reply = act(&w, &w.alex, "research", second, "approve", 2).await;
    assert_eq!(reply.status, StatusCode::OK, "{}", reply.text());
    assert_eq!(
        show(&w, "research", first).await.request.state,
        State::Superseded
    );
    let world: QuotaWorld = call(&w, Method::GET, "/api/quota/world", &w.rita, None)
        .await
        .json();
    assert_eq!(world.approved.len(), 1);
    let superseded =
        sqlx::query_scalar::<_, String>("select actor from audit_log where action = 'supersede'")
            .fetch_one(&pool)
            .await
            .expect("supersede entry");
    assert_eq!(superseded, "gpufleet");

    assert_eq!(
        act(&w, &w.anna, "research", second, "revoke", 3)
            .await
            .status,
        StatusCode::OK
    );
    let view = show(&w, "research", second).await;
    assert_eq!(view.request.state, State::Revoked);
    assert!(!view.request.in_force);
    // No quota in force: the queue stays, with nothing of its own and nothing to borrow.
    assert!(
        view.queue_now_yaml.contains("nominalQuota: 0")
            && view.queue_now_yaml.contains("borrowingLimit: 0")
    );
}

#[sqlx::test(migrator = "backend::MIGRATOR")]
async fn bad_requests_are_422_with_paths_and_write_nothing(pool: PgPool) {
    let w = world(&pool).await;
    // Ask the search team to leave its cohort, so limits are refused for it.
    let reply = call(
        &w,
        Method::PUT,
        "/api/quota/teams/search/queue",
        &w.ada,
        Some(json!({"cluster_queue": "search", "local_queue": "search", "cohort": null})),
    )
    .await;
    assert_eq!(reply.status, StatusCode::OK, "{}", reply.text());
    let (requests, audit) = (
        count(&pool, "quota_requests").await,
        count(&pool, "audit_log").await,
    );
    let cases: [(&str, Value, &str); 5] = [
        (
            "research",
            json!([{"flavor": "h100-shared", "resource": "nvidia.com/gpu", "nominal": -1}]),
            "spec.lines[0].nominal",
        ),
        (
            "research",
            json!([{"flavor": "a100", "resource": "nvidia.com/gpu", "nominal": 1}]),
            "spec.lines[0].flavor",
        ),
        ("research", h100(65), "spec.lines[0].nominal"),
        (
            "search",
            json!([{"flavor": "h100-shared", "resource": "nvidia.com/gpu", "nominal": 4, "borrowing_limit": 2}]),
            "spec.lines[0].borrowing_limit",
        ),
        (
            "research",
            json!([{"flavor": "h100-shared", "resource": "nvidia.com/gpu", "nominal": "many"}]),
            "spec.lines[0].nominal",
        ),
    ];
    for (team, lines, path) in cases {
        let reply = call(
            &w,
            Method::POST,
            &format!("/api/quota/teams/{team}/requests"),
            &w.ada,
            Some(json!({"spec": spec(lines.clone())})),
        )
        .await;
        assert_eq!(
            reply.status,
            StatusCode::UNPROCESSABLE_ENTITY,
            "{lines}: {}",
            reply.text()
        );
        let err = error(&reply);
        assert_eq!(err.code, ErrorCode::Invalid);
        assert_eq!(err.fields[0].path, path, "{lines}: {:?}", err.fields);
    }
    assert_eq!(count(&pool, "quota_requests").await, requests);
    assert_eq!(count(&pool, "audit_log").await, audit);
}

#[sqlx::test(migrator = "backend::MIGRATOR")]
async fn the_audit_log_cannot_be_rewritten(pool: PgPool) {
    let w = world(&pool).await;
    draft(&w, &w.rita, "research", h100(8)).await;
    for statement in [
        "update audit_log set actor = 'mallory'",
        "delete from audit_log",
        "truncate audit_log",
    ] {
        let err = sqlx::query(statement)
            .execute(&pool)
            .await
            .expect_err(statement);
        assert!(
            err.to_string().contains("audit_log is append-only"),
            "{statement}: {err}"
        );
    }
    // The demo's import and the draft.
    assert_eq!(count(&pool, "audit_log").await, 2);
}

#[sqlx::test(migrator = "backend::MIGRATOR")]
async fn the_audit_filters_pages_and_exports_csv(pool: PgPool) {
    let w = world(&pool).await;
    for _ in 0..3 {
        draft(&w, &w.rita, "research", h100(1)).await;
    }
    draft(&w, &w.ada, "search", h100(1)).await;
    let w = &w;
    let get = move |uri: String| async move { call(w, Method::GET, &uri, &w.alex, None).await };
    let page: Page = get("/api/quota/audit?team=research&per_page=2&page=2".to_owned())
        .await
        .json();
    assert_eq!((page.total, page.entries.len(), page.page), (3, 1, 2));
    let page: Page = get("/api/quota/audit?actor=ada".to_owned()).await.json();
    assert_eq!(page.total, 1);
    assert_eq!(page.entries[0].team.as_deref(), Some("search"));
    let page: Page = get("/api/quota/audit?kind=flavor".to_owned()).await.json();
    assert_eq!(page.total, 0);
    // Four drafts and the demo inventory's import.
    let page: Page = get("/api/quota/audit?page=9".to_owned()).await.json();
    assert_eq!((page.total, page.entries.len()), (5, 0));
    let page: Page = get("/api/quota/audit?kind=inventory".to_owned())
        .await
        .json();
    assert_eq!(
        (page.total, page.entries[0].actor.as_str()),
        (1, "gpufleet")
    );
    // Today's entries are inside today, not before it.
    let today = backend::clock::today().to_string();
    let page: Page = get(format!("/api/quota/audit?from={today}&to={today}"))
        .await
        .json();
    assert_eq!(page.total, 5);
    let page: Page = get("/api/quota/audit?to=2026-01-01".to_owned())
        .await
        .json();
    assert_eq!(page.total, 0);
    let reply = get("/api/quota/audit?from=yesterday&kind=x".to_owned()).await;
    assert_eq!(reply.status, StatusCode::UNPROCESSABLE_ENTITY);
    let paths: Vec<String> = error(&reply).fields.into_iter().map(|f| f.path).collect();
    assert_eq!(paths, ["kind", "from"]);

    let reply = get("/api/quota/audit.csv?team=research".to_owned()).await;
    assert_eq!(reply.status, StatusCode::OK);
    assert_eq!(reply.headers["content-type"], "text/csv; charset=utf-8");
    let text = reply.text();
    let lines: Vec<&str> = text.split("\r\n").filter(|l| !l.is_empty()).collect();
    assert_eq!(
        lines[0],
        "id,at_utc,actor,kind,action,subject,team,before_json,after_json"
    );
    assert_eq!(lines.len(), 4);
    assert!(
        lines[1].contains(",rita,quota_request,create,quota request 3,research,,\"{"),
        "{}",
        lines[1]
    );
}

#[sqlx::test(migrator = "backend::MIGRATOR")]
async fn admins_edit_flavors_and_queues_and_the_rules_hold(pool: PgPool) {
    let w = world(&pool).await;
    let uri = "/api/quota/flavors/h100-shared";
    let settings = |mig: Value| {
        json!({"version": 1, "settings": {
            "node_labels": {"nvidia.com/gpu.product": "H100-SXM5-80GB", "gpufleet.io/pool": "h100-shared"},
            "node_taints": [{"key": "nvidia.com/gpu", "effect": "NoSchedule"}],
            "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
            "mig_layout": mig,
        }})
    };
    // 8 × 1g.10gb does not fit one H100 (7 at most).
    let reply = call(
        &w,
        Method::PUT,
        uri,
        &w.ada,
        Some(settings(json!({"1g.10gb": 8}))),
    )
    .await;
    assert_eq!(
        reply.status,
        StatusCode::UNPROCESSABLE_ENTITY,
        "{}",
        reply.text()
    );
    assert_eq!(error(&reply).fields[0].path, "settings.mig_layout");
    // Before saving, what it would change (no cluster here: against the approved objects):
    // the ResourceFlavor's labels, taint and toleration; nothing saved, the same refusal
    // for a layout that does not fit.
    let dry_run = format!("{uri}/dry-run");
    let reply = call(
        &w,
        Method::POST,
        &dry_run,
        &w.ada,
        Some(settings(json!({}))),
    )
    .await;
    assert_eq!(reply.status, StatusCode::OK, "{}", reply.text());
    let dry: shared::cluster::DryRun = reply.json();
    let changed: Vec<(String, &str)> = dry
        .objects
        .iter()
        .map(|o| (o.object.to_string(), o.action.as_str()))
        .collect();
    assert_eq!(
        changed,
        [("ResourceFlavor h100-shared".to_owned(), "update")],
        "{dry:#?}"
    );
    let paths: Vec<&str> = dry.objects[0]
        .changes
        .iter()
        .map(|c| c.path.as_str())
        .collect();
    assert!(
        paths.iter().any(|p| p.contains("nodeTaints"))
            && paths.iter().any(|p| p.contains("tolerations")),
        "{paths:?}"
    );
    let reply = call(
        &w,
        Method::POST,
        &dry_run,
        &w.ada,
        Some(settings(json!({"1g.10gb": 8}))),
    )
    .await;
    assert_eq!(reply.status, StatusCode::UNPROCESSABLE_ENTITY);
    assert_eq!(error(&reply).fields[0].path, "settings.mig_layout");
    // Whole GPUs with labels, a taint and a toleration: saved, version 2, audited (the dry
    // runs saved nothing: version 1 is still the one to name).
    let reply = call(&w, Method::PUT, uri, &w.ada, Some(settings(json!({})))).await;
    assert_eq!(reply.status, StatusCode::OK, "{}", reply.text());
    assert_eq!(reply.json::<shared::quota::Flavor>().version, 2);
    let reply = call(&w, Method::PUT, uri, &w.ada, Some(settings(json!({})))).await;
    assert_eq!(reply.status, StatusCode::CONFLICT, "version 1 is stale now");

    // Approved whole-GPU quota on the flavor: switching it to MIG would strand it.
    let id = draft(&w, &w.rita, "research", h100(8)).await;
    act(&w, &w.rita, "research", id, "submit", 1).await;
    act(&w, &w.alex, "research", id, "approve", 2).await;
    let mut mig = settings(json!({"1g.10gb": 7}));
    mig["version"] = json!(2);
    let reply = call(&w, Method::PUT, uri, &w.ada, Some(mig)).await;
    assert_eq!(reply.status, StatusCode::CONFLICT);
    assert!(
        error(&reply).message.contains("over its capacity of 0"),
        "{}",
        reply.text()
    );

    // Queue names: an existing cluster's names are adopted; a taken one is a conflict.
    let reply = call(
        &w,
        Method::PUT,
        "/api/quota/teams/research/queue",
        &w.ada,
        Some(json!({"cluster_queue": "cq-research", "local_queue": "default", "cohort": "ml"})),
    )
    .await;
    assert_eq!(reply.status, StatusCode::OK, "{}", reply.text());
    let reply = call(
        &w,
        Method::PUT,
        "/api/quota/teams/search/queue",
        &w.ada,
        Some(json!({"cluster_queue": "cq-research", "local_queue": "default", "cohort": "ml"})),
    )
    .await;
    assert_eq!(reply.status, StatusCode::CONFLICT);
    let view = show(&w, "research", id).await;
    assert!(
        view.queue_now_yaml.contains("name: \"cq-research\""),
        "{}",
        view.queue_now_yaml
    );
    assert!(view.queue_now_yaml.contains("cohortName: \"ml\""));
    let kinds = sqlx::query_scalar::<_, String>(
        "select kind from audit_log where actor = 'ada' order by id",
    )
    .fetch_all(&pool)
    .await
    .expect("kinds");
    assert_eq!(kinds, ["flavor", "team_queue"]);
}

/// A fleet whose nodes of a model carry another product label than the catalogue's (a board
/// variant: an H200 NVL's NVML name is "NVIDIA H200 NVL") says so in the inventory; the
/// flavors of that model then select it, and the check takes it as what the nodes carry.
#[sqlx::test(migrator = "backend::MIGRATOR")]
async fn the_inventory_names_the_product_label_its_nodes_carry(pool: PgPool) {
    let w = world(&pool).await;
    let mut inventory: Value = call(&w, Method::GET, "/api/inventory", &w.ada, None)
        .await
        .json();
    let h200 = inventory["models"]
        .as_array()
        .and_then(|models| models.iter().position(|m| m["name"] == "H200-SXM-141GB"))
        .expect("the H200 model");
    assert_eq!(inventory["models"][h200].get("product_label"), None);
    let apply = |inventory: &Value| {
        call(
            &w,
            Method::POST,
            "/api/inventory",
            &w.ada,
            Some(inventory.clone()),
        )
    };
    // A value no label may hold is refused at its path.
    inventory["models"][h200]["product_label"] = json!("NVIDIA H200 NVL");
    let reply = apply(&inventory).await;
    assert_eq!(
        reply.status,
        StatusCode::UNPROCESSABLE_ENTITY,
        "{}",
        reply.text()
    );
    let path = format!("models[{h200}].product_label");
    assert!(reply.text().contains(&path), "{}", reply.text());
    inventory["models"][h200]["product_label"] = json!("NVIDIA-H200-NVL");
    assert_eq!(
        apply(&inventory).await.json::<Value>(),
        json!({"changes": ["change model H200-SXM-141GB: product_label (the catalogue's) → NVIDIA-H200-NVL"], "applied": true})
    );
    let world: QuotaWorld = call(&w, Method::GET, "/api/quota/world", &w.ada, None)
        .await
        .json();
    let flavor = world
        .flavors
        .iter()
        .find(|f| f.name == "h200-train")
        .expect("h200-train");
    assert_eq!(
        flavor.object().node_labels["nvidia.com/gpu.product"],
        "NVIDIA-H200-NVL"
    );
    assert_eq!(flavor.node_labels(), flavor.object().node_labels);
    // Applied again, nothing changes; exported, it is there.
    assert_eq!(
        apply(&inventory).await.json::<Value>(),
        json!({"changes": [], "applied": false})
    );
    let exported: Value = call(&w, Method::GET, "/api/inventory", &w.ada, None)
        .await
        .json();
    assert_eq!(exported["models"][h200]["product_label"], "NVIDIA-H200-NVL");
}

#[sqlx::test(migrator = "backend::MIGRATOR")]
async fn admins_apply_the_inventory_over_the_api_and_approved_quota_holds(pool: PgPool) {
    let w = world(&pool).await;
    let reply = call(&w, Method::GET, "/api/inventory", &w.ada, None).await;
    assert_eq!(reply.status, StatusCode::OK);
    let mut inventory: Value = reply.json();
    // research holds 40 of the 64 H100s.
    let id = draft(&w, &w.rita, "research", h100(40)).await;
    act(&w, &w.rita, "research", id, "submit", 1).await;
    act(&w, &w.alex, "research", id, "approve", 2).await;
    let h100 = inventory["pools"]
        .as_array()
        .and_then(|pools| pools.iter().position(|p| p["name"] == "h100-shared"))
        .expect("the h100-shared pool");
    // Four H100 nodes (32 GPUs) would strand 8 of research's GPUs: refused, nothing written.
    inventory["pools"][h100]["nodes"] = json!(4);
    let reply = call(
        &w,
        Method::POST,
        "/api/inventory?dry_run=true",
        &w.ada,
        Some(inventory.clone()),
    )
    .await;
    assert_eq!(reply.status, StatusCode::CONFLICT, "{}", reply.text());
    assert!(
        error(&reply).message.contains("add up to 40")
            && error(&reply).message.contains("capacity of 32")
    );
    // Five nodes (40 GPUs) hold it: the dry run says what would change and changes nothing.
    inventory["pools"][h100]["nodes"] = json!(5);
    let reply = call(
        &w,
        Method::POST,
        "/api/inventory?dry_run=true",
        &w.ada,
        Some(inventory.clone()),
    )
    .await;
    assert_eq!(reply.status, StatusCode::OK, "{}", reply.text());
    let applied: Value = reply.json();
    assert_eq!(
        applied,
        json!({"changes": ["change pool h100-shared: nodes 8 → 5"], "applied": false})
    );
    let world: QuotaWorld = call(&w, Method::GET, "/api/quota/world", &w.ada, None)
        .await
        .json();
    let gpus = |world: &QuotaWorld| {
        world
            .flavors
            .iter()
            .find(|f| f.name == "h100-shared")
            .map(|f| f.gpus)
    };
    assert_eq!(gpus(&world), Some(64));
    let reply = call(
        &w,
        Method::POST,
        "/api/inventory",
        &w.ada,
        Some(inventory.clone()),
    )
    .await;
    assert_eq!(reply.json::<Value>()["applied"], true);
    let world: QuotaWorld = call(&w, Method::GET, "/api/quota/world", &w.ada, None)
        .await
        .json();
    assert_eq!(gpus(&world), Some(40));
    // Bad input: 422 with the path, nothing written.
    inventory["teams"][0]["namespace"] = json!("Not A Label");
    let reply = call(&w, Method::POST, "/api/inventory", &w.ada, Some(inventory)).await;
    assert_eq!(reply.status, StatusCode::UNPROCESSABLE_ENTITY);
    assert_eq!(error(&reply).fields[0].path, "teams[0].namespace");
}

/// Grants `team` `nominal` H100s from 2026-01-01: drafted and submitted by an admin, approved
/// by alex.
async fn grant(w: &World, team: &str, nominal: i64) {
    let id = draft(w, &w.ada, team, h100(nominal)).await;
    assert_eq!(
        act(w, &w.ada, team, id, "submit", 1).await.status,
        StatusCode::OK
    );
    let reply = act(w, &w.alex, team, id, "approve", 2).await;
    assert_eq!(reply.status, StatusCode::OK, "{}", reply.text());
}

/// Every hour of `[from, from + 4 weeks)`: `team`'s h100-shared nominal, allocated, busy and
/// observed GPUs (busy and observed at the allocation's share); hour `peak_hour` allocates
/// `peak` instead.
async fn hours_of(
    pool: &PgPool,
    from: shared::common::day::Day,
    team: &str,
    gpus: [i64; 3],
    peak: (i64, i64),
) {
    let [nominal, allocated, busy] = gpus;
    sqlx::query(
        "insert into usage_rollups (grain, period, namespace, cluster_queue, flavor, team_id,
             nominal_gpu_microseconds, allocated_gpu_microseconds, busy_gpu_microseconds,
             observed_gpu_microseconds, fb_used_mib_minutes, minutes)
         select 'hour', $1::date::timestamp at time zone 'UTC' + h * interval '1 hour',
                t.namespace, '', 'h100-shared', t.id, $3 * 3600000000,
                case when h = $6 then $7 else $4 end * 3600000000,
                $5 * 3600000000, $4 * 3600000000, 0, 60
         from generate_series(0, 4 * 168 - 1) as h, teams t where t.name = $2",
    )
    .bind(from.to_string())
    .bind(team)
    .bind(nominal)
    .bind(allocated)
    .bind(busy)
    .bind(peak.0)
    .bind(peak.1)
    .execute(pool)
    .await
    .expect("hour rollups");
}

/// Re-plan findings on constructed history (`shared::planning::findings` holds the rules):
/// research holds 32 H100s and uses 4 of them every hour of four weeks (9 in its busiest):
/// unused quota, drafted down to 9; search's twenty 2-GPU Workloads waited 40, 45, … 135
/// minutes for admission: p50 85 and p95 130 minutes (nearest rank: the 10th and 19th) above
/// the 30-minute target, 2 × 1,750 = 3,500 GPU-minutes over the 40,320 of four weeks: a
/// draft for ⌈0.087⌉ = 1 more GPU. Only approvers and admins read them.
#[sqlx::test(migrator = "backend::MIGRATOR")]
async fn re_plan_findings_name_the_idle_team_and_the_waiting_one(pool: PgPool) {
    let w = world(&pool).await;
    grant(&w, "research", 32).await;
    grant(&w, "search", 16).await;
    let today = backend::clock::today();
    let from = today.plus(-28);
    hours_of(&pool, from, "research", [32, 4, 3], (100, 9)).await;
    hours_of(&pool, from, "search", [16, 14, 13], (0, 14)).await;
    let from_ms = i64::from(from.days_since_epoch()) * 86_400_000;
    let workload = |team: &str, i: i64, gpus: u32, wait_minutes: i64| {
        let created = from_ms + i * 3_600_000;
        let admitted = created + wait_minutes * 60_000;
        json!({
            "uid": format!("{team}-{i}"), "namespace": format!("team-{team}"), "name": format!("job-{i}"),
            "local_queue": team, "cluster_queue": team, "priority": 0, "priority_class": null,
            "pod_sets": [{"name": "main", "count": 1, "resources": {"nvidia.com/gpu": gpus},
                "flavors": {"nvidia.com/gpu": "h100-shared"}}],
            "created_at_ms": created, "quota_reserved_at_ms": admitted, "admitted_at_ms": admitted,
            "evicted": null, "finished": {"at_ms": admitted + 3_600_000, "reason": "Succeeded", "detail": null},
            "evictions": [], "problems": []
        })
    };
    let mut rows: Vec<Value> = (0..20)
        .map(|i| workload("search", i, 2, 40 + 5 * i))
        .collect();
    rows.extend((0..5).map(|i| workload("research", 100 + i, 8, 0)));
    backend::cluster::db::record_workloads(&pool, &Value::from(rows).to_string(), from_ms, false)
        .await
        .expect("history");

    let reply = call(&w, Method::GET, "/api/quota/findings", &w.alex, None).await;
    assert_eq!(reply.status, StatusCode::OK, "{}", reply.text());
    let found: shared::planning::findings::Findings = reply.json();
    assert_eq!((found.from, found.to), (from, today.plus(-1)));
    assert_eq!(found.workloads_read, 25);
    let said: Vec<(&str, &str)> = found
        .findings
        .iter()
        .map(|f| (f.team.as_str(), f.summary.as_str()))
        .collect();
    assert_eq!(found.findings.len(), 2, "{said:#?}");
    let (unused, waiting) = (&found.findings[0], &found.findings[1]);
    assert_eq!(unused.kind, shared::planning::findings::Kind::UnusedQuota);
    assert_eq!((unused.team.as_str(), unused.weeks.len()), ("research", 4));
    // 4 × 168 hours × 4 GPUs + 5 more in the busiest hour = 2,693 of 21,504 GPU-hours.
    assert!(
        unused
            .summary
            .contains("used 2693.0 of its 21504.0 nominal GPU-hours on h100-shared (12.5%)")
            && unused.summary.contains("busiest hour held 9 GPUs"),
        "{}",
        unused.summary
    );
    let draft = unused.draft.as_ref().expect("a draft");
    assert_eq!((draft.lines[0].nominal, draft.starts_on), (9, today));
    assert!(
        unused.draft_problems.is_empty(),
        "{:?}",
        unused.draft_problems
    );
    assert_eq!(waiting.kind, shared::planning::findings::Kind::Waiting);
    let wait = waiting.wait.as_ref().expect("figures");
    assert_eq!(waiting.team, "search");
    assert_eq!(
        (wait.workloads, wait.p50_minutes, wait.p95_minutes),
        (20, 85, 130)
    );
    assert_eq!(wait.waited_gpu_minutes, Some(3_500));
    let draft = waiting.draft.as_ref().expect("a draft");
    assert_eq!(draft.lines[0].nominal, 17);

    // The same through the drafted request: an approver's form takes it as it is.
    let reply = call(
        &w,
        Method::POST,
        "/api/quota/teams/search/requests",
        &w.ada,
        Some(json!({"spec": draft})),
    )
    .await;
    assert_eq!(reply.status, StatusCode::CREATED, "{}", reply.text());

    // Who may read them, and a query that is not one.
    for who in [&w.rita, &w.fiona] {
        let reply = call(&w, Method::GET, "/api/quota/findings", who, None).await;
        assert_eq!(reply.status, StatusCode::FORBIDDEN);
    }
    let reply = call(
        &w,
        Method::GET,
        "/api/quota/findings?weeks=14&idle_percent=x",
        &w.ada,
        None,
    )
    .await;
    assert_eq!(
        reply.status,
        StatusCode::UNPROCESSABLE_ENTITY,
        "{}",
        reply.text()
    );
    let paths: Vec<String> = error(&reply).fields.into_iter().map(|f| f.path).collect();
    assert_eq!(paths, ["weeks", "idle_percent"]);
}

/// The review's context (issue 33, point 8): research holds 32 H100s and used 4 of them (3
/// busy) every hour of the last day; it asks for 40 from today for 10 days (240 h) at the demo
/// inventory's H100 price, $8.60 per GPU-hour: 40 × 240 × 860 = 8,256,000 cents asked against
/// 32 × 240 × 860 = 6,604,800 in force. A requester of the team reads the same.
#[sqlx::test(migrator = "backend::MIGRATOR")]
async fn the_review_prices_the_request_and_shows_what_the_team_uses(pool: PgPool) {
    let w = world(&pool).await;
    grant(&w, "research", 32).await;
    let today = backend::clock::today();
    hours_of(&pool, today.plus(-27), "research", [32, 4, 3], (0, 4)).await;
    let mut asked = spec(h100(40));
    asked["starts_on"] = json!(today.to_string());
    asked["ends_on"] = json!(today.plus(9).to_string());
    let reply = call(
        &w,
        Method::POST,
        "/api/quota/teams/research/requests",
        &w.rita,
        Some(json!({ "spec": asked })),
    )
    .await;
    assert_eq!(reply.status, StatusCode::CREATED, "{}", reply.text());
    let id = reply.json::<RequestView>().request.id;
    let reply = call(
        &w,
        Method::GET,
        &format!("/api/quota/teams/research/requests/{id}"),
        &w.alex,
        None,
    )
    .await;
    let review: Review = reply.json();
    let worth = &review.worth;
    assert_eq!(
        (worth.from, worth.to, worth.runs_on),
        (today, today.plus(9), false)
    );
    assert_eq!(
        (worth.asked_cents, worth.in_force_cents),
        (8_256_000, 6_604_800)
    );
    assert_eq!(worth.flavors[0].cents_per_gpu_hour, Some(860));
    let hour_us = 3_600_000_000;
    assert_eq!(
        review.in_use,
        [InUse {
            flavor: "h100-shared".into(),
            hours: 24,
            nominal_gpu_microseconds: Some(32 * 24 * hour_us),
            allocated_gpu_microseconds: Some(4 * 24 * hour_us),
            busy_gpu_microseconds: 3 * 24 * hour_us,
        }]
    );
    let own = call(
        &w,
        Method::GET,
        &format!("/api/quota/teams/research/requests/{id}"),
        &w.rita,
        None,
    )
    .await;
    assert_eq!(own.json::<Review>().worth, review.worth);
}

/// Asks research's preview of `spec` as `who`.
async fn preview(w: &World, who: &Session, spec: &Value) -> Reply {
    let body = json!({ "spec": spec });
    call(
        w,
        Method::POST,
        "/api/quota/teams/research/preview",
        who,
        Some(body),
    )
    .await
}

/// What the approver will weigh, before sending (issue 57, point 6): the same review for a spec
/// not saved — 40 H100s for 10 days at $8.60 an hour, 8,256,000 cents, and a month of 30 days
/// of it 40 × 24 h × 30 × 860 = 24,768,000 cents — with the cohort impact (h100-shared's 64:
/// research 32 → 40 of its nominal total). Nothing is saved or audited; an invalid spec is a
/// 422 at its field; another team's member may not ask.
#[sqlx::test(migrator = "backend::MIGRATOR")]
async fn a_requester_sees_what_the_approver_will_before_sending(pool: PgPool) {
    let w = world(&pool).await;
    grant(&w, "research", 32).await;
    let today = backend::clock::today();
    let mut asked = spec(h100(40));
    asked["starts_on"] = json!(today.to_string());
    asked["ends_on"] = json!(today.plus(9).to_string());
    let counts = || async {
        sqlx::query_as::<_, (i64, i64)>(
            "select (select count(*) from quota_requests), (select count(*) from audit_log)",
        )
        .fetch_one(&pool)
        .await
        .expect("counts")
    };
    let before = counts().await;
    let reply = preview(&w, &w.rita, &asked).await;
    assert_eq!(reply.status, StatusCode::OK, "{}", reply.text());
    let review: Review = reply.json();
    assert_eq!(review.view.request.id, 0);
    assert_eq!(
        (review.worth.asked_cents, review.worth.asked_per_month_cents),
        (8_256_000, 24_768_000)
    );
    assert_eq!(review.worth.in_force_cents, 6_604_800);
    let h100 = review
        .view
        .impact
        .iter()
        .find(|i| i.flavor == "h100-shared")
        .expect("h100-shared's impact");
    assert_eq!(
        (
            h100.capacity,
            h100.before.nominal_total,
            h100.after.nominal_total
        ),
        (64, 32, 40)
    );
    assert_eq!(counts().await, before, "nothing saved, nothing audited");
    asked["lines"][0]["nominal"] = json!(-1);
    let reply = preview(&w, &w.rita, &asked).await;
    assert_eq!(
        reply.status,
        StatusCode::UNPROCESSABLE_ENTITY,
        "{}",
        reply.text()
    );
    assert!(
        error(&reply)
            .fields
            .iter()
            .all(|f| f.path.starts_with("spec.")),
        "{}",
        reply.text()
    );
    let sam = login(&w.router, "sam", PASSWORD).await;
    let reply = preview(&w, &sam, &asked).await;
    assert_eq!(reply.status, StatusCode::FORBIDDEN, "{}", reply.text());
}
