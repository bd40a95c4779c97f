-- Sema Edge schema, PostgreSQL dialect. Twin of ../sqlite/0001_runs.sql (same tables, columns, keys
-- and indexes). Every text column is COLLATE "C" (byte order, case-sensitive); timestamps are BIGINT
-- milliseconds. Idempotent: applying it twice is harmless.

CREATE TABLE IF NOT EXISTS session (
  session_id VARCHAR(64)  COLLATE "C" NOT NULL,
  owner      VARCHAR(190) COLLATE "C" NULL,
  created_at BIGINT NOT NULL,
  updated_at BIGINT NOT NULL,
  PRIMARY KEY (session_id)
);
CREATE INDEX IF NOT EXISTS idx_session_owner_updated ON session (owner, updated_at, session_id);
CREATE INDEX IF NOT EXISTS idx_session_updated ON session (updated_at, session_id);

CREATE TABLE IF NOT EXISTS task_run (
  task_id           VARCHAR(64)  COLLATE "C" NOT NULL,
  session_id        VARCHAR(64)  COLLATE "C" NOT NULL,
  owner             VARCHAR(190) COLLATE "C" NULL,
  instance_id       VARCHAR(64)  COLLATE "C" NOT NULL,
  status            VARCHAR(16)  COLLATE "C" NOT NULL,
  objective         TEXT         COLLATE "C" NOT NULL,
  objective_preview VARCHAR(160) COLLATE "C" NOT NULL,
  meta              JSONB NOT NULL DEFAULT '{}'::jsonb,
  result            JSONB NULL,
  error             TEXT         COLLATE "C" NULL,
  error_code        VARCHAR(64)  COLLATE "C" NULL,
  held_by           VARCHAR(64)  COLLATE "C" NULL,
  lease_epoch       BIGINT NOT NULL DEFAULT 0,
  lease_acked       SMALLINT NOT NULL DEFAULT 0,
  cancel_requested  SMALLINT NOT NULL DEFAULT 0,
  heartbeat_at      BIGINT NOT NULL,
  last_seq          BIGINT NOT NULL DEFAULT 0,
  created_at        BIGINT NOT NULL,
  updated_at        BIGINT NOT NULL,
  reap_tick         VARCHAR(64)  COLLATE "C" NULL,
  queue             VARCHAR(64)  COLLATE "C" NOT NULL DEFAULT 'default',
  PRIMARY KEY (task_id)
);
CREATE INDEX IF NOT EXISTS idx_task_run_session_created ON task_run (session_id, created_at, task_id);
CREATE INDEX IF NOT EXISTS idx_task_run_owner_created ON task_run (owner, created_at, task_id);
CREATE INDEX IF NOT EXISTS idx_task_run_created ON task_run (created_at, task_id);
CREATE INDEX IF NOT EXISTS idx_task_run_status_created ON task_run (status, created_at, task_id);
CREATE INDEX IF NOT EXISTS idx_task_run_status_heartbeat ON task_run (status, heartbeat_at);
CREATE INDEX IF NOT EXISTS idx_task_run_status_updated ON task_run (status, updated_at);
CREATE INDEX IF NOT EXISTS idx_task_run_lease ON task_run (queue, status, held_by, created_at, task_id);
CREATE INDEX IF NOT EXISTS idx_task_run_leasable ON task_run (status, held_by, updated_at, task_id);

CREATE TABLE IF NOT EXISTS task_active (
  session_id   VARCHAR(64) COLLATE "C" NOT NULL,
  task_id      VARCHAR(64) COLLATE "C" NOT NULL,
  created_at   BIGINT NOT NULL,
  release_tick VARCHAR(64) COLLATE "C" NULL,
  PRIMARY KEY (session_id),
  CONSTRAINT uq_task_active_task UNIQUE (task_id)
);
CREATE INDEX IF NOT EXISTS idx_task_active_release_tick ON task_active (release_tick);

CREATE TABLE IF NOT EXISTS idempotency_key (
  scoped_key      CHAR(64)     COLLATE "C" NOT NULL,
  owner           VARCHAR(190) COLLATE "C" NULL,
  fingerprint     CHAR(64)     COLLATE "C" NOT NULL,
  task_id         VARCHAR(64)  COLLATE "C" NOT NULL,
  response_status SMALLINT NOT NULL,
  response_body   TEXT         COLLATE "C" NOT NULL,
  created_at      BIGINT NOT NULL,
  PRIMARY KEY (scoped_key)
);
CREATE INDEX IF NOT EXISTS idx_idempotency_key_task ON idempotency_key (task_id);
