//! The operator console's script and style sheet (`src/console/`), minified by esbuild into
//! `OUT_DIR` for the Worker's module (`src/http/console.rs`): the served files keep their meaning
//! and lose their comments and indentation, and the module a third of their bytes ("Size and
//! start" in docs/ARCHITECTURE.md). Only the wasm build embeds them; on a native target the crate
//! is empty and nothing runs. esbuild is the one `scripts/setup` installs (`ESBUILD_BIN`, as
//! `scripts/build` sets it, else its place under `node_modules`).

use std::{env, path::PathBuf, process::Command};

fn main() {
    println!("cargo::rerun-if-changed=src/console");
    println!("cargo::rerun-if-env-changed=ESBUILD_BIN");
    if env::var("CARGO_CFG_TARGET_ARCH").as_deref() != Ok("wasm32") {
        return;
    }
    let root = PathBuf::from(env::var("CARGO_MANIFEST_DIR").expect("cargo sets it"));
    let esbuild = env::var_os("ESBUILD_BIN").map_or_else(
        || root.join("node_modules/@esbuild/linux-x64/bin/esbuild"),
        PathBuf::from,
    );
    // A new esbuild (scripts/setup after a version bump) minifies again.
    println!("cargo::rerun-if-changed={}", esbuild.display());
    let out = PathBuf::from(env::var("OUT_DIR").expect("cargo sets it"));
    for file in ["console.js", "console.css"] {
        let status = Command::new(&esbuild)
            .arg(root.join("src/console").join(file))
            .args(["--minify", "--log-level=warning"])
            .arg(format!("--outfile={}", out.join(file).display()))
            .status();
        match status {
            Ok(s) if s.success() => {}
            other => panic!(
                "esbuild ({}) could not minify src/console/{file}: {other:?}; run scripts/setup",
                esbuild.display()
            ),
        }
    }
}
