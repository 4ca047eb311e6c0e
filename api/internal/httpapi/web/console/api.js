// Calls of the admin API with the operator's token: every action the
// console takes goes through here, so the API's checks and its audit
// record apply to it.
import { token } from './auth.js';

// ApiError is the API's refusal: its HTTP status, code and message.
export class ApiError extends Error {
  constructor(status, code, message) {
    super(message);
    this.status = status;
    this.code = code;
  }
}

// call sends method to path with body as JSON and returns the parsed
// answer; key is the Idempotency-Key of a route that takes one.
export async function call(method, path, { body, key } = {}) {
  const headers = { Accept: 'application/json' };
  const t = token();
  if (t) headers.Authorization = `Bearer ${t}`;
  if (body !== undefined) headers['Content-Type'] = 'application/json';
  if (key) headers['Idempotency-Key'] = key;
  let r;
  try {
    r = await fetch(path, { method, headers, body: body === undefined ? undefined : JSON.stringify(body), cache: 'no-store' });
  } catch (e) {
    throw new ApiError(0, 'NETWORK', `the api did not answer (${e.message}); the change may or may not have happened: look before trying again`);
  }
  const text = await r.text();
  let data = null;
  try { data = text ? JSON.parse(text) : null; } catch { data = null; }
  if (!r.ok) {
    const e = (data && data.error) || {};
    throw new ApiError(r.status, e.code || `HTTP_${r.status}`, e.message || `the api answered ${r.status}`);
  }
  return data;
}

// explain is an error as the operator reads it.
export function explain(e) {
  return e instanceof ApiError ? `${e.code}: ${e.message}` : e.message;
}
