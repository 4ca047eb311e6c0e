// One sale, live: its figures read from the admin API every second (the
// summary's MySQL and Redis figures, the room's state, the sale page's
// draw), the actions on it, its summary and its audit trail.
import { call, explain } from './api.js';
import { h, money, when, say } from './dom.js';
import { actionsPanel, restockForm, roomPanel } from './actions.js';

const statuses = ['CREATED', 'PAID', 'CLOSED', 'FAILED'];

function figure(id, label) {
  return h('div', {}, h('dt', {}, label), h('dd', { id }, '–'));
}

const set = (id, v) => { const el = document.getElementById(id); if (el) el.textContent = v; };

export function renderSale(show, id) {
  const root = `/admin/v1/activities/${id}`;
  const title = h('h1', { id: 'sale-title' }, `Sale #${id}`);
  const state = h('span', { id: 'live-state', className: 'state' }, '…');
  const times = h('p', { className: 'muted', id: 'sale-times' });
  const figures = h('dl', { className: 'figures', id: 'live' },
    figure('live-units-left', 'Units left'),
    figure('live-rate', 'Orders per second'),
    ...statuses.map((s) => figure(`live-orders-${s.toLowerCase()}`, `Orders ${s}`)),
    figure('live-in-flight', 'Units in flight'),
    figure('live-revenue', 'Revenue paid'),
    figure('live-webhooks', 'Webhook endpoints failing'));
  const sizes = h('tbody', { id: 'sizes' });
  const sizesTable = h('table', {},
    h('thead', {}, h('tr', {}, ['Size', 'Units left', 'Sold', 'Paid', 'In flight', 'MySQL stock', 'Restock']
      .map((t, i) => h('th', { scope: 'col', className: i >= 1 && i <= 5 ? 'num' : '' }, t)))), sizes);
  const room = h('section', { className: 'card', id: 'room', hidden: true });
  const draw = h('section', { className: 'card', id: 'draw', hidden: true });
  const actions = h('section', { className: 'card', id: 'actions' });
  const summary = h('section', { className: 'card', id: 'summary' });
  const audit = h('ol', { className: 'audit', id: 'audit' });
  show(title, h('p', {}, state, ' ', times), h('p', { className: 'muted' }, 'Refreshed every second. ', h('a', { href: '#/' }, 'All sales')),
    figures, h('h2', {}, 'Sizes'), sizesTable, room, draw, actions,
    h('h2', {}, 'Summary'), summary, h('h2', {}, 'Audit trail'), audit);

  let stopped = false, timer = null, tick = 0, last = null, built = false, auditDue = true;
  // refresh asks for the audit at the next second: an action was taken.
  const ctx = { id, root, refresh: () => { auditDue = true; }, summary: null };

  function drawSizes(sum) {
    if (!built) {
      sizes.replaceChildren(...sum.items.map((it) => h('tr', { dataset: { item: it.item_id } },
        h('th', { scope: 'row' }, it.label || `item ${it.item_id}`),
        h('td', { className: 'num units-left' }), h('td', { className: 'num sold' }), h('td', { className: 'num paid' }),
        h('td', { className: 'num in-flight' }), h('td', { className: 'num db-stock' }),
        h('td', {}, restockForm(ctx, it)))));
      built = true;
    }
    for (const it of sum.items) {
      const tr = sizes.querySelector(`tr[data-item="${it.item_id}"]`);
      if (!tr) continue;
      tr.querySelector('.units-left').textContent = Math.max(it.redis_stock ?? it.db_stock, 0);
      tr.querySelector('.sold').textContent = it.units_sold;
      tr.querySelector('.paid').textContent = it.units_paid;
      tr.querySelector('.in-flight').textContent = it.in_flight;
      tr.querySelector('.db-stock').textContent = it.db_stock;
    }
  }

  function drawSummary(sum) {
    summary.replaceChildren(h('dl', { className: 'figures' },
      h('div', {}, h('dt', {}, 'Units sold'), h('dd', { id: 'summary-units-sold' }, sum.units_sold)),
      h('div', {}, h('dt', {}, 'Units paid'), h('dd', { id: 'summary-units-paid' }, sum.units_paid)),
      h('div', {}, h('dt', {}, 'Revenue paid'), h('dd', { id: 'summary-revenue' }, sum.currency ? money(sum.revenue_paid, sum.currency) : 'no price')),
      h('div', {}, h('dt', {}, 'Refunds owed'), h('dd', { id: 'summary-refunds' }, sum.refunds_needed)),
      h('div', {}, h('dt', {}, 'Orders closed'), h('dd', {}, sum.orders.CLOSED)),
      h('div', {}, h('dt', {}, 'Orders failed'), h('dd', {}, sum.orders.FAILED))));
  }

  async function loadAudit() {
    const a = await call('GET', `${root}/audit?limit=50`);
    audit.replaceChildren(...a.actions.map((e) => h('li', { dataset: { action: e.action } },
      h('strong', {}, e.action), ` by ${e.subject}, ${when(e.at)} `, h('code', {}, JSON.stringify(e.detail)))));
    if (a.actions.length === 0) audit.append(h('li', {}, 'No operator action yet.'));
  }

  async function load() {
    const [sum, page] = await Promise.all([call('GET', `${root}/summary`), call('GET', `/api/v1/activities/${id}`)]);
    ctx.summary = sum;
    ctx.sale = page;
    title.textContent = `#${id} ${page.name || ''}`.trim();
    state.textContent = page.state;
    state.className = `state ${page.state}`;
    times.textContent = `${when(page.starts_at)} to ${when(page.ends_at)} · ${page.mode === 'draw' ? 'draw' : page.waiting_room ? 'waiting room' : 'first come'} · access ${page.access}`;
    const total = statuses.reduce((n, s) => n + (sum.orders[s] || 0), 0);
    const now = performance.now();
    if (last) set('live-rate', (Math.max(total - last.total, 0) / ((now - last.at) / 1000)).toFixed(1));
    last = { total, at: now };
    set('live-units-left', Math.max(sum.redis_stock ?? sum.db_stock, 0));
    for (const s of statuses) set(`live-orders-${s.toLowerCase()}`, sum.orders[s] || 0);
    set('live-in-flight', sum.in_flight);
    set('live-revenue', sum.currency ? money(sum.revenue_paid, sum.currency) : 'no price');
    drawSizes(sum);
    drawSummary(sum);
    if (page.waiting_room) {
      const r = await call('GET', `${root}/room`);
      roomPanel(ctx, room, r);
    }
    if (page.draw) {
      draw.hidden = false;
      draw.replaceChildren(h('h2', {}, 'Draw'), h('dl', { className: 'figures' },
        h('div', {}, h('dt', {}, 'State'), h('dd', { id: 'draw-state' }, page.draw.state)),
        h('div', {}, h('dt', {}, 'Entries'), h('dd', { id: 'draw-entries' }, page.draw.entries)),
        h('div', {}, h('dt', {}, 'Entries close'), h('dd', {}, when(page.draw.entries_close_at)))));
    }
    if (auditDue || tick % 5 === 0) {
      auditDue = false;
      const hooks = await call('GET', '/admin/v1/webhooks');
      set('live-webhooks', hooks.webhooks.filter((w) => w.failing_since || w.disabled_reason === 'failing').length);
      await loadAudit();
    }
    if (!actions.firstChild) actionsPanel(ctx, actions);
  }

  async function loop() {
    try {
      await load();
      document.getElementById('view').dataset.tick = String(++tick);
    } catch (e) {
      say(explain(e), true);
    }
    if (!stopped) timer = setTimeout(loop, 1000);
  }
  loop();
  return () => { stopped = true; clearTimeout(timer); };
}
