-- Sema Edge schema, SQLite dialect (D1). Twins: ../postgres/0001_runs.sql, ../mysql/0001_runs.sql.
-- Timestamps are integer milliseconds since the Unix epoch. Ids are case-sensitive (SQLite's default
-- BINARY collation). Every statement is idempotent (IF NOT EXISTS), so applying the file twice is harmless.

-- A conversation. Owned by the principal that first submitted into it (NULL = anonymous).
CREATE TABLE IF NOT EXISTS session (
  session_id TEXT NOT NULL PRIMARY KEY,
  owner      TEXT,
  created_at INTEGER NOT NULL,
  updated_at INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS idx_session_owner_updated ON session (owner, updated_at, session_id);
CREATE INDEX IF NOT EXISTS idx_session_updated ON session (updated_at, session_id);

-- One agent run. heartbeat_at: last sign of life of its driver (admission time, then the lease, the
-- runner's heartbeats and appends; reset when an unacknowledged lease is requeued). held_by: the runner
-- holding the lease (NULL while queued). lease_epoch: 0 until the first lease, + 1 on every lease,
-- requeue and resume. lease_acked: 0 from a lease until its holder's first heartbeat or append. last_seq: the highest event seq appended. status: running | suspended | needs_review (non-terminal) or any other word (terminal).
-- reap_tick: the reaper tick that last failed or requeued the run (so the tick can read back what it changed).
-- queue: the named task queue the run is leased from (a safe id; 'default' unless the submit named one).
-- updated_at of an unheld running run: when it became leasable (admission, resume, requeue, release).
CREATE TABLE IF NOT EXISTS task_run (
  task_id           TEXT    NOT NULL PRIMARY KEY,
  session_id        TEXT    NOT NULL,
  owner             TEXT,
  instance_id       TEXT    NOT NULL,
  status            TEXT    NOT NULL,
  objective         TEXT    NOT NULL,
  objective_preview TEXT    NOT NULL,
  meta              TEXT    NOT NULL DEFAULT '{}',
  result            TEXT,
  error             TEXT,
  error_code        TEXT,
  held_by           TEXT,
  lease_epoch       INTEGER NOT NULL DEFAULT 0,
  lease_acked       INTEGER NOT NULL DEFAULT 0,
  cancel_requested  INTEGER NOT NULL DEFAULT 0,
  heartbeat_at      INTEGER NOT NULL,
  last_seq          INTEGER NOT NULL DEFAULT 0,
  created_at        INTEGER NOT NULL,
  updated_at        INTEGER NOT NULL,
  reap_tick         TEXT,
  queue             TEXT    NOT NULL DEFAULT 'default'
);
CREATE INDEX IF NOT EXISTS idx_task_run_session_created ON task_run (session_id, created_at, task_id);
CREATE INDEX IF NOT EXISTS idx_task_run_owner_created ON task_run (owner, created_at, task_id);
CREATE INDEX IF NOT EXISTS idx_task_run_created ON task_run (created_at, task_id);
CREATE INDEX IF NOT EXISTS idx_task_run_status_created ON task_run (status, created_at, task_id);
CREATE INDEX IF NOT EXISTS idx_task_run_status_heartbeat ON task_run (status, heartbeat_at);
CREATE INDEX IF NOT EXISTS idx_task_run_status_updated ON task_run (status, updated_at);
-- Lease candidates and a queue's backlog: one queue's unheld running runs, oldest first.
CREATE INDEX IF NOT EXISTS idx_task_run_lease ON task_run (queue, status, held_by, created_at, task_id);
-- The cron's sweep: unheld running runs of every queue by the time they became leasable, oldest first.
CREATE INDEX IF NOT EXISTS idx_task_run_leasable ON task_run (status, held_by, updated_at, task_id);

-- The single-active claim: at most one row per session, naming the run that holds it. release_tick:
-- set by a claim sweep on the claims it is releasing, in the transaction that deletes them.
CREATE TABLE IF NOT EXISTS task_active (
  session_id   TEXT    NOT NULL PRIMARY KEY,
  task_id      TEXT    NOT NULL,
  created_at   INTEGER NOT NULL,
  release_tick TEXT
);
CREATE UNIQUE INDEX IF NOT EXISTS uq_task_active_task ON task_active (task_id);
CREATE INDEX IF NOT EXISTS idx_task_active_release_tick ON task_active (release_tick);

-- Submit idempotency: scoped_key = sha256-hex(owner + 0x1F + raw key), bound forever to one run.
CREATE TABLE IF NOT EXISTS idempotency_key (
  scoped_key      TEXT    NOT NULL PRIMARY KEY,
  owner           TEXT,
  fingerprint     TEXT    NOT NULL,
  task_id         TEXT    NOT NULL,
  response_status INTEGER NOT NULL,
  response_body   TEXT    NOT NULL,
  created_at      INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS idx_idempotency_key_task ON idempotency_key (task_id);
