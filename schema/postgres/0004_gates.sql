-- Sema Edge schema part 4, PostgreSQL dialect. Twin of ../sqlite/0004_gates.sql (which explains the
-- columns and why `checkpoint` is replaced rather than altered).
DROP TABLE IF EXISTS checkpoint;

CREATE TABLE IF NOT EXISTS gate_checkpoint (
  checkpoint_id   CHAR(64)     COLLATE "C" NOT NULL,
  session_id      VARCHAR(64)  COLLATE "C" NOT NULL,
  task_id         VARCHAR(64)  COLLATE "C" NOT NULL,
  owner           VARCHAR(190) COLLATE "C" NULL,
  gate_kind       VARCHAR(32)  COLLATE "C" NOT NULL,
  card            JSONB NOT NULL,
  status          VARCHAR(16)  COLLATE "C" NOT NULL,
  pending_session VARCHAR(64)  COLLATE "C" NULL,
  park_seq        BIGINT NOT NULL,
  expires_at      BIGINT NULL,
  decision        VARCHAR(16)  COLLATE "C" NULL,
  reason          TEXT         COLLATE "C" NULL,
  resolution_id   VARCHAR(64)  COLLATE "C" NULL,
  resolved_at     BIGINT NULL,
  created_at      BIGINT NOT NULL,
  updated_at      BIGINT NOT NULL,
  PRIMARY KEY (checkpoint_id),
  CONSTRAINT uq_gate_checkpoint_pending UNIQUE (pending_session),
  CONSTRAINT uq_gate_checkpoint_task_seq UNIQUE (task_id, park_seq),
  CONSTRAINT uq_gate_checkpoint_resolution UNIQUE (resolution_id)
);
CREATE INDEX IF NOT EXISTS idx_gate_checkpoint_session_created ON gate_checkpoint (session_id, created_at);
CREATE INDEX IF NOT EXISTS idx_gate_checkpoint_status_expires ON gate_checkpoint (status, expires_at);
CREATE INDEX IF NOT EXISTS idx_gate_checkpoint_status_created ON gate_checkpoint (status, created_at, session_id);
CREATE INDEX IF NOT EXISTS idx_gate_checkpoint_owner_status ON gate_checkpoint (owner, status, created_at, session_id);
