//! What a person sees: the built console in headless Chromium, served by the real server over a
//! real PostgreSQL.

use fantoccini::Locator;
use gpufleet_e2e::{Browser, Server, repo_root};
use shared::{
    auth::{NewTeam, NewUser, Page, Role},
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
    backend::accounts::insert_user(pool, &backend::work::Work::for_this_machine().hashing, &new)
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

async fn link_texts(browser: &Browser, css: &str) -> Vec<String> {
    let links = browser
        .client
        .find_all(Locator::Css(css))
        .await
        .expect("links");
    let mut titles = Vec::new();
    for link in links {
        titles.push(link.text().await.expect("text"));
    }
    titles
}

async fn nav_titles(browser: &Browser) -> Vec<String> {
    link_texts(browser, "[data-test=nav] a").await
}

async fn card_titles(browser: &Browser) -> Vec<String> {
    link_texts(browser, "[data-test=cards] a").await
}

/// On the Admin page: a user without a role is refused beside the roles; a member is added
/// from the drop-down, twice in a row; removing one asks first; a password is reset.
async fn admin_changes_say_where_and_whether_they_were_saved(browser: &Browser) {
    browser
        .fill_and_submit(
            "[data-test=new-user]",
            &[
                ("input[placeholder='username']", "norole"),
                ("input[type=password]", "a long enough password"),
            ],
        )
        .await;
    browser
        .wait_for_text("[data-test=error-roles]", "give at least one role")
        .await;
    // Members: choose, add, and choose again from the reloaded list.
    for member in ["rita", "alex"] {
        let choice = browser
            .client
            .find(Locator::Css(
                "[data-test=team-ml] [data-test=member-choice]",
            ))
            .await
            .expect("member drop-down");
        choice.select_by_value(member).await.expect("choose");
        browser
            .click_css("[data-test=team-ml] [data-test=add-member]")
            .await;
        browser
            .wait_for_text("[data-test=team-ml]", &format!("Saved: {member} added."))
            .await;
    }
    // Removing a member (alex, the first chip) asks first; dismissed, nothing changes, so the
    // second try still removes alex.
    browser.click_css("[data-test=team-ml] .chip button").await;
    browser
        .client
        .dismiss_alert()
        .await
        .expect("a confirmation");
    browser.click_css("[data-test=team-ml] .chip button").await;
    browser.client.accept_alert().await.expect("a confirmation");
    browser
        .wait_for_text("[data-test=team-ml]", "Saved: alex removed.")
        .await;
    // A new password for rita, typed twice.
    browser
        .click_css("[data-test=user-rita] [data-test=reset-password]")
        .await;
    browser
        .fill_and_submit(
            "[data-test=user-rita] [data-test=password-form]",
            &[
                ("input[placeholder^='new password']", NEW_PASSWORD),
                ("input[placeholder='again']", NEW_PASSWORD),
            ],
        )
        .await;
    browser
        .wait_for_text("[data-test=user-rita]", "Saved: new password set")
        .await;
}

const NEW_PASSWORD: &str = "a brand new password";

#[sqlx::test(migrator = "backend::MIGRATOR")]
async fn the_console_renders_shows_health_and_navigates(pool: PgPool) {
    backend::fleet::load_demo(&pool).await.expect("demo fleet");
    user(&pool, "ada", Role::Admin).await;
    let (server, browser) = open_console(pool).await;
    // plotly.js is not loaded until a page draws a chart: not for the log-in page.
    let plotly_loaded = || async {
        browser
            .client
            .execute("return typeof window.Plotly !== 'undefined'", vec![])
            .await
            .expect("script")
            .as_bool()
    };
    browser
        .wait_for_text("[data-test=login-form]", "Log in")
        .await;
    assert_eq!(plotly_loaded().await, Some(false));
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

    // Nor for the admin's home page.
    assert_eq!(plotly_loaded().await, Some(false));

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

    assert_eq!(plotly_loaded().await, Some(true));

    // A page that is not built yet says so, and so does a deep link into it, reloaded.
    browser.click("Quotas").await;
    browser.wait_for_text(".notyet", "Not built yet").await;
    browser
        .client
        .goto(&server.url("/quotas/new"))
        .await
        .expect("deep link");
    browser.wait_for_text(".notyet", "Not built yet").await;
    // Every page in the navigation survives a reload.
    for page in Page::ALL {
        browser
            .client
            .goto(&server.url(page.path()))
            .await
            .expect("reload");
        browser.wait_for_text("main h1", page.title()).await;
    }

    // The planning math runs in the browser: evaluate two example scenarios, and see the
    // figures that `gpufleet plan evaluate` gives for the same files.
    let cli = |name: &str| {
        backend::plan::cli::evaluate_file(
            &repo_root().join(format!("shared/scenarios/{name}.json")),
        )
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
                "Batch: {:.0} GPU-hours wanted; {:.0} admitted",
                sim.wanted_batch_gpu_minutes / 60.0,
                sim.batch_gpu_minutes / 60.0
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
    // A mistyped field is named by its path, as the CLI and the API name it.
    let mut typo: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(repo_root().join("shared/scenarios/startup-40.json"))
            .expect("example"),
    )
    .expect("json");
    typo["fleet"][0]["count"] = "forty".into();
    browser
        .client
        .execute(
            "const t = document.querySelector('textarea.scenario'); t.value = arguments[0]; t.dispatchEvent(new Event('input'));",
            vec![typo.to_string().into()],
        )
        .await
        .expect("type the scenario");
    browser.click_css("[data-test=evaluate]").await;
    let errors = browser
        .wait_for_text("[data-test=scenario-errors]", "fleet[0].count")
        .await;
    let text = errors.text().await.expect("text");
    assert!(text.contains("whole number"), "{text}");

    // Save a scenario, open it again by its URL after a reload: the same scenario comes back.
    example.select_by_value("startup-40").await.expect("choose");
    browser
        .fill_and_submit(
            "[data-test=save-scenario]",
            &[("input[type=text]", "Start-up, as today")],
        )
        .await;
    browser
        .wait_for_text("[data-test=save-status]", "saved as “Start-up, as today”")
        .await;
    let url = browser.client.current_url().await.expect("url");
    let id: i64 = url
        .path()
        .strip_prefix("/plan/")
        .and_then(|id| id.parse().ok())
        .unwrap_or_else(|| panic!("saved scenarios open at /plan/{{id}}: {url}"));
    browser
        .client
        .goto(&server.url(&format!("/plan/{id}")))
        .await
        .expect("reload");
    browser
        .wait_for_text("[data-test=saved-scenarios] summary", "Saved scenarios")
        .await;
    browser
        .click_css("[data-test=saved-scenarios] summary")
        .await;
    browser
        .wait_for_text("[data-test=saved-scenarios]", "Start-up, as today ada")
        .await;
    wait_for_scenario(&browser, "\"name\": \"40-card start-up\"").await;
    browser.click_css("[data-test=evaluate]").await;
    browser
        .wait_for_text(
            "[data-test=recommendation]",
            cli("startup-40").decision.recommendation.label(),
        )
        .await;
    browser.screenshot("console-plan-saved").await;
    // An edit after evaluating says the results are stale.
    browser
        .client
        .execute(
            "const t = document.querySelector('textarea.scenario'); t.value = t.value.replace('40-card start-up', '40-card start-up, edited'); t.dispatchEvent(new Event('input'));",
            vec![],
        )
        .await
        .expect("edit the scenario");
    browser
        .wait_for_text("[data-test=stale]", "evaluate again")
        .await;
    // The draft survives a reload of the plain Plan page.
    browser
        .client
        .goto(&server.url("/plan"))
        .await
        .expect("reload");
    wait_for_scenario(&browser, "40-card start-up, edited").await;

    browser.close().await;
}

/// Waits until the Plan page's scenario text contains `text`.
async fn wait_for_scenario(browser: &Browser, text: &str) {
    let started = std::time::Instant::now();
    loop {
        let value = browser
            .client
            .execute(
                "const t = document.querySelector('textarea.scenario'); return t ? t.value : null;",
                vec![],
            )
            .await
            .expect("read the scenario");
        if value.as_str().is_some_and(|v| v.contains(text)) {
            return;
        }
        assert!(
            started.elapsed() < std::time::Duration::from_secs(30),
            "the scenario text never held {text:?}: {value}"
        );
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
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
    backend::accounts::insert_team(
        &pool,
        &NewTeam {
            name: "ml".into(),
            namespace: "team-ml".into(),
            cost_centre: "CC-1".into(),
        },
    )
    .await
    .expect("team");
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
        // Each lands on their own role's page, whatever page the last user left open.
        let home = Page::home_for(&[*role]);
        browser.wait_for_text("main h1", home.title()).await;
        let url = browser.client.current_url().await.expect("url");
        assert_eq!(url.path(), home.path(), "{name}");
        assert_eq!(nav_titles(&browser).await, *want, "{name}");
        // The start page offers exactly the pages the navigation does.
        browser.click_css("a.brand").await;
        browser.wait_for_text("[data-test=cards]", " — ").await;
        assert_eq!(card_titles(&browser).await, *want, "{name}");
        if *role == Role::Admin {
            browser.click("Admin").await;
            browser
                .wait_for_text("[data-test=user-rita]", Role::Requester.label())
                .await;
            admin_changes_say_where_and_whether_they_were_saved(&browser).await;
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
    // The admin's password reset took: rita's new password lets her in.
    log_in(&browser, "rita", NEW_PASSWORD).await;
    browser
        .wait_for_text("[data-test=user-roles]", Role::Requester.label())
        .await;
    browser.close().await;
}
