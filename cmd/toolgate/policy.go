package main

import (
	"context"
	"os"

	"github.com/spf13/cobra"

	"github.com/toolgate/toolgate"
	"github.com/toolgate/toolgate/bundles"
	"github.com/toolgate/toolgate/config"
	"github.com/toolgate/toolgate/engine"
)

// policyFlags are the flags every command that evaluates policy shares.
type policyFlags struct {
	bundle          string
	verificationKey string
	data            []string
	configPath      string
}

func (p *policyFlags) register(cmd *cobra.Command) {
	cmd.Flags().StringVar(&p.bundle, "bundle", "", "policy bundle: a directory, .tar.gz or http(s) URL (default: the embedded default bundle)")
	cmd.Flags().StringVar(&p.verificationKey, "verification-key", "", "PEM public key: the bundle must be signed with its private key or it is refused")
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
	opts := []engine.Option{engine.WithData(toolgate.ConfigData(cfg))}
	src := p.bundle
	if src == "" {
		src = cfg.Resolve(cfg.Policy.Bundle)
	}
	key, err := p.verification(cfg)
	if err != nil {
		return nil, err
	}
	if key != nil && src == "" {
		return nil, usageError("--verification-key: the embedded default bundle is not signed; give --bundle")
	}
	if src != "" {
		b, err := bundles.Load(ctx, src, key)
		if err != nil {
			return nil, withCode(exitUsage, err)
		}
		opts = append(opts, engine.WithBundle(b, bundles.Name(src, b)))
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

// verification reads the bundle verification key, from the flag or the
// config; nil when none is configured.
func (p *policyFlags) verification(cfg *config.Config) (*bundles.VerificationKey, error) {
	path := p.verificationKey
	if path == "" {
		path = cfg.Resolve(cfg.Policy.VerificationKey)
	}
	if path == "" {
		return nil, nil
	}
	pem, err := os.ReadFile(path)
	if err != nil {
		return nil, usageError("verification key: %v", err)
	}
	return &bundles.VerificationKey{PEM: pem}, nil
}
