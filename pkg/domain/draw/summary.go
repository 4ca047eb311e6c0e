package draw

// Summary is where a sale's draw stands: StateOpen or
// StateDrawn (the api shows CLOSED for an OPEN draw past its close),
// and its entries so far.
type Summary struct {
	State   string
	Entries int64
}
