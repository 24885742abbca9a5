// Package agents is Switchyard's agent runtime. It loads agent definitions
// (markdown files with YAML frontmatter: built in, from packages, from the
// user's agents_dir, in rising priority), and runs them: Runtime implements
// bot.Runner, driving the model loop of an agent with its tools until a final
// answer or a limit, reporting progress, persisting the conversation of each
// (thread, agent) and a redacted transcript of each run.
//
// Agents reach each other two ways. An agent with mode tool is offered to the
// others as the tool agent_<name>: it runs the task it is given with only an
// invocation context, never the caller's history, and its AgentResponse is
// the tool result; depth and cycles are bounded. handoff_to instead re-routes
// the work item itself to another agent through the core's hop-limited
// Rerouter.
package agents
