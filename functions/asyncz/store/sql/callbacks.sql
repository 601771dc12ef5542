-- Named queries of durable tasks' callbacks (migration 0022; see waits.sql for the wait a
-- callback is, and for how its value resolves it).

-- name: callback_secret
-- The key callback tokens are derived under (read once per sandbox).
SELECT secret FROM asyncz_secrets WHERE name = 'callback_tokens';

-- name: find_callback
-- POST /callbacks/{token}: the callback whose token hashes to %(token_hash)s, along
-- job_steps_callback_idx, waiting or used, and whether its job still lives.
SELECT s.job_id, s.seq, s.status, j.status AS job_status, s.wait_until
  FROM job_steps s JOIN jobs j ON j.id = s.job_id
 WHERE s.kind = 'callback' AND s.wait_key = %(token_hash)s;

-- name: heartbeat_callback
-- A heartbeat: the waiting callback's deadline moves to at least now() plus its timeout
-- (kept in its terms while it waits). The job's run_at is left alone: woken at the old
-- deadline, the replay finds the later one and suspends again until it.
UPDATE job_steps s
   SET wait_until = greatest(s.wait_until,
                             now() + make_interval(secs => (s.result ->> 'timeout')::float8))
  FROM jobs j
 WHERE s.kind = 'callback' AND s.wait_key = %(token_hash)s AND s.status = 'waiting'
   AND j.id = s.job_id AND j.status IN ('queued', 'processing', 'suspended')
RETURNING s.wait_until;

-- name: peek_step
-- One stored step as it is now (cb.wait() in the attempt that made the callback: its token
-- may have been posted to while the task went on).
SELECT status, result, wait_until FROM job_steps WHERE job_id = %(job_id)s AND seq = %(seq)s;
