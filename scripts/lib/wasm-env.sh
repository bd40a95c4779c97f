# Environment for compiling the Worker to wasm32 with Debian's rustc-web (1.96, std sources) and
# -Zbuild-std. Sourced by scripts/build and scripts/lint; never needed for native builds.
root="${root:?root must be set}"
source "$root/scripts/lib/env.sh"
# Debian's cargo/rustc must win over rustup's proxies in ~/.cargo/bin.
export PATH="/usr/bin:$SEMA_TOOLS/bin:$PATH"
export RUSTC_BOOTSTRAP=1
export CARGO_UNSTABLE_BUILD_STD="std,panic_abort"
# std's smaller sorts and formatting: 3.9 KB less gzipped, no CPU cost visible in an interleaved A/B
# (docs/ARCHITECTURE.md, "Size and start").
export CARGO_UNSTABLE_BUILD_STD_FEATURES=optimize_for_size
export CARGO_TARGET_WASM32_UNKNOWN_UNKNOWN_LINKER=rust-lld
export CARGO_TARGET_DIR="$root/target-wasm"
