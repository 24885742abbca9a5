-- Routing rules made through the API or the admin UI (bot.StoredRule), by
-- the sequence of their ids (rule_<seq>); names are unique among them.

CREATE TABLE rules (
	seq  bigserial PRIMARY KEY,
	name text NOT NULL UNIQUE,
	doc  bytea NOT NULL
);
