//! Compiles the git commit and the build profile into the binary for `/api/health`, and
//! rebuilds it when a migration changes.

use std::process::Command;

fn main() {
    let sha = Command::new("git")
        .args(["rev-parse", "--short=12", "HEAD"])
        .output()
        .ok()
        .filter(|out| out.status.success())
        .and_then(|out| String::from_utf8(out.stdout).ok())
        .map(|s| s.trim().to_owned())
        .unwrap_or_else(|| "unknown".to_owned());
    println!("cargo:rustc-env=GPUFLEET_GIT_SHA={sha}");
    let profile = std::env::var("PROFILE").unwrap_or_else(|_| "unknown".to_owned());
    println!("cargo:rustc-env=GPUFLEET_BUILD_PROFILE={profile}");
    println!("cargo:rerun-if-changed=../.git/HEAD");
    println!("cargo:rerun-if-changed=../.git/refs/heads");
    println!("cargo:rerun-if-changed=build.rs");
    // sqlx::migrate! embeds the migrations: a new or changed one must rebuild the binary.
    println!("cargo:rerun-if-changed=../migrations");
}
