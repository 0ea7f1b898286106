//! The console's wasm is split into chunks after linking (`./dev build`, `wasm-split-cli`),
//! which reads the linker's relocations to know what each function refers to: keep them in the
//! console's own link only (the planner's wasm stays without them).
fn main() {
    if std::env::var("CARGO_CFG_TARGET_FAMILY").is_ok_and(|family| family == "wasm") {
        println!("cargo::rustc-link-arg-cdylib=--emit-relocs");
    }
    println!("cargo::rerun-if-changed=build.rs");
}
