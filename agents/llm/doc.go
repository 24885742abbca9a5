// Package llm puts the model providers Switchyard talks to behind one small
// interface, Provider: an OpenAI-compatible chat completions client (OpenAI,
// Ollama, vLLM, LM Studio and anything else that speaks the protocol at a
// base URL) and an Anthropic messages client, both built on the official
// SDKs so retries, Retry-After and wire details are theirs, not ours.
//
// The agent runtime sees only Request, Response and the tool-call shapes
// here; it never imports an SDK.
package llm
