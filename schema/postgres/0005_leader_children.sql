-- Sema Edge schema part 5, PostgreSQL dialect. Twin of ../sqlite/0005_leader_children.sql (which
-- explains the columns and why these are new tables).

CREATE TABLE IF NOT EXISTS leader_plan (
  leader_run_id    VARCHAR(64) COLLATE "C" NOT NULL,
  max_concurrency  BIGINT NOT NULL,
  deadline_at      BIGINT NULL,
  cancel_requested SMALLINT NOT NULL DEFAULT 0,
  created_at       BIGINT NOT NULL,
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
