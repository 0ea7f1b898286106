//! The `gpufleet` binary's account commands, run as a person would, against a real database.

mod common;

use std::{
    io::Write,
    process::{Command, Output, Stdio},
};

use common::{database_url, router, try_login};
use sqlx::PgPool;

fn gpufleet(pool: &PgPool, args: &[&str], stdin: Option<&str>) -> Output {
    let mut child = Command::new(env!("CARGO_BIN_EXE_gpufleet"))
        .args(args)
        .env("DATABASE_URL", database_url(pool))
        .env("RUST_LOG", "warn")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run gpufleet");
    if let Some(text) = stdin {
        child
            .stdin
            .take()
            .expect("stdin")
            .write_all(text.as_bytes())
            .expect("write stdin");
    }
    drop(child.stdin.take());
    child.wait_with_output().expect("gpufleet exits")
}

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
    // A second run changes nothing and prints no password.
    let second = gpufleet(&pool, &["demo"], None);
    assert!(second.status.success());
    assert_eq!(stdout(&second), "");
    let _ = std::fs::remove_file(file);
}
