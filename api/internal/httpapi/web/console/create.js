// A new sale: its items (one a size, each with its stock and price), its
// window, how it sells (first come, a waiting room, a draw), whom it takes
// (open, or presale codes) and its codes. The form refuses what the API
// would refuse before anything is sent; a refusal the API still makes is
// shown as it came. The items are made first (POST /admin/v1/items), then
// the sale of them; an attempt the API refused keeps the items it made, so
// sending again does not make them twice.
import { call, explain } from './api.js';
import { h, say, once, newKey, decimals } from './dom.js';

const day = 24 * 3600 * 1000;

// local is a Date as a datetime-local input's value.
function local(d) {
  const p = (n) => String(n).padStart(2, '0');
  return `${d.getFullYear()}-${p(d.getMonth() + 1)}-${p(d.getDate())}T${p(d.getHours())}:${p(d.getMinutes())}`;
}

function field(id, label, input, hint) {
  input.id = id;
  const hintEl = hint ? h('span', { className: 'muted', id: `${id}-hint` }, hint) : null;
  if (hintEl) input.setAttribute('aria-describedby', hintEl.id);
  return h('div', { className: 'field' }, h('label', { for: id }, label), input, hintEl);
}

let rowSeq = 0;

function sizeRow(label = '', stock = '', price = '') {
  const n = ++rowSeq;
  const remove = h('button', { type: 'button', className: 'secondary', 'aria-label': 'Remove this size' }, 'Remove');
  const row = h('div', { className: 'row size-row' },
    field(`size-label-${n}`, 'Size label', h('input', { type: 'text', className: 'size-label', maxlength: 40, value: label, required: true })),
    field(`size-stock-${n}`, 'Stock', h('input', { type: 'number', className: 'size-stock', min: 0, step: 1, value: stock, required: true })),
    field(`size-price-${n}`, 'Price', h('input', { type: 'text', className: 'size-price', inputmode: 'decimal', value: price, required: true })),
    remove);
  remove.addEventListener('click', () => {
    if (row.parentElement.children.length > 1) row.remove();
  });
  return row;
}

// problems lists what the API would refuse in the form's values, each
// with the input to fix; read returns the request to send.
function read(form) {
  const bad = [];
  const v = (id) => form.querySelector(`#${id}`);
  const name = v('sale-name').value.trim();
  if (name.length < 1 || name.length > 150) bad.push([v('sale-name'), 'The name is 1-150 characters.']);
  const currency = v('sale-currency').value.trim().toUpperCase();
  if (!/^[A-Z]{3}$/.test(currency)) bad.push([v('sale-currency'), 'The currency is an ISO 4217 code of three letters (EUR).']);
  const d = decimals(currency);
  const sizes = [];
  const labels = new Set();
  for (const row of form.querySelectorAll('.size-row')) {
    const l = row.querySelector('.size-label'), s = row.querySelector('.size-stock'), p = row.querySelector('.size-price');
    const label = l.value.trim();
    if (label.length < 1 || label.length > 40) bad.push([l, 'A size\'s label is 1-40 characters.']);
    else if (labels.has(label)) bad.push([l, `The label ${label} is there twice.`]);
    labels.add(label);
    const stock = Number(s.value);
    if (s.value === '' || !Number.isInteger(stock) || stock < 0 || stock > 1e9) bad.push([s, 'A size\'s stock is a whole number from 0 to 1,000,000,000.']);
    const re = d === 0 ? /^\d+$/ : /^\d+(\.\d{1,2})?$/;
    const price = re.test(p.value.trim()) ? Math.round(Number(p.value.trim()) * 10 ** d) : NaN;
    if (!Number.isFinite(price) || price > 1e12) {
      bad.push([p, d === 0 ? `A price in ${currency} is a whole number.` : 'A price is an amount like 129 or 129.90.']);
    }
    sizes.push({ label, stock, price });
  }
  if (sizes.length < 1 || sizes.length > 100) bad.push([form.querySelector('#add-size'), 'A sale has 1-100 sizes.']);
  const starts = new Date(v('sale-starts').value), ends = new Date(v('sale-ends').value);
  if (isNaN(starts)) bad.push([v('sale-starts'), 'The start is a date and time.']);
  if (isNaN(ends)) bad.push([v('sale-ends'), 'The end is a date and time.']);
  else if (!isNaN(starts) && ends <= starts) bad.push([v('sale-ends'), 'The end is after the start.']);
  else if (!isNaN(starts) && ends - starts > 90 * day) bad.push([v('sale-ends'), 'A sale lasts at most 90 days.']);
  if (!isNaN(starts) && starts - Date.now() > 1825 * day) bad.push([v('sale-starts'), 'A sale starts at most five years from now.']);
  const limit = Number(v('sale-limit').value);
  if (!Number.isInteger(limit) || limit < 1 || limit > 1000) bad.push([v('sale-limit'), 'The units one order may hold are 1-1000.']);
  const mode = form.querySelector('input[name=mode]:checked').value;
  const access = v('sale-access').value;
  const iso = (t) => (isNaN(t) ? undefined : t.toISOString());
  const body = { starts_at: iso(starts), ends_at: iso(ends), per_user_limit: limit };
  if (mode === 'room') {
    const rate = Number(v('room-rate').value), bits = Number(v('room-pow').value);
    if (!Number.isInteger(rate) || rate < 1 || rate > 100000) bad.push([v('room-rate'), 'The room admits 1-100,000 buyers a second.']);
    if (!Number.isInteger(bits) || bits < 0 || bits > 24) bad.push([v('room-pow'), 'The proof of work is 0-24 bits.']);
    body.waiting_room = { admit_per_second: rate, proof_of_work_bits: bits };
  }
  if (mode === 'draw') {
    const closes = new Date(v('draw-closes').value);
    if (isNaN(closes)) bad.push([v('draw-closes'), 'A draw needs the time its entries close.']);
    else if (!isNaN(starts) && !isNaN(ends) && (closes < starts || closes >= ends)) bad.push([v('draw-closes'), 'The entries close between the start and the end.']);
    else body.entries_close_at = closes.toISOString();
    body.mode = 'draw';
  }
  if (access === 'code_priority' && mode !== 'room') bad.push([v('sale-access'), 'Code holders first needs a waiting room.']);
  if (access !== 'open') body.access = access;
  const codes = Number(v('sale-codes').value || 0);
  if (!Number.isInteger(codes) || codes < 0 || codes > 100000) bad.push([v('sale-codes'), 'Generate 0-100,000 codes.']);
  if (codes > 0 && access === 'open') bad.push([v('sale-codes'), 'An open sale takes no codes: choose whom it takes first.']);
  const uses = Number(v('sale-code-uses').value);
  if (codes > 0 && (!Number.isInteger(uses) || uses < 1 || uses > 1000000)) bad.push([v('sale-code-uses'), 'Each code has 1-1,000,000 uses.']);
  return { bad, name, currency, sizes, body, codes, uses };
}

export function renderCreate(show) {
  const sizes = h('div', { id: 'sizes-rows' }, sizeRow('EU 41', '10', '129.00'), sizeRow('EU 42', '10', '129.00'), sizeRow('EU 43', '10', '129.00'));
  const add = h('button', { type: 'button', id: 'add-size', className: 'secondary' }, 'Add a size');
  add.addEventListener('click', () => sizes.append(sizeRow()));
  const now = new Date(Date.now() + 5 * 60 * 1000);
  const mode = (value, text, checked) => h('label', {}, h('input', { type: 'radio', name: 'mode', value, id: `mode-${value}`, checked }), ` ${text}`);
  const room = h('div', { className: 'row', id: 'room-settings', hidden: true },
    field('room-rate', 'Buyers admitted a second', h('input', { type: 'number', min: 1, max: 100000, value: 50 })),
    field('room-pow', 'Proof of work (bits)', h('input', { type: 'number', min: 0, max: 24, value: 12 }), 'Makes each join cost a bot some work; 0 is none.'));
  const draw = h('div', { className: 'row', id: 'draw-settings', hidden: true },
    field('draw-closes', 'Entries close at', h('input', { type: 'datetime-local' })));
  const submit = h('button', { type: 'submit', id: 'create-sale' }, 'Create the sale');
  const errors = h('ul', { id: 'form-errors', className: 'error', 'aria-live': 'assertive' });
  const form = h('form', { id: 'create', novalidate: true },
    h('fieldset', {}, h('legend', {}, 'What is sold'),
      h('div', { className: 'row' },
        field('sale-name', 'Name', h('input', { type: 'text', maxlength: 150, required: true, value: '' }), 'Buyers see it with the size: "runner EU 42".'),
        field('sale-currency', 'Currency', h('input', { type: 'text', maxlength: 3, value: 'EUR', required: true }))),
      sizes, add),
    h('fieldset', {}, h('legend', {}, 'When'),
      h('div', { className: 'row' },
        field('sale-starts', 'Starts at', h('input', { type: 'datetime-local', value: local(now), required: true })),
        field('sale-ends', 'Ends at', h('input', { type: 'datetime-local', value: local(new Date(now.getTime() + 3600 * 1000)), required: true })),
        field('sale-limit', 'Units one order may hold', h('input', { type: 'number', min: 1, max: 1000, value: 1 })))),
    h('fieldset', {}, h('legend', {}, 'How it sells'),
      h('div', { className: 'row', role: 'radiogroup' }, mode('first_come', 'First come', true), mode('room', 'Waiting room', false), mode('draw', 'Draw', false)),
      room, draw),
    h('fieldset', {}, h('legend', {}, 'Whom it takes'),
      h('div', { className: 'row' },
        field('sale-access', 'Access', h('select', {},
          h('option', { value: 'open' }, 'Everyone'),
          h('option', { value: 'code_required' }, 'Presale code holders only'),
          h('option', { value: 'code_priority' }, 'Code holders first (waiting room)'))),
        field('sale-codes', 'Codes to generate', h('input', { type: 'number', min: 0, max: 100000, value: 0 })),
        field('sale-code-uses', 'Uses of each code', h('input', { type: 'number', min: 1, max: 1000000, value: 1 }),
          'How many live orders may hold one code at once.'))),
    errors, submit);
  form.addEventListener('change', () => {
    const m = form.querySelector('input[name=mode]:checked').value;
    room.hidden = m !== 'room';
    draw.hidden = m !== 'draw';
  });
  show(h('h1', {}, 'New sale'), form);

  const made = new Map(); // name|label|stock|price|currency -> item_id, kept across attempts
  let codesKey = null;
  once(submit, async () => {
    for (const el of form.querySelectorAll('[aria-invalid]')) el.removeAttribute('aria-invalid');
    const f = read(form);
    errors.replaceChildren(...f.bad.map(([el, text]) => { el.setAttribute('aria-invalid', 'true'); return h('li', {}, text); }));
    if (f.bad.length) {
      say(`The sale was not sent: ${f.bad.length} field${f.bad.length === 1 ? '' : 's'} to fix.`, true);
      f.bad[0][0].focus();
      return;
    }
    try {
      const items = [];
      for (const s of f.sizes) {
        const sig = [f.name, s.label, s.stock, s.price, f.currency].join('|');
        if (!made.has(sig)) {
          const it = await call('POST', '/admin/v1/items', { body: { name: `${f.name} ${s.label}`, stock: s.stock, price: s.price, currency: f.currency } });
          made.set(sig, it.item_id);
        }
        items.push({ item_id: made.get(sig), label: s.label });
      }
      const sale = await call('POST', '/admin/v1/activities', { body: { ...f.body, items } });
      say(`Sale #${sale.activity_id} created.`);
      if (f.codes > 0) {
        // The codes are shown here, once: no later answer of the API lists
        // them (a retry under the same key would answer them again).
        codesKey = codesKey || newKey(`console-codes-${sale.activity_id}`);
        const added = await call('POST', `/admin/v1/activities/${sale.activity_id}/codes`, { body: { count: f.codes, uses: f.uses }, key: codesKey });
        show(h('h1', {}, `Sale #${sale.activity_id} created`),
          h('p', {}, `Its ${added.count} presale codes, ${added.uses} use${added.uses === 1 ? '' : 's'} each. Copy them now: they are shown this once.`),
          h('label', { for: 'codes-out' }, 'The codes, one a line'),
          h('textarea', { id: 'codes-out', readonly: true, rows: 12, cols: 24 }, added.codes.join('\n')),
          h('p', {}, h('a', { href: `#/sales/${sale.activity_id}`, id: 'open-sale' }, 'Open the sale live')));
        return;
      }
      location.hash = `#/sales/${sale.activity_id}`;
    } catch (e) {
      errors.replaceChildren(h('li', {}, `The API refused: ${explain(e)}`));
      say(explain(e), true);
    }
  });
}
