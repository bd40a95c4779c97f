# Shared by scripts/test and scripts/test-postgres (sourced after they set `work`, `passed` and
# `failed`): counted checks, counted cargo test runs, the test tokens, Worker launches and health
# waits, the schema-version check, the Workers' logged errors. Ports come from scripts/lib/env.sh's
# free_port.

# fail WHAT [LOG]: counts one failure and keeps its name (and the log that tells why) for
# report_failures, which the scripts call last: CI keeps only the tail of the output.
failures=()
fail() {
  failed=$((failed + 1))
  failures+=("$1${2:+|$2}")
}

# One named check that counts as a single test.
check() {
  local name=$1
  shift
  if "$@" >"$work/check-$name.log" 2>&1; then
    passed=$((passed + 1))
    echo "check $name ... ok"
  else
    fail "check $name" "$work/check-$name.log"
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
  ((${f:-0} > 0)) && failures+=("$name: $(grep -cE '^test .* FAILED$' "$log") failed test(s)|$log")
  if [[ $status -ne 0 && ${f:-0} -eq 0 ]]; then
    local why="$name: cargo exited $status without reporting a failed test (build failure? crash?)"
    fail "$why" "$log"
    echo "$why"
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

# launch_worker NAME CMD...: runs CMD (a `wrangler dev`, with any environment as `env K=V`) in its
# own process group, its output in $work/NAME.log; the command is kept in $work/NAME.cmd so that
# wait_healthy can start it again.
launch_worker() {
  local name=$1
  shift
  printf '%q ' "$@" >"$work/$name.cmd"
  _run_worker "$name"
}

_run_worker() {
  setsid bash "$work/$1.cmd" >"$work/$1.log" 2>&1 &
  pids+=($!)
  printf '%s' "$!" >"$work/$1.pid"
}

# The process group of whatever listens on loopback port $1; empty when that cannot be seen (nothing
# listens, or `ss` shows no process).
_listener_pgid() {
  local pid
  pid=$(ss -ltnpH "sport = :$1" 2>/dev/null | grep -o 'pid=[0-9]*' | head -n 1 | cut -d= -f2)
  [[ -n "$pid" ]] && pgid_of "$pid"
}

# still_ours NAME URL: whether the process answering at URL's port is of the Worker launched as NAME
# (true when the listener's process cannot be seen; false, with NAME's log, on a real mismatch).
still_ours() {
  local name=$1 url=$2 owner
  [[ -f "$work/$name.pid" ]] || return 0
  owner=$(_listener_pgid "${url##*:}")
  [[ -z "$owner" || "$owner" == "$(cat "$work/$name.pid")" ]] && return 0
  echo "$name: $url is served by process group $owner, not by $name's ($(cat "$work/$name.pid")); its log:"
  tail -n 5 "$work/$name.log"
  return 1
}

# wait_healthy URL NAME: until URL/health answers, from the Worker launched as NAME: an answer from
# a process outside NAME's process group (another server holding the port NAME lost) fails at once,
# rather than letting a suite run against the wrong Worker. A Worker launched by launch_worker whose
# process exited before answering (wrangler dev can lose a race for one of its own ports when
# several start at once: "Address already in use") is started again, at most twice, with its log
# kept beside.
wait_healthy() {
  local url=$1 name=$2 restarts=0
  for _ in $(seq 1 120); do
    if curl -fsS "$url/health" >/dev/null 2>&1; then
      still_ours "$name" "$url"
      return
    fi
    if [[ -f "$work/$name.pid" ]] && ! kill -0 -- "-$(cat "$work/$name.pid")" 2>/dev/null && ((restarts < 2)); then
      restarts=$((restarts + 1))
      echo "$name exited before it was healthy (start $restarts); its log:"
      tail -n 5 "$work/$name.log"
      cp "$work/$name.log" "$work/$name.log.$restarts"
      _run_worker "$name"
    fi
    sleep 0.5
  done
  echo "$name did not become healthy; its log:"
  tail -n 40 "$work/$name.log"
  return 1
}

# schema_check URL MIGRATE...: a Worker over an unmigrated database answers every store route 503
# store.schema_mismatch (never a 500, never a panic); once MIGRATE... has applied the migrations,
# the same Worker serves without a restart.
schema_check() {
  local url=$1 out
  shift
  out=$(curl -sS -w '\n%{http_code}' -H 'X-Sema-Principal: schema-check' "$url/v1/runs")
  echo "$out"
  [[ $(tail -n 1 <<<"$out") == 503 ]] || return 1
  grep -q '"errorCode":"store.schema_mismatch"' <<<"$out" || return 1
  grep -q '"foundVersion":0' <<<"$out" || return 1
  "$@" || return 1
  out=$(curl -sS -w '\n%{http_code}' -H 'X-Sema-Principal: schema-check' "$url/v1/runs")
  echo "$out"
  [[ $(tail -n 1 <<<"$out") == 200 ]]
}

# static_files_missing URL: a Worker whose static Worker is missing answers each static route 500
# with the error body (logged as what failed), and its other public route, /health, as before.
static_files_missing() {
  local url=$1 path out
  for path in /openapi.json /docs /console /console/console.js /console/console.css; do
    out=$(curl -sS -w '\n%{http_code}' "$url$path")
    echo "$path: $out"
    [[ $(tail -n 1 <<<"$out") == 500 ]] || return 1
    grep -q '"errorCode":"internal"' <<<"$out" || return 1
  done
  [[ $(curl -sS -o /dev/null -w '%{http_code}' "$url/health") == 200 ]]
}

# uncaught WHAT LOG...: a failure named WHAT when any of the Workers' logs shows an uncaught error
# or a panic (the lines after each are printed).
uncaught() {
  local what=$1
  shift
  (($# > 0)) && grep -qE 'Uncaught|panicked' "$@" || return 0
  echo "$what:"
  grep -hE -A5 'Uncaught|panicked' "$@" | head -40
  fail "$what"
}

# log_errors TITLE LOG...: under TITLE, the first lines of the Workers' logs that name an error (for
# the end of a failing run, where CI's view of the output ends).
log_errors() {
  echo "---- $1 ----"
  shift
  grep -E 'Address already in use|EADDRINUSE|ERROR|Uncaught|panicked' "$@" 2>/dev/null | head -n 20
}

# report_failures: each failure fail() kept, with the lines of its log that say why: a cargo
# suite's failing tests and their panic messages, else the log's last lines.
report_failures() {
  ((${#failures[@]} > 0)) || return 0
  echo "---- what failed ----"
  local entry what log
  for entry in "${failures[@]}"; do
    what=${entry%%|*}
    log=""
    [[ $entry == *"|"* ]] && log=${entry#*|}
    echo "* $what"
    [[ -n "$log" && -f "$log" ]] || continue
    if [[ $log == *-failed.log ]]; then # another script's own report of what failed
      head -n 40 "$log" | sed 's/^/    /'
    elif grep -qE '^test .* FAILED$|panicked at' "$log"; then
      grep -E '^test .* FAILED$' "$log" | sort -u | head -n 10 | sed 's/^/    /'
      grep -h -A3 'panicked at' "$log" | grep -v '^note: ' | head -n 16 | sed 's/^/    /'
    else
      tail -n 12 "$log" | sed 's/^/    /'
    fi
  done
}
