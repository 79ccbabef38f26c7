package main

import (
	"context"
	"fmt"
	"os"

	"github.com/open-policy-agent/opa/v1/bundle"
	"github.com/spf13/cobra"

	"github.com/toolgate/toolgate/config"
	"github.com/toolgate/toolgate/engine"
)

// policyFlags are the flags every command that evaluates policy shares.
type policyFlags struct {
	bundle     string
	data       []string
	configPath string
}

func (p *policyFlags) register(cmd *cobra.Command) {
	cmd.Flags().StringVar(&p.bundle, "bundle", "", "policy bundle: a directory or .tar.gz (default: the embedded default bundle)")
	cmd.Flags().StringArrayVar(&p.data, "data", nil, "JSON data file merged over the bundle's data (repeatable)")
	cmd.Flags().StringVar(&p.configPath, "config", "", "toolgate.yaml configuration file")
}

func (p *policyFlags) loadConfig() (*config.Config, error) {
	cfg, err := config.Load(p.configPath)
	if err != nil {
		return nil, withCode(exitUsage, err)
	}
	return cfg, nil
}

// newEngine builds the engine from the flags and the config: the bundle, the
// config's policy extensions, then each --data file, merged in that order.
func (p *policyFlags) newEngine(ctx context.Context, cfg *config.Config) (*engine.Engine, error) {
	opts := []engine.Option{engine.WithData(configData(cfg))}
	src := p.bundle
	if src == "" {
		src = cfg.Resolve(cfg.Policy.Bundle)
	}
	if src != "" {
		b, err := loadBundle(src)
		if err != nil {
			return nil, withCode(exitUsage, err)
		}
		opts = append(opts, engine.WithBundle(b, bundleName(src, b)))
	}
	files := append(append([]string{}, resolveAll(cfg, cfg.Policy.Data)...), p.data...)
	for _, f := range files {
		d, err := engine.ReadDataFile(f)
		if err != nil {
			return nil, withCode(exitUsage, err)
		}
		opts = append(opts, engine.WithData(d))
	}
	e, err := engine.New(ctx, opts...)
	if err != nil {
		return nil, withCode(exitUsage, err)
	}
	return e, nil
}

func resolveAll(cfg *config.Config, paths []string) []string {
	out := make([]string, len(paths))
	for i, p := range paths {
		out[i] = cfg.Resolve(p)
	}
	return out
}

// configData turns the config's policy keys into data.toolgate.config.
func configData(cfg *config.Config) map[string]any {
	c := map[string]any{"max_steps": cfg.Conversation.MaxSteps}
	if len(cfg.Policy.AdditionalPatterns) > 0 {
		c["additional_patterns"] = toAny(cfg.Policy.AdditionalPatterns)
	}
	if len(cfg.Policy.AdditionalHighRiskTools) > 0 {
		c["additional_high_risk_tools"] = toAny(cfg.Policy.AdditionalHighRiskTools)
	}
	if len(cfg.Policy.AgentTools) > 0 {
		at := map[string]any{}
		for id, t := range cfg.Policy.AgentTools {
			at[id] = map[string]any{"allowed": toAny(t.Allowed), "blocked": toAny(t.Blocked)}
		}
		c["agent_tools"] = at
	}
	return map[string]any{"toolgate": map[string]any{"config": c}}
}

func toAny(s []string) []any {
	out := make([]any, len(s))
	for i, v := range s {
		out[i] = v
	}
	return out
}

// loadBundle reads a bundle directory or .tar.gz.
func loadBundle(src string) (*bundle.Bundle, error) {
	fi, err := os.Stat(src)
	if err != nil {
		return nil, fmt.Errorf("bundle: %w", err)
	}
	if fi.IsDir() {
		return engine.ReadBundleFS(os.DirFS(src), false)
	}
	f, err := os.Open(src)
	if err != nil {
		return nil, fmt.Errorf("bundle: %w", err)
	}
	defer f.Close()
	b, err := bundle.NewReader(f).Read()
	if err != nil {
		return nil, fmt.Errorf("bundle %s: %w", src, err)
	}
	return &b, nil
}

func bundleName(src string, b *bundle.Bundle) string {
	if n, ok := b.Manifest.Metadata["name"].(string); ok && n != "" {
		return n
	}
	return src
}
