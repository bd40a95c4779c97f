-- Sema Edge schema part 2, SQLite dialect (D1): the event ledger, checkpoints, steer messages and
-- leader runs. Twins: ../postgres/0002_ledger_leader.sql, ../mysql/0002_ledger_leader.sql.

-- The per-run append-only event ledger. seq is gap-free per run (1, 2, ...); event_id is the
-- runner's optional id for an event, unique per run, so a retried append cannot duplicate it.
CREATE TABLE IF NOT EXISTS run_event (
  task_id    TEXT    NOT NULL,
  seq        INTEGER NOT NULL,
  type       TEXT    NOT NULL,
  data       TEXT    NOT NULL,
  event_id   TEXT,
  created_at INTEGER NOT NULL,
  PRIMARY KEY (task_id, seq)
);
CREATE UNIQUE INDEX IF NOT EXISTS uq_run_event_event_id ON run_event (task_id, event_id);

-- A parked run's pending human gate. status: pending | resolved | expired. A checkpoint counts as
-- expired once expires_at has passed (or it was expired explicitly). The token never leaves the server:
-- checkpoint_id is its sha256.
CREATE TABLE IF NOT EXISTS checkpoint (
  checkpoint_id TEXT    NOT NULL PRIMARY KEY,
  session_id    TEXT    NOT NULL,
  task_id       TEXT    NOT NULL,
  owner         TEXT,
  gate_kind     TEXT    NOT NULL,
  status        TEXT    NOT NULL,
  expires_at    INTEGER NOT NULL,
  created_at    INTEGER NOT NULL,
  updated_at    INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS idx_checkpoint_session_status ON checkpoint (session_id, status, expires_at);
CREATE INDEX IF NOT EXISTS idx_checkpoint_status_expires ON checkpoint (status, expires_at);
CREATE INDEX IF NOT EXISTS idx_checkpoint_task ON checkpoint (task_id);

-- Messages queued for a running run, delivered to its runner once each, in seq order. delivery_id
-- names the heartbeat that took them (so that heartbeat reads back exactly what it marked).
CREATE TABLE IF NOT EXISTS steer_message (
  task_id      TEXT    NOT NULL,
  seq          INTEGER NOT NULL,
  message      TEXT    NOT NULL,
  created_at   INTEGER NOT NULL,
  delivered_at INTEGER,
  delivery_id  TEXT,
  PRIMARY KEY (task_id, seq)
);

-- A leader run (fan-out of child runs). Not a task_run: no session, no claim. idem_key is
-- sha256-hex(owner + 0x1F + raw Idempotency-Key), bound forever to the run it admitted. reap_tick: the
-- stale-sweep tick that failed the run, if one did.
CREATE TABLE IF NOT EXISTS leader_run (
  leader_run_id     TEXT    NOT NULL PRIMARY KEY,
  idem_key          TEXT,
  owner             TEXT,
  objective_preview TEXT,
  status            TEXT    NOT NULL,
  result            TEXT,
  error             TEXT,
  started_at_ms     INTEGER NOT NULL,
  finished_at_ms    INTEGER,
  reap_tick         TEXT
);
CREATE UNIQUE INDEX IF NOT EXISTS uq_leader_run_idem ON leader_run (idem_key);
CREATE INDEX IF NOT EXISTS idx_leader_run_owner ON leader_run (owner);
CREATE INDEX IF NOT EXISTS idx_leader_run_started ON leader_run (started_at_ms);
CREATE INDEX IF NOT EXISTS idx_leader_run_reap_tick ON leader_run (reap_tick);

-- One child of a leader run: the child run (own session) it admitted and how it ended.
CREATE TABLE IF NOT EXISTS leader_worker (
  leader_run_id  TEXT    NOT NULL,
  worker_id      TEXT    NOT NULL,
  task_id        TEXT,
  session_id     TEXT    NOT NULL,
  status         TEXT    NOT NULL,
  error          TEXT,
  started_at_ms  INTEGER,
  finished_at_ms INTEGER,
  PRIMARY KEY (leader_run_id, worker_id)
);
CREATE INDEX IF NOT EXISTS idx_leader_worker_task ON leader_worker (task_id);
