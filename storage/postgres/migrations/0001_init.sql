-- Switchyard's schema. Times are Unix nanoseconds (bigint), so they read
-- back exactly as Go wrote them; records are JSON documents (bytea, byte for
-- byte) beside the columns queries select, order and lock by. Text that is
-- ordered or matched by prefix is COLLATE "C": byte order, as bbolt keeps it.

-- Intake. The raw payload is written once and read only by GetEvent;
-- retention sets it to NULL, and the index holds the events that still have
-- one.
CREATE TABLE events (
	seq    bigserial PRIMARY KEY,
	header bytea NOT NULL,
	raw    bytea
);
CREATE INDEX events_with_payload ON events (seq) WHERE raw IS NOT NULL;

-- Delivery ids seen within the dedup window. The primary key is what makes
-- a redelivery a duplicate across replicas: the second insert of a key
-- waits for the first and then finds it.
CREATE TABLE dedup (
	key   text COLLATE "C" PRIMARY KEY,
	until bigint NOT NULL,
	ref   text NOT NULL
);
CREATE INDEX dedup_until ON dedup (until);
CREATE INDEX dedup_ref ON dedup (ref);

-- What each delivery made, for as long as its record lives (explain).
CREATE TABLE deliveries (
	key text COLLATE "C" PRIMARY KEY,
	ref text NOT NULL
);
CREATE INDEX deliveries_ref ON deliveries (ref);

CREATE TABLE ingress (
	seq       bigserial PRIMARY KEY,
	event_seq bigint NOT NULL,
	reason    text COLLATE "C" NOT NULL,
	doc       bytea NOT NULL
);
CREATE INDEX ingress_reason ON ingress (reason, seq);

CREATE TABLE work_items (
	seq          bigserial PRIMARY KEY,
	event_seq    bigint,
	thread       text COLLATE "C" NOT NULL,
	status       text NOT NULL,
	dispatch_seq bigint,
	doc          bytea NOT NULL
);
CREATE INDEX work_items_thread ON work_items (thread, seq);
CREATE INDEX work_items_status ON work_items (status, seq);

-- The queue. unit is what one running job at a time is held over: the
-- thread, or a thread-less work item's own id.
CREATE TABLE dispatches (
	seq           bigserial PRIMARY KEY,
	work_item_seq bigint NOT NULL,
	unit          text COLLATE "C" NOT NULL,
	agent         text NOT NULL,
	status        text NOT NULL,
	doc           bytea NOT NULL
);
CREATE INDEX dispatches_pending ON dispatches (seq) WHERE status = 'pending';
CREATE INDEX dispatches_pending_unit ON dispatches (unit, seq) WHERE status = 'pending';
CREATE INDEX dispatches_leased ON dispatches (seq) WHERE status = 'leased';

CREATE TABLE jobs (
	seq           bigserial PRIMARY KEY,
	status        text NOT NULL,
	owner         text NOT NULL,
	lease_expires bigint NOT NULL,
	unit          text COLLATE "C" NOT NULL,
	doc           bytea NOT NULL
);
CREATE INDEX jobs_running ON jobs (lease_expires) WHERE status = 'running';

CREATE TABLE job_work_items (
	work_item_seq bigint NOT NULL,
	job_seq       bigint NOT NULL,
	PRIMARY KEY (work_item_seq, job_seq)
);
CREATE INDEX job_work_items_job ON job_work_items (job_seq, work_item_seq);

-- One running job per unit: the primary key is the guarantee.
CREATE TABLE active_units (
	unit    text COLLATE "C" PRIMARY KEY,
	job_seq bigint NOT NULL
);

-- The outbox. destination groups undelivered messages by where they go
-- (Thread.Destination), so one that is down is skipped whole.
-- claimed_by/claim_until say which replica is delivering a message (the
-- store that listed it as due, until the claim runs out or the outcome is
-- recorded): exactly one replica sends each.
CREATE TABLE outbox (
	key          text COLLATE "C" PRIMARY KEY,
	seq          bigint NOT NULL UNIQUE,
	thread       text COLLATE "C" NOT NULL,
	destination  text COLLATE "C" NOT NULL,
	work_item    text NOT NULL,
	pending      boolean NOT NULL,
	dead         boolean NOT NULL,
	next_attempt bigint NOT NULL,
	claimed_by   text NOT NULL DEFAULT '',
	claim_until  bigint NOT NULL DEFAULT 0,
	doc          bytea NOT NULL
);
CREATE SEQUENCE outbox_seq;
CREATE INDEX outbox_thread ON outbox (thread, seq);
CREATE INDEX outbox_pending ON outbox (destination, seq) WHERE pending;
CREATE INDEX outbox_dead ON outbox (seq) WHERE dead;

CREATE TABLE schedules (
	name       text COLLATE "C" PRIMARY KEY,
	last_fired bigint NOT NULL
);

CREATE TABLE audit (
	seq      bigserial PRIMARY KEY,
	at       bigint NOT NULL,
	decision text COLLATE "C" NOT NULL,
	doc      bytea NOT NULL
);
CREATE INDEX audit_at ON audit (at, seq);
CREATE INDEX audit_decision ON audit (decision, at, seq);

CREATE TABLE conversations (
	session_key text COLLATE "C" NOT NULL,
	agent       text COLLATE "C" NOT NULL,
	doc         bytea NOT NULL,
	PRIMARY KEY (session_key, agent)
);

CREATE TABLE transcripts (
	job_id text COLLATE "C" NOT NULL,
	run_id text COLLATE "C" NOT NULL,
	ord    bigserial,
	doc    bytea NOT NULL,
	PRIMARY KEY (job_id, run_id)
);

CREATE TABLE installations (
	id  bigint PRIMARY KEY,
	doc bytea NOT NULL
);
CREATE TABLE installation_repos (
	repo         text COLLATE "C" PRIMARY KEY, -- owner/name, lower case
	installation bigint NOT NULL
);

CREATE TABLE packages (
	name text COLLATE "C" PRIMARY KEY,
	doc  bytea NOT NULL
);
CREATE TABLE skill_settings (
	scope text COLLATE "C" NOT NULL,
	name  text COLLATE "C" NOT NULL,
	doc   bytea NOT NULL,
	PRIMARY KEY (scope, name)
);

CREATE TABLE approvals (
	id         text COLLATE "C" PRIMARY KEY,
	key        text COLLATE "C" NOT NULL,
	status     text NOT NULL,
	created_at bigint NOT NULL,
	decided_at bigint,
	taken      boolean NOT NULL DEFAULT false,
	doc        bytea NOT NULL
);
CREATE INDEX approvals_key ON approvals (key, created_at) WHERE key <> '';
CREATE INDEX approvals_pending ON approvals (created_at) WHERE status = 'pending';
CREATE INDEX approvals_decided ON approvals (decided_at) WHERE status <> 'pending';

-- Leases replicas take turns on (Socket Mode runs on one replica at a time).
CREATE TABLE leases (
	name   text COLLATE "C" PRIMARY KEY,
	holder text NOT NULL,
	until  bigint NOT NULL
);
