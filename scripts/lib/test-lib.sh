# Shared by scripts/test and scripts/test-postgres (sourced after they set `work`, `passed` and
# `failed`): counted checks, counted cargo test runs, the test tokens, free ports, health waits.

# One named check that counts as a single test.
check() {
  local name=$1
  shift
  if "$@" >"$work/check-$name.log" 2>&1; then
    passed=$((passed + 1))
    echo "check $name ... ok"
  else
    failed=$((failed + 1))
    echo "check $name ... FAILED"
    tail -n 60 "$work/check-$name.log"
  fi
}

# A cargo test run: adds up its "test result" lines; a run that reports nothing counts as one failure.
cargo_tests() {
  local name=$1
  shift
  local log="$work/cargo-$name.log" # never a Worker's log name (start_worker writes $name.log)
  "$@" 2>&1 | tee "$log"
  local status=${PIPESTATUS[0]}
  local p f
  p=$(awk '/^test result:/ { for (i = 1; i < NF; i++) if ($(i + 1) ~ /^passed/) s += $i } END { print s + 0 }' "$log")
  f=$(awk '/^test result:/ { for (i = 1; i < NF; i++) if ($(i + 1) ~ /^failed/) s += $i } END { print s + 0 }' "$log")
  passed=$((passed + ${p:-0}))
  failed=$((failed + ${f:-0}))
  if [[ $status -ne 0 && ${f:-0} -eq 0 ]]; then
    failed=$((failed + 1))
    echo "$name: cargo exited $status without reporting a failed test (build failure?)"
  fi
}

token_json() {
  local out="{" sep="" entry token principal role
  for entry in "test-token-alice-client alice client" "test-token-bob-client bob client" \
    "test-token-ops-operator ops operator" "test-token-runner runner1 runner"; do
    read -r token principal role <<<"$entry"
    out+="$sep\"$(printf '%s' "$token" | sha256sum | cut -d' ' -f1)\":{\"principal\":\"$principal\",\"role\":\"$role\"}"
    sep=","
  done
  printf '%s}' "$out"
}

free_port() {
  python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1]); s.close()'
}

wait_healthy() {
  local url=$1 name=$2
  for _ in $(seq 1 120); do
    curl -fsS "$url/health" >/dev/null 2>&1 && return 0
    sleep 0.5
  done
  echo "$name did not become healthy; its log:"
  tail -n 40 "$work/$name.log"
  return 1
}
