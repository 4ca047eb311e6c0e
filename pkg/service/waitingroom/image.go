package waitingroom

import (
	"slices"
	"strconv"

	"github.com/seckill/seckill/pkg/domain/access"
	"github.com/seckill/seckill/pkg/domain/room"
)

// Image is the room the record joins rebuilds, for a seed: the early
// joiners by rank, then the late ones in the order they joined; from the
// start (frozen) the leading positions whose buyers hold an order (done)
// are taken as admitted, so admissions resume at the first buyer whose
// turn is not over.
func Image(seed room.Seed, joins []room.Join, done map[string]bool, frozen bool) room.Image {
	img := room.Image{Frozen: frozen}
	for _, j := range joins {
		if j.Seq == 0 {
			img.Early = append(img.Early, room.RankedJoin{UserID: j.UserID, Rank: room.Rank(seed, j.UserID)})
		} else {
			img.Late = append(img.Late, j.UserID)
		}
	}
	// As the early sorted set orders them: by rank, then by member bytes.
	slices.SortFunc(img.Early, func(a, b room.RankedJoin) int {
		if a.Rank != b.Rank {
			if a.Rank < b.Rank {
				return -1
			}
			return 1
		}
		switch {
		case a.UserID < b.UserID:
			return -1
		case a.UserID > b.UserID:
			return 1
		}
		return 0
	})
	img.Lane = lane(img, joins, done)
	if !frozen {
		return img
	}
	img.LaneNext = leadingDone(len(img.Lane), func(i int) string { return img.Lane[i].UserID }, done)
	img.Next = leadingDone(len(img.Early), func(i int) string { return img.Early[i].UserID }, done)
	if img.Next == int64(len(img.Early)) {
		img.Next += leadingDone(len(img.Late), func(i int) string { return img.Late[i] }, done)
	}
	return img
}

// leadingDone counts the leading members of a line of n (user(i) the
// i-th) whose turn is done.
func leadingDone(n int, user func(int) string, done map[string]bool) int64 {
	k := 0
	for k < n && done[user(k)] {
		k++
	}
	return int64(k)
}

// lane is the priority lane of img, from the joins that carried a code:
// its early members in the early joiners' order, scored rank / 2^53 (exact:
// a rank is below 2^53), then its late ones by their new sequence numbers,
// as room_join scores them. A member without an order still holds their
// code's use; one with an order gave it to the order (and, if the order
// ended without a sale, it came back to the code).
func lane(img room.Image, joins []room.Join, done map[string]bool) []room.LaneMember {
	codes := map[string]access.Digest{}
	for _, j := range joins {
		if j.Code != "" {
			codes[j.UserID] = j.Code
		}
	}
	if len(codes) == 0 {
		return nil
	}
	var out []room.LaneMember
	add := func(user, score string) {
		if d, ok := codes[user]; ok {
			m := room.LaneMember{UserID: user, Score: score}
			if !done[user] {
				m.Holds = d
			}
			out = append(out, m)
		}
	}
	for _, j := range img.Early {
		add(j.UserID, strconv.FormatFloat(float64(j.Rank)/(1<<53), 'g', 17, 64))
	}
	for i, u := range img.Late {
		add(u, strconv.Itoa(i+1))
	}
	return out
}
