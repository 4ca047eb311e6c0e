package fulfil

import "github.com/seckill/seckill/pkg/adapter/orderevents"

// OutcomeOf is the Outcome a result of Handle stands for.
func OutcomeOf(r orderevents.Result) Outcome { return outcomeOf(r) }
