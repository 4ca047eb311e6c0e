package activity

import (
	"errors"
	"testing"
	"time"

	"github.com/seckill/seckill/pkg/domain/access"
	"github.com/seckill/seckill/pkg/domain/order"
)

func TestSaleAccess(t *testing.T) {
	now := time.Now()
	draft := func(acc string) Draft {
		return Draft{ItemID: 1, StartsAt: now.Add(time.Hour), EndsAt: now.Add(2 * time.Hour), Access: acc}
	}
	for _, tc := range []struct {
		name   string
		access string
		room   bool
		want   access.Mode
		bad    bool
	}{
		{name: "left out is open", want: access.Open},
		{name: "code required", access: "code_required", want: access.CodeRequired},
		{name: "code priority with a room", access: "code_priority", room: true, want: access.CodePriority},
		{name: "code priority without a room", access: "code_priority", bad: true},
		{name: "unknown", access: "members", bad: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a, err := draft(tc.access).Activity(now)
			if err == nil {
				if tc.room {
					a.Room = WaitingRoom{AdmitPerSecond: 10}
				}
				err = a.CheckAccess()
			}
			if tc.bad != (err != nil) || (err != nil && !errors.Is(err, order.ErrInvalidArgument)) {
				t.Fatalf("err %v, want refused %v", err, tc.bad)
			}
			if !tc.bad && a.AccessMode() != tc.want {
				t.Fatalf("access %q, want %q", a.AccessMode(), tc.want)
			}
		})
	}
	m := access.CodeRequired
	if err := (Change{Access: &m}).Check(); err != nil {
		t.Fatalf("a change of the access alone: %v", err)
	}
	if (Activity{}).AccessMode() != access.Open {
		t.Fatal("a sale without an access is not open")
	}
}
