# Sourced by the project's scripts: tool paths (from scripts/setup) and offline wrangler settings.
SEMA_TOOLS="${SEMA_TOOLS:-$HOME/.local/share/sema-edge/tools}"
if [[ -f "$SEMA_TOOLS/env.sh" ]]; then
  # shellcheck source=/dev/null
  source "$SEMA_TOOLS/env.sh"
fi
export WRANGLER_SEND_METRICS=false WRANGLER_SEND_ERROR_REPORTS=false DO_NOT_TRACK=1
export CLOUDFLARE_CF_FETCH_ENABLED=false

# free_port: a loopback port for a server a script is about to start, drawn from outside the kernel's
# ephemeral range and held from other picks for a while (scripts/lib/free_port.py says why).
_sema_lib="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
free_port() {
  local p
  p=$(python3 "$_sema_lib/free_port.py") && [[ "$p" =~ ^[0-9]+$ ]] || { echo "free_port: no port" >&2; return 1; }
  echo "$p"
}

# pgid_of PID: the process group of process PID (from /proc; empty when it is gone).
pgid_of() {
  local stat pgrp
  stat=$(cat "/proc/$1/stat" 2>/dev/null) || return 0
  # Fields after the parenthesised command name: state, ppid, pgrp.
  read -r _ _ pgrp _ <<<"${stat##*) }"
  echo "$pgrp"
}
