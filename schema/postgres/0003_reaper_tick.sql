-- Sema Edge schema part 3, PostgreSQL dialect. Twin of ../sqlite/0003_reaper_tick.sql.

CREATE TABLE IF NOT EXISTS reaper_tick (
  tick_id     VARCHAR(64) COLLATE "C" NOT NULL,
  started_at  BIGINT NOT NULL,
  finished_at BIGINT NOT NULL,
  report      TEXT        COLLATE "C" NOT NULL,
  PRIMARY KEY (tick_id)
);
CREATE INDEX IF NOT EXISTS idx_reaper_tick_started ON reaper_tick (started_at, tick_id);
