package engine

import (
	"encoding/json"
	"fmt"
	"os"
)

// mergeData deep-merges src into dst: objects merge key by key, any other
// value (arrays included) replaces.
func mergeData(dst, src map[string]any) {
	for k, v := range src {
		if sm, ok := v.(map[string]any); ok {
			if dm, ok := dst[k].(map[string]any); ok {
				mergeData(dm, sm)
				continue
			}
			v = deepCopy(sm)
		}
		dst[k] = v
	}
}

func deepCopy(v any) any {
	switch x := v.(type) {
	case map[string]any:
		m := make(map[string]any, len(x))
		for k, e := range x {
			m[k] = deepCopy(e)
		}
		return m
	case []any:
		a := make([]any, len(x))
		for i, e := range x {
			a[i] = deepCopy(e)
		}
		return a
	}
	return v
}

// ReadDataFile reads a JSON object to merge over the bundle's data (for
// example a registry extension: {"toolgate": {"registry": {"tools": {...}}}}).
func ReadDataFile(path string) (map[string]any, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("data file: %w", err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, fmt.Errorf("data file %s: must be a JSON object: %w", path, err)
	}
	return m, nil
}
