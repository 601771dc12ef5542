-- Trace context: the W3C traceparent (and tracestate) a submit carried (or the span the api
-- made for it), so each attempt's span continues the submitter's trace. NULL: no context.
-- Nullable columns without a default: no table rewrite.
ALTER TABLE jobs
    ADD COLUMN traceparent text,
    ADD COLUMN tracestate  text;
ALTER TABLE jobs ADD CONSTRAINT jobs_traceparent_check
    CHECK (length(traceparent) = 55) NOT VALID;
ALTER TABLE jobs ADD CONSTRAINT jobs_tracestate_check
    CHECK (length(tracestate) <= 512) NOT VALID;
