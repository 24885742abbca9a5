-- The ledger of child runs and background tasks, budgets and run states.

CREATE TABLE runs (
	seq           bigserial PRIMARY KEY,
	owner_session text COLLATE "C" NOT NULL,
	owner_agent   text NOT NULL,
	parent_wi     text COLLATE "C" NOT NULL,
	status        text NOT NULL,
	archived      boolean NOT NULL,
	doc           bytea NOT NULL
);
CREATE INDEX runs_owner ON runs (owner_session, seq);
CREATE INDEX runs_parent ON runs (parent_wi, seq);
CREATE INDEX runs_open ON runs (seq) WHERE status IN ('queued', 'running');

-- The record a work item runs for: a subagent's, or its latest handoff's.
-- The queue's own transactions move it with the work item.
CREATE TABLE run_children (
	child_wi text COLLATE "C" PRIMARY KEY,
	run_seq  bigint NOT NULL
);

CREATE TABLE tasks (
	seq           bigserial PRIMARY KEY,
	owner_session text COLLATE "C" NOT NULL,
	owner_agent   text NOT NULL,
	creator_job   text NOT NULL,
	status        text NOT NULL,
	archived      boolean NOT NULL,
	doc           bytea NOT NULL
);
CREATE INDEX tasks_owner ON tasks (owner_session, seq);
CREATE INDEX tasks_open ON tasks (seq) WHERE status = 'running';

CREATE TABLE thread_resets (
	session_key text COLLATE "C" PRIMARY KEY,
	at          bigint NOT NULL
);

-- Spending per key, counted by every replica: a row lock per key.
CREATE TABLE budgets (
	key text COLLATE "C" PRIMARY KEY,
	doc bytea NOT NULL
);

CREATE TABLE run_states (
	work_item text COLLATE "C" PRIMARY KEY,
	doc       bytea NOT NULL
);
