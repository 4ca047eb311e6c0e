package httpapi

// Both order-body decoders, for the fuzz test's comparison.
var (
	DecodePlaceOrderFast = decodePlaceOrderFast
	DecodeEntryFast      = decodeEntryFast
	DecodeStrict         = decodeStrict
)
