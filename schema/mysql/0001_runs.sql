-- Sema Edge schema, MySQL / MariaDB dialect. Twin of ../sqlite/0001_runs.sql (same tables, columns,
-- keys and indexes). Tables are utf8mb4_bin (byte order, case-sensitive); timestamps are BIGINT
-- milliseconds. Idempotent: applying it twice is harmless.

CREATE TABLE IF NOT EXISTS session (
  session_id VARCHAR(64)  NOT NULL,
  owner      VARCHAR(190) NULL,
  created_at BIGINT NOT NULL,
  updated_at BIGINT NOT NULL,
  PRIMARY KEY (session_id),
  KEY idx_session_owner_updated (owner, updated_at, session_id),
  KEY idx_session_updated (updated_at, session_id)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

CREATE TABLE IF NOT EXISTS task_run (
  task_id           VARCHAR(64)  NOT NULL,
  session_id        VARCHAR(64)  NOT NULL,
  owner             VARCHAR(190) NULL,
  instance_id       VARCHAR(64)  NOT NULL,
  status            VARCHAR(16)  NOT NULL,
  objective         MEDIUMTEXT   NOT NULL,
  objective_preview VARCHAR(160) NOT NULL,
  meta              JSON NOT NULL,
  result            JSON NULL,
  error             TEXT NULL,
  error_code        VARCHAR(64)  NULL,
  held_by           VARCHAR(64)  NULL,
  lease_epoch       BIGINT NOT NULL DEFAULT 0,
  lease_acked       TINYINT NOT NULL DEFAULT 0,
  cancel_requested  TINYINT NOT NULL DEFAULT 0,
  heartbeat_at      BIGINT NOT NULL,
  last_seq          BIGINT NOT NULL DEFAULT 0,
  created_at        BIGINT NOT NULL,
  updated_at        BIGINT NOT NULL,
  reap_tick         VARCHAR(64)  NULL,
  queue             VARCHAR(64)  NOT NULL DEFAULT 'default',
  PRIMARY KEY (task_id),
  KEY idx_task_run_session_created (session_id, created_at, task_id),
  KEY idx_task_run_owner_created (owner, created_at, task_id),
  KEY idx_task_run_created (created_at, task_id),
  KEY idx_task_run_status_created (status, created_at, task_id),
  KEY idx_task_run_status_heartbeat (status, heartbeat_at),
  KEY idx_task_run_status_updated (status, updated_at),
  KEY idx_task_run_lease (queue, status, held_by, created_at, task_id),
  KEY idx_task_run_leasable (status, held_by, updated_at, task_id)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

CREATE TABLE IF NOT EXISTS task_active (
  session_id   VARCHAR(64) NOT NULL,
  task_id      VARCHAR(64) NOT NULL,
  created_at   BIGINT NOT NULL,
  release_tick VARCHAR(64) NULL,
  PRIMARY KEY (session_id),
  UNIQUE KEY uq_task_active_task (task_id),
  KEY idx_task_active_release_tick (release_tick)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

CREATE TABLE IF NOT EXISTS idempotency_key (
  scoped_key      CHAR(64)     NOT NULL,
  owner           VARCHAR(190) NULL,
  fingerprint     CHAR(64)     NOT NULL,
  task_id         VARCHAR(64)  NOT NULL,
  response_status SMALLINT NOT NULL,
  response_body   TEXT NOT NULL,
  created_at      BIGINT NOT NULL,
  PRIMARY KEY (scoped_key),
  KEY idx_idempotency_key_task (task_id)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;
