-- Sema Edge schema part 4, SQLite dialect (D1): human gates. Twins: ../postgres/0004_gates.sql,
-- ../mysql/0004_gates.sql.
--
-- 0002's `checkpoint` table is replaced by `gate_checkpoint` rather than altered: SQLite has no
-- `ADD COLUMN IF NOT EXISTS`, and every statement of the schema must stay safe to apply twice. Nothing
-- ever wrote `checkpoint` outside tests (no route parked a run before this migration), so dropping it
-- loses nothing.
DROP TABLE IF EXISTS checkpoint;

-- A gate a run parked on, one row per park. checkpoint_id: sha256 (hex) of the checkpoint's token; the
-- token itself is never stored and never leaves the server (decisions are addressed by session or
-- task). card: JSON object shown to clients. status: pending | resolved (decided) | expired (its
-- deadline passed and the reaper failed the run) | voided (the run was cancelled or ended otherwise).
-- pending_session: the session id while pending, NULL afterwards; its UNIQUE index makes "one pending
-- gate per session" a constraint of the database (NULLs never collide in any of the three engines).
-- park_seq: the seq of the park event in the run's ledger (orders a run's gates). expires_at: NULL =
-- never. decision, reason (or a plan review's feedback), resolution_id (the decide attempt that
-- resolved it), resolved_at: set by the decision.
CREATE TABLE IF NOT EXISTS gate_checkpoint (
  checkpoint_id   TEXT    NOT NULL PRIMARY KEY,
  session_id      TEXT    NOT NULL,
  task_id         TEXT    NOT NULL,
  owner           TEXT,
  gate_kind       TEXT    NOT NULL,
  card            TEXT    NOT NULL,
  status          TEXT    NOT NULL,
  pending_session TEXT,
  park_seq        INTEGER NOT NULL,
  expires_at      INTEGER,
  decision        TEXT,
  reason          TEXT,
  resolution_id   TEXT,
  resolved_at     INTEGER,
  created_at      INTEGER NOT NULL,
  updated_at      INTEGER NOT NULL
);
CREATE UNIQUE INDEX IF NOT EXISTS uq_gate_checkpoint_pending ON gate_checkpoint (pending_session);
CREATE UNIQUE INDEX IF NOT EXISTS uq_gate_checkpoint_task_seq ON gate_checkpoint (task_id, park_seq);
CREATE UNIQUE INDEX IF NOT EXISTS uq_gate_checkpoint_resolution ON gate_checkpoint (resolution_id);
CREATE INDEX IF NOT EXISTS idx_gate_checkpoint_session_created ON gate_checkpoint (session_id, created_at);
CREATE INDEX IF NOT EXISTS idx_gate_checkpoint_status_expires ON gate_checkpoint (status, expires_at);
CREATE INDEX IF NOT EXISTS idx_gate_checkpoint_status_created ON gate_checkpoint (status, created_at, session_id);
CREATE INDEX IF NOT EXISTS idx_gate_checkpoint_owner_status ON gate_checkpoint (owner, status, created_at, session_id);
