// Package lua embeds the project's Redis Lua scripts, one script a file.
//
// Each file starts with a header comment that lists its KEYS, ARGV and
// return values. Only the Redis adapters (pkg/adapter/stockredis, pkg/adapter/lock) run
// them; this package only hands out their text.
//
// A rule that several scripts share is written once, in lib/<name>.lua, and
// a script takes it with a line "--#include <name>" (Redis has no way for
// one script to call another; Source puts the text in its place).
package lua

import (
	"embed"
	"fmt"
	"strings"
)

//go:embed *.lua lib/*.lua
var files embed.FS

const include = "--#include "

// Source returns the text of the script name (the file name without
// ".lua"), each include line replaced by its lib file. A missing script or
// lib file is a programming error, so it panics.
func Source(name string) string {
	return expand(name + ".lua")
}

func expand(file string) string {
	b, err := files.ReadFile(file)
	if err != nil {
		panic(fmt.Sprintf("lua: no script %q: %v", file, err))
	}
	lines := strings.SplitAfter(string(b), "\n")
	for i, l := range lines {
		if lib, ok := strings.CutPrefix(strings.TrimRight(l, "\n"), include); ok {
			lines[i] = expand("lib/" + strings.TrimSpace(lib) + ".lua")
		}
	}
	return strings.Join(lines, "")
}
