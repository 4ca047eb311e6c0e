// Package sql embeds the versioned MySQL schema files (NNNN_name.sql).
// The programs, the tests and docker-compose apply the same files; nothing
// else holds a copy of the schema. Its importers name it schema (import
// schema "github.com/seckill/seckill/sql"), which also keeps it apart from
// database/sql.
package sql

import "embed"

// Files holds every migration, applied in the order of their names.
//
//go:embed *.sql
var Files embed.FS
