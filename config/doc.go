// Package config loads Switchyard's configuration file: YAML with ${ENV}
// expansion, decoded strictly against the Go types so that an unknown key, a
// wrong type or a bad value is reported as "<file>:<line>: <path>: <why>",
// with the path spelled as in the file ("routing.rules[2].agent").
//
// Loading happens in two steps. Parse (and Load, Default) checks the syntax,
// the types and every value that can be judged on its own. Compile then
// checks what depends on the agents the daemon found (rule and schedule
// agents) and builds the router; its errors carry the file's line numbers
// too. A program that wants to know whether a config is valid runs both.
//
// Secrets are bot.Secret values: they never appear in a printed or
// marshalled Config nor in an error message.
package config
