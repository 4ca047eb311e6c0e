package webhook

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"time"
)

// answerBytes is how much of an endpoint's answer Send reads: enough for
// the start of an error page in the delivery's failure, never a large body.
const answerBytes = 4 << 10

// quotedBytes is how much of a failed delivery's answer its error quotes.
const quotedBytes = 200

// Send delivers body, the event with message id sent at time at, to the
// endpoint: a POST signed with the secrets (Sign), with Headers. It returns
// the endpoint's status, and an error unless that is a 2xx (a redirect
// is not followed: the client NewClient makes returns it, and it is a
// failed delivery). It reads at most a few KB of the answer and closes
// it. ctx and the client's timeout bound it.
//
// Its errors name the endpoint without its query, which may carry a
// token of the shop's.
func Send(ctx context.Context, client *http.Client, endpoint, id string, at time.Time, body []byte, secrets []string) (int, error) {
	sig, err := Sign(secrets, id, at, body)
	if err != nil {
		return 0, err
	}
	u, err := url.Parse(endpoint)
	if err != nil {
		return 0, fmt.Errorf("deliver webhook %s: %w: %v", id, ErrURL, err)
	}
	where := (&url.URL{Scheme: u.Scheme, Host: u.Host, Path: u.Path}).String()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, endpoint, bytes.NewReader(body))
	if err != nil {
		return 0, fmt.Errorf("deliver webhook %s to %s: %w", id, where, err)
	}
	req.Header = Headers(id, at, sig)
	req.Header.Set("User-Agent", "seckill-webhooks")
	resp, err := client.Do(req)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err // its message repeats the whole URL
		}
		return 0, fmt.Errorf("deliver webhook %s to %s: %w", id, where, err)
	}
	// The status decides; an answer cut short only shortens the quote of
	// a failure's.
	answer, _ := io.ReadAll(io.LimitReader(resp.Body, answerBytes))
	resp.Body.Close()
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return resp.StatusCode, fmt.Errorf("deliver webhook %s to %s: answered %s%s", id, where, resp.Status, said(resp, answer))
	}
	return resp.StatusCode, nil
}

// said is what a failed delivery's error adds about the answer: where a
// redirect pointed, or the start of its body.
func said(resp *http.Response, answer []byte) string {
	if resp.StatusCode >= 300 && resp.StatusCode <= 399 {
		return fmt.Sprintf(" (a redirect to %q, not followed)", resp.Header.Get("Location"))
	}
	if len(answer) == 0 {
		return ""
	}
	if len(answer) > quotedBytes {
		answer = answer[:quotedBytes]
	}
	return ": " + strconv.Quote(string(answer))
}

// Sender sends deliveries with its client (NewClient), as the dispatcher
// takes it.
type Sender struct{ Client *http.Client }

// Send is Send with s's client.
func (s Sender) Send(ctx context.Context, endpoint, id string, at time.Time, body []byte, secrets []string) (int, error) {
	return Send(ctx, s.Client, endpoint, id, at, body, secrets)
}
