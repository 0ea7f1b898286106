//! Accounts and access control against a real PostgreSQL: every `/api` route × every role ×
//! own team vs. another team, sessions, CSRF, throttling, the auth proxy, and secrets.

use std::{
    io::Write,
    sync::{Arc, Mutex},
};

use crate::common::{
    PASSWORD, Session, login, request, request_from, router, router_with, send, send_head, team,
    try_login, user,
};
use axum::http::{Method, StatusCode, header};
use backend::auth::settings::{AuthSettings, ProxySettings, parse_networks};
use shared::{
    ApiError, ErrorCode,
    accounts::{Me, Role, Team, User},
};
use sqlx::PgPool;

/// Who calls, in the access matrix.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Who {
    Anonymous,
    Requester,
    Approver,
    Finance,
    Admin,
}

const EVERYONE: [Who; 5] = [
    Who::Anonymous,
    Who::Requester,
    Who::Approver,
    Who::Finance,
    Who::Admin,
];

/// What each route must allow, written out by hand (not read from the router): a route the
/// router has and this table lacks fails the test, and so does a rule that drifts.
/// Tokens: anon, requester, requester@own (only for the caller's own team), approver, finance,
/// admin.
const EXPECTED: &[(&str, &str, &str)] = &[
    ("GET", "/health", "anon requester approver finance admin"),
    (
        "POST",
        "/auth/login",
        "anon requester approver finance admin",
    ),
    ("POST", "/auth/logout", "requester approver finance admin"),
    ("GET", "/auth/me", "requester approver finance admin"),
    ("GET", "/users", "admin"),
    ("POST", "/users", "admin"),
    ("PATCH", "/users/{username}", "admin"),
    ("POST", "/users/{username}/password", "admin"),
    ("GET", "/teams", "requester approver finance admin"),
    ("POST", "/teams", "admin"),
    (
        "GET",
        "/teams/{team}",
        "requester@own approver finance admin",
    ),
    ("PATCH", "/teams/{team}", "admin"),
    ("PUT", "/teams/{team}/members/{username}", "admin"),
    ("DELETE", "/teams/{team}/members/{username}", "admin"),
    ("GET", "/fleet", "requester approver finance admin"),
    ("GET", "/inventory", "admin"),
    ("POST", "/inventory", "admin"),
    (
        "GET",
        "/auth/session",
        "anon requester approver finance admin",
    ),
    ("POST", "/packing/replay", "approver admin"),
    ("POST", "/packing/mig", "approver admin"),
    ("POST", "/plan/evaluate", "approver admin"),
    ("GET", "/plan/today", "approver admin"),
    ("GET", "/plan/from-history", "approver admin"),
    ("GET", "/plan/replay", "approver admin"),
    ("GET", "/scenarios", "approver admin"),
    ("POST", "/scenarios", "approver admin"),
    ("GET", "/scenarios/{id}", "approver admin"),
    ("PUT", "/scenarios/{id}", "approver admin"),
    ("DELETE", "/scenarios/{id}", "approver admin"),
    ("POST", "/scenarios/{id}/duplicate", "approver admin"),
    ("GET", "/quota/world", "requester approver finance admin"),
    ("PUT", "/quota/flavors/{flavor}", "admin"),
    ("POST", "/quota/flavors/{flavor}/dry-run", "admin"),
    ("PUT", "/quota/teams/{team}/queue", "admin"),
    ("GET", "/quota/requests", "approver finance admin"),
    (
        "GET",
        "/quota/teams/{team}/standing",
        "requester@own approver finance admin",
    ),
    (
        "GET",
        "/quota/teams/{team}/requests",
        "requester@own approver finance admin",
    ),
    (
        "POST",
        "/quota/teams/{team}/requests",
        "requester@own admin",
    ),
    ("POST", "/quota/teams/{team}/preview", "requester@own admin"),
    (
        "GET",
        "/quota/teams/{team}/requests/{id}",
        "requester@own approver finance admin",
    ),
    (
        "PUT",
        "/quota/teams/{team}/requests/{id}",
        "requester@own admin",
    ),
    (
        "POST",
        "/quota/teams/{team}/requests/{id}/submit",
        "requester@own admin",
    ),
    (
        "POST",
        "/quota/teams/{team}/requests/{id}/withdraw",
        "requester@own admin",
    ),
    (
        "POST",
        "/quota/teams/{team}/requests/{id}/approve",
        "approver admin",
    ),
    (
        "POST",
        "/quota/teams/{team}/requests/{id}/reject",
        "approver admin",
    ),
    (
        "POST",
        "/quota/teams/{team}/requests/{id}/revoke",
        "approver admin",
    ),
    ("GET", "/quota/findings", "approver admin"),
    (
        "GET",
        "/quota/teams/{team}/requests/{id}/what-if",
        "approver admin",
    ),
    (
        "GET",
        "/quota/teams/{team}/requests/{id}/what-if/input",
        "approver admin",
    ),
    ("GET", "/quota/audit", "approver finance admin"),
    ("GET", "/quota/audit.csv", "approver finance admin"),
    (
        "GET",
        "/quota/teams/{team}/requests/{id}/dry-run",
        "requester@own approver finance admin",
    ),
    ("GET", "/cluster", "requester approver finance admin"),
    ("GET", "/cluster/workloads", "approver finance admin"),
    (
        "GET",
        "/cluster/teams/{team}/workloads",
        "requester@own approver finance admin",
    ),
    ("POST", "/cluster/reconcile", "approver admin"),
    ("POST", "/cluster/apply", "approver admin"),
    (
        "GET",
        "/cluster/gitops.zip",
        "requester approver finance admin",
    ),
    ("DELETE", "/cluster/queues/{kind}/{name}", "admin"),
    (
        "GET",
        "/chargeback/statement",
        "requester approver finance admin",
    ),
    ("GET", "/chargeback/rates", "approver finance admin"),
    ("PUT", "/chargeback/rates/{flavor}", "admin"),
    ("DELETE", "/chargeback/rates/{flavor}/{from}", "admin"),
    (
        "GET",
        "/chargeback/drill",
        "requester approver finance admin",
    ),
    (
        "GET",
        "/chargeback/neighbours",
        "requester approver finance admin",
    ),
    ("GET", "/chargeback/months", "approver finance admin"),
    ("POST", "/chargeback/months/{month}/close", "finance admin"),
    ("POST", "/chargeback/months/{month}/reopen", "admin"),
    (
        "GET",
        "/chargeback/budgets",
        "requester approver finance admin",
    ),
    ("PUT", "/chargeback/budgets/{team}/{month}", "finance admin"),
    (
        "DELETE",
        "/chargeback/budgets/{team}/{month}",
        "finance admin",
    ),
    ("POST", "/chargeback/holds/{id}/{action}", "approver admin"),
    ("GET", "/usage/stream", "requester approver finance admin"),
    ("GET", "/usage/queues", "approver finance admin"),
];

fn allowed(spec: &str, who: Who, own_team: bool) -> bool {
    spec.split_whitespace().any(|token| match (token, who) {
        ("anon", Who::Anonymous) => true,
        ("requester", Who::Requester) => true,
        ("requester@own", Who::Requester) => own_team,
        ("approver", Who::Approver) => true,
        ("finance", Who::Finance) => true,
        ("admin", Who::Admin) => true,
        _ => false,
    })
}

async fn seed_world(pool: &PgPool) {
    team(pool, "own").await;
    team(pool, "other").await;
    user(pool, "rita", &[Role::Requester], &["own"]).await;
    user(pool, "alex", &[Role::Approver], &[]).await;
    user(pool, "fiona", &[Role::Finance], &[]).await;
    user(pool, "ada", &[Role::Admin], &[]).await;
    user(pool, "tom", &[Role::Requester], &[]).await;
}

fn username_of(who: Who) -> Option<&'static str> {
    match who {
        Who::Anonymous => None,
        Who::Requester => Some("rita"),
        Who::Approver => Some("alex"),
        Who::Finance => Some("fiona"),
        Who::Admin => Some("ada"),
    }
}

#[sqlx::test(migrator = "backend::MIGRATOR")]
async fn every_route_enforces_its_rule_for_every_role_and_team(pool: PgPool) {
    seed_world(&pool).await;
    let router = router(pool.clone());
    let api = backend::app::api();
    let rules = api.rules();

    for rule in rules {
        assert!(
            EXPECTED
                .iter()
                .any(|(m, p, _)| *m == rule.method.as_str() && *p == rule.path),
            "{} {} is a new route: add its expected access to EXPECTED in this test",
            rule.method,
            rule.path
        );
    }
    for (method, path, _) in EXPECTED {
        assert!(
            rules
                .iter()
                .any(|r| r.method.as_str() == *method && r.path == *path),
            "{method} {path} is expected but the router has no such route"
        );
    }

    for (method, path, spec) in EXPECTED {
        // Who each route lets in and who it refuses; a spec naming nobody (a typo) or everybody
        // where a role is named would check nothing.
        let (mut let_in, mut refused) = (0, 0);
        let teams: &[(&str, bool)] = if path.contains("{team}") {
            &[("own", true), ("other", false)]
        } else {
            &[("own", true)]
        };
        for &(team_name, own) in teams {
            for who in EVERYONE {
                // A fresh session per call: some calls (log-out) end the one they use.
                let session: Option<Session> = match username_of(who) {
                    Some(name) => Some(login(&router, name, PASSWORD).await),
                    None => None,
                };
                let uri = format!(
                    "/api{}",
                    path.replace("{team}", team_name)
                        .replace("{username}", "tom")
                );
                let method = Method::from_bytes(method.as_bytes()).expect("method");
                let body = (!matches!(method, Method::GET | Method::DELETE))
                    .then(|| serde_json::json!({}));
                let request = request(method.clone(), &uri, session.as_ref(), body);
                let reply = if *path == "/usage/stream" {
                    // an event stream never ends: its head says who got in
                    send_head(&router, request).await
                } else {
                    send(&router, request).await
                };
                let expect = allowed(spec, who, own);
                let context = format!(
                    "{method} {uri} as {who:?}: {} {}",
                    reply.status,
                    reply.text()
                );
                if expect {
                    assert!(
                        !matches!(
                            reply.status,
                            StatusCode::UNAUTHORIZED | StatusCode::FORBIDDEN
                        ),
                        "should be allowed: {context}"
                    );
                } else {
                    let want = if who == Who::Anonymous {
                        StatusCode::UNAUTHORIZED
                    } else {
                        StatusCode::FORBIDDEN
                    };
                    assert_eq!(reply.status, want, "should be refused: {context}");
                    // A refusal carries the error and nothing else: no data, not even a count.
                    let value: serde_json::Value = reply.json();
                    let keys: Vec<&String> = value.as_object().expect("an object").keys().collect();
                    assert_eq!(keys, ["code", "message"], "{context}");
                }
                if expect {
                    let_in += 1;
                } else {
                    refused += 1;
                }
            }
        }
        assert!(let_in > 0, "{method} {path}: {spec:?} lets nobody in");
        if !spec.contains("anon") {
            assert!(refused > 0, "{method} {path}: {spec:?} refuses nobody");
        }
    }
}

#[sqlx::test(migrator = "backend::MIGRATOR")]
async fn log_in_sets_a_strict_http_only_cookie_and_me_answers(pool: PgPool) {
    seed_world(&pool).await;
    let router = router(pool.clone());
    let session = login(&router, "Rita", PASSWORD).await; // user names are case-insensitive
    assert_eq!(session.me.username, "rita");
    assert_eq!(session.me.roles, vec![Role::Requester]);
    assert_eq!(session.me.teams, vec!["own".to_owned()]);
    assert_eq!(session.me.csrf_token.len(), 64);
    for attribute in ["HttpOnly", "SameSite=Strict", "Path=/", "Max-Age=43200"] {
        assert!(
            session.set_cookie.contains(attribute),
            "{}",
            session.set_cookie
        );
    }
    assert!(
        !session.set_cookie.contains("Secure"),
        "plain http: {}",
        session.set_cookie
    );
    let reply = send(
        &router,
        request(Method::GET, "/api/auth/me", Some(&session), None),
    )
    .await;
    assert_eq!(reply.json::<Me>(), session.me);
    // The console's start-up question: who is signed in, `null` for a visitor, never a 401.
    let reply = send(
        &router,
        request(Method::GET, "/api/auth/session", Some(&session), None),
    )
    .await;
    assert_eq!(reply.json::<Option<Me>>(), Some(session.me.clone()));
    let reply = send(
        &router,
        request(Method::GET, "/api/auth/session", None, None),
    )
    .await;
    assert_eq!(reply.status, StatusCode::OK);
    assert_eq!(reply.json::<Option<Me>>(), None);

    // Behind TLS the cookie is Secure.
    let secure = router_with(
        pool,
        AuthSettings {
            secure_cookies: true,
            ..AuthSettings::default()
        },
    );
    let session = login(&secure, "rita", PASSWORD).await;
    assert!(
        session.set_cookie.starts_with("__Host-gpufleet_session=")
            && session.set_cookie.contains("; Secure"),
        "{}",
        session.set_cookie
    );
    // The browser sends it back under its own name.
    let mut me = request(Method::GET, "/api/auth/me", None, None);
    me.headers_mut().insert(
        header::COOKIE,
        format!("__Host-gpufleet_session={}", session.token)
            .parse()
            .expect("header"),
    );
    assert_eq!(send(&secure, me).await.json::<Me>(), session.me);
}

#[sqlx::test(migrator = "backend::MIGRATOR")]
async fn unknown_users_and_wrong_passwords_get_the_same_answer(pool: PgPool) {
    seed_world(&pool).await;
    let router = router(pool);
    let wrong = try_login(&router, "rita", "not the password at all", "10.0.0.1:1").await;
    let unknown = try_login(&router, "nobody", PASSWORD, "10.0.0.2:1").await;
    assert_eq!(wrong.status, StatusCode::UNAUTHORIZED);
    assert_eq!(wrong.status, unknown.status);
    assert_eq!(wrong.body, unknown.body);
    assert!(wrong.headers.get(header::SET_COOKIE).is_none());
    let err: ApiError = wrong.json();
    assert_eq!(err.code, ErrorCode::Unauthenticated);
    assert_eq!(err.message, "wrong username or password");
}

#[sqlx::test(migrator = "backend::MIGRATOR")]
async fn log_out_really_ends_the_session(pool: PgPool) {
    seed_world(&pool).await;
    let router = router(pool.clone());
    let session = login(&router, "rita", PASSWORD).await;
    let reply = send(
        &router,
        request(Method::POST, "/api/auth/logout", Some(&session), None),
    )
    .await;
    assert_eq!(reply.status, StatusCode::NO_CONTENT);
    let cleared = reply
        .headers
        .get(header::SET_COOKIE)
        .expect("cookie cleared")
        .to_str()
        .expect("ascii");
    assert!(cleared.contains("Max-Age=0"), "{cleared}");
    // The old cookie is dead on the server, whatever the browser keeps.
    let reply = send(
        &router,
        request(Method::GET, "/api/auth/me", Some(&session), None),
    )
    .await;
    assert_eq!(reply.status, StatusCode::UNAUTHORIZED);
    let left: i64 = sqlx::query_scalar("select count(*) from sessions")
        .fetch_one(&pool)
        .await
        .expect("count");
    assert_eq!(left, 0);
}

#[sqlx::test(migrator = "backend::MIGRATOR")]
async fn sessions_expire_when_idle_and_at_their_absolute_limit(pool: PgPool) {
    seed_world(&pool).await;
    let router = router(pool.clone());
    let me = |s: &Session| request(Method::GET, "/api/auth/me", Some(s), None);

    // Active use pushes the idle expiry back.
    let active = login(&router, "rita", PASSWORD).await;
    sqlx::query("update sessions set last_seen_at = now() - interval '20 minutes'")
        .execute(&pool)
        .await
        .expect("age");
    assert_eq!(send(&router, me(&active)).await.status, StatusCode::OK);
    let seen: bool =
        sqlx::query_scalar("select last_seen_at > now() - interval '1 minute' from sessions")
            .fetch_one(&pool)
            .await
            .expect("seen");
    assert!(seen, "a request marks the session seen");

    // 31 idle minutes (the default idle limit is 30) end it.
    sqlx::query("update sessions set last_seen_at = now() - interval '31 minutes'")
        .execute(&pool)
        .await
        .expect("age");
    assert_eq!(
        send(&router, me(&active)).await.status,
        StatusCode::UNAUTHORIZED
    );

    // However active, a session ends at its absolute expiry.
    let busy = login(&router, "alex", PASSWORD).await;
    sqlx::query("update sessions set expires_at = now() - interval '1 second' where user_id = (select id from users where username = 'alex')")
        .execute(&pool)
        .await
        .expect("expire");
    assert_eq!(
        send(&router, me(&busy)).await.status,
        StatusCode::UNAUTHORIZED
    );
}

#[sqlx::test(migrator = "backend::MIGRATOR")]
async fn state_changing_requests_need_the_csrf_token_and_the_same_origin(pool: PgPool) {
    seed_world(&pool).await;
    let router = router(pool);
    let session = login(&router, "ada", PASSWORD).await;
    let body = serde_json::json!({"name": "new", "namespace": "ns-new", "cost_centre": "CC-9"});

    let mut missing = request(
        Method::POST,
        "/api/teams",
        Some(&session),
        Some(body.clone()),
    );
    missing.headers_mut().remove("x-csrf-token");
    let mut wrong = request(
        Method::POST,
        "/api/teams",
        Some(&session),
        Some(body.clone()),
    );
    wrong
        .headers_mut()
        .insert("x-csrf-token", "0".repeat(64).parse().expect("header"));
    // A request to console.example (over plain http) from `origin`.
    let from = |origin: &str, body: serde_json::Value| {
        let mut req = request(Method::POST, "/api/teams", Some(&session), Some(body));
        req.headers_mut()
            .insert(header::HOST, "console.example".parse().expect("header"));
        req.headers_mut()
            .insert(header::ORIGIN, origin.parse().expect("header"));
        req
    };
    let cross_site = from("https://evil.example", body.clone());
    // The same host under another scheme is another origin.
    let other_scheme = from("https://console.example", body.clone());
    for (what, req) in [
        ("no token", missing),
        ("wrong token", wrong),
        ("cross-site", cross_site),
        ("other scheme", other_scheme),
    ] {
        let reply = send(&router, req).await;
        assert_eq!(
            reply.status,
            StatusCode::FORBIDDEN,
            "{what}: {}",
            reply.text()
        );
        assert_eq!(reply.json::<ApiError>().code, ErrorCode::Forbidden);
    }
    // Nothing was created; with the token it is.
    let reply = send(&router, from("http://console.example", body)).await;
    assert_eq!(reply.status, StatusCode::CREATED, "{}", reply.text());
    assert_eq!(reply.json::<Team>().namespace, "ns-new");
}

#[sqlx::test(migrator = "backend::MIGRATOR")]
async fn failed_log_ins_are_throttled_per_account_and_per_address(pool: PgPool) {
    seed_world(&pool).await;
    let router = router(pool.clone());
    for i in 0..5 {
        let reply = try_login(
            &router,
            "rita",
            "wrong password 123",
            &format!("10.1.0.{i}:1"),
        )
        .await;
        assert_eq!(reply.status, StatusCode::UNAUTHORIZED);
    }
    // Now even the right password from a new address is refused for a while...
    let reply = try_login(&router, "rita", PASSWORD, "10.2.0.1:1").await;
    assert_eq!(
        reply.status,
        StatusCode::TOO_MANY_REQUESTS,
        "{}",
        reply.text()
    );
    let err = reply.json::<ApiError>();
    assert_eq!(err.code, ErrorCode::TooManyRequests);
    // The README's 15-minute window, in the header and in words.
    assert_eq!(
        reply
            .headers
            .get(header::RETRY_AFTER)
            .and_then(|v| v.to_str().ok()),
        Some("900")
    );
    assert_eq!(
        err.message,
        "too many failed log-ins; try again in 15 minutes"
    );
    // ...while other accounts log in.
    login(&router, "alex", PASSWORD).await;
    // Once the window has passed, the account opens again.
    sqlx::query("update login_failures set created_at = created_at")
        .execute(&pool)
        .await
        .expect_err("failed log-ins are append-only");
    sqlx::query("delete from login_failures where username = 'rita'")
        .execute(&pool)
        .await
        .expect("window passes");
    assert_eq!(
        try_login(&router, "rita", PASSWORD, "10.2.0.1:1")
            .await
            .status,
        StatusCode::OK
    );

    // One address guessing across many accounts is stopped too.
    for i in 0..20 {
        let reply = try_login(
            &router,
            &format!("guess{i}"),
            "wrong password 123",
            "10.9.9.9:1",
        )
        .await;
        assert_eq!(reply.status, StatusCode::UNAUTHORIZED);
    }
    let reply = try_login(&router, "fiona", PASSWORD, "10.9.9.9:2").await;
    assert_eq!(reply.status, StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(
        try_login(&router, "fiona", PASSWORD, "10.8.8.8:1")
            .await
            .status,
        StatusCode::OK
    );
}

fn proxy_settings(trusted: &str) -> AuthSettings {
    AuthSettings {
        trusted_proxies: parse_networks(trusted).expect("networks"),
        proxy: Some(ProxySettings {
            role_groups: vec![
                ("platform-admins".into(), Role::Admin),
                ("ml".into(), Role::Requester),
            ],
            team_group_prefix: "team-".into(),
        }),
        ..AuthSettings::default()
    }
}

fn proxied(peer: &str, user: &str, groups: &str) -> axum::http::Request<axum::body::Body> {
    let mut req = request_from(Method::GET, "/api/auth/me", None, None, peer);
    req.headers_mut()
        .insert("x-forwarded-user", user.parse().expect("header"));
    req.headers_mut()
        .insert("x-forwarded-groups", groups.parse().expect("header"));
    req
}

#[sqlx::test(migrator = "backend::MIGRATOR")]
async fn the_auth_proxy_is_believed_only_from_trusted_addresses(pool: PgPool) {
    seed_world(&pool).await;
    let logs = capture_logs();
    let router = router_with(pool.clone(), proxy_settings("10.0.0.1"));

    let reply = send(
        &router,
        proxied("10.0.0.1:4000", "Zoe", "ml, team-own, team-nope"),
    )
    .await;
    assert_eq!(reply.status, StatusCode::OK, "{}", reply.text());
    let me: Me = reply.json();
    assert_eq!(
        (me.username.as_str(), me.roles.clone(), me.teams.clone()),
        ("zoe", vec![Role::Requester], vec!["own".to_owned()])
    );
    assert_eq!(me.csrf_token.len(), 64);
    // Groups change, and the user's roles follow.
    let me: Me = send(&router, proxied("10.0.0.1:4000", "zoe", "platform-admins"))
        .await
        .json();
    assert_eq!((me.roles, me.teams), (vec![Role::Admin], vec![]));

    // Someone in no mapped group gets nothing, and is told why; a proxy name that is a local
    // account's (rita has a password) cannot take that account over, whatever its groups.
    for (user, groups, why) in [
        ("yan", "unrelated, team-nope", "map to no role or team"),
        ("rita", "platform-admins", "belongs to a local account"),
    ] {
        let reply = send(&router, proxied("10.0.0.1:4000", user, groups)).await;
        assert_eq!(
            reply.status,
            StatusCode::FORBIDDEN,
            "{user}: {}",
            reply.text()
        );
        assert!(reply.text().contains(why), "{user}: {}", reply.text());
    }
    let roles: Vec<String> = sqlx::query_scalar(
        "select r.role from user_roles r join users u on u.id = r.user_id where u.username = 'rita'",
    )
    .fetch_all(&pool)
    .await
    .expect("roles");
    assert_eq!(roles, ["requester"]);
    let yan: i64 = sqlx::query_scalar("select count(*) from users where username = 'yan'")
        .fetch_one(&pool)
        .await
        .expect("count");
    assert_eq!(yan, 0, "an unmapped user is not created");

    // The same headers from elsewhere are ignored, and logged.
    let reply = send(
        &router,
        proxied("192.168.7.7:4000", "ada", "platform-admins"),
    )
    .await;
    assert_eq!(reply.status, StatusCode::UNAUTHORIZED);
    assert!(
        logs.text()
            .contains("ignored X-Forwarded-User from an address that is not a trusted proxy"),
        "{}",
        logs.text()
    );

    // With the proxy mode off, even a trusted address cannot vouch.
    let plain = router_with(
        pool,
        AuthSettings {
            trusted_proxies: parse_networks("10.0.0.1").expect("ok"),
            ..AuthSettings::default()
        },
    );
    assert_eq!(
        send(&plain, proxied("10.0.0.1:4000", "ada", "platform-admins"))
            .await
            .status,
        StatusCode::UNAUTHORIZED
    );
    assert!(
        logs.text()
            .contains("ignored X-Forwarded-User: the auth-proxy mode is off")
    );
}

#[sqlx::test(migrator = "backend::MIGRATOR")]
async fn behind_the_proxy_each_user_has_a_csrf_token_every_replica_accepts(pool: PgPool) {
    seed_world(&pool).await;
    // Two replicas over one database, keyed alike (as --csrf-secret or the database makes them).
    let secret = backend::auth::db::shared_secret(&pool, "proxy-csrf", &"k".repeat(64))
        .await
        .expect("secret");
    assert_eq!(
        backend::auth::db::shared_secret(&pool, "proxy-csrf", &"other".repeat(10))
            .await
            .expect("secret"),
        secret,
        "the first replica's secret is kept"
    );
    let replica = || {
        router_with(
            pool.clone(),
            AuthSettings {
                csrf_secret: secret.clone(),
                ..proxy_settings("10.0.0.1")
            },
        )
    };
    let (one, two) = (replica(), replica());
    let token = |me: Me| me.csrf_token;
    let zoe = token(
        send(&one, proxied("10.0.0.1:4000", "zoe", "ml, team-own"))
            .await
            .json(),
    );
    let yuri = token(
        send(&one, proxied("10.0.0.1:4000", "yuri", "ml, team-own"))
            .await
            .json(),
    );
    assert_ne!(zoe, yuri, "no two users share a token");
    assert_eq!(
        token(
            send(&two, proxied("10.0.0.1:4000", "zoe", "ml, team-own"))
                .await
                .json()
        ),
        zoe,
        "the other replica derives the same"
    );
    // Zoe drafts through the other replica with her token (the empty body is then refused as
    // input), and not with Yuri's.
    let draft = |csrf: &str| {
        let mut req = proxied("10.0.0.1:4000", "zoe", "ml, team-own");
        *req.method_mut() = Method::POST;
        *req.uri_mut() = "/api/quota/teams/own/requests".parse().expect("uri");
        req.headers_mut()
            .insert("x-csrf-token", csrf.parse().expect("header"));
        req.headers_mut()
            .insert("content-type", "application/json".parse().expect("header"));
        *req.body_mut() = axum::body::Body::from("{}");
        req
    };
    assert_eq!(
        send(&two, draft(&zoe)).await.status,
        StatusCode::UNPROCESSABLE_ENTITY
    );
    let reply = send(&two, draft(&yuri)).await;
    assert_eq!(reply.status, StatusCode::FORBIDDEN);
    assert!(reply.text().contains("X-CSRF-Token"), "{}", reply.text());
}

#[sqlx::test(migrator = "backend::MIGRATOR")]
async fn api_answers_are_never_cached_and_https_asks_for_hsts(pool: PgPool) {
    let router = router_with(pool, proxy_settings("10.0.0.1"));
    let session = |peer: &str, proto: Option<&str>| {
        let mut req = request_from(Method::GET, "/api/auth/session", None, None, peer);
        if let Some(proto) = proto {
            req.headers_mut()
                .insert("x-forwarded-proto", proto.parse().expect("header"));
        }
        req
    };
    let header = |reply: &crate::common::Reply, name: &str| {
        reply
            .headers
            .get(name)
            .map(|v| v.to_str().expect("text").to_owned())
    };
    // Over https as the trusted proxy says: HSTS; plain http, or a proxy nobody trusts: none.
    let https = send(&router, session("10.0.0.1:4000", Some("https"))).await;
    assert_eq!(
        header(&https, "strict-transport-security").as_deref(),
        Some("max-age=31536000")
    );
    assert_eq!(header(&https, "cache-control").as_deref(), Some("no-store"));
    for (peer, proto) in [("10.0.0.1:4000", None), ("192.168.7.7:4000", Some("https"))] {
        let reply = send(&router, session(peer, proto)).await;
        assert_eq!(header(&reply, "strict-transport-security"), None, "{peer}");
        assert_eq!(header(&reply, "cache-control").as_deref(), Some("no-store"));
    }
    // every response over https says so, not only the API's: the console's pages and files,
    // and a file that is not there
    for path in ["/quotas", "/pkg/no-such-file.js", "/favicon.svg"] {
        let file = |peer: &str, proto: &str| {
            let mut req = request_from(Method::GET, path, None, None, peer);
            req.headers_mut()
                .insert("x-forwarded-proto", proto.parse().expect("header"));
            req
        };
        let https = send(&router, file("10.0.0.1:4000", "https")).await;
        assert_eq!(
            header(&https, "strict-transport-security").as_deref(),
            Some("max-age=31536000"),
            "{path}"
        );
        let spoofed = send(&router, file("192.168.7.7:4000", "https")).await;
        assert_eq!(
            header(&spoofed, "strict-transport-security"),
            None,
            "{path}"
        );
    }
}

#[sqlx::test(migrator = "backend::MIGRATOR")]
async fn passwords_are_never_logged_or_returned(pool: PgPool) {
    let logs = capture_logs();
    seed_world(&pool).await;
    let router = router(pool.clone());
    let admin = login(&router, "ada", PASSWORD).await;
    let secret = "zebra-kettle-7-orbit-velvet";
    let created = send(
        &router,
        request(
            Method::POST,
            "/api/users",
            Some(&admin),
            Some(serde_json::json!({
                "username": "newbie", "password": secret, "roles": ["requester"], "teams": ["own"]
            })),
        ),
    )
    .await;
    assert_eq!(created.status, StatusCode::CREATED, "{}", created.text());
    let wrong = try_login(&router, "newbie", &format!("{secret}x"), "127.0.0.1:1").await;
    let right = try_login(&router, "newbie", secret, "127.0.0.1:1").await;
    let reset = send(
        &router,
        request(
            Method::POST,
            "/api/users/newbie/password",
            Some(&admin),
            Some(serde_json::json!({"password": format!("{secret}-2")})),
        ),
    )
    .await;
    assert_eq!(reset.status, StatusCode::NO_CONTENT);
    let listed = send(
        &router,
        request(Method::GET, "/api/users", Some(&admin), None),
    )
    .await;
    let users: Vec<User> = listed.json();
    assert!(
        users
            .iter()
            .any(|u| u.username == "newbie" && u.teams == ["own"])
    );

    for reply in [&created, &wrong, &right, &reset, &listed] {
        let text = reply.text();
        assert!(
            !text.contains(secret) && !text.contains("argon2"),
            "a reply leaks: {text}"
        );
    }
    let logged = logs.text();
    assert!(logged.contains("newbie"), "the capture works: {logged}");
    assert!(
        !logged.contains(secret) && !logged.contains("argon2id$"),
        "the log leaks:\n{logged}"
    );
    let stored: String =
        sqlx::query_scalar("select password_hash from users where username = 'newbie'")
            .fetch_one(&pool)
            .await
            .expect("hash");
    assert!(stored.starts_with("$argon2id$"));
}

#[sqlx::test(migrator = "backend::MIGRATOR")]
async fn disabling_a_user_ends_their_sessions_and_admins_cannot_lock_themselves_out(pool: PgPool) {
    seed_world(&pool).await;
    let router = router(pool);
    let admin = login(&router, "ada", PASSWORD).await;
    let rita = login(&router, "rita", PASSWORD).await;
    let patch = |who: &str, body| {
        request(
            Method::PATCH,
            &format!("/api/users/{who}"),
            Some(&admin),
            Some(body),
        )
    };

    let reply = send(
        &router,
        patch("rita", serde_json::json!({"disabled": true})),
    )
    .await;
    assert_eq!(reply.status, StatusCode::OK, "{}", reply.text());
    assert!(reply.json::<User>().disabled);
    assert_eq!(
        send(
            &router,
            request(Method::GET, "/api/auth/me", Some(&rita), None)
        )
        .await
        .status,
        StatusCode::UNAUTHORIZED
    );
    let again = try_login(&router, "rita", PASSWORD, "127.0.0.1:1").await;
    assert_eq!(
        again.json::<ApiError>().message,
        "wrong username or password"
    );

    for body in [
        serde_json::json!({"disabled": true}),
        serde_json::json!({"roles": ["finance"]}),
    ] {
        let reply = send(&router, patch("ada", body)).await;
        assert_eq!(reply.status, StatusCode::CONFLICT, "{}", reply.text());
    }
    let reply = send(
        &router,
        patch("tom", serde_json::json!({"teams": ["own", "ghost"]})),
    )
    .await;
    assert_eq!(reply.status, StatusCode::UNPROCESSABLE_ENTITY);
    assert_eq!(reply.json::<ApiError>().fields[0].path, "teams[1]");
}

#[sqlx::test(migrator = "backend::MIGRATOR")]
async fn requesters_see_only_their_teams_and_admins_manage_them(pool: PgPool) {
    seed_world(&pool).await;
    let router = router(pool);
    let rita = login(&router, "rita", PASSWORD).await;
    let teams: Vec<Team> = send(
        &router,
        request(Method::GET, "/api/teams", Some(&rita), None),
    )
    .await
    .json();
    assert_eq!(
        teams.iter().map(|t| t.name.as_str()).collect::<Vec<_>>(),
        ["own"]
    );
    assert_eq!(teams[0].members, ["rita"]);

    let admin = login(&router, "ada", PASSWORD).await;
    let all: Vec<Team> = send(
        &router,
        request(Method::GET, "/api/teams", Some(&admin), None),
    )
    .await
    .json();
    assert_eq!(all.len(), 2);
    let put = send(
        &router,
        request(
            Method::PUT,
            "/api/teams/other/members/rita",
            Some(&admin),
            None,
        ),
    )
    .await;
    assert_eq!(put.status, StatusCode::NO_CONTENT);
    let team: Team = send(
        &router,
        request(
            Method::PATCH,
            "/api/teams/other",
            Some(&admin),
            Some(serde_json::json!({"cost_centre": "CC-42"})),
        ),
    )
    .await
    .json();
    assert_eq!(
        (team.cost_centre.as_str(), team.members.clone()),
        ("CC-42", vec!["rita".to_owned()])
    );
    let clash = send(
        &router,
        request(
            Method::PATCH,
            "/api/teams/other",
            Some(&admin),
            Some(serde_json::json!({"namespace": "ns-own"})),
        ),
    )
    .await;
    assert_eq!(clash.status, StatusCode::CONFLICT, "{}", clash.text());
    let bad = send(
        &router,
        request(
            Method::POST,
            "/api/teams",
            Some(&admin),
            Some(serde_json::json!({"name": "Bad_Name", "namespace": "ok", "cost_centre": ""})),
        ),
    )
    .await;
    assert_eq!(bad.status, StatusCode::UNPROCESSABLE_ENTITY);
    let paths: Vec<String> = bad
        .json::<ApiError>()
        .fields
        .into_iter()
        .map(|f| f.path)
        .collect();
    assert_eq!(paths, ["name", "cost_centre"]);
    let gone = send(
        &router,
        request(
            Method::DELETE,
            "/api/teams/other/members/nobody",
            Some(&admin),
            None,
        ),
    )
    .await;
    assert_eq!(gone.status, StatusCode::NOT_FOUND);
}

/// Captures every log line of this test (the sqlx::test runtime is single-threaded).
struct Logs(
    Arc<Mutex<Vec<u8>>>,
    #[allow(dead_code)] tracing::subscriber::DefaultGuard,
);

impl Logs {
    fn text(&self) -> String {
        String::from_utf8_lossy(&self.0.lock().expect("lock")).into_owned()
    }
}

#[derive(Clone)]
struct Sink(Arc<Mutex<Vec<u8>>>);

impl Write for Sink {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().expect("lock").extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

fn capture_logs() -> Logs {
    let buffer = Arc::new(Mutex::new(Vec::new()));
    let sink = Sink(Arc::clone(&buffer));
    let subscriber = tracing_subscriber::fmt()
        .with_max_level(tracing::Level::TRACE)
        .with_ansi(false)
        .with_writer(move || sink.clone())
        .finish();
    let guard = tracing::subscriber::set_default(subscriber);
    Logs(buffer, guard)
}

#[sqlx::test(migrator = "backend::MIGRATOR")]
async fn a_user_always_holds_a_role(pool: PgPool) {
    seed_world(&pool).await;
    let router = router(pool.clone());
    let admin = login(&router, "ada", PASSWORD).await;
    let created = send(
        &router,
        request(
            Method::POST,
            "/api/users",
            Some(&admin),
            Some(serde_json::json!({
                "username": "nobody", "password": "long enough password", "roles": []
            })),
        ),
    )
    .await;
    assert_eq!(created.status, StatusCode::UNPROCESSABLE_ENTITY);
    let err: ApiError = created.json();
    assert_eq!(err.fields[0].path, "roles");
    assert_eq!(err.fields[0].message, "give at least one role");
    // Nothing was written.
    let count: i64 = sqlx::query_scalar("select count(*) from users where username = 'nobody'")
        .fetch_one(&pool)
        .await
        .expect("count");
    assert_eq!(count, 0);
    // Nor can the last role be taken away.
    let patched = send(
        &router,
        request(
            Method::PATCH,
            "/api/users/rita",
            Some(&admin),
            Some(serde_json::json!({"roles": []})),
        ),
    )
    .await;
    assert_eq!(patched.status, StatusCode::UNPROCESSABLE_ENTITY);
    assert_eq!(patched.json::<ApiError>().fields[0].path, "roles");
}
