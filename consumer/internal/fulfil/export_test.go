package fulfil

import (
	"github.com/seckill/seckill/pkg/foundation/consume"
)

// OutcomeOf is the Outcome a result of Handle stands for.
func OutcomeOf(r consume.Result) Outcome { return outcomeOf(r) }
