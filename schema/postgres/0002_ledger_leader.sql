-- Sema Edge schema part 2, PostgreSQL dialect. Twin of ../sqlite/0002_ledger_leader.sql.

CREATE TABLE IF NOT EXISTS run_event (
  task_id    VARCHAR(64)  COLLATE "C" NOT NULL,
  seq        BIGINT NOT NULL,
  type       VARCHAR(64)  COLLATE "C" NOT NULL,
  data       JSONB NOT NULL,
  event_id   VARCHAR(128) COLLATE "C" NULL,
  created_at BIGINT NOT NULL,
  PRIMARY KEY (task_id, seq),
  CONSTRAINT uq_run_event_event_id UNIQUE (task_id, event_id)
);

CREATE TABLE IF NOT EXISTS checkpoint (
  checkpoint_id CHAR(64)     COLLATE "C" NOT NULL,
  session_id    VARCHAR(64)  COLLATE "C" NOT NULL,
  task_id       VARCHAR(64)  COLLATE "C" NOT NULL,
  owner         VARCHAR(190) COLLATE "C" NULL,
  gate_kind     VARCHAR(32)  COLLATE "C" NOT NULL,
  status        VARCHAR(16)  COLLATE "C" NOT NULL,
  expires_at    BIGINT NOT NULL,
  created_at    BIGINT NOT NULL,
  updated_at    BIGINT NOT NULL,
  PRIMARY KEY (checkpoint_id)
);
CREATE INDEX IF NOT EXISTS idx_checkpoint_session_status ON checkpoint (session_id, status, expires_at);
CREATE INDEX IF NOT EXISTS idx_checkpoint_status_expires ON checkpoint (status, expires_at);
CREATE INDEX IF NOT EXISTS idx_checkpoint_task ON checkpoint (task_id);

CREATE TABLE IF NOT EXISTS steer_message (
  task_id      VARCHAR(64) COLLATE "C" NOT NULL,
  seq          BIGINT NOT NULL,
  message      TEXT        COLLATE "C" NOT NULL,
  created_at   BIGINT NOT NULL,
  delivered_at BIGINT NULL,
  delivery_id  VARCHAR(64) COLLATE "C" NULL,
  PRIMARY KEY (task_id, seq)
);

CREATE TABLE IF NOT EXISTS leader_run (
  leader_run_id     VARCHAR(64)  COLLATE "C" NOT NULL,
  idem_key          VARCHAR(64)  COLLATE "C" NULL,
  owner             VARCHAR(190) COLLATE "C" NULL,
  objective_preview VARCHAR(160) COLLATE "C" NULL,
  status            VARCHAR(16)  COLLATE "C" NOT NULL,
  result            JSONB NULL,
  error             TEXT         COLLATE "C" NULL,
  started_at_ms     BIGINT NOT NULL,
  finished_at_ms    BIGINT NULL,
  reap_tick         VARCHAR(64)  COLLATE "C" NULL,
  PRIMARY KEY (leader_run_id),
  CONSTRAINT uq_leader_run_idem UNIQUE (idem_key)
);
CREATE INDEX IF NOT EXISTS idx_leader_run_owner ON leader_run (owner);
CREATE INDEX IF NOT EXISTS idx_leader_run_started ON leader_run (started_at_ms);
CREATE INDEX IF NOT EXISTS idx_leader_run_reap_tick ON leader_run (reap_tick);

CREATE TABLE IF NOT EXISTS leader_worker (
  leader_run_id  VARCHAR(64) COLLATE "C" NOT NULL,
  worker_id      VARCHAR(64) COLLATE "C" NOT NULL,
  task_id        VARCHAR(64) COLLATE "C" NULL,
  session_id     VARCHAR(64) COLLATE "C" NOT NULL,
  status         VARCHAR(16) COLLATE "C" NOT NULL,
  error          TEXT        COLLATE "C" NULL,
  started_at_ms  BIGINT NULL,
  finished_at_ms BIGINT NULL,
  PRIMARY KEY (leader_run_id, worker_id)
);
CREATE INDEX IF NOT EXISTS idx_leader_worker_task ON leader_worker (task_id);
