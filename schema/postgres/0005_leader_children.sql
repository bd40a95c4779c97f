-- Sema Edge schema part 5, PostgreSQL dialect. Twin of ../sqlite/0005_leader_children.sql (which
-- explains the columns and why these are new tables).

CREATE TABLE IF NOT EXISTS leader_plan (
  leader_run_id    VARCHAR(64) COLLATE "C" NOT NULL,
  max_concurrency  BIGINT NOT NULL,
  deadline_at      BIGINT NULL,
  cancel_requested SMALLINT NOT NULL DEFAULT 0,
  created_at       BIGINT NOT NULL,
  fingerprint      CHAR(64) COLLATE "C" NULL,
  PRIMARY KEY (leader_run_id)
);

CREATE TABLE IF NOT EXISTS leader_child (
  leader_run_id VARCHAR(64) COLLATE "C" NOT NULL,
  idx           BIGINT NOT NULL,
  session_id    VARCHAR(64) COLLATE "C" NOT NULL,
  task_id       VARCHAR(64) COLLATE "C" NULL,
  objective     TEXT        COLLATE "C" NOT NULL,
  meta          TEXT        COLLATE "C" NOT NULL,
  state         VARCHAR(16) COLLATE "C" NOT NULL,
  skip_report   VARCHAR(16) COLLATE "C" NULL,
  PRIMARY KEY (leader_run_id, idx)
);
CREATE UNIQUE INDEX IF NOT EXISTS uq_leader_child_task ON leader_child (task_id);

CREATE INDEX IF NOT EXISTS idx_leader_run_owner_started ON leader_run (owner, started_at_ms, leader_run_id);
CREATE INDEX IF NOT EXISTS idx_leader_run_owner_status_started ON leader_run (owner, status, started_at_ms, leader_run_id);
CREATE INDEX IF NOT EXISTS idx_leader_run_status_started ON leader_run (status, started_at_ms, leader_run_id);
CREATE INDEX IF NOT EXISTS idx_leader_run_started_id ON leader_run (started_at_ms, leader_run_id);
CREATE INDEX IF NOT EXISTS idx_leader_run_status_id ON leader_run (status, leader_run_id);
