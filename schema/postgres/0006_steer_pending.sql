-- Sema Edge schema part 6, PostgreSQL dialect. Twin of ../sqlite/0006_steer_pending.sql (which
-- explains the index).
CREATE INDEX IF NOT EXISTS idx_steer_message_pending ON steer_message (task_id, delivered_at, seq);
