# Pinned tool versions (one place). wasm-bindgen must equal the `wasm-bindgen` version in Cargo.lock;
# scripts/test checks this.
WORKER_BUILD_VERSION=0.8.7
WASM_BINDGEN_VERSION=0.2.130
NODE_VERSION=22.23.5
# The OpenAPI fuzzer (PyPI), installed by scripts/setup into \$SEMA_TOOLS/schemathesis-venv.
SCHEMATHESIS_VERSION=4.32.5
