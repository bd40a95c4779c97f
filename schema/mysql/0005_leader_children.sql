-- Sema Edge schema part 5, MySQL / MariaDB dialect. Twin of ../sqlite/0005_leader_children.sql (which
-- explains the columns and why these are new tables).

CREATE TABLE IF NOT EXISTS leader_plan (
  leader_run_id    VARCHAR(64) NOT NULL,
  max_concurrency  BIGINT NOT NULL,
  deadline_at      BIGINT NULL,
  cancel_requested TINYINT NOT NULL DEFAULT 0,
  created_at       BIGINT NOT NULL,
  PRIMARY KEY (leader_run_id)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

CREATE TABLE IF NOT EXISTS leader_child (
  leader_run_id VARCHAR(64) NOT NULL,
  idx           BIGINT NOT NULL,
  session_id    VARCHAR(64) NOT NULL,
  task_id       VARCHAR(64) NULL,
  objective     MEDIUMTEXT  NOT NULL,
  meta          MEDIUMTEXT  NOT NULL,
  state         VARCHAR(16) NOT NULL,
  skip_report   VARCHAR(16) NULL,
  PRIMARY KEY (leader_run_id, idx),
  UNIQUE KEY uq_leader_child_task (task_id)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;
