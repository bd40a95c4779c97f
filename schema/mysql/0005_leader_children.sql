-- Sema Edge schema part 5, MySQL / MariaDB dialect. Twin of ../sqlite/0005_leader_children.sql (which
-- explains the columns and why these are new tables).

CREATE TABLE IF NOT EXISTS leader_plan (
  leader_run_id    VARCHAR(64) NOT NULL,
  max_concurrency  BIGINT NOT NULL,
  deadline_at      BIGINT NULL,
  cancel_requested TINYINT NOT NULL DEFAULT 0,
  created_at       BIGINT NOT NULL,
  fingerprint      CHAR(64) NULL,
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

-- leader_run's listing and driving-pass indexes. leader_run is 0002's table, so they cannot be keys of a
-- CREATE TABLE here, and MySQL has no `CREATE INDEX IF NOT EXISTS` (MariaDB has): each index is created
-- by a prepared statement only when the catalogue does not list it yet, so this file stays safe to apply
-- twice on both servers.
SET @ddl = IF(EXISTS (SELECT 1 FROM information_schema.statistics WHERE table_schema = DATABASE()
  AND table_name = 'leader_run' AND index_name = 'idx_leader_run_owner_started'), 'DO 0',
  'CREATE INDEX idx_leader_run_owner_started ON leader_run (owner, started_at_ms, leader_run_id)');
PREPARE ddl FROM @ddl;
EXECUTE ddl;
DEALLOCATE PREPARE ddl;
SET @ddl = IF(EXISTS (SELECT 1 FROM information_schema.statistics WHERE table_schema = DATABASE()
  AND table_name = 'leader_run' AND index_name = 'idx_leader_run_owner_status_started'), 'DO 0',
  'CREATE INDEX idx_leader_run_owner_status_started ON leader_run (owner, status, started_at_ms, leader_run_id)');
PREPARE ddl FROM @ddl;
EXECUTE ddl;
DEALLOCATE PREPARE ddl;
SET @ddl = IF(EXISTS (SELECT 1 FROM information_schema.statistics WHERE table_schema = DATABASE()
  AND table_name = 'leader_run' AND index_name = 'idx_leader_run_status_started'), 'DO 0',
  'CREATE INDEX idx_leader_run_status_started ON leader_run (status, started_at_ms, leader_run_id)');
PREPARE ddl FROM @ddl;
EXECUTE ddl;
DEALLOCATE PREPARE ddl;
SET @ddl = IF(EXISTS (SELECT 1 FROM information_schema.statistics WHERE table_schema = DATABASE()
  AND table_name = 'leader_run' AND index_name = 'idx_leader_run_started_id'), 'DO 0',
  'CREATE INDEX idx_leader_run_started_id ON leader_run (started_at_ms, leader_run_id)');
PREPARE ddl FROM @ddl;
EXECUTE ddl;
DEALLOCATE PREPARE ddl;
SET @ddl = IF(EXISTS (SELECT 1 FROM information_schema.statistics WHERE table_schema = DATABASE()
  AND table_name = 'leader_run' AND index_name = 'idx_leader_run_status_id'), 'DO 0',
  'CREATE INDEX idx_leader_run_status_id ON leader_run (status, leader_run_id)');
PREPARE ddl FROM @ddl;
EXECUTE ddl;
DEALLOCATE PREPARE ddl;
