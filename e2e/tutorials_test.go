package e2e_test

import (
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"
)

// tutorialBlock returns the shell block of docs/tutorials/<name>.md, made to
// run against d: the address `make run` listens on in this test instead of
// its default one.
func tutorialBlock(t *testing.T, name string, d *devRun) string {
	t.Helper()
	b, err := os.ReadFile("../docs/tutorials/" + name + ".md")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile("(?s)```sh\n(.*?)```").FindSubmatch(b)
	if m == nil {
		t.Fatalf("docs/tutorials/%s.md has no sh block", name)
	}
	block := string(m[1])
	if !strings.Contains(block, "API=localhost:8080") {
		t.Fatalf("docs/tutorials/%s.md no longer sets API=localhost:8080; the test points it at its own api", name)
	}
	return strings.Replace(block, "API=localhost:8080", "API="+d.addr, 1)
}

// The tutorials under docs/tutorials are run as a reader runs them, in a
// second terminal beside `make run`, and say what they say: each line of
// want matches a line of the output, in order.
func TestTutorials(t *testing.T) {
	if testing.Short() {
		t.Skip("runs make run and the tutorials (about a minute)")
	}
	d := startMakeRun(t)
	for _, tc := range []struct {
		name string
		want []string
	}{
		{"sizes", []string{
			`"order_no".* 202$`,                   // Ann takes the last EU 45
			`ALREADY_PURCHASED.* 409$`,            // one order per buyer, whatever the size
			`SOLD_OUT.* 409$`,                     // Bob: that size is gone
			`"order_no".* 202$`,                   // ...the others still sell
			`"label":"EU 45".*"state":"SOLD_OUT"`, // the activity page
			`"label":"EU 45".*"unit_price":9900,"amount":9900,"currency":"EUR"`,
		}},
		{"waiting-room", []string{
			`"state":"WAITING".*"position":null`,
			`"state":"WAITING".*"position":null`,
			`"waiting_room":true.*"seed_commitment"`,
			`"state":"(ADMITTED|WAITING)"`,
			`"state":"(ADMITTED|WAITING)"`,
			`( 202|NOT_ADMITTED.* 403)$`,
			`( 202|NOT_ADMITTED.* 403)$`,
			`"state":"SOLD_OUT"|"state":"ADMITTED"`,
			`"seed":"`,
		}},
		{"draw", []string{
			`"state":"ENTERED".* 201$`,
			`"state":"ENTERED".* 201$`,
			`"state":"ENTERED".* 201$`,
			`"state":"ENTERED".* 200$`, // Ann's entry as it was
			`DRAW_SALE.* 409$`,
			`"mode":"draw".*"state":"DRAWN","entries":3`,
			`"state":"(WON|ALTERNATE)"`,
			`"state":"(WON|ALTERNATE)"`,
			`"state":"WON"`,
			`holds: 3 entries, 2 won, 1 alternates`,
			`holds: 3 entries, 2 won, 1 alternates`,
			`"status":"CLOSED"`,         // the winner's cancel
			`"state":"WON".*"order_no"`, // the alternate, promoted
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			cmd := exec.Command("bash", "-c", tutorialBlock(t, tc.name, d))
			cmd.Dir = ".."
			out, err := cmd.CombinedOutput()
			if err != nil {
				t.Fatalf("docs/tutorials/%s.md: %v\n%s", tc.name, err, out)
			}
			t.Logf("docs/tutorials/%s.md printed:\n%s", tc.name, out)
			lines := strings.Split(strings.TrimSpace(string(out)), "\n")
			i := 0
			for _, w := range tc.want {
				re := regexp.MustCompile(w)
				for i < len(lines) && !re.MatchString(lines[i]) {
					i++
				}
				if i == len(lines) {
					t.Fatalf("docs/tutorials/%s.md: no line after the ones before matches %q; it printed:\n%s", tc.name, w, out)
				}
				i++
			}
		})
	}
}
