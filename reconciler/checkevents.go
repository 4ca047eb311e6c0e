package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"

	"github.com/seckill/seckill/internal/config"
	"github.com/seckill/seckill/pkg/adapter/orderdb"
	"github.com/seckill/seckill/pkg/adapter/webhook"
	"github.com/seckill/seckill/pkg/domain/outbox"
	"github.com/seckill/seckill/pkg/service/eventcheck"
)

// checkEventsOptions are the flags of check-events.
type checkEventsOptions struct {
	activities idList
	file       string
	json       bool
}

// checkEvents is "reconciler check-events": it reads the events a receiver
// got (the JSON lines `api webhook-listen` prints, in the order they
// arrived) and holds them to MySQL for the sales named (eventcheck).
// Exit 0: every promise kept; 1: one broken (each is printed); 2: the
// events or MySQL could not be read.
func checkEvents(ctx context.Context, args []string, lookup func(string) (string, bool), stdout, stderr io.Writer) error {
	o, err := parseCheckEventsFlags(args, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return nil
	}
	if err != nil {
		return fail(exitFailed, err)
	}
	env := config.New(lookup)
	mcfg := config.MySQL(env)
	if err := env.Err(); err != nil {
		return fail(exitFailed, err)
	}
	delivered, err := readDelivered(o.file)
	if err != nil {
		return fail(exitFailed, err)
	}
	db, err := orderdb.Open(mcfg)
	if err != nil {
		return fail(exitFailed, err)
	}
	defer db.Close()
	ck := &eventcheck.Checker{Tx: db, Store: db.Streams}
	rep, err := ck.Check(ctx, o.activities, delivered)
	if err != nil {
		return fail(exitFailed, err)
	}
	if o.json {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		err = enc.Encode(rep)
	} else {
		_, err = fmt.Fprintln(stdout, rep)
	}
	if err != nil {
		return fail(exitFailed, fmt.Errorf("write report: %w", err))
	}
	if !rep.OK() {
		return fail(exitDrift, errors.New(rep.Summary()))
	}
	return nil
}

// parseCheckEventsFlags reads the flags of check-events; flag.ErrHelp when
// help was asked for (and printed).
func parseCheckEventsFlags(args []string, stderr io.Writer) (checkEventsOptions, error) {
	var o checkEventsOptions
	fs := flag.NewFlagSet("reconciler check-events", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Var(&o.activities, "activity", "a sale whose events to check, by `id` (repeat, or comma-separate)")
	fs.StringVar(&o.file, "file", "", "the events received: `path` of the JSON lines `api webhook-listen` printed (- for standard input)")
	fs.BoolVar(&o.json, "json", false, "print the report as JSON")
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), `usage: reconciler check-events --activity ID[,ID...] --file PATH [--json]

Holds the events a receiver got, in the order they arrived, to MySQL
(SECKILL_MYSQL_DSN): every event MySQL committed for the sales' orders and
draw entries arrived; each order's events first arrived in seq order; an
order's last event states its status in MySQL; each stream opens with its
creation; no event names an order MySQL does not have; and each event is
the outbox's of its id. Run it once the outbox has drained: an event still
on its way counts as missing.

Exit codes: 0 every promise kept, 1 one broken (each is printed), 2 the
events or MySQL could not be read.

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
	case len(o.activities) == 0:
		return o, errors.New("give the sales to check with --activity")
	case o.file == "":
		return o, errors.New("give the events received with --file")
	}
	return o, nil
}

// readDelivered reads the events of path (- for standard input).
func readDelivered(path string) ([]outbox.Event, error) {
	if path == "-" {
		return webhook.ReadEvents(os.Stdin)
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	evs, err := webhook.ReadEvents(f)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return evs, nil
}
