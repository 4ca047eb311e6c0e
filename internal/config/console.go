package config

import "net/url"

// ConsoleClientID reads SECKILL_CONSOLE_CLIENT_ID, the operator console's
// public client at the identity provider (empty: the console offers no
// sign-in there, only a development token in its address). The console
// finds the provider from its issuer's discovery document, so the client
// needs SECKILL_JWT_ISSUER, an http(s) URL.
func ConsoleClientID(e *Env, issuer string) string {
	id := e.String("SECKILL_CONSOLE_CLIENT_ID", "")
	if id == "" {
		return ""
	}
	if u, err := url.Parse(issuer); err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
		e.fail("SECKILL_CONSOLE_CLIENT_ID", id, "needs SECKILL_JWT_ISSUER, the http(s) URL of the provider the console signs in at")
	}
	return id
}
