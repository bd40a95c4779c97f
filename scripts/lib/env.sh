# Sourced by the project's scripts: tool paths (from scripts/setup) and offline wrangler settings.
SEMA_TOOLS="${SEMA_TOOLS:-$HOME/.local/share/sema-edge/tools}"
if [[ -f "$SEMA_TOOLS/env.sh" ]]; then
  # shellcheck source=/dev/null
  source "$SEMA_TOOLS/env.sh"
fi
export WRANGLER_SEND_METRICS=false WRANGLER_SEND_ERROR_REPORTS=false DO_NOT_TRACK=1
export CLOUDFLARE_CF_FETCH_ENABLED=false
