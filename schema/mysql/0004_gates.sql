-- Sema Edge schema part 4, MySQL / MariaDB dialect. Twin of ../sqlite/0004_gates.sql (which explains
-- the columns and why `checkpoint` is replaced rather than altered).
DROP TABLE IF EXISTS checkpoint;

CREATE TABLE IF NOT EXISTS gate_checkpoint (
  checkpoint_id   CHAR(64)     NOT NULL,
  session_id      VARCHAR(64)  NOT NULL,
  task_id         VARCHAR(64)  NOT NULL,
  owner           VARCHAR(190) NULL,
  gate_kind       VARCHAR(32)  NOT NULL,
  card            JSON NOT NULL,
  status          VARCHAR(16)  NOT NULL,
  pending_session VARCHAR(64)  NULL,
  park_seq        BIGINT NOT NULL,
  expires_at      BIGINT NULL,
  decision        VARCHAR(16)  NULL,
  reason          TEXT NULL,
  resolution_id   VARCHAR(64)  NULL,
  resolved_at     BIGINT NULL,
  created_at      BIGINT NOT NULL,
  updated_at      BIGINT NOT NULL,
  PRIMARY KEY (checkpoint_id),
  UNIQUE KEY uq_gate_checkpoint_pending (pending_session),
  UNIQUE KEY uq_gate_checkpoint_task_seq (task_id, park_seq),
  UNIQUE KEY uq_gate_checkpoint_resolution (resolution_id),
  KEY idx_gate_checkpoint_session_created (session_id, created_at),
  KEY idx_gate_checkpoint_status_expires (status, expires_at),
  KEY idx_gate_checkpoint_status_created (status, created_at, session_id),
  KEY idx_gate_checkpoint_owner_status (owner, status, created_at, session_id)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;
