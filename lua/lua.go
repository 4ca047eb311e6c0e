// Package lua embeds the project's Redis Lua scripts, one script a file.
//
// Each file starts with a header comment that lists its KEYS, ARGV and
// return values. Only the Redis adapters (pkg/adapter/stockredis, pkg/adapter/lock) run
// them; this package only hands out their text.
package lua

import (
	"embed"
	"fmt"
)

//go:embed *.lua
var files embed.FS

// Source returns the text of the script name (the file name without
// ".lua"). A missing script is a programming error, so it panics.
func Source(name string) string {
	b, err := files.ReadFile(name + ".lua")
	if err != nil {
		panic(fmt.Sprintf("lua: no script %q: %v", name, err))
	}
	return string(b)
}
