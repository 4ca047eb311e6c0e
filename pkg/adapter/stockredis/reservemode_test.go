package stockredis

import "testing"

// The typed modes reach lua/reserve.lua as the strings it reads in ARGV[2].
func TestReserveModeArg(t *testing.T) {
	for _, tc := range []struct {
		m    reserveMode
		want string
	}{{plainMode, ""}, {roomMode, "room"}, {bucketMode(0), "0"}, {bucketMode(15), "15"}} {
		if got := tc.m.arg(); got != tc.want {
			t.Errorf("mode %d: arg %q, want %q", tc.m, got, tc.want)
		}
	}
}
