package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/seckill/seckill/pkg/domain/draw"
)

// maxRecord bounds a draw record read (a million entries is about 100 MB).
const maxRecord = 1 << 30

// verifyDraw is "reconciler verify-draw": it reads a draw's published
// record from the api (--url, --activity) or a saved copy (--file) and
// recomputes it (draw.Verify) from the record alone, needing no store.
// Exit 0: the record holds; 1: it does not (each mismatch is printed); 2:
// it could not be read.
func verifyDraw(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("reconciler verify-draw", flag.ContinueOnError)
	fs.SetOutput(stderr)
	url := fs.String("url", "", "the api's base `URL` (e.g. http://127.0.0.1:8080): reads GET /api/v1/activities/{id}/draw")
	activity := fs.Int64("activity", 0, "the draw sale's `id` (with --url)")
	file := fs.String("file", "", "a saved copy of the draw record (`path`; - for standard input) instead of --url")
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), `usage: reconciler verify-draw (--url URL --activity ID | --file PATH)

Recomputes a draw from its published record alone: the commitment from the
seed, the digest from the entries, the ranking from the seed and the entry
ids, and each entry's outcome from the ranking and the sizes' stock.

Exit codes: 0 the record holds, 1 it does not (every mismatch is printed),
2 the record could not be read.

flags:
`)
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		return fail(exitFailed, err)
	}
	switch {
	case fs.NArg() > 0:
		return fail(exitFailed, fmt.Errorf("unexpected arguments %q", fs.Args()))
	case (*url == "") == (*file == ""):
		return fail(exitFailed, errors.New("give --url with --activity, or --file"))
	case *url != "" && *activity <= 0:
		return fail(exitFailed, errors.New("--activity must be a positive id"))
	}
	var (
		body []byte
		err  error
		from string
	)
	if *file != "" {
		from = *file
		body, err = readRecordFile(*file)
	} else {
		from = strings.TrimRight(*url, "/") + fmt.Sprintf("/api/v1/activities/%d/draw", *activity)
		body, err = fetchRecord(ctx, from)
	}
	if err != nil {
		return fail(exitFailed, err)
	}
	var rec draw.Record
	if err := json.Unmarshal(body, &rec); err != nil {
		return fail(exitFailed, fmt.Errorf("%s is not a draw record: %w", from, err))
	}
	if err := draw.Verify(rec); err != nil {
		fmt.Fprintf(stdout, "draw of activity %d does NOT hold:\n", rec.ActivityID)
		for _, line := range strings.Split(err.Error(), "\n") {
			fmt.Fprintf(stdout, "  - %s\n", line)
		}
		return fail(exitDrift, fmt.Errorf("the draw of activity %d does not match its record", rec.ActivityID))
	}
	won := 0
	for _, e := range rec.Entries {
		if e.Outcome == draw.Won {
			won++
		}
	}
	fmt.Fprintf(stdout, "draw of activity %d holds: %d entries, %d won, %d alternates; the seed matches commitment %s, the entries digest %s, and the ranking and every outcome recompute\n",
		rec.ActivityID, len(rec.Entries), won, len(rec.Entries)-won, rec.Commitment, rec.Digest)
	return nil
}

func readRecordFile(path string) ([]byte, error) {
	if path == "-" {
		return io.ReadAll(io.LimitReader(os.Stdin, maxRecord))
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return io.ReadAll(io.LimitReader(f, maxRecord))
}

func fetchRecord(ctx context.Context, url string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxRecord))
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s: %s: %s", url, resp.Status, strings.TrimSpace(string(body)))
	}
	return body, nil
}
