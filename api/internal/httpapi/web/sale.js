// The waiting page of one sale (/sale/{id}): joins the sale's waiting room,
// shows the buyer's place while it polls at the pace the server sets, and
// once admitted lets the buyer pick a size and buy, retrying with the same
// Idempotency-Key, until the order's final status. Plain JavaScript: the api
// serves it as it is, with no build step.
//
// The buyer's access token comes from the shop's sign-in, handed over in the
// address's fragment (/sale/42#token=...), which never reaches a server; the
// page keeps it for the tab in sessionStorage. A presale code the shop gave
// the buyer comes the same way (#token=...&code=...) and goes with the join.
"use strict";

const activity = Number(location.pathname.split("/").filter(Boolean).pop());
const $ = (id) => document.getElementById(id);
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

const fragment = new URLSearchParams(location.hash.slice(1));

function token() {
  const fromHash = fragment.get("token");
  if (fromHash) {
    sessionStorage.setItem("seckill.token", fromHash);
    if (fragment.get("code")) sessionStorage.setItem("seckill.code." + activity, fragment.get("code"));
    history.replaceState(null, "", location.pathname);
  }
  return sessionStorage.getItem("seckill.token") || "";
}

// The presale code the buyer joins with ("" for none).
function accessCode() {
  return fragment.get("code") || sessionStorage.getItem("seckill.code." + activity) || "";
}

// One Idempotency-Key per tab and sale: a retry after a lost answer or a 503
// is the same order.
function idempotencyKey() {
  const name = "seckill.key." + activity;
  let key = sessionStorage.getItem(name);
  if (!key) {
    key = "page-" + crypto.getRandomValues(new Uint32Array(2)).join("-");
    sessionStorage.setItem(name, key);
  }
  return key;
}

async function call(method, path, { body, headers = {}, auth = true } = {}) {
  const h = { ...headers };
  if (auth) h.Authorization = "Bearer " + token();
  if (body !== undefined) h["Content-Type"] = "application/json";
  try {
    const res = await fetch(path, { method, headers: h, body: body === undefined ? undefined : JSON.stringify(body) });
    const text = await res.text();
    return { status: res.status, body: text ? JSON.parse(text) : {} };
  } catch (e) {
    return { status: 0, body: { error: { code: "NETWORK", message: String(e) } } };
  }
}

function phase(p) {
  document.body.dataset.phase = p;
}

function say(text) {
  $("message").textContent = text || "";
}

function money(amount, currency) {
  if (amount === undefined || !currency) return "";
  return new Intl.NumberFormat(undefined, { style: "currency", currency }).format(amount / 100);
}

let sale = null;

async function loadSale() {
  const r = await call("GET", "/api/v1/activities/" + activity, { auth: false });
  if (r.status !== 200) {
    throw new Error(r.body.error ? r.body.error.message : "the sale cannot be read (" + r.status + ")");
  }
  sale = r.body;
  const name = sale.name || "Sale " + sale.activity_id;
  $("title").textContent = name;
  document.title = name;
  const price = money(sale.sale_price, sale.currency);
  $("sale-state").textContent = sale.state.replace("_", " ").toLowerCase() + (price ? " · " + price : "") +
    " · from " + new Date(sale.starts_at).toLocaleString();
  $("sale-state").dataset.state = sale.state;
  $("units-left").textContent = sale.units_left;
  $("fairness").textContent = sale.seed
    ? "the draw's seed: " + sale.seed
    : sale.seed_commitment ? "the draw is committed to: " + sale.seed_commitment.slice(0, 16) + "…" : "";
  return sale;
}

function renderSizes(admission) {
  const box = $("sizes");
  box.replaceChildren();
  for (const it of sale.items) {
    const b = document.createElement("button");
    b.type = "button";
    b.dataset.item = it.item_id;
    const price = money(it.sale_price, it.currency);
    b.textContent = (it.label || "Buy") + (price ? " · " + price : "") + " (" + it.units_left + " left)";
    b.disabled = it.units_left <= 0;
    b.addEventListener("click", () => buy(it.item_id, admission));
    box.append(b);
  }
}

// solve finds a solution of the room's proof of work: SHA-256 of
// challenge + "." + n with bits leading zero bits.
async function solve(challenge, bits) {
  const enc = new TextEncoder();
  for (let n = 0; ; n++) {
    const sum = new Uint8Array(await crypto.subtle.digest("SHA-256", enc.encode(challenge + "." + n)));
    let zeros = 0;
    for (const byte of sum) {
      if (byte === 0) { zeros += 8; continue; }
      zeros += Math.clz32(byte) - 24;
      break;
    }
    if (zeros >= bits) return String(n);
    if (n % 2000 === 0) await sleep(0);
  }
}

async function join() {
  $("work").hidden = false;
  const ch = await call("GET", "/api/v1/activities/" + activity + "/queue/challenge");
  let body;
  if (ch.status === 200 && ch.body.bits > 0) {
    body = { challenge: ch.body.challenge, solution: await solve(ch.body.challenge, ch.body.bits) };
  }
  if (accessCode()) body = Object.assign(body || {}, { access_code: accessCode() });
  $("work").hidden = true;
  return call("POST", "/api/v1/activities/" + activity + "/queue", { body });
}

const stateText = {
  WAITING: "Waiting for your turn. Keep this page open.",
  ADMITTED: "It is your turn.",
  SOLD_OUT: "Sold out for now. You keep your place: if units come back, the next in line get them.",
  ENDED: "The sale has ended.",
  EXPIRED: "Your turn expired before you bought.",
  ORDERED: "You bought in this sale: your order is below.",
};

// The operator paused admissions: the buyer keeps their place.
const pausedText = "The shop has paused admissions for a moment. You keep your place: keep this page open.";

let admissionExpiry = null;

function renderQueue(q) {
  admissionExpiry = q.admission_expires_at || admissionExpiry;
  $("queue").hidden = false;
  if (q.priority) $("queue-title").textContent = "You are in the priority lane";
  $("queue-state").textContent = q.paused ? pausedText : stateText[q.state] || q.state;
  $("queue-state").dataset.state = q.state;
  $("queue-state").dataset.paused = q.paused ? "true" : "false";
  $("position").textContent = q.position === null ? "drawn at the start" : "#" + q.position;
  $("ahead").textContent = q.position === null ? "–" : q.ahead;
  $("eta").textContent = q.paused ? "paused" : q.state === "WAITING" ? (q.eta_seconds > 0 ? "about " + q.eta_seconds + " s" : "any moment") : "–";
}

// waitInQueue polls the queue until the buyer's turn: it returns the
// queue's last answer (ADMITTED, ORDERED, ENDED or EXPIRED).
async function waitInQueue() {
  const path = "/api/v1/activities/" + activity + "/queue";
  let q = await call("GET", path);
  if (q.status === 404) q = await join();
  for (;;) {
    if (q.status === 200) {
      renderQueue(q.body);
      say("");
      const st = q.body.state;
      phase(st.toLowerCase());
      if (st === "ADMITTED" || st === "ORDERED" || st === "ENDED" || st === "EXPIRED") return q.body;
    } else {
      say(q.body.error ? q.body.error.message : "The queue cannot be reached; retrying.");
    }
    await sleep(q.status === 200 && q.body.poll_after_ms > 0 ? q.body.poll_after_ms : 2000);
    if (q.status === 200 && q.body.state === "SOLD_OUT") await loadSale().catch(() => {});
    q = await call("GET", path);
    // An instance that has not seen the join yet (it was made on another
    // within the last second or so) says to join: joining again answers
    // the same place.
    if (q.status === 404) q = await join();
  }
}

let buying = false;

async function buy(item, admission) {
  if (buying) return;
  buying = true;
  const headers = { "Idempotency-Key": idempotencyKey() };
  if (admission) headers["X-Admission"] = admission;
  for (let attempt = 0; ; attempt++) {
    say("Placing your order…");
    const r = await call("POST", "/api/v1/orders", { body: { activity_id: activity, item_id: item }, headers });
    if (r.status === 202) {
      say("");
      await follow(r.body.order_no);
      return;
    }
    const code = r.body.error ? r.body.error.code : "";
    // A lost answer, a 503, a busy api, the same key still being placed:
    // the same key again is the same order.
    if (r.status === 0 || r.status === 503 || r.status === 429 || code === "IN_PROGRESS") {
      await sleep(Math.min(250 * 2 ** attempt, 4000));
      continue;
    }
    buying = false;
    say(r.body.error ? r.body.error.message : "The order was refused (" + r.status + ").");
    if (code === "SOLD_OUT") {
      await loadSale().catch(() => {});
      renderSizes(admission);
    }
    if (code === "NOT_ADMITTED") main();
    return;
  }
}

async function follow(orderNo) {
  phase("ordered");
  $("buy").hidden = true;
  $("order").hidden = false;
  $("order-no").textContent = orderNo;
  for (;;) {
    const r = await call("GET", "/api/v1/orders/" + orderNo);
    if (r.status === 200) {
      $("order-status").textContent = r.body.status;
      $("order-status").dataset.status = r.body.status;
      $("order-reason").textContent = r.body.failure_reason || "";
      if (r.body.status !== "PENDING") return;
    }
    await sleep(500);
  }
}

async function main() {
  if (!token()) {
    say("Sign in first: this page needs your access token (…/sale/" + activity + "#token=…).");
    phase("signed-out");
    return;
  }
  try {
    await loadSale();
  } catch (e) {
    say(e.message);
    phase("error");
    return;
  }
  let admission = null;
  if (sale.waiting_room) {
    const q = await waitInQueue();
    if (q.state === "ORDERED") {
      // The buyer holds an order (bought in another tab, or before a lost
      // answer): show it, to be paid, not a turn that expired.
      await follow(q.order_no);
      return;
    }
    if (q.state !== "ADMITTED") return;
    admission = q.admission;
    await loadSale().catch(() => {});
    $("admission").textContent = "Your turn lasts until " + new Date(admissionExpiry).toLocaleTimeString() + ".";
  }
  phase("admitted");
  $("buy").hidden = false;
  renderSizes(admission);
}

main();
