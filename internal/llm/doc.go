// Package llm is the plumbing the model tiers share: an OpenAI-compatible
// chat completions client (go-openai) built from a base_url, a model and an
// API key; structured output through a json_schema response format; retries
// of 429 and 5xx answers within the caller's deadline; and token accounting
// summed over attempts. It owns no policy: it never decides what an answer
// means, and it must not read configuration files or environment variables.
package llm
