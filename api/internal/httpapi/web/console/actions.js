// The actions on one sale. Each confirms what it will do before it is
// sent, is sent once however often its button is clicked (the button is
// off while the call is in flight; a restock carries an Idempotency-Key,
// kept for a retry of the same restock after a lost answer), and shows
// the API's refusal as it came.
import { call, explain, ApiError } from './api.js';
import { h, say, confirmAction, once, newKey } from './dom.js';

// act confirms, calls and reports; it returns the answer or null.
async function act(ctx, title, text, yes, send, done) {
  if (!(await confirmAction(title, text, yes))) return null;
  try {
    const r = await send();
    say(done(r));
    ctx.refresh();
    return r;
  } catch (e) {
    say(explain(e), true);
    return null;
  }
}

// lost says whether a call's outcome is unknown (no answer, or a 503 the
// API gives when a change may be half done): its key is kept for a retry.
const lost = (e) => e instanceof ApiError && (e.status === 0 || e.status === 503);

export function restockForm(ctx, item) {
  const input = h('input', { type: 'number', min: 1, max: 1000000, step: 1, required: true, id: `restock-${item.item_id}`, value: '' });
  const label = h('label', { for: input.id, className: 'visually-hidden' }, `Units to add to ${item.label || item.item_id}`);
  const button = h('button', { type: 'submit', className: 'secondary' }, 'Restock');
  const form = h('form', { className: 'inline', 'aria-label': `Restock ${item.label || item.item_id}` }, label, input, button);
  let pending = null; // {quantity, key} of a restock whose answer was lost
  once(button, async () => {
    const q = Number(input.value);
    if (!Number.isInteger(q) || q < 1 || q > 1000000) {
      input.setAttribute('aria-invalid', 'true');
      say('A restock is a whole number of units from 1 to 1,000,000.', true);
      input.focus();
      return;
    }
    input.removeAttribute('aria-invalid');
    const key = pending && pending.quantity === q ? pending.key : newKey(`console-restock-${item.item_id}`);
    pending = { quantity: q, key };
    const what = item.label || `item ${item.item_id}`;
    await act(ctx, `Restock ${what}?`,
      `Adds ${q} units to ${what}: in MySQL first, then in Redis, where buyers can take them at once if the sale is warmed up.`,
      `Add ${q} units`,
      () => call('POST', `/admin/v1/items/${item.item_id}/restock`, { body: { quantity: q }, key }).catch((e) => {
        if (!lost(e)) pending = null;
        throw e;
      }),
      (r) => {
        pending = null;
        input.value = '';
        return r.replayed ? `That restock of ${what} was already made (nothing added twice).` : `Added ${r.quantity} units to ${what}.`;
      });
  });
  return form;
}

export function roomPanel(ctx, el, r) {
  el.hidden = false;
  if (!el.dataset.built) {
    el.dataset.built = 'yes';
    const rate = h('input', { type: 'number', id: 'room-rate-input', min: 1, max: 100000, step: 1, required: true });
    const change = h('button', { type: 'submit', id: 'room-rate-change' }, 'Change rate');
    const pause = h('button', { type: 'button', id: 'room-pause', className: 'secondary' }, 'Pause');
    el.append(h('h2', {}, 'Waiting room'),
      h('dl', { className: 'figures' },
        ...[['room-joined', 'Joined'], ['room-waiting', 'In line'], ['room-admitted', 'Admitted'], ['room-held', 'Units held by admissions'],
          ['room-rate', 'Admitted per second'], ['room-paused', 'Admission']]
          .map(([id, t]) => h('div', {}, h('dt', {}, t), h('dd', { id }, '–')))),
      h('form', { className: 'inline', 'aria-label': 'The room\'s rate' },
        h('label', { for: rate.id }, 'New rate (buyers a second)'), rate, change), ' ', pause);
    once(change, async () => {
      const v = Number(rate.value);
      if (!Number.isInteger(v) || v < 1 || v > 100000) {
        rate.setAttribute('aria-invalid', 'true');
        say('The room\'s rate is a whole number of buyers a second, from 1 to 100,000.', true);
        rate.focus();
        return;
      }
      rate.removeAttribute('aria-invalid');
      await act(ctx, 'Change the room\'s rate?',
        `Every api instance admits ${v} buyers a second from the line, within a second, until you change it again.`,
        `Admit ${v} a second`, () => call('PATCH', `${ctx.root}/room`, { body: { admit_per_second: v } }),
        (res) => `The room admits ${res.admit_per_second} a second.`);
    });
    once(pause, async () => {
      const paused = el.dataset.paused === 'yes';
      await act(ctx, paused ? 'Resume admissions?' : 'Pause admissions?',
        paused ? 'The room admits buyers again at its rate.' : 'Nobody more is admitted until you resume; buyers keep their places, admitted buyers can still order.',
        paused ? 'Resume' : 'Pause', () => call('PATCH', `${ctx.root}/room`, { body: { paused: !paused } }),
        (res) => (res.paused ? 'Admissions are paused.' : 'Admissions resumed.'));
    });
  }
  const set = (id, v) => { document.getElementById(id).textContent = v; };
  set('room-joined', r.joined);
  set('room-waiting', r.waiting);
  set('room-admitted', r.admitted);
  set('room-held', r.held);
  set('room-rate', r.admit_per_second);
  set('room-paused', r.paused ? 'paused' : r.passthrough ? 'passthrough' : 'running');
  el.dataset.paused = r.paused ? 'yes' : 'no';
  document.getElementById('room-pause').textContent = r.paused ? 'Resume' : 'Pause';
}

export function actionsPanel(ctx, el) {
  const warm = h('button', { type: 'button', id: 'action-warmup', className: 'secondary' }, 'Warm up now');
  const end = h('button', { type: 'button', id: 'action-end' }, 'End the sale now');
  const cancel = h('button', { type: 'button', id: 'action-cancel', className: 'danger' }, 'Cancel the sale');
  el.append(h('h2', {}, 'Actions'), h('div', { className: 'actions' }, warm, end, cancel));
  once(warm, () => act(ctx, 'Warm up now?',
    'Loads the sale\'s stock into Redis now (the consumer does it on its own a few minutes before the start). Doing it twice changes nothing.',
    'Warm up', () => call('POST', `${ctx.root}/warmup`), (r) => `Warmed up: ${r.redis_stock} units in Redis.`));
  once(end, () => act(ctx, 'End the sale now?',
    'Every api instance refuses new orders within a second. Orders already accepted finish, and buyers may still pay or cancel them. This cannot be undone.',
    'End now', () => call('POST', `${ctx.root}/end`), () => 'The sale ended.'));
  once(cancel, () => {
    const unpaid = ctx.summary ? ctx.summary.orders.CREATED : 0;
    const paid = ctx.summary ? ctx.summary.orders.PAID : 0;
    return act(ctx, 'Cancel the sale?',
      `Ends the sale now and closes its ${unpaid} unpaid order${unpaid === 1 ? '' : 's'} (CREATED): their units and the buyers' quotas go back, ` +
      `and orders still on their way are closed when they land. Its ${paid} paid order${paid === 1 ? ' stays' : 's stay'} paid: refunds are the shop's to make. This cannot be undone.`,
      'Cancel the sale', () => call('POST', `${ctx.root}/cancel`), (r) => `The sale is cancelled; ${r.orders_closed} unpaid orders closed.`);
  });
}
