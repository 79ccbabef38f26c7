// Package shell is a temporary stand-in; replaced by the real normaliser.
package shell

import "strings"

func Normalize(cmd string) []string { return []string{strings.Join(strings.Fields(cmd), " ")} }
