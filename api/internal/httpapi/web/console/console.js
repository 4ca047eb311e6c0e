// The console's entry: sign the operator in, then show the view the
// address's fragment names (#/ the sales, #/new a new sale, #/sales/ID
// one sale live).
import * as auth from './auth.js';
import { h, say } from './dom.js';
import { renderList } from './list.js';
import { renderSale } from './live.js';
import { renderCreate } from './create.js';

const view = document.getElementById('view');
let config = {};
let stopView = () => {};

function show(...nodes) {
  stopView();
  stopView = () => {};
  view.replaceChildren(...nodes);
  const heading = view.querySelector('h1');
  if (heading) { heading.tabIndex = -1; heading.focus(); }
}

function signInScreen(why) {
  document.body.dataset.signedIn = 'no';
  document.getElementById('sign-out').hidden = true;
  document.getElementById('who').textContent = '';
  const button = h('button', { type: 'button', id: 'sign-in' }, 'Sign in');
  button.addEventListener('click', () => {
    button.disabled = true;
    auth.signIn(location.hash || '#/').catch((e) => { button.disabled = false; say(e.message, true); });
  });
  show(h('h1', {}, 'Sign in'),
    why ? h('p', { className: 'error', id: 'sign-in-error' }, why) : null,
    config.client_id
      ? h('p', {}, 'Operators sign in at the shop\'s identity provider (', h('code', {}, config.issuer), ').')
      : h('p', {}, 'No identity provider is configured for the console (SECKILL_CONSOLE_CLIENT_ID). ' +
        'In development, open the address `make run` prints: it carries an operator\'s token.'),
    config.client_id ? button : null);
}

async function route() {
  if (!auth.token()) return signInScreen();
  if (!auth.isOperator(auth.token())) {
    return signInScreen(`${auth.who() || 'This account'} does not hold the operators' role (${config.admin_role} in ${config.role_claim}).`);
  }
  document.body.dataset.signedIn = 'yes';
  document.getElementById('who').textContent = `Signed in as ${auth.who()}`;
  document.getElementById('sign-out').hidden = false;
  const hash = location.hash || '#/';
  const m = hash.match(/^#\/sales\/(\d+)$/);
  say('');
  if (m) {
    stopView = renderSale(show, Number(m[1]));
  } else if (hash === '#/new') {
    renderCreate(show);
  } else {
    stopView = renderList(show);
  }
}

async function main() {
  try {
    const r = await fetch('/console/config.json');
    config = await r.json();
  } catch (e) {
    view.replaceChildren(h('p', { className: 'error' }, `The console's settings did not load: ${e.message}`));
    return;
  }
  document.getElementById('sign-out').addEventListener('click', () => { auth.signOut(); signInScreen('Signed out.'); });
  try {
    await auth.start(config, () => signInScreen('Your sign-in ran out: sign in again.'));
  } catch (e) {
    return signInScreen(e.message);
  }
  window.addEventListener('hashchange', route);
  route();
}

main();
