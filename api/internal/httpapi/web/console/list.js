// The sales, newest first, with their state, units left, orders and
// revenue (GET /admin/v1/activities), refreshed every five seconds.
import { call, explain } from './api.js';
import { h, money, when, say } from './dom.js';

const live = (o) => (o.CREATED || 0) + (o.PAID || 0);

function row(a) {
  return h('tr', { dataset: { activity: a.activity_id } },
    h('td', {}, h('a', { href: `#/sales/${a.activity_id}` }, `#${a.activity_id} ${a.name}`)),
    h('td', {}, h('span', { className: `state ${a.state}` }, a.cancelled ? 'CANCELLED' : a.state)),
    h('td', {}, a.mode === 'draw' ? 'draw' : a.waiting_room ? 'room' : 'first come'),
    h('td', { className: 'num units-left' }, a.units_left),
    h('td', { className: 'num orders' }, live(a.orders)),
    h('td', { className: 'num revenue' }, a.currency ? money(a.revenue_paid, a.currency) : '–'),
    h('td', {}, when(a.starts_at)),
    h('td', {}, when(a.ends_at)));
}

export function renderList(show) {
  const body = h('tbody', { id: 'sales' });
  const table = h('table', {},
    h('caption', { className: 'muted' }, 'Orders count CREATED and PAID; revenue counts PAID.'),
    h('thead', {}, h('tr', {}, ['Sale', 'State', 'Selling', 'Units left', 'Orders', 'Revenue paid', 'Starts', 'Ends']
      .map((t, i) => h('th', { scope: 'col', className: i >= 3 && i <= 5 ? 'num' : '' }, t)))),
    body);
  show(h('h1', {}, 'Sales'), h('p', {}, h('a', { href: '#/new' }, 'Create a sale')), table);
  let timer = null, stopped = false;
  async function load() {
    try {
      const page = await call('GET', '/admin/v1/activities?limit=50');
      body.replaceChildren(...page.activities.map(row));
      if (page.activities.length === 0) body.append(h('tr', {}, h('td', { colspan: 8 }, 'No sale yet.')));
    } catch (e) {
      say(explain(e), true);
    }
    if (!stopped) timer = setTimeout(load, 5000);
  }
  load();
  return () => { stopped = true; clearTimeout(timer); };
}
