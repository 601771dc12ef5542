-- Flow control: paused queues (the rows are the truth; workers read them at most a
-- second old).

-- name: pause_queue
-- Pausing a paused queue changes nothing (the first pause's time and key stay).
INSERT INTO queue_pauses (queue, paused_by) VALUES (%(queue)s, %(by)s)
ON CONFLICT (queue) DO NOTHING
RETURNING queue;

-- name: resume_queue
DELETE FROM queue_pauses WHERE queue = %(queue)s RETURNING queue;

-- name: paused_queues
SELECT queue, paused_at, paused_by FROM queue_pauses ORDER BY queue;
