"""Schemathesis hooks of scripts/api-fuzz.

docs/openapi.yaml states a few rules in words because a JSON Schema cannot say them: one field
against another (a sale's ends_at after its starts_at, and within the range a sale's times may
have), or against what the server holds (an
order's quantity at most the sale's per_user_limit, its item_id one of the sale's items, a list
cursor is one the api gave, a restock's Idempotency-Key names one quantity, the items of a sale
distinct and priced in one currency, a webhook's URL one deliveries may reach and its patterns
naming events the outbox writes, a replay's start not in the future). A request the fuzzer generates as valid (positive mode) that
breaks one of them is made to keep it here, just before it is sent, so the check
positive_data_acceptance stays as strict as it is: any other valid request refused with a 4xx it
does not allow is a failure. Negative requests are sent as generated.
"""

import base64
import datetime
import hashlib
import hmac
import json
import os
import time
import urllib.request

import schemathesis

API = os.environ["API_FUZZ_URL"]
# The order scripts/api-fuzz placed, its amount and currency, and the secret the payment
# provider shares with the api.
ORDER_NO = os.environ["API_FUZZ_ORDER_NO"]
ORDER_AMOUNT = int(os.environ["API_FUZZ_ORDER_AMOUNT"])
ORDER_CURRENCY = os.environ["API_FUZZ_ORDER_CURRENCY"]
PAYMENT_SECRET = os.environ["SECKILL_PAYMENT_SECRET"].encode()
# (item id, Idempotency-Key) -> the quantity the api restocked under it.
restocked = {}
# item id -> its price's currency ("" for none), for the items the api created: scripts/api-fuzz
# makes item 1 priced in EUR, the fuzzer the others.
currencies = {"1": "EUR"}


def positive(case):
    return case.meta is not None and case.meta.generation.mode.is_positive


def when(value):
    """A date-time as the api keeps it: to the millisecond."""
    try:
        t = datetime.datetime.fromisoformat(value.replace("z", "Z"))
    except (AttributeError, TypeError, ValueError):
        return None
    return t.replace(microsecond=t.microsecond // 1000 * 1000)


def rfc3339(t):
    return t.astimezone(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


# activity id -> the sale as the api last answered it to a create, PATCH, end or cancel: fresher
# than the sale page, which may be a second old.
activities = {}


def sale_page(activity_id):
    """The sale (starts_at, ends_at, per_user_limit) as the api last told it, or None."""
    try:
        activity_id = int(activity_id)
    except (TypeError, ValueError):
        return None
    if activity_id in activities:
        return activities[activity_id]
    try:
        with urllib.request.urlopen(f"{API}/api/v1/activities/{activity_id}", timeout=5) as r:
            return json.load(r)
    except Exception:
        return None


# The range a sale's times must be within (pkg/order MaxSaleLead, MaxSaleLength).
MAX_LEAD = datetime.timedelta(days=1825)
MAX_LENGTH = datetime.timedelta(days=90)


def keep_sale_times(body, starts, ends):
    """Keeps a sale's times as the api takes them (pkg/order CheckSaleTimes): a starts_at in the
    body at most MAX_LEAD from now (else a day from now), and ends_at after starts_at by at most
    MAX_LENGTH (else ends_at a day after starts_at, or, when the body has no ends_at, starts_at
    an hour before it)."""
    s, e = when(starts), when(ends)
    if s is None or e is None:
        return
    if "starts_at" in body and s > datetime.datetime.now(datetime.timezone.utc) + MAX_LEAD - datetime.timedelta(days=1):
        s = when(rfc3339(datetime.datetime.now(datetime.timezone.utc) + datetime.timedelta(days=1)))
        body["starts_at"] = rfc3339(s)
    if s < e <= s + MAX_LENGTH:
        return
    try:
        if "ends_at" in body:
            body["ends_at"] = rfc3339(s + datetime.timedelta(days=1))
        else:
            body["starts_at"] = rfc3339(e - datetime.timedelta(hours=1))
    except OverflowError:
        body["starts_at"] = rfc3339(e - datetime.timedelta(days=1))


def keep_sale_items(body):
    """Makes a sale's items ones a sale can list: each item once, and either all priced in one
    currency or none priced (an item's sale_price in its own currency, EUR for one without)."""
    seen, items = set(), []
    for it in body["items"]:
        known = currencies.get(str(it.get("item_id")))
        # Items in another currency than EUR cannot join a sale in EUR.
        if it.get("item_id") in seen or known not in (None, "", "EUR"):
            continue
        seen.add(it.get("item_id"))
        items.append(it)
    if not items:
        items = [{"item_id": 1, "label": "EU 42"}]
    if "currency" in body or any(currencies.get(str(it.get("item_id"))) == "" for it in items):
        # A currency goes with every item's sale_price, and an item without a price needs both.
        body["currency"] = "EUR"
        for it in items:
            it.setdefault("sale_price", 100)
    body["items"] = items


def keep_waiting_room(body):
    """Makes a sale's waiting room one the api takes (pkg/domain/order CheckRoom): its opens_at
    before the sale's starts_at, and one stock key per item (no stock_buckets above 1)."""
    room, starts = body["waiting_room"], when(body.get("starts_at"))
    opens = when(room.get("opens_at"))
    if opens is not None and starts is not None and opens >= starts:
        room["opens_at"] = rfc3339(starts - datetime.timedelta(hours=1))
    body.pop("stock_buckets", None)


def keep_draw(body):
    """Makes a new sale's draw one the api takes (pkg/domain/order CheckDraw): entries_close_at
    only with mode draw, and then in the future, after starts_at and before ends_at, with no
    waiting room and one stock key per item. A sale that ends too soon for that is made first
    come."""
    if body.get("mode") != "draw":
        body.pop("entries_close_at", None)
        return
    body.pop("waiting_room", None)
    body.pop("stock_buckets", None)
    starts, ends = when(body.get("starts_at")), when(body.get("ends_at"))
    now = datetime.datetime.now(datetime.timezone.utc)
    if starts is None or ends is None or ends <= now + datetime.timedelta(seconds=30):
        body["mode"] = "first_come"
        body.pop("entries_close_at", None)
        return
    lo = max(starts, now + datetime.timedelta(seconds=10))
    body["entries_close_at"] = rfc3339(lo + (ends - lo) / 2)


def keep_draw_change(body, page):
    """Keeps a change of a draw sale within its draw: starts_at before entries_close_at, ends_at
    after it, no waiting room, no stock buckets (what cannot be kept is left out)."""
    closes = when(((page or {}).get("draw") or {}).get("entries_close_at"))
    if closes is None:
        return
    body.pop("waiting_room", None)
    body.pop("stock_buckets", None)
    if "starts_at" in body and (when(body["starts_at"]) is None or when(body["starts_at"]) >= closes):
        del body["starts_at"]
    if "ends_at" in body and (when(body["ends_at"]) is None or when(body["ends_at"]) <= closes):
        del body["ends_at"]
    if not body:
        body["per_user_limit"] = 1


# The event types the outbox writes (docs/events.md); a pattern naming another is refused.
EVENT_TYPES = {"order.created", "order.failed", "order.paid", "order.closed", "refund.owed",
               "entry.won", "entry.alternate"}


def keep_webhook(body):
    """A webhook the api takes: a URL it may reach (scripts/api-fuzz allows loopback; port 9
    refuses connections, so the consumer's deliveries fail at once and go nowhere else), patterns
    naming events it writes, a description of 255 bytes at most."""
    if "url" in body:
        body["url"] = "http://127.0.0.1:9/hook"
    if isinstance(body.get("events"), list):
        body["events"] = [p if p == "*" or p.endswith(".*") or p in EVENT_TYPES else "*" for p in body["events"]]
    if isinstance(body.get("description"), str):
        body["description"] = body["description"].encode()[:255].decode(errors="ignore")


@schemathesis.hook
def before_call(context, case, kwargs):
    if not positive(case):
        return
    op = case.operation.definition.raw.get("operationId")
    body = case.body if isinstance(case.body, dict) else None
    if op == "createActivity" and body is not None:
        if "starts_at" in body and "ends_at" in body:
            keep_sale_times(body, body["starts_at"], body["ends_at"])
        # A sale price is in the item's currency, and needs one when the item has no price.
        item = currencies.get(str(body.get("item_id")))
        if item and "currency" in body:
            body["currency"] = item
        elif item == "" and "sale_price" in body and "currency" not in body:
            body["currency"] = "EUR"
        if isinstance(body.get("items"), list):
            keep_sale_items(body)
        if isinstance(body.get("waiting_room"), dict):
            keep_waiting_room(body)
        keep_draw(body)
    elif op == "patchActivity" and body is not None:
        page = sale_page(case.path_parameters.get("id"))
        if "starts_at" in body or "ends_at" in body:
            starts = body.get("starts_at", page and page["starts_at"])
            ends = body.get("ends_at", page and page["ends_at"])
            keep_sale_times(body, starts, ends)
        if isinstance(body.get("waiting_room"), dict) or (page and page.get("waiting_room")):
            room = body.get("waiting_room")
            if isinstance(room, dict) and "starts_at" not in body and page:
                body["starts_at"] = page["starts_at"]
                keep_waiting_room(body)
                if body["starts_at"] == page["starts_at"]:
                    del body["starts_at"]
            else:
                keep_waiting_room(body)
        if page and page.get("mode") == "draw":
            keep_draw_change(body, page)
    elif op in ("registerWebhook", "patchWebhook") and body is not None:
        keep_webhook(body)
    elif op == "replayWebhook" and body is not None:
        since = when(body.get("since"))
        if since is None or since > datetime.datetime.now(datetime.timezone.utc):
            body["since"] = rfc3339(datetime.datetime.now(datetime.timezone.utc) - datetime.timedelta(hours=1))
    elif op == "enterDraw" and isinstance(case.body, dict):
        page = sale_page(case.path_parameters.get("id"))
        if page and isinstance(body.get("quantity"), int) and body["quantity"] > page["per_user_limit"]:
            body["quantity"] = page["per_user_limit"]
        items = [it["item_id"] for it in (page or {}).get("items") or []]
        if items and (body.get("item_id") not in items if "item_id" in body else len(items) > 1):
            body["item_id"] = items[0]
    elif op == "placeOrder" and body is not None:
        page = sale_page(body.get("activity_id", 0))
        if page and isinstance(body.get("quantity"), int) and body["quantity"] > page["per_user_limit"]:
            body["quantity"] = page["per_user_limit"]
        # The item ordered is one of the sale's, and named when the sale has several.
        items = [it["item_id"] for it in (page or {}).get("items") or []]
        if items and (body.get("item_id") not in items if "item_id" in body else len(items) > 1):
            body["item_id"] = items[0]
    elif op == "listOrders" and case.query and "cursor" in case.query:
        # The api's cursors: base64url of "o1:<row id>".
        row = abs(hash(str(case.query["cursor"]))) % 1_000_000 + 1
        case.query["cursor"] = base64.urlsafe_b64encode(f"o1:{row}".encode()).decode().rstrip("=")
    elif op == "paymentNotification" and body is not None:
        # A valid notification is the provider's: for an order the api issued, of its amount,
        # signed (pkg/payment.Sign) over the bytes sent. The transaction id stays as generated.
        body.update(order_no=ORDER_NO, amount=ORDER_AMOUNT, currency=ORDER_CURRENCY)
        raw = json.dumps(body).encode()
        ts = str(int(time.time()))
        sig = hmac.new(PAYMENT_SECRET, ts.encode() + b"." + raw, hashlib.sha256).hexdigest()
        case.headers = {**(case.headers or {}), "Seckill-Signature": f"t={ts},v1={sig}"}
        kwargs["data"] = raw
    elif op == "restockItem" and body is not None and case.headers:
        key = (str(case.path_parameters.get("id")), case.headers.get("Idempotency-Key"))
        if key in restocked:
            body["quantity"] = restocked[key]


@schemathesis.hook
def after_call(context, case, response):
    op = case.operation.definition.raw.get("operationId")
    if op == "restockItem" and response.status_code == 200:
        v = response.json()
        restocked[(str(case.path_parameters.get("id")), case.headers.get("Idempotency-Key"))] = v["quantity"]
    elif op in ("createActivity", "patchActivity", "endActivity", "cancelActivity") and response.status_code in (200, 201):
        v = response.json()
        activities[v["activity_id"]] = v
    elif op == "createItem" and response.status_code == 201:
        v = response.json()
        currencies[str(v["item_id"])] = v.get("currency", "")
