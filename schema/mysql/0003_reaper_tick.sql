-- Sema Edge schema part 3, MySQL / MariaDB dialect. Twin of ../sqlite/0003_reaper_tick.sql.

CREATE TABLE IF NOT EXISTS reaper_tick (
  tick_id     VARCHAR(64) NOT NULL,
  started_at  BIGINT NOT NULL,
  finished_at BIGINT NOT NULL,
  report      MEDIUMTEXT NOT NULL,
  PRIMARY KEY (tick_id),
  KEY idx_reaper_tick_started (started_at, tick_id)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;
