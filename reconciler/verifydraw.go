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

// maxRecord bounds a draw record read (a million entries is about 100 MB
// of JSON): the verifier holds 32 bytes of each entry it reads, so the
// bound keeps a broken or hostile source from making it hold more than
// about 10 million entries' worth.
const maxRecord = 1 << 30

// receiptFiles is --receipt, given once a receipt.
type receiptFiles []string

func (f *receiptFiles) String() string     { return strings.Join(*f, ",") }
func (f *receiptFiles) Set(v string) error { *f = append(*f, v); return nil }

// verifyDraw is "reconciler verify-draw": it reads a draw's published
// record from the api (--url, --activity) or a saved copy (--file) and
// recomputes it (draw.Verify) from the record alone, needing no store,
// then holds it to each buyer's receipt given (--receipt: an entry's
// answer as the buyer received it; draw.Record.CheckReceipt). The record
// is decoded and checked as it is read (draw.Verifier), so a record of a
// million entries is checked in tens of MB, not held whole.
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
	held, err := readReceipts(o.receipts)
	if err != nil {
		return fail(exitFailed, err)
	}
	v := draw.NewVerifier(held...)
	rec, err := o.read(ctx, v)
	if err != nil {
		return fail(exitFailed, err)
	}
	breaches := v.Err()
	for i := range held {
		if err := v.ReceiptErr(i); err != nil {
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
	entries, won := v.Entries()
	writeDrawHolds(stdout, rec, entries, won, len(held))
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

// read streams the draw record the options name, the saved copy or the
// api's, into v, and returns its head (the record but its entries).
func (o verifyOptions) read(ctx context.Context, v *draw.Verifier) (draw.Record, error) {
	var (
		body io.ReadCloser
		err  error
		from string
	)
	if o.file != "" {
		from = o.file
		body, err = openRecordFile(o.file)
	} else {
		from = strings.TrimRight(o.url, "/") + fmt.Sprintf("/api/v1/activities/%d/draw", o.activity)
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, fetchTimeout)
		defer cancel()
		body, err = fetchRecord(ctx, from)
	}
	if err != nil {
		return draw.Record{}, err
	}
	defer body.Close()
	rec, err := v.Read(&capped{r: body})
	if err != nil {
		return draw.Record{}, fmt.Errorf("%s is not a draw record: %w", from, err)
	}
	return rec, nil
}

// capped fails a read past maxRecord bytes.
type capped struct {
	r    io.Reader
	read int64
}

func (c *capped) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	if c.read += int64(n); c.read > maxRecord {
		return n, fmt.Errorf("it is over %d bytes", int64(maxRecord))
	}
	return n, err
}

// writeDrawHolds prints that the draw rec holds, with its count of entries
// and winners, held receipts kept, and the restocks it was drawn after.
func writeDrawHolds(stdout io.Writer, rec draw.Record, entries, won, held int) {
	fmt.Fprintf(stdout, "draw of activity %d holds: %d entries, %d won, %d alternates; the seed matches commitment %s, the entries digest %s, and the ranking and every outcome recompute",
		rec.ActivityID, entries, won, entries-won, rec.Commitment, rec.Digest)
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

// readRecordFile reads a small file whole (a receipt).
func readRecordFile(path string) ([]byte, error) {
	f, err := openRecordFile(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return io.ReadAll(&capped{r: f})
}

// openRecordFile opens path, or standard input for -.
func openRecordFile(path string) (io.ReadCloser, error) {
	if path == "-" {
		return io.NopCloser(os.Stdin), nil
	}
	return os.Open(path)
}

// fetchTimeout bounds the read and check of a record from the api: a
// million entries take seconds.
const fetchTimeout = 10 * time.Minute

// fetchRecord GETs the record at url and returns its body, to be read as
// it comes (the client asks for gzip and inflates it on its own).
func fetchRecord(ctx context.Context, url string) (io.ReadCloser, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		defer resp.Body.Close()
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 4<<10))
		return nil, fmt.Errorf("GET %s: %s: %s", url, resp.Status, strings.TrimSpace(string(body)))
	}
	return resp.Body, nil
}
