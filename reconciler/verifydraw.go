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

// receiptFiles is --receipt, given once a receipt.
type receiptFiles []string

func (f *receiptFiles) String() string     { return strings.Join(*f, ",") }
func (f *receiptFiles) Set(v string) error { *f = append(*f, v); return nil }

// verifyDraw is "reconciler verify-draw": it reads a draw's published
// record from the api (--url, --activity) or a saved copy (--file) and
// recomputes it (draw.Verify) from the record alone, needing no store,
// then holds it to each buyer's receipt given (--receipt: an entry's
// answer as the buyer received it; draw.Record.CheckReceipt).
// Exit 0: the record holds; 1: it does not (each mismatch is printed); 2:
// it or a receipt could not be read.
func verifyDraw(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	o, err := parseVerifyFlags(args, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return nil
	}
	if err != nil {
		return fail(exitFailed, err)
	}
	rec, err := o.record(ctx)
	if err != nil {
		return fail(exitFailed, err)
	}
	held, err := readReceipts(o.receipts)
	if err != nil {
		return fail(exitFailed, err)
	}
	breaches := draw.Verify(rec)
	for i, r := range held {
		if err := rec.CheckReceipt(r); err != nil {
			breaches = errors.Join(breaches, fmt.Errorf("receipt %s: %w", o.receipts[i], err))
		}
	}
	if breaches != nil {
		fmt.Fprintf(stdout, "draw of activity %d does NOT hold:\n", rec.ActivityID)
		for _, line := range strings.Split(breaches.Error(), "\n") {
			fmt.Fprintf(stdout, "  - %s\n", line)
		}
		return fail(exitDrift, fmt.Errorf("the draw of activity %d does not match its record or its buyers' receipts", rec.ActivityID))
	}
	writeDrawHolds(stdout, rec, len(held))
	return nil
}

// verifyOptions are the flags of verify-draw.
type verifyOptions struct {
	url      string
	activity int64
	file     string
	receipts receiptFiles
}

// parseVerifyFlags reads the flags of verify-draw; flag.ErrHelp when help
// was asked for (and printed).
func parseVerifyFlags(args []string, stderr io.Writer) (verifyOptions, error) {
	var o verifyOptions
	fs := flag.NewFlagSet("reconciler verify-draw", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&o.url, "url", "", "the api's base `URL` (e.g. http://127.0.0.1:8080): reads GET /api/v1/activities/{id}/draw")
	fs.Int64Var(&o.activity, "activity", 0, "the draw sale's `id` (with --url)")
	fs.StringVar(&o.file, "file", "", "a saved copy of the draw record (`path`; - for standard input) instead of --url")
	fs.Var(&o.receipts, "receipt", "a buyer's receipt: the JSON `file` of their entry's answer (POST .../entries or GET .../entries/me); repeat for more")
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), `usage: reconciler verify-draw (--url URL --activity ID | --file PATH) [--receipt FILE]...

Recomputes a draw from its published record alone: the commitment from the
seed, the digest from the entries, the ranking from the seed and the entry
ids, and each entry's outcome from the ranking and the sizes' stock. Each
--receipt (an entry's answer as its buyer received it) must name the
record's commitment, and its entry must be in the record with its item and
quantity: the commitment was fixed when the sale was made, so a record
drawn with another seed, or without an entry, fails here.

Exit codes: 0 the record holds (and keeps every receipt), 1 it does not
(every mismatch is printed), 2 the record or a receipt could not be read.

flags:
`)
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	switch {
	case fs.NArg() > 0:
		return o, fmt.Errorf("unexpected arguments %q", fs.Args())
	case (o.url == "") == (o.file == ""):
		return o, errors.New("give --url with --activity, or --file")
	case o.url != "" && o.activity <= 0:
		return o, errors.New("--activity must be a positive id")
	}
	return o, nil
}

// record reads the draw record the options name: the saved copy, or the
// api's.
func (o verifyOptions) record(ctx context.Context) (draw.Record, error) {
	var (
		body []byte
		err  error
		from string
	)
	if o.file != "" {
		from = o.file
		body, err = readRecordFile(o.file)
	} else {
		from = strings.TrimRight(o.url, "/") + fmt.Sprintf("/api/v1/activities/%d/draw", o.activity)
		body, err = fetchRecord(ctx, from)
	}
	if err != nil {
		return draw.Record{}, err
	}
	var rec draw.Record
	if err := json.Unmarshal(body, &rec); err != nil {
		return draw.Record{}, fmt.Errorf("%s is not a draw record: %w", from, err)
	}
	return rec, nil
}

// writeDrawHolds prints that the draw rec holds, with held receipts kept,
// and the restocks it was drawn after.
func writeDrawHolds(stdout io.Writer, rec draw.Record, held int) {
	won := 0
	for _, e := range rec.Entries {
		if e.Outcome == draw.Won {
			won++
		}
	}
	fmt.Fprintf(stdout, "draw of activity %d holds: %d entries, %d won, %d alternates; the seed matches commitment %s, the entries digest %s, and the ranking and every outcome recompute",
		rec.ActivityID, len(rec.Entries), won, len(rec.Entries)-won, rec.Commitment, rec.Digest)
	if held > 0 {
		fmt.Fprintf(stdout, "; %d receipts name that commitment and their entries are in the record", held)
	}
	fmt.Fprintln(stdout)
	// Restocks moved the stock the draw gave out: the auditor judges them.
	for _, r := range rec.Restocks {
		fmt.Fprintf(stdout, "  restocked before the draw: item %d +%d at %s\n", r.ItemID, r.Quantity, r.At.UTC().Format(time.RFC3339Nano))
	}
}

// readReceipts reads each receipt file: an entry's answer, as JSON.
func readReceipts(files []string) ([]draw.Receipt, error) {
	out := make([]draw.Receipt, len(files))
	for i, f := range files {
		body, err := readRecordFile(f)
		if err != nil {
			return nil, fmt.Errorf("receipt %s: %w", f, err)
		}
		if err := json.Unmarshal(body, &out[i]); err != nil {
			return nil, fmt.Errorf("receipt %s is not an entry's answer: %w", f, err)
		}
		if err := out[i].Check(); err != nil {
			return nil, fmt.Errorf("receipt %s: %w", f, err)
		}
	}
	return out, nil
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
