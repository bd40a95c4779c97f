-- Sema Edge schema part 2, MySQL / MariaDB dialect. Twin of ../sqlite/0002_ledger_leader.sql.

CREATE TABLE IF NOT EXISTS run_event (
  task_id    VARCHAR(64)  NOT NULL,
  seq        BIGINT NOT NULL,
  type       VARCHAR(64)  NOT NULL,
  data       JSON NOT NULL,
  event_id   VARCHAR(128) NULL,
  created_at BIGINT NOT NULL,
  PRIMARY KEY (task_id, seq),
  UNIQUE KEY uq_run_event_event_id (task_id, event_id)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

CREATE TABLE IF NOT EXISTS checkpoint (
  checkpoint_id CHAR(64)     NOT NULL,
  session_id    VARCHAR(64)  NOT NULL,
  task_id       VARCHAR(64)  NOT NULL,
  owner         VARCHAR(190) NULL,
  gate_kind     VARCHAR(32)  NOT NULL,
  status        VARCHAR(16)  NOT NULL,
  expires_at    BIGINT NOT NULL,
  created_at    BIGINT NOT NULL,
  updated_at    BIGINT NOT NULL,
  PRIMARY KEY (checkpoint_id),
  KEY idx_checkpoint_session_status (session_id, status, expires_at),
  KEY idx_checkpoint_status_expires (status, expires_at),
  KEY idx_checkpoint_task (task_id)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

CREATE TABLE IF NOT EXISTS steer_message (
  task_id      VARCHAR(64) NOT NULL,
  seq          BIGINT NOT NULL,
  message      TEXT NOT NULL,
  created_at   BIGINT NOT NULL,
  delivered_at BIGINT NULL,
  delivery_id  VARCHAR(64) NULL,
  PRIMARY KEY (task_id, seq)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

CREATE TABLE IF NOT EXISTS leader_run (
  leader_run_id     VARCHAR(64)  NOT NULL,
  idem_key          VARCHAR(64)  NULL,
  owner             VARCHAR(190) NULL,
  objective_preview VARCHAR(160) NULL,
  status            VARCHAR(16)  NOT NULL,
  result            JSON NULL,
  error             TEXT NULL,
  started_at_ms     BIGINT NOT NULL,
  finished_at_ms    BIGINT NULL,
  reap_tick         VARCHAR(64)  NULL,
  PRIMARY KEY (leader_run_id),
  UNIQUE KEY uq_leader_run_idem (idem_key),
  KEY idx_leader_run_owner (owner),
  KEY idx_leader_run_started (started_at_ms),
  KEY idx_leader_run_reap_tick (reap_tick)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

CREATE TABLE IF NOT EXISTS leader_worker (
  leader_run_id  VARCHAR(64) NOT NULL,
  worker_id      VARCHAR(64) NOT NULL,
  task_id        VARCHAR(64) NULL,
  session_id     VARCHAR(64) NOT NULL,
  status         VARCHAR(16) NOT NULL,
  error          TEXT NULL,
  started_at_ms  BIGINT NULL,
  finished_at_ms BIGINT NULL,
  PRIMARY KEY (leader_run_id, worker_id),
  KEY idx_leader_worker_task (task_id)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;
