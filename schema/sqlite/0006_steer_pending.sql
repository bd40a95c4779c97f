-- Sema Edge schema part 6, SQLite dialect (D1): the undelivered steer messages of a run, found
-- without reading the delivered ones. Twins: ../postgres/0006_steer_pending.sql,
-- ../mysql/0006_steer_pending.sql.
--
-- Every append, lease and heartbeat counts the run's undelivered messages (`delivered_at IS NULL`),
-- a heartbeat marks them delivered from the lowest such seq, and a steer is admitted against their
-- count and bytes. By the primary key (task_id, seq) alone each of these reads every message the run
-- was ever sent; with this index they read only those still waiting, which a steer's admission bounds.
CREATE INDEX IF NOT EXISTS idx_steer_message_pending ON steer_message (task_id, delivered_at, seq);
