// Package policies embeds toolgate's default Tier 1 bundle: the Rego rules of
// package toolgate.tier1, their _test.rego unit tests, and the data (tool
// registry, suspicious patterns, dangerous-command rules, config defaults).
// It holds no code beyond the embedding: the engine loads it.
package policies

import "embed"

// FS holds the bundle, rooted at toolgate/ (data paths follow directories:
// toolgate/registry/data.json is data.toolgate.registry).
//
//go:embed toolgate
var FS embed.FS
