package adapters

import (
	"bytes"
	"encoding/json"
	"io"
	"os"

	"github.com/toolgate/toolgate/schema"
)

// Bounds of what is read of a transcript.
const (
	// MaxTranscriptBytes is how much of a transcript's end is read.
	MaxTranscriptBytes = 256 << 10
	// MaxTranscriptEntries is how many of its last entries are used.
	MaxTranscriptEntries = 20
)

// transcriptEntry is one line of Claude Code's transcript (JSONL); only the
// fields toolgate reads.
type transcriptEntry struct {
	Type    string `json:"type"`
	IsMeta  bool   `json:"isMeta"`
	Message struct {
		Role    string          `json:"role"`
		Content json.RawMessage `json:"content"`
	} `json:"message"`
}

type contentPart struct {
	Type    string          `json:"type"`
	Text    string          `json:"text"`
	Content json.RawMessage `json:"content"`
}

// readTranscript returns the context blocks of the last entries of a Claude
// Code transcript: user text is trusted, tool results are untrusted,
// assistant turns are left out. It also returns the last user text as the
// user's intent. A missing or unreadable transcript gives no blocks: it is
// written asynchronously and may lag, and the recorded results still apply.
func readTranscript(path string) (blocks []schema.Block, intent string) {
	if path == "" {
		return nil, ""
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, ""
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil || !fi.Mode().IsRegular() {
		return nil, ""
	}
	off := fi.Size() - MaxTranscriptBytes
	if off < 0 {
		off = 0
	}
	data, err := io.ReadAll(io.NewSectionReader(f, off, fi.Size()-off))
	if err != nil {
		return nil, ""
	}
	lines := bytes.Split(data, []byte{'\n'})
	if off > 0 && len(lines) > 0 {
		lines = lines[1:] // the first line was cut
	}
	var entries []transcriptEntry
	for _, l := range lines {
		var e transcriptEntry
		if len(bytes.TrimSpace(l)) == 0 || json.Unmarshal(l, &e) != nil {
			continue
		}
		if e.Type == "user" || e.Message.Role == "user" {
			entries = append(entries, e)
		}
	}
	if len(entries) > MaxTranscriptEntries {
		entries = entries[len(entries)-MaxTranscriptEntries:]
	}
	for _, e := range entries {
		bs, text := userBlocks(e.Message.Content)
		if e.IsMeta {
			// Meta entries (command output, reminders) are not the user's words.
			for i := range bs {
				bs[i].Trust, bs[i].Source = schema.Untrusted, "claude-code:meta"
			}
		} else if text != "" {
			intent = text
		}
		blocks = append(blocks, bs...)
	}
	return blocks, truncate(intent, 2<<10)
}

func userBlocks(raw json.RawMessage) ([]schema.Block, string) {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return []schema.Block{{Trust: schema.Trusted, Source: "user", Content: truncate(s, MaxResultBytes)}}, s
	}
	var parts []contentPart
	if json.Unmarshal(raw, &parts) != nil {
		return nil, ""
	}
	var out []schema.Block
	var text string
	for _, p := range parts {
		switch p.Type {
		case "text":
			out = append(out, schema.Block{Trust: schema.Trusted, Source: "user", Content: truncate(p.Text, MaxResultBytes)})
			text = p.Text
		case "tool_result":
			out = append(out, schema.Block{Trust: schema.Untrusted, Source: "tool_result", Content: flattenRaw(p.Content, MaxResultBytes)})
		}
	}
	return out, text
}
