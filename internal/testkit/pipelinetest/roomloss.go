package pipelinetest

import (
	"context"
	"strconv"
	"time"

	"github.com/seckill/seckill/internal/testkit/redistest"
)

// RoomSnapshot is a copy of a waiting room's keys (DUMP), to bring the room
// back later as Redis restored from an older copy would.
type RoomSnapshot map[string]struct {
	Dump string
	TTL  time.Duration
}

// RoomKeys are the keys of activity's waiting room under the pipeline's
// prefix (every node of a cluster).
func (p *Pipeline) RoomKeys(activity int64) []string {
	p.t.Helper()
	keys, err := redistest.Keys(context.Background(), p.Redis, p.Prefix+":*room:"+strconv.FormatInt(activity, 10)+":*")
	if err != nil {
		p.t.Fatal(err)
	}
	return keys
}

// DeleteRoomKeys deletes activity's waiting room from Redis, as an emptied
// Redis would have lost it, and returns how many keys went.
func (p *Pipeline) DeleteRoomKeys(activity int64) int {
	p.t.Helper()
	keys := p.RoomKeys(activity)
	for _, k := range keys {
		if err := p.Redis.Del(context.Background(), k).Err(); err != nil {
			p.t.Fatal(err)
		}
	}
	return len(keys)
}

// SnapshotRoom copies activity's waiting room.
func (p *Pipeline) SnapshotRoom(activity int64) RoomSnapshot {
	p.t.Helper()
	ctx := context.Background()
	s := RoomSnapshot{}
	for _, k := range p.RoomKeys(activity) {
		d, err := p.Redis.Dump(ctx, k).Result()
		if err != nil {
			p.t.Fatal(err)
		}
		ttl, err := p.Redis.PTTL(ctx, k).Result()
		if err != nil {
			p.t.Fatal(err)
		}
		s[k] = struct {
			Dump string
			TTL  time.Duration
		}{d, max(ttl, 0)}
	}
	return s
}

// RewindRoom puts activity's waiting room back as s copied it.
func (p *Pipeline) RewindRoom(activity int64, s RoomSnapshot) {
	p.t.Helper()
	p.DeleteRoomKeys(activity)
	for k, v := range s {
		if err := p.Redis.RestoreReplace(context.Background(), k, v.TTL, v.Dump).Err(); err != nil {
			p.t.Fatal(err)
		}
	}
}
