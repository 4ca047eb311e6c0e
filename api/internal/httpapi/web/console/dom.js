// Small helpers to build the views' DOM: no template strings of HTML, so
// nothing the API returns is ever parsed as markup.

// h makes an element: attrs are properties (on* handlers, dataset, text)
// or attributes; children are nodes or strings.
export function h(tag, attrs = {}, ...children) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k.startsWith('on')) el.addEventListener(k.slice(2), v);
    else if (k === 'dataset') Object.assign(el.dataset, v);
    else if (k === 'text') el.textContent = v;
    else if (k === 'className') el.className = v;
    else el.setAttribute(k, v === true ? '' : String(v));
  }
  for (const c of children.flat()) {
    if (c === undefined || c === null || c === false) continue;
    el.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return el;
}

// Currencies whose minor unit is the unit itself (ISO 4217 exponent 0).
const noDecimals = new Set(['JPY', 'KRW', 'CLP', 'ISK', 'VND', 'XAF', 'XOF', 'UGX', 'PYG', 'RWF']);

// decimals is how many digits a price in currency has after the point.
export function decimals(currency) {
  return noDecimals.has((currency || '').toUpperCase()) ? 0 : 2;
}

// money shows an amount of minor units in its currency.
export function money(amount, currency) {
  if (amount === undefined || amount === null) return '–';
  const d = decimals(currency);
  return `${(amount / 10 ** d).toFixed(d)} ${currency || ''}`.trim();
}

// when shows an instant in the operator's time zone.
export function when(iso) {
  if (!iso) return '–';
  return new Date(iso).toLocaleString(undefined, { dateStyle: 'medium', timeStyle: 'medium' });
}

const message = () => document.getElementById('message');

// say puts text in the status line a screen reader announces.
export function say(text, isError = false) {
  const m = message();
  m.textContent = text;
  m.classList.toggle('error', isError);
}

// confirmAction asks before a change with what it will do; it resolves
// true only for the confirm button.
export function confirmAction(title, text, yes) {
  const d = document.getElementById('confirm');
  document.getElementById('confirm-title').textContent = title;
  document.getElementById('confirm-text').textContent = text;
  const yesButton = document.getElementById('confirm-yes');
  yesButton.textContent = yes;
  return new Promise((resolve) => {
    const done = (answer) => () => { d.close(); resolve(answer); };
    const onYes = done(true), onNo = done(false);
    yesButton.addEventListener('click', onYes, { once: true });
    document.getElementById('confirm-no').addEventListener('click', onNo, { once: true });
    d.addEventListener('cancel', onNo, { once: true });
    d.addEventListener('close', () => {
      yesButton.removeEventListener('click', onYes);
      document.getElementById('confirm-no').removeEventListener('click', onNo);
    }, { once: true });
    d.showModal();
    document.getElementById('confirm-no').focus();
  });
}

// once runs action for a button's click with the button disabled while it
// is in flight: a double click sends once.
export function once(button, action) {
  button.addEventListener('click', async (ev) => {
    ev.preventDefault();
    if (button.disabled) return;
    button.disabled = true;
    button.setAttribute('aria-busy', 'true');
    try {
      await action();
    } finally {
      button.disabled = false;
      button.removeAttribute('aria-busy');
    }
  });
}

// newKey is an Idempotency-Key (A-Z a-z 0-9 _ -, 1-64 characters).
export function newKey(prefix) {
  const b = new Uint8Array(12);
  crypto.getRandomValues(b);
  return `${prefix}-${Array.from(b, (x) => x.toString(16).padStart(2, '0')).join('')}`;
}
