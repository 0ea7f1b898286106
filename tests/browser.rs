//! What a person sees: the built console in headless Chromium, served by the real server over a
//! real PostgreSQL.

use fantoccini::Locator;
use gpufleet_e2e::{Browser, Server};
use sqlx::PgPool;

#[sqlx::test(migrator = "backend::MIGRATOR")]
async fn the_console_renders_shows_health_and_navigates(pool: PgPool) {
    backend::fleet::load_demo(&pool).await.expect("demo fleet");
    let server = Server::start(pool).await;
    let browser = Browser::start().await;

    browser
        .client
        .goto(&server.url("/"))
        .await
        .expect("open the console");
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
    browser
        .client
        .find(Locator::LinkText("Fleet"))
        .await
        .expect("nav link")
        .click()
        .await
        .expect("click");
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
    browser
        .client
        .find(Locator::LinkText("Plan"))
        .await
        .expect("nav link")
        .click()
        .await
        .expect("click");
    browser.wait_for_text(".notyet", "Not built yet").await;

    browser.close().await;
}
