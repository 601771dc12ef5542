-- A parent's children read in bounded pages: its edges by (parent, settled, child), so GET
-- /jobs/{id} lists the first children of a parent with 200,000 in index order (those still
-- waiting on it first) and counts them along the index alone, instead of sorting every child
-- row (which passed the statement timeout). Settling still seeks to the unsettled edges.
DROP INDEX job_dependencies_parent_idx;
CREATE INDEX job_dependencies_parent_idx ON job_dependencies (parent_id, settled, child_id);
