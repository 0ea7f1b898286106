//! What a person sees: the built console in headless Chromium, served by the real server over a
//! real PostgreSQL.

use fantoccini::Locator;
use gpufleet_e2e::{Browser, Server, repo_root};
use shared::{
    auth::{NewUser, Role},
    label::Labelled,
};
use sqlx::PgPool;

const PASSWORD: &str = "browser test password";

async fn user(pool: &PgPool, username: &str, role: Role) {
    let new = NewUser {
        username: username.into(),
        display_name: format!("{username} {}", role.as_str()),
        password: PASSWORD.into(),
        roles: vec![role],
        teams: Vec::new(),
    };
    backend::accounts::insert_user(pool, &new)
        .await
        .expect("user");
}

async fn log_in(browser: &Browser, username: &str, password: &str) {
    browser
        .wait_for_text("[data-test=login-form]", "Log in")
        .await;
    browser
        .fill_and_submit(
            "[data-test=login-form]",
            &[
                ("input[name=username]", username),
                ("input[name=password]", password),
            ],
        )
        .await;
}

/// The real server on `pool`, and Chromium on its start page.
async fn open_console(pool: PgPool) -> (Server, Browser) {
    let server = Server::start(pool).await;
    let browser = Browser::start().await;
    browser
        .client
        .goto(&server.url("/"))
        .await
        .expect("open the console");
    (server, browser)
}

async fn nav_titles(browser: &Browser) -> Vec<String> {
    let links = browser
        .client
        .find_all(Locator::Css("[data-test=nav] a"))
        .await
        .expect("links");
    let mut titles = Vec::new();
    for link in links {
        titles.push(link.text().await.expect("text"));
    }
    titles
}

#[sqlx::test(migrator = "backend::MIGRATOR")]
async fn the_console_renders_shows_health_and_navigates(pool: PgPool) {
    backend::fleet::load_demo(&pool).await.expect("demo fleet");
    user(&pool, "ada", Role::Admin).await;
    let (_server, browser) = open_console(pool).await;
    log_in(&browser, "ada", PASSWORD).await;
    // The WASM app rendered and the health round trip reached the database.
    let health = browser
        .wait_for_text("[data-test=health-status]", "database up")
        .await;
    let text = health.text().await.expect("text");
    assert!(
        text.contains(&format!("backend {}", env!("CARGO_PKG_VERSION"))),
        "{text}"
    );

    // Navigate by clicking, as a person would.
    browser.click("Fleet").await;
    browser
        .wait_for_text("[data-test=fleet-total]", "192 GPUs in 3 pools")
        .await;
    let url = browser.client.current_url().await.expect("url");
    assert_eq!(url.path(), "/fleet");
    // plotly.js (served locally) drew the chart.
    browser.wait_for_text("#fleet-chart", "GPUs by model").await;
    let shot = browser.screenshot("console-fleet").await;
    assert!(std::fs::metadata(&shot).expect("screenshot").len() > 10_000);

    // A page that is not built yet says so.
    browser.click("Quotas").await;
    browser.wait_for_text(".notyet", "Not built yet").await;

    // The planning math runs in the browser: evaluate two example scenarios, and see the
    // figures that `gpufleet plan evaluate` gives for the same files.
    let cli = |name: &str| {
        backend::plan::evaluate_file(&repo_root().join(format!("shared/scenarios/{name}.json")))
            .unwrap_or_else(|err| panic!("{name}: {err}"))
    };
    let aws = cli("aws-300");
    browser.click("Plan").await;
    browser.click_css("[data-test=evaluate]").await;
    browser
        .wait_for_text(
            "[data-test=recommendation]",
            aws.decision.recommendation.label(),
        )
        .await;
    let sizing = &aws.sizing;
    for figure in [
        format!(
            "GPUs needed {} {}",
            sizing.separate_pools.gpus, sizing.shared_pool.gpus
        ),
        format!(
            "Mean busy (DCGM) {:.1}% {:.1}%",
            sizing.separate_pools.mean_busy_pct, sizing.shared_pool.mean_busy_pct
        ),
    ] {
        browser.wait_for_text("[data-test=sizing]", &figure).await;
    }
    let sim = &aws.simulation.total;
    browser
        .wait_for_text(
            "[data-test=simulation]",
            &format!(
                "Admitted {:.0} of {:.0} GPU-hours wanted",
                sim.admitted_gpu_minutes / 60.0,
                sim.wanted_gpu_minutes / 60.0
            ),
        )
        .await;
    let first = &aws.isolation.classes[0];
    browser
        .wait_for_text(
            "[data-test=isolation]",
            &format!(
                "{} {} {}",
                first.team,
                first.workload,
                first.mechanism.label()
            ),
        )
        .await;
    browser
        .wait_for_text("#sensitivity-chart", "Recommendation as the fleet grows")
        .await;
    browser.screenshot("console-plan").await;
    let example = browser
        .client
        .find(Locator::Css("[data-test=example]"))
        .await
        .expect("select");
    example
        .select_by_value("no-own-model")
        .await
        .expect("choose");
    browser.click_css("[data-test=evaluate]").await;
    browser
        .wait_for_text(
            "[data-test=recommendation]",
            cli("no-own-model").decision.recommendation.label(),
        )
        .await;

    browser.close().await;
}

#[sqlx::test(migrator = "backend::MIGRATOR")]
async fn each_role_sees_its_navigation_and_logs_out(pool: PgPool) {
    let people = [
        ("rita", Role::Requester, vec!["Quotas", "Fleet"]),
        (
            "alex",
            Role::Approver,
            vec!["Plan", "Quotas", "Chargeback", "Fleet"],
        ),
        ("fiona", Role::Finance, vec!["Chargeback", "Fleet"]),
        (
            "ada",
            Role::Admin,
            vec!["Plan", "Quotas", "Chargeback", "Fleet", "Admin"],
        ),
    ];
    for (name, role, _) in &people {
        user(&pool, name, *role).await;
    }
    let (server, browser) = open_console(pool).await;

    // A wrong password is refused in words, and nothing else shows.
    log_in(&browser, "rita", "not the password").await;
    browser
        .wait_for_text(".error", "wrong username or password")
        .await;
    browser.client.goto(&server.url("/")).await.expect("reload");

    for (name, role, want) in &people {
        log_in(&browser, name, PASSWORD).await;
        browser
            .wait_for_text("[data-test=user-roles]", role.label())
            .await;
        assert_eq!(nav_titles(&browser).await, *want, "{name}");
        if *role == Role::Admin {
            browser.click("Admin").await;
            browser
                .wait_for_text("[data-test=user-rita]", Role::Requester.label())
                .await;
            // An admin creates a team from the form, and it is listed.
            browser
                .fill_and_submit(
                    "[data-test=new-team]",
                    &[
                        ("input[placeholder='team name']", "vision"),
                        ("input[placeholder='namespace']", "team-vision"),
                        ("input[placeholder='cost centre']", "CC-7"),
                    ],
                )
                .await;
            browser
                .wait_for_text("[data-test=team-vision]", "vision")
                .await;
            browser.screenshot("console-admin").await;
        } else {
            // A page outside the role, opened by its address, shows no data.
            browser
                .client
                .goto(&server.url("/admin"))
                .await
                .expect("open /admin");
            browser
                .wait_for_text("main", "You do not have access to this page.")
                .await;
        }
        browser.click_css("[data-test=logout]").await;
        browser
            .wait_for_text("[data-test=login-form]", "Log in")
            .await;
        // Logged out for real: a reload stays on the log-in page.
        browser
            .client
            .goto(&server.url("/fleet"))
            .await
            .expect("reload");
        browser
            .wait_for_text("[data-test=login-form]", "Log in")
            .await;
    }
    browser.close().await;
}
