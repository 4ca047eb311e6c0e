// The operator's sign-in. Tokens live in this module's memory only: no
// cookie, no localStorage, gone with the tab. Two ways in:
//   - the shop's identity provider, OpenID Connect's authorization code
//     flow with PKCE (RFC 7636) as the public client config.client_id;
//     only the PKCE verifier and state cross the redirect, in
//     sessionStorage, and are removed on return;
//   - in development, a token in the address's fragment (#token=...),
//     which `make run` prints; no server ever sees a fragment.

let session = null; // {token, refresh, tokenEndpoint, timer}
let config = null;
const pkceKey = 'seckill.console.pkce';

const b64url = (bytes) => btoa(String.fromCharCode(...bytes)).replace(/\+/g, '-').replace(/\//g, '_').replace(/=+$/, '');

function random(n) {
  const b = new Uint8Array(n);
  crypto.getRandomValues(b);
  return b64url(b);
}

// claims reads a JWT's payload (unverified: the api verifies every call;
// this only decides what the console offers).
export function claims(token) {
  try {
    const part = token.split('.')[1].replace(/-/g, '+').replace(/_/g, '/');
    return JSON.parse(decodeURIComponent(escape(atob(part))));
  } catch {
    return {};
  }
}

// claimValue reads name from the claims as the api does: the claim itself,
// or a dotted path through objects when no claim has the dotted name.
function claimValue(c, name) {
  if (name in c) return c[name];
  return name.split('.').reduce((v, k) => (v && typeof v === 'object' ? v[k] : undefined), c);
}

// isOperator says whether the token holds the admin role in the role
// claim: equal to it, one of its space-separated values, or an element
// of an array (the api's own rule, pkg/adapter/auth).
export function isOperator(token) {
  const v = claimValue(claims(token), config.role_claim || 'role');
  const role = config.admin_role || 'admin';
  if (typeof v === 'string') return v === role || v.split(' ').includes(role);
  if (Array.isArray(v)) return v.includes(role);
  return false;
}

// token is the operator's current access token, or null.
export const token = () => (session ? session.token : null);

// who names the signed-in operator.
export function who() {
  const c = claims(token() || '');
  return c.preferred_username || c.email || c.sub || '';
}

async function discovery() {
  const r = await fetch(config.issuer.replace(/\/$/, '') + '/.well-known/openid-configuration');
  if (!r.ok) throw new Error(`the identity provider's discovery document answered ${r.status}`);
  return r.json();
}

const redirectURI = () => location.origin + '/console';

// signIn leaves for the provider's sign-in page; back is the view to
// return to.
export async function signIn(back) {
  const d = await discovery();
  const verifier = random(32);
  const digest = new Uint8Array(await crypto.subtle.digest('SHA-256', new TextEncoder().encode(verifier)));
  const state = random(16);
  sessionStorage.setItem(pkceKey, JSON.stringify({ state, verifier, tokenEndpoint: d.token_endpoint, back }));
  const q = new URLSearchParams({
    response_type: 'code', client_id: config.client_id, redirect_uri: redirectURI(), scope: 'openid',
    state, code_challenge: b64url(digest), code_challenge_method: 'S256',
  });
  location.assign(`${d.authorization_endpoint}?${q}`);
}

async function tokenRequest(endpoint, form) {
  const r = await fetch(endpoint, { method: 'POST', body: new URLSearchParams(form) });
  const body = await r.json().catch(() => ({}));
  if (!r.ok || !body.access_token) {
    throw new Error(`the identity provider refused the sign-in: ${body.error_description || body.error || r.status}`);
  }
  return body;
}

function keep(body, tokenEndpoint, onExpired) {
  clearTimeout(session && session.timer);
  session = { token: body.access_token, refresh: body.refresh_token, tokenEndpoint };
  if (body.refresh_token && body.expires_in) {
    // Refresh a little before the access token runs out.
    const ms = Math.max(5, body.expires_in - 30) * 1000;
    session.timer = setTimeout(() => refresh(onExpired), ms);
  }
}

async function refresh(onExpired) {
  const s = session;
  try {
    const body = await tokenRequest(s.tokenEndpoint, { grant_type: 'refresh_token', refresh_token: s.refresh, client_id: config.client_id });
    keep(body, s.tokenEndpoint, onExpired);
  } catch {
    session = null;
    onExpired();
  }
}

// start finishes whatever sign-in the address carries and returns the
// view to show (the fragment), or throws what went wrong.
export async function start(cfg, onExpired) {
  config = cfg;
  const frag = new URLSearchParams(location.hash.slice(1));
  if (frag.get('token')) {
    session = { token: frag.get('token') };
    history.replaceState(null, '', '/console#/');
    return '#/';
  }
  const q = new URLSearchParams(location.search);
  if (q.get('code') || q.get('error')) {
    const saved = JSON.parse(sessionStorage.getItem(pkceKey) || 'null');
    sessionStorage.removeItem(pkceKey);
    history.replaceState(null, '', '/console');
    if (q.get('error')) throw new Error(`the identity provider refused the sign-in: ${q.get('error_description') || q.get('error')}`);
    if (!saved || saved.state !== q.get('state')) throw new Error('this sign-in was not started here (its state does not match): sign in again');
    const body = await tokenRequest(saved.tokenEndpoint, {
      grant_type: 'authorization_code', code: q.get('code'), redirect_uri: redirectURI(),
      client_id: config.client_id, code_verifier: saved.verifier,
    });
    keep(body, saved.tokenEndpoint, onExpired);
    const back = saved.back || '#/';
    history.replaceState(null, '', '/console' + back);
    return back;
  }
  return location.hash || '#/';
}

// signOut forgets the tokens.
export function signOut() {
  clearTimeout(session && session.timer);
  session = null;
}
