-- Sema Edge schema part 3, SQLite dialect (D1): the reaper tick log. Twins:
-- ../postgres/0003_reaper_tick.sql, ../mysql/0003_reaper_tick.sql.

-- One row per cron reaper tick: when it ran and what it changed (report: JSON text). Bounded: each
-- recorded tick deletes all but the newest N (by started_at, then tick_id).
CREATE TABLE IF NOT EXISTS reaper_tick (
  tick_id     TEXT    NOT NULL PRIMARY KEY,
  started_at  INTEGER NOT NULL,
  finished_at INTEGER NOT NULL,
  report      TEXT    NOT NULL
);
CREATE INDEX IF NOT EXISTS idx_reaper_tick_started ON reaper_tick (started_at, tick_id);
