package httpapi

// decodePlaceOrderFast reads the order body every client sends,
// {"activity_id":N}, with "item_id", "quantity" and "access_code" (a
// string of printable ASCII without escapes) or not (any order, JSON
// whitespace anywhere between tokens), without encoding/json: on the order
// path the strict decoder and its second pass for names (exactKeys) cost
// about a tenth of the api's CPU per request. It reports false for anything
// else (other fields, null, decimals, exponents, escapes, numbers of more
// than 18 digits, a field twice), and the strict decoder then gives the
// answer; what it accepts, the strict decoder accepts with the same values
// (FuzzDecodePlaceOrder checks both).
func decodePlaceOrderFast(body []byte, out *PlaceOrderBody) bool {
	b, ok := decodeBodyFast(body, true)
	if ok {
		*out = b
	}
	return ok
}

// decodeEntryFast is decodePlaceOrderFast for a draw's entry body, the
// same fields without "activity_id" (the path names the sale), an empty
// object included: the entries of a draw come at the orders' rate, and the
// strict decoder was a tenth of the api's CPU per entry (FuzzDecodeEntry
// checks it against the strict decoder).
func decodeEntryFast(body []byte, out *EntryBody) bool {
	b, ok := decodeBodyFast(body, false)
	if ok {
		*out = EntryBody{ItemID: b.ItemID, Quantity: b.Quantity, AccessCode: b.AccessCode}
	}
	return ok
}

// decodeBodyFast reads an order's fields; "activity_id" is required with
// withActivity and refused without.
func decodeBodyFast(body []byte, withActivity bool) (PlaceOrderBody, bool) {
	p := scanner{b: body}
	p.space()
	var b PlaceOrderBody
	if !p.byte('{') {
		return b, false
	}
	// "Seen" from the start: a field it must not have.
	seenActivity := !withActivity
	var seenItem, seenQuantity, seenCode bool
	p.space()
	if !withActivity && p.byte('}') {
		p.space()
		return b, p.i == len(p.b)
	}
	for {
		p.space()
		name, ok := p.name()
		if !ok {
			return b, false
		}
		p.space()
		if !p.byte(':') {
			return b, false
		}
		p.space()
		if string(name) == "access_code" {
			if seenCode {
				return b, false
			}
			code, ok := p.plainString()
			if !ok {
				return b, false
			}
			seenCode, b.AccessCode = true, string(code)
		} else {
			n, ok := p.int()
			if !ok || !b.setInt(string(name), n, &seenActivity, &seenItem, &seenQuantity) {
				return b, false
			}
		}
		p.space()
		if p.byte('}') {
			break
		}
		if !p.byte(',') {
			return b, false
		}
	}
	p.space()
	if p.i != len(p.b) || !seenActivity {
		return b, false
	}
	return b, true
}

// setInt sets the integer field name of b to n, once each; false for any
// other name, a field seen before or a quantity out of int's range.
func (b *PlaceOrderBody) setInt(name string, n int64, seenActivity, seenItem, seenQuantity *bool) bool {
	switch {
	case name == "activity_id" && !*seenActivity:
		*seenActivity, b.ActivityID = true, n
	case name == "item_id" && !*seenItem:
		*seenItem, b.ItemID = true, optional[int64]{Set: true, Value: n}
	case name == "quantity" && !*seenQuantity:
		if n != int64(int(n)) {
			return false
		}
		*seenQuantity, b.Quantity = true, optional[int]{Set: true, Value: int(n)}
	default:
		return false
	}
	return true
}

// scanner walks a byte slice for decodePlaceOrderFast.
type scanner struct {
	b []byte
	i int
}

func (p *scanner) space() {
	for p.i < len(p.b) {
		switch p.b[p.i] {
		case ' ', '\t', '\n', '\r':
			p.i++
		default:
			return
		}
	}
}

func (p *scanner) byte(c byte) bool {
	if p.i < len(p.b) && p.b[p.i] == c {
		p.i++
		return true
	}
	return false
}

// name reads a string of lower-case letters and underscores (no escapes).
func (p *scanner) name() ([]byte, bool) {
	if !p.byte('"') {
		return nil, false
	}
	start := p.i
	for p.i < len(p.b) && (p.b[p.i] >= 'a' && p.b[p.i] <= 'z' || p.b[p.i] == '_') {
		p.i++
	}
	end := p.i
	if !p.byte('"') {
		return nil, false
	}
	return p.b[start:end], true
}

// int reads a JSON integer of at most 18 digits (no fraction, no exponent,
// no leading zero), so it cannot overflow int64.
func (p *scanner) int() (int64, bool) {
	neg := p.byte('-')
	start := p.i
	var n int64
	for p.i < len(p.b) && p.b[p.i] >= '0' && p.b[p.i] <= '9' {
		n = n*10 + int64(p.b[p.i]-'0')
		p.i++
	}
	digits := p.i - start
	if digits == 0 || digits > 18 || (digits > 1 && p.b[start] == '0') {
		return 0, false
	}
	if p.i < len(p.b) && (p.b[p.i] == '.' || p.b[p.i] == 'e' || p.b[p.i] == 'E') {
		return 0, false
	}
	if neg {
		n = -n
	}
	return n, true
}

// maxPlainString bounds plainString: a presale code is at most 64
// letters and digits before its hyphens and spaces are dropped.
const maxPlainString = 256

// plainString reads a JSON string of printable ASCII with no escape (no
// '\\'), at most maxPlainString bytes between its quotes.
func (p *scanner) plainString() ([]byte, bool) {
	if !p.byte('"') {
		return nil, false
	}
	start := p.i
	for p.i < len(p.b) && p.b[p.i] >= 0x20 && p.b[p.i] < 0x7f && p.b[p.i] != '"' && p.b[p.i] != '\\' {
		p.i++
	}
	end := p.i
	if end-start > maxPlainString || !p.byte('"') {
		return nil, false
	}
	return p.b[start:end], true
}
