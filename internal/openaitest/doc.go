// Package openaitest runs a real HTTP server on the loopback interface that
// speaks the OpenAI chat completions protocol with scripted answers, so the
// model tiers are tested through their ordinary client against a base_url.
// It owns only test scaffolding: no production package may import it, and it
// must not reach any address but 127.0.0.1.
package openaitest
