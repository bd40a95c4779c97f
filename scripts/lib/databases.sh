# PostgreSQL and MariaDB servers for the store contract suite: started on loopback in a temporary
# directory, stopped (and their data removed) by the caller's cleanup. Sourced by scripts/test,
# scripts/test-postgres and scripts/bench, after scripts/lib/env.sh (its free_port).
#   start_databases DIR   sets SEMA_PG_URL and SEMA_MYSQL_URL; returns non-zero if a server fails
#   start_postgres DIR    PostgreSQL alone (sets SEMA_PG_URL and SEMA_PG_PORT)
#   stop_databases        stops both; safe to call more than once
#   pg_url DB             the URL of database DB on the server start_postgres started

pg_bin=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1)

start_postgres() {
  local dir=$1
  _db_dir="$dir"
  mkdir -p "$dir/pg"
  # PostgreSQL refuses to run as root: its data directory belongs to the postgres user.
  chown postgres: "$dir/pg"
  chmod 755 "$dir"
  local pg_port
  pg_port=$(free_port)
  runuser -u postgres -- "$pg_bin/initdb" -D "$dir/pg/data" -U postgres --auth=trust -E UTF8 \
    --no-locale >"$dir/pg-init.log" 2>&1 || { cat "$dir/pg-init.log"; return 1; }
  runuser -u postgres -- "$pg_bin/pg_ctl" -D "$dir/pg/data" -l "$dir/pg/server.log" -w -t 60 \
    -o "-p $pg_port -k $dir/pg -c listen_addresses=127.0.0.1 -c fsync=off -c synchronous_commit=off -c full_page_writes=off -c max_connections=200" \
    start >"$dir/pg-start.log" 2>&1 || { cat "$dir/pg-start.log" "$dir/pg/server.log"; return 1; }
  export SEMA_PG_URL="host=127.0.0.1 port=$pg_port user=postgres dbname=postgres"
  export SEMA_PG_PORT=$pg_port
}

pg_url() { echo "postgres://postgres:local@127.0.0.1:$SEMA_PG_PORT/$1"; }

start_databases() {
  local dir=$1
  start_postgres "$dir" || return 1
  mkdir -p "$dir/maria"
  local my_port
  my_port=$(free_port)
  mariadb-install-db --no-defaults --datadir="$dir/maria/data" --user=root --skip-test-db \
    --auth-root-authentication-method=normal >"$dir/maria-init.log" 2>&1 ||
    { cat "$dir/maria-init.log"; return 1; }
  mariadbd --no-defaults --datadir="$dir/maria/data" --user=root --bind-address=127.0.0.1 \
    --port="$my_port" --socket="$dir/maria/mysqld.sock" --pid-file="$dir/maria/mysqld.pid" \
    --skip-grant-tables --skip-log-bin --innodb-flush-log-at-trx-commit=0 --innodb-buffer-pool-size=128M \
    --max-connections=300 --character-set-server=utf8mb4 --collation-server=utf8mb4_bin \
    >"$dir/maria/server.log" 2>&1 &
  _db_maria_pid=$!
  for _ in $(seq 1 120); do
    mariadb --no-defaults -h 127.0.0.1 -P "$my_port" -u root -e 'SELECT 1' >/dev/null 2>&1 && break
    sleep 0.5
  done
  mariadb --no-defaults -h 127.0.0.1 -P "$my_port" -u root -e 'SELECT 1' >/dev/null 2>&1 ||
    { tail -n 30 "$dir/maria/server.log"; return 1; }
  export SEMA_MYSQL_URL="mysql://root@127.0.0.1:$my_port"
}

stop_databases() {
  if [[ -n "${_db_dir:-}" && -d "$_db_dir/pg/data" ]]; then
    runuser -u postgres -- "$pg_bin/pg_ctl" -D "$_db_dir/pg/data" -m immediate -w stop >/dev/null 2>&1 || true
  fi
  if [[ -n "${_db_maria_pid:-}" ]]; then
    kill "$_db_maria_pid" 2>/dev/null || true
    wait "$_db_maria_pid" 2>/dev/null || true
    _db_maria_pid=""
  fi
}
