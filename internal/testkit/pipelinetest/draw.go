package pipelinetest

import "fmt"

// Entry is an answer of POST /api/v1/activities/{id}/entries or GET
// .../entries/me.
type Entry struct {
	// Code is the answer's status (0: no answer).
	Code          int    `json:"-"`
	EntryID       string `json:"entry_id"`
	ItemID        int64  `json:"item_id"`
	Quantity      int    `json:"quantity"`
	State         string `json:"state"`
	OrderNo       string `json:"order_no"`
	AlternateRank int64  `json:"alternate_rank"`
	Commitment    string `json:"commitment"`
	Error         struct {
		Code string `json:"code"`
	} `json:"error"`
}

// Enter sends the entry of buyer sub for one unit of item in the draw sale
// activity, once, and returns the status (0 with an error: no answer).
func (a *API) Enter(sub string, activity, item int64) (int, Entry, error) {
	var e Entry
	code, err := a.DoAs("POST", fmt.Sprintf("/api/v1/activities/%d/entries", activity), sub, "", nil,
		map[string]any{"item_id": item, "quantity": 1}, &e)
	e.Code = code
	return code, e, err
}

// MyEntry reads the entry of buyer sub in the draw sale activity.
func (a *API) MyEntry(sub string, activity int64) (int, Entry, error) {
	var e Entry
	code, err := a.DoAs("GET", fmt.Sprintf("/api/v1/activities/%d/entries/me", activity), sub, "", nil, nil, &e)
	e.Code = code
	return code, e, err
}

// Pick is one row of a draw's ranking as MySQL holds it, with the status of
// the order its number names ("" when MySQL has no such order).
type Pick struct {
	Rank     int
	EntryID  string
	ItemID   int64
	Quantity int
	UserID   string
	Outcome  string
	OrderNo  string
	Issued   bool
	Status   string
}

// Picks reads the draw sale's ranking, in rank order, with each pick's
// order.
func (p *Pipeline) Picks(activity int64) ([]Pick, error) {
	var rows []Pick
	err := p.DB.Gorm().Raw(`SELECT r.draw_rank AS `+"`rank`"+`, r.entry_id, r.item_id, r.quantity, r.user_id, r.outcome,
		COALESCE(r.order_no, '') AS order_no, r.issued, COALESCE(o.status, '') AS status
		FROM draw_results r LEFT JOIN orders o ON o.order_no = r.order_no
		WHERE r.activity_id = ? ORDER BY r.draw_rank`, activity).Scan(&rows).Error
	return rows, err
}
