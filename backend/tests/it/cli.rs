//! The `gpufleet` binary's account commands, run as a person would, against a real database.

use std::process::Output;

use crate::common::{gpufleet, router, try_login};
use sqlx::PgPool;

fn stdout(output: &Output) -> String {
    String::from_utf8_lossy(&output.stdout).into_owned()
}

#[sqlx::test(migrator = "backend::MIGRATOR")]
async fn the_first_admin_is_made_on_the_command_line(pool: PgPool) {
    let made = gpufleet(
        &pool,
        &[
            "user",
            "create",
            "root-admin",
            "--admin",
            "--password-stdin",
        ],
        Some("a good long password\n"),
    );
    assert!(
        made.status.success(),
        "{}",
        String::from_utf8_lossy(&made.stderr)
    );
    assert_eq!(stdout(&made), "created root-admin with roles [admin]\n");
    let router = router(pool.clone());
    assert_eq!(
        try_login(&router, "root-admin", "a good long password", "127.0.0.1:1")
            .await
            .status,
        200
    );

    // A generated password is printed once and works.
    let reset = gpufleet(&pool, &["user", "reset-password", "root-admin"], None);
    assert!(reset.status.success());
    let text = stdout(&reset);
    let password = text
        .lines()
        .find_map(|l| l.strip_prefix("password (shown once): "))
        .expect("printed");
    assert_eq!(password.len(), 20);
    assert_eq!(
        try_login(&router, "root-admin", password, "127.0.0.1:1")
            .await
            .status,
        200
    );

    let listed = gpufleet(&pool, &["user", "list"], None);
    let text = stdout(&listed);
    assert!(
        text.lines()
            .any(|l| l.starts_with("root-admin") && l.contains("admin") && l.ends_with("active")),
        "{text}"
    );
    assert!(!text.contains(password) && !text.contains("argon2"));
}

#[sqlx::test(migrator = "backend::MIGRATOR")]
async fn bad_input_is_explained_with_the_field(pool: PgPool) {
    let short = gpufleet(
        &pool,
        &["user", "create", "x", "--password-stdin"],
        Some("short\n"),
    );
    assert!(!short.status.success());
    let stderr = String::from_utf8_lossy(&short.stderr);
    assert!(
        stderr.contains("password: must be at least 12 characters"),
        "{stderr}"
    );
    let role = gpufleet(&pool, &["user", "create", "x", "--role", "root"], None);
    assert!(String::from_utf8_lossy(&role.stderr).contains("\"root\" is not a role"));
    let roleless = gpufleet(&pool, &["user", "create", "nobody"], None);
    assert!(!roleless.status.success());
    assert!(
        String::from_utf8_lossy(&roleless.stderr).contains("roles: give at least one role"),
        "{}",
        String::from_utf8_lossy(&roleless.stderr)
    );
    let twice = gpufleet(
        &pool,
        &["user", "create", "dup", "--role", "requester"],
        None,
    );
    assert!(twice.status.success());
    let again = gpufleet(
        &pool,
        &["user", "create", "dup", "--role", "requester"],
        None,
    );
    assert!(String::from_utf8_lossy(&again.stderr).contains("the username \"dup\" is taken"));
}

#[sqlx::test(migrator = "backend::MIGRATOR")]
async fn demo_users_are_made_once_with_printed_random_passwords(pool: PgPool) {
    let file = std::env::temp_dir().join(format!("gpufleet-demo-{}.txt", std::process::id()));
    let first = gpufleet(
        &pool,
        &["demo", "--credentials-file", file.to_str().expect("utf-8")],
        None,
    );
    assert!(
        first.status.success(),
        "{}",
        String::from_utf8_lossy(&first.stderr)
    );
    let printed = stdout(&first);
    let saved = std::fs::read_to_string(&file).expect("credentials file");
    let router = router(pool.clone());
    for (who, role) in [
        ("rita", "requester"),
        ("sam", "requester"),
        ("alex", "approver"),
        ("fiona", "finance"),
        ("ada", "admin"),
    ] {
        let line = saved
            .lines()
            .find(|l| l.starts_with(&format!("{who} ({role})")))
            .expect("a line per user");
        let password = line.split_whitespace().last().expect("password");
        assert!(printed.contains(line));
        assert_eq!(
            try_login(&router, who, password, "127.0.0.1:1")
                .await
                .status,
            200,
            "{who}"
        );
    }
    // The demo quota: research's 48 H200s and search's serving quota approved (by alex, not
    // their author), search's request for shared H100s waiting.
    let states = || async {
        sqlx::query_as::<_, (String, String, Option<String>)>(
            "select t.name, r.state, d.username from quota_requests r join teams t on t.id = r.team_id
             left join users d on d.id = r.decided_by order by t.name, r.id",
        )
        .fetch_all(&pool)
        .await
        .expect("requests")
    };
    assert_eq!(
        states().await,
        [
            (
                "research".to_owned(),
                "approved".to_owned(),
                Some("alex".to_owned())
            ),
            (
                "search".to_owned(),
                "approved".to_owned(),
                Some("alex".to_owned())
            ),
            ("search".to_owned(), "submitted".to_owned(), None),
        ]
    );
    // A second run changes nothing and prints no password.
    let second = gpufleet(&pool, &["demo"], None);
    assert!(second.status.success());
    assert_eq!(stdout(&second), "");
    assert_eq!(states().await.len(), 3);
    let _ = std::fs::remove_file(file);
}

fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

async fn inventory_rows(pool: &PgPool) -> (i64, i64, i64, i64) {
    let count = |table: &'static str| async move {
        sqlx::query_scalar::<_, i64>(&format!("select count(*) from {table}"))
            .fetch_one(pool)
            .await
            .expect("count")
    };
    (
        count("gpu_models").await,
        count("flavors").await,
        count("node_pools").await,
        count("teams").await,
    )
}

/// Inventory as code: the demo file applied, exported, applied again (no change), edited and
/// dry-run (nothing written), applied (audited), and a bad file refused with its path.
#[sqlx::test(migrator = "backend::MIGRATOR")]
async fn the_inventory_round_trips_through_a_file(pool: PgPool) {
    let dir = std::env::temp_dir().join(format!("gpufleet-inventory-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("dir");
    let demo = concat!(env!("CARGO_MANIFEST_DIR"), "/demo/inventory.yaml");
    let first = gpufleet(&pool, &["fleet", "import", demo], None);
    assert!(first.status.success(), "{}", stderr(&first));
    // 3 models, 4 flavors, 4 pools, 2 teams: 13 additions.
    assert!(
        stdout(&first).ends_with("applied 13 changes\n"),
        "{}",
        stdout(&first)
    );
    assert_eq!(inventory_rows(&pool).await, (3, 4, 4, 2));

    let exported = gpufleet(&pool, &["fleet", "export"], None);
    assert!(exported.status.success(), "{}", stderr(&exported));
    let yaml = stdout(&exported);
    assert!(yaml.contains("cluster_queue: research"), "{yaml}");
    let file = dir.join("inventory.yaml");
    std::fs::write(&file, &yaml).expect("write");
    let again = gpufleet(
        &pool,
        &["fleet", "import", file.to_str().expect("path")],
        None,
    );
    assert!(again.status.success(), "{}", stderr(&again));
    assert_eq!(
        stdout(&again),
        "the inventory already matches the file: nothing changed\n"
    );
    // The same as JSON reads the same.
    let json = gpufleet(&pool, &["fleet", "export", "--format", "json"], None);
    let json_file = dir.join("inventory.json");
    std::fs::write(&json_file, stdout(&json)).expect("write");
    let same = gpufleet(
        &pool,
        &["fleet", "import", json_file.to_str().expect("path")],
        None,
    );
    assert!(
        stdout(&same).contains("nothing changed"),
        "{}",
        stdout(&same)
    );

    // Two more H100 nodes, a cheaper H200, the research team's ClusterQueue as the cluster
    // names it: a dry run says so and writes nothing.
    let edited = yaml
        .replacen("nodes: 8", "nodes: 10", 1)
        .replace(
            "price_cents_per_gpu_hour: 791",
            "price_cents_per_gpu_hour: 750",
        )
        .replacen("cluster_queue: research", "cluster_queue: cq-research", 1);
    std::fs::write(&file, &edited).expect("write");
    let dry = gpufleet(
        &pool,
        &["fleet", "import", file.to_str().expect("path"), "--dry-run"],
        None,
    );
    assert!(dry.status.success(), "{}", stderr(&dry));
    assert_eq!(
        stdout(&dry),
        "change model H200-SXM-141GB: price_cents_per_gpu_hour 791 → 750\n\
         change pool h100-shared: nodes 8 → 10\n\
         change team research: cluster_queue research → cq-research\n\
         dry run: 3 changes, none applied\n"
    );
    let nodes = || async {
        sqlx::query_scalar::<_, i32>("select nodes from node_pools where name = 'h100-shared'")
            .fetch_one(&pool)
            .await
            .expect("nodes")
    };
    assert_eq!(nodes().await, 8);
    let applied = gpufleet(
        &pool,
        &["fleet", "import", file.to_str().expect("path")],
        None,
    );
    assert!(
        stdout(&applied).ends_with("applied 3 changes\n"),
        "{}",
        stdout(&applied)
    );
    assert_eq!(nodes().await, 10);
    let audited = sqlx::query_scalar::<_, i64>(
        "select count(*) from audit_log where kind = 'inventory' and action = 'import'",
    )
    .fetch_one(&pool)
    .await
    .expect("audit");
    assert_eq!(
        audited, 2,
        "the first import and this one; the unchanged ones left no entry"
    );

    // A bad file names the file, the path and the problem, exits 2 and changes nothing.
    let before = inventory_rows(&pool).await;
    for (text, want) in [
        (
            edited.replacen("nodes: 10", "nodes: -3", 1),
            "pools[1].nodes: 0 to 100000 nodes",
        ),
        (
            edited.replacen("gpus_per_node: 8", "gpus_per_node: eight", 1),
            "pools[0].gpus_per_node: invalid type",
        ),
        (
            edited.replacen("name: H100-SXM5-80GB", "name: H100", 1),
            "models[0].name",
        ),
    ] {
        std::fs::write(&file, &text).expect("write");
        let bad = gpufleet(
            &pool,
            &["fleet", "import", file.to_str().expect("path")],
            None,
        );
        assert_eq!(bad.status.code(), Some(2), "{}", stderr(&bad));
        let message = stderr(&bad);
        assert!(
            message.contains(file.to_str().expect("path")) && message.contains(want),
            "{want}: {message}"
        );
    }
    assert_eq!(inventory_rows(&pool).await, before);
    assert_eq!(nodes().await, 10);
}

/// `gpufleet quota findings` prints the API's findings as JSON; a window it cannot read is
/// explained with its flag and exits 2.
#[sqlx::test(migrator = "backend::MIGRATOR")]
async fn quota_findings_are_printed_and_bad_windows_explained(pool: PgPool) {
    let demo = gpufleet(&pool, &["demo"], None);
    assert!(demo.status.success(), "{}", stderr(&demo));
    let printed = gpufleet(&pool, &["quota", "findings", "--weeks", "2"], None);
    assert!(printed.status.success(), "{}", stderr(&printed));
    let found: shared::planning::findings::Findings =
        serde_json::from_str(&stdout(&printed)).expect("JSON");
    assert_eq!(found.rules.weeks, 2);
    assert_eq!(found.from, backend::clock::today().plus(-14));
    assert!(found.findings.iter().any(|f| f.team == "research"));
    let bad = gpufleet(&pool, &["quota", "findings", "--weeks", "14"], None);
    assert_eq!(bad.status.code(), Some(2));
    assert!(
        stderr(&bad).contains("--weeks: \"14\": a whole number from 1 to 13"),
        "{}",
        stderr(&bad)
    );
}

/// `./dev run` seeds the demo's week a day at a time, each day's end given: `--end T --hours 1`
/// writes the hour before T, every sample's timestamp in it; an end off the minute is refused.
#[sqlx::test(migrator = "backend::MIGRATOR")]
async fn the_demo_history_is_written_for_the_hours_asked(pool: PgPool) {
    use shared::common::utc::{HOUR_MS, floor_minute, format_rfc3339};
    assert!(gpufleet(&pool, &["demo"], None).status.success());
    let file = std::env::temp_dir().join(format!("gpufleet-demo-{}.om", std::process::id()));
    let out = file.to_str().expect("utf-8");
    let to = floor_minute(backend::clock::now_ms()) - 24 * HOUR_MS;
    let end = format_rfc3339(to);
    let args = [
        "usage",
        "demo-history",
        "--hours",
        "1",
        "--out",
        out,
        "--end",
    ];
    let written = gpufleet(&pool, &[&args[..], &[end.as_str()]].concat(), None);
    let said = String::from_utf8_lossy(&written.stderr).into_owned();
    assert!(written.status.success(), "{said}");
    assert!(
        said.contains(&format!("({} to {end})", format_rfc3339(to - HOUR_MS))),
        "{said}"
    );
    let text = std::fs::read_to_string(&file).expect("the history");
    std::fs::remove_file(&file).expect("removed");
    // each sample line ends in its timestamp, in seconds
    let stamps: Vec<i64> = (text.lines())
        .filter(|l| !l.starts_with('#'))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .map(|s| (s * 1000.0) as i64)
        .collect();
    assert!(!stamps.is_empty(), "{said}");
    assert!(
        stamps.iter().all(|ms| (to - HOUR_MS..to).contains(ms)),
        "every sample in the hour before {end}"
    );
    let off = gpufleet(
        &pool,
        &[&args[..], &["2026-12-01T00:00:30Z"]].concat(),
        None,
    );
    assert!(!off.status.success());
    assert!(
        String::from_utf8_lossy(&off.stderr).contains("is not on a whole minute"),
        "{}",
        String::from_utf8_lossy(&off.stderr)
    );
}
