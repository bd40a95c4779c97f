-- Sema Edge schema part 6, MySQL / MariaDB dialect. Twin of ../sqlite/0006_steer_pending.sql (which
-- explains the index). MySQL has no `CREATE INDEX IF NOT EXISTS`: the index is created by a prepared
-- statement only when the catalogue does not list it yet, so this file stays safe to apply twice on
-- both servers.
SET @ddl = IF(EXISTS (SELECT 1 FROM information_schema.statistics WHERE table_schema = DATABASE()
  AND table_name = 'steer_message' AND index_name = 'idx_steer_message_pending'), 'DO 0',
  'CREATE INDEX idx_steer_message_pending ON steer_message (task_id, delivered_at, seq)');
PREPARE ddl FROM @ddl;
EXECUTE ddl;
DEALLOCATE PREPARE ddl;
