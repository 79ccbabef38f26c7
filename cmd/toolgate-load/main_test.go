package main

import (
	"bytes"
	"strings"
	"testing"
)

// TestLoadSmoke runs a tiny load against an in-process server: no errors,
// and as many audit rows as requests.
func TestLoadSmoke(t *testing.T) {
	var out bytes.Buffer
	err := run([]string{"-clients", "1,4", "-duration", "200ms", "-max-requests", "200", "-warmup", "20", "-breakdown", "10", "-audit", "on"}, &out)
	if err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	for _, want := range []string{"  1 clients:", "  4 clients:", "audit rows", ": equal", "stages without HTTP", "/request;"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
}

func TestLoadFlags(t *testing.T) {
	for _, args := range [][]string{
		{"-clients", "0"},
		{"-clients", "x"},
		{"-duration", "2m"},
		{"-audit", "maybe"},
		{"-key-type", "rsa"},
	} {
		if err := run(args, &bytes.Buffer{}); err == nil {
			t.Errorf("%v: no error", args)
		}
	}
}
