-- Sema Edge schema part 5, SQLite dialect (D1): the driving state of leader runs. Twins:
-- ../postgres/0005_leader_children.sql, ../mysql/0005_leader_children.sql.
--
-- New tables rather than new columns on leader_run: SQLite has no `ADD COLUMN IF NOT EXISTS`, and every
-- statement of the schema must stay safe to apply twice.

-- A leader run's driving settings, written in the admission's batch, exactly when the leader_run row
-- was newly created by it. deadline_at: ms since the epoch, NULL = none. cancel_requested: 0 | 1.
-- max_concurrency: at most this many children are started with a non-terminal run at once (the start's
-- compare-and-set counts them). fingerprint: sha256 hex of a keyed admission's request, so a key
-- reused with another body is answered 422; NULL for an unkeyed admission.
CREATE TABLE IF NOT EXISTS leader_plan (
  leader_run_id    TEXT    NOT NULL PRIMARY KEY,
  max_concurrency  INTEGER NOT NULL,
  deadline_at      INTEGER,
  cancel_requested INTEGER NOT NULL DEFAULT 0,
  created_at       INTEGER NOT NULL,
  fingerprint      TEXT
);

-- One subtask of a leader run. session_id: `leader-<leaderRunId>-<idx>`, the child run's own session.
-- task_id: NULL until the child is started, then its run (set by the same compare-and-set that moves
-- state). state: not_started | started | skipped. skip_report: NULL, or what a skipped child reports
-- (timeout | failed). meta: JSON text, handed to the child run as its meta.
CREATE TABLE IF NOT EXISTS leader_child (
  leader_run_id TEXT    NOT NULL,
  idx           INTEGER NOT NULL,
  session_id    TEXT    NOT NULL,
  task_id       TEXT,
  objective     TEXT    NOT NULL,
  meta          TEXT    NOT NULL,
  state         TEXT    NOT NULL,
  skip_report   TEXT,
  PRIMARY KEY (leader_run_id, idx)
);
CREATE UNIQUE INDEX IF NOT EXISTS uq_leader_child_task ON leader_child (task_id);

-- Leader runs listed newest first by (started_at_ms, leader_run_id), per owner and status or for the
-- operator, and the running ones walked by id in windows (the cron's driving pass). Each index's prefix
-- is a listing's filter and its tail the sort key, so no listing sorts outside an index.
CREATE INDEX IF NOT EXISTS idx_leader_run_owner_started ON leader_run (owner, started_at_ms, leader_run_id);
CREATE INDEX IF NOT EXISTS idx_leader_run_owner_status_started ON leader_run (owner, status, started_at_ms, leader_run_id);
CREATE INDEX IF NOT EXISTS idx_leader_run_status_started ON leader_run (status, started_at_ms, leader_run_id);
CREATE INDEX IF NOT EXISTS idx_leader_run_started_id ON leader_run (started_at_ms, leader_run_id);
CREATE INDEX IF NOT EXISTS idx_leader_run_status_id ON leader_run (status, leader_run_id);
