// console.js - the web console of `sbx serve` (docs/console.md): plain JavaScript, no build
// step, no library, nothing from outside this server.
//
// Safety rules this file keeps (docs/security.md, "The web console"):
// - every value from the server (sandbox ids, metadata, images, file names, logs, errors) is
//   put in the page with textContent or as an attribute value set through the DOM, never
//   parsed as HTML: there is no innerHTML, insertAdjacentHTML or document.write here;
// - the API key lives in this tab's sessionStorage and travels only as the
//   OPEN-SANDBOX-API-KEY header of fetch calls to this origin (credentials: 'omit'), or, for a
//   WebSocket, which cannot carry headers, as the subprotocol `sbx-api-key.<hex>` that the
//   router checks and never forwards; no cookie is ever set;
// - links built from data are fragment links (#/sandbox/<id>) or same-origin paths.
'use strict';

(() => {
  const KEY_STORE = 'sbx-console-key';
  const EXECD = 44772;
  const REFRESH_MS = 3000;
  const $ = (id) => document.getElementById(id);
  const main = $('main');

  // ---- DOM building: text only ----

  // h('div.cls#id', {attrs, on: {event: fn}}, children...): children are nodes or strings
  // (strings become text nodes).
  function h(spec, props, ...kids) {
    const m = /^([a-z0-9]+)((?:[.#][\w-]+)*)$/.exec(spec);
    const el = document.createElement(m[1]);
    for (const part of m[2].match(/[.#][\w-]+/g) || []) {
      if (part[0] === '.') el.classList.add(part.slice(1));
      else el.id = part.slice(1);
    }
    if (props && (typeof props !== 'object' || props instanceof Node || Array.isArray(props))) {
      kids.unshift(props);
      props = null;
    }
    for (const [k, v] of Object.entries(props || {})) {
      if (k === 'on') for (const [ev, fn] of Object.entries(v)) el.addEventListener(ev, fn);
      else if (k === 'text') el.textContent = v;
      else if (k === 'dataset') Object.assign(el.dataset, v);
      else if (v === true) el.setAttribute(k, '');
      else if (v !== false && v !== null && v !== undefined) el.setAttribute(k, String(v));
    }
    append(el, kids);
    return el;
  }
  function append(el, ...kids) {
    for (const k of kids.flat(Infinity)) {
      if (k === null || k === undefined || k === false) continue;
      el.appendChild(k instanceof Node ? k : document.createTextNode(String(k)));
    }
    return el;
  }
  function clear(el) {
    while (el.firstChild) el.removeChild(el.firstChild);
    return el;
  }

  let toastTimer = 0;
  function toast(msg, bad) {
    const t = $('toast');
    t.textContent = msg;
    t.className = bad ? 'show bad' : 'show';
    clearTimeout(toastTimer);
    toastTimer = setTimeout(() => { t.className = ''; }, bad ? 8000 : 3000);
  }

  // A confirmation in the page (not window.confirm: no browser dialog).
  function ask(question, okText) {
    return new Promise((resolve) => {
      const done = (v) => { back.remove(); resolve(v); };
      const ok = h('button.danger', { type: 'button', on: { click: () => done(true) } },
                   okText || 'OK');
      const back = h('div.modal-back', h('div.modal', { role: 'dialog' },
        h('p', question),
        h('div.row.end',
          h('button.ghost', { type: 'button', on: { click: () => done(false) } }, 'Cancel'), ok)));
      document.body.appendChild(back);
      ok.focus();
    });
  }

  // ---- time and size ----

  function ago(ms) {
    const s = Math.max(0, Math.round(ms / 1000));
    if (s < 60) return s + 's';
    if (s < 3600) return Math.floor(s / 60) + 'm';
    if (s < 86400) return Math.floor(s / 3600) + 'h ' + Math.floor((s % 3600) / 60) + 'm';
    return Math.floor(s / 86400) + 'd ' + Math.floor((s % 86400) / 3600) + 'h';
  }
  function since(iso) { return iso ? ago(Date.now() - Date.parse(iso)) : '—'; }
  function until(iso) {
    if (!iso) return 'never';
    const d = Date.parse(iso) - Date.now();
    return d <= 0 ? 'expired' : 'in ' + ago(d);
  }
  function bytes(n) {
    if (n === undefined || n === null || isNaN(n)) return '—';
    const u = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];
    let i = 0;
    while (n >= 1024 && i < u.length - 1) { n /= 1024; i++; }
    return (i ? n.toFixed(1) : String(n)) + ' ' + u[i];
  }

  // ---- the API ----

  const key = () => sessionStorage.getItem(KEY_STORE) || '';

  class ApiError extends Error {
    constructor(status, code, message) {
      super(message || code || ('HTTP ' + status));
      this.status = status;
      this.code = code || '';
    }
  }

  async function raw(method, path, body, extra) {
    const headers = Object.assign({ 'OPEN-SANDBOX-API-KEY': key() }, extra || {});
    let data = body;
    if (body !== undefined && !(body instanceof FormData) && typeof body !== 'string') {
      data = JSON.stringify(body);
      headers['Content-Type'] = 'application/json';
    }
    const r = await fetch(path, { method, headers, body: data, credentials: 'omit',
                                  cache: 'no-store', redirect: 'error' });
    if (r.status === 401 && path.startsWith('/v1/') && !path.includes('/proxy/')) {
      signOut('The API key was refused: enter it again.');
      throw new ApiError(401, 'INVALID_API_KEY', 'the API key was refused');
    }
    if (!r.ok) {
      let code = '', msg = '';
      try {
        const j = await r.json();
        code = j.code || '';
        msg = j.message || '';
      } catch (e) { /* not JSON */ }
      throw new ApiError(r.status, code, msg || (r.status + ' ' + r.statusText));
    }
    return r;
  }
  async function api(method, path, body) {
    const r = await raw(method, path, body);
    const text = await r.text();
    return text ? JSON.parse(text) : null;
  }
  const sbxPath = (id) => '/v1/sandboxes/' + encodeURIComponent(id);
  const execd = (id, rest) => sbxPath(id) + '/proxy/' + EXECD + rest;

  function hex(s) {
    return Array.from(new TextEncoder().encode(s), (b) => b.toString(16).padStart(2, '0'))
      .join('');
  }

  // ---- routing (#/sandboxes, #/sandbox/<id>[/tab], #/server) ----

  let timers = [];
  let cleanups = [];
  function every(ms, fn) { timers.push(setInterval(fn, ms)); }
  function leave() {
    timers.forEach(clearInterval);
    timers = [];
    cleanups.forEach((fn) => { try { fn(); } catch (e) { /* already gone */ } });
    cleanups = [];
  }

  function route() {
    leave();
    $('live').textContent = '';
    if (!key()) return showLogin();
    const parts = location.hash.replace(/^#\/?/, '').split('/').map(decodeURIComponent);
    document.querySelectorAll('#nav a').forEach((a) => a.classList.remove('on'));
    if (parts[0] === 'sandbox' && parts[1]) {
      $('nav-sandboxes').classList.add('on');
      return showSandbox(parts[1], parts[2] || 'overview');
    }
    if (parts[0] === 'server') {
      $('nav-server').classList.add('on');
      return showServer();
    }
    $('nav-sandboxes').classList.add('on');
    return showList();
  }

  function setView(name, ...kids) {
    document.body.dataset.view = name;
    clear(main);
    append(main, kids);
  }

  // ---- sign in ----

  function signOut(why) {
    sessionStorage.removeItem(KEY_STORE);
    leave();
    showLogin(why);
  }

  function showLogin(why) {
    const input = h('input#key', { type: 'password', autocomplete: 'off', spellcheck: 'false',
                                    placeholder: 'API key', 'aria-label': 'API key' });
    const msg = h('p.error#login-error', why || '');
    const form = h('form.card.login#login', {
      on: {
        submit: async (e) => {
          e.preventDefault();
          const k = input.value.trim();
          if (!k) return;
          sessionStorage.setItem(KEY_STORE, k);
          try {
            await api('GET', '/v1/sandboxes?pageSize=1');
            route();
          } catch (err) {
            sessionStorage.removeItem(KEY_STORE);
            msg.textContent = err.status === 401 ? 'That key was refused.' : String(err.message);
          }
        },
      },
    },
    h('h1', 'Sign in'),
    h('p.dim', 'The API key of this server (', h('code', 'sbx serve'), ' keeps it in ',
      h('code', '<state dir>/api-key'), '). It stays in this browser tab only and is sent as a ',
      'request header, never as a cookie.'),
    input, h('button#login-go', { type: 'submit' }, 'Sign in'), msg);
    setView('login', form);
    input.focus();
  }

  // ---- badges and helpers shared by the pages ----

  function stateBadge(state) {
    return h('span.badge', { dataset: { state: String(state || 'Unknown') } },
             String(state || 'Unknown'));
  }
  function imageOf(sb) { return (sb.image && sb.image.uri) || '—'; }
  function nameOf(sb) {
    const m = sb.metadata || {};
    return m.name || m['sbx.name'] || (sb.extensions && sb.extensions.name) || '';
  }
  function chips(obj, skip) {
    return Object.entries(obj || {}).filter(([k]) => k !== skip)
      .map(([k, v]) => h('span.chip', k + '=' + v));
  }
  // A state's reason, unless it only repeats the state (SANDBOX_RUNNING for Running).
  function reasonOf(sb) {
    const st = sb.status || {};
    const r = st.reason || '';
    return r.replace(/^SANDBOX_/, '') === String(st.state || '').toUpperCase() ? '' : r;
  }

  // The actions a sandbox in this state allows: [label, verb, class]
  function actionsFor(state) {
    const a = [];
    if (state === 'Running') a.push(['Pause', 'pause'], ['Stop', 'stop']);
    if (state === 'Paused') a.push(['Resume', 'resume'], ['Stop', 'stop']);
    if (state === 'Stopped') a.push(['Start', 'start']);
    if (state !== 'Failed') a.push(['Renew', 'renew']);
    a.push(['Delete', 'delete', 'danger']);
    return a;
  }

  async function act(sb, verb, after) {
    try {
      if (verb === 'delete') {
        if (!await ask('Delete sandbox ' + sb.id + '? Its files are removed.', 'Delete')) return;
        await api('DELETE', sbxPath(sb.id));
        toast('Deleted ' + sb.id);
      } else if (verb === 'renew') {
        const secs = await askRenew(sb);
        if (!secs) return;
        const at = new Date(Date.now() + secs * 1000).toISOString();
        const r = await api('POST', sbxPath(sb.id) + '/renew-expiration', { expiresAt: at });
        toast('Expires ' + until(r.expiresAt));
      } else {
        await api('POST', sbxPath(sb.id) + '/' + verb);
        toast(verb[0].toUpperCase() + verb.slice(1) + ': ' + sb.id);
      }
    } catch (e) {
      toast(verb + ' failed: ' + e.message, true);
    }
    if (after) after();
  }

  function askRenew(sb) {
    return new Promise((resolve) => {
      const sel = h('select#renew-for',
        [['600', '10 minutes'], ['3600', '1 hour'], ['14400', '4 hours'], ['86400', '1 day']]
          .map(([v, t]) => h('option', { value: v, selected: v === '3600' }, t)));
      const done = (v) => { back.remove(); resolve(v); };
      const back = h('div.modal-back', h('div.modal', { role: 'dialog' },
        h('p', 'Renew ' + sb.id + ': expire it from now in'), sel,
        h('div.row.end',
          h('button.ghost', { type: 'button', on: { click: () => done(0) } }, 'Cancel'),
          h('button', { type: 'button', on: { click: () => done(Number(sel.value)) } },
            'Renew'))));
      document.body.appendChild(back);
    });
  }

  // Per-sandbox figures from GET /metrics, when the server exports any: a family whose name
  // starts with sbx_sandbox_ and that has a label naming the sandbox.
  async function sandboxMetrics() {
    const out = {};
    let text = '';
    try {
      text = await (await raw('GET', '/metrics')).text();
    } catch (e) {
      return out;
    }
    const re = /^(sbx_sandbox_[a-z_]+)\{([^}]*)\}\s+([-+0-9.eE]+|NaN)/;
    for (const line of text.split('\n')) {
      const m = re.exec(line);
      if (!m) continue;
      const id = /(?:^|,)\s*(?:sandbox_id|sandbox|id)="([^"]+)"/.exec(m[2]);
      if (!id) continue;
      (out[id[1]] = out[id[1]] || {})[m[1]] = Number(m[3]);
    }
    return out;
  }
  function usage(m) {
    if (!m) return '—';
    const pick = (re) => {
      const k = Object.keys(m).find((n) => re.test(n));
      return k === undefined ? undefined : m[k];
    };
    const cpu = pick(/cpu/);
    const mem = pick(/mem|rss/);
    const parts = [];
    if (cpu !== undefined) parts.push('CPU ' + cpu.toFixed(1) + 's');
    if (mem !== undefined) parts.push(bytes(mem));
    return parts.length ? parts.join(' · ') : '—';
  }

  // ---- the sandbox list ----

  const listState = { state: '', provider: '', text: '' };

  function showList() {
    const body = h('tbody#sandbox-rows');
    const count = h('span.dim#count', '');
    const stateSel = h('select#filter-state', { 'aria-label': 'state' },
      ['', 'Running', 'Paused', 'Stopped', 'Pending', 'Starting', 'Stopping', 'Failed']
        .map((s) => h('option', { value: s, selected: s === listState.state }, s || 'any state')));
    const provSel = h('select#filter-provider', { 'aria-label': 'provider' },
      h('option', { value: '' }, 'any provider'));
    const text = h('input#filter-text', { type: 'search', placeholder: 'filter: id, image, ' +
      'metadata', value: listState.text, 'aria-label': 'filter' });
    let items = [];
    let metrics = {};
    let providers = new Set();

    function render() {
      const q = listState.text.toLowerCase();
      const shown = items.filter((sb) =>
        (!listState.provider || sb.provider === listState.provider) &&
        (!q || [sb.id, imageOf(sb), nameOf(sb), sb.status && sb.status.state,
                ...Object.entries(sb.metadata || {}).map(([k, v]) => k + '=' + v)]
          .some((s) => String(s || '').toLowerCase().includes(q))));
      clear(body);
      for (const sb of shown) {
        const st = (sb.status && sb.status.state) || 'Unknown';
        const open = '#/sandbox/' + encodeURIComponent(sb.id);
        const name = nameOf(sb);
        body.appendChild(h('tr.sandbox', { dataset: { id: sb.id } },
          h('td.id', h('a.mono', { href: open, title: sb.id }, sb.id.slice(0, 8)),
            name ? h('div.name', name) : null,
            h('div.chips', chips(sb.metadata, name && sb.metadata && sb.metadata.name === name
              ? 'name' : ''))),
          h('td', stateBadge(st), reasonOf(sb) ? h('div.dim.small', reasonOf(sb)) : null),
          h('td', sb.provider || '—'),
          h('td.image', { title: imageOf(sb) }, imageOf(sb)),
          h('td.num', { title: sb.createdAt || '' }, since(sb.createdAt)),
          h('td.num', { title: sb.expiresAt || '' }, until(sb.expiresAt)),
          h('td.num.usage', usage(metrics[sb.id])),
          h('td.actions', actionsFor(st).map(([label, verb, cls]) =>
            h('button.small' + (cls ? '.' + cls : '.ghost'), {
              type: 'button', dataset: { verb },
              on: { click: () => act(sb, verb, load) },
            }, label)))));
      }
      if (!shown.length)
        body.appendChild(h('tr.empty', h('td', { colspan: 8 },
          items.length ? 'No sandbox matches the filter.' : 'No sandboxes yet.')));
      count.textContent = shown.length === items.length ? items.length + ' sandboxes'
                                                        : shown.length + ' of ' + items.length;
    }

    async function load() {
      try {
        const q = new URLSearchParams({ pageSize: '200' });
        if (listState.state) q.append('state', listState.state);
        const all = [];
        for (let page = 1; page <= 50; page++) {
          q.set('page', String(page));
          const r = await api('GET', '/v1/sandboxes?' + q);
          all.push(...r.items);
          if (!r.pagination || !r.pagination.hasNextPage) break;
        }
        items = all;
        for (const sb of items) if (sb.provider) providers.add(sb.provider);
        syncProviders();
        render();
        $('live').textContent = 'updated ' + new Date().toLocaleTimeString();
        document.body.dataset.loaded = '1';
      } catch (e) {
        $('live').textContent = 'cannot list: ' + e.message;
      }
    }
    function syncProviders() {
      const have = new Set(Array.from(provSel.options, (o) => o.value));
      for (const p of providers) {
        if (!have.has(p)) provSel.appendChild(h('option', { value: p }, p));
      }
      provSel.value = listState.provider;
    }
    // The usage column is shown when the server exports per-sandbox figures at all.
    async function loadMetrics() {
      metrics = await sandboxMetrics();
      $('sandboxes').classList.toggle('no-usage', !Object.keys(metrics).length);
      render();
    }

    stateSel.addEventListener('change', () => { listState.state = stateSel.value; load(); });
    provSel.addEventListener('change', () => { listState.provider = provSel.value; render(); });
    text.addEventListener('input', () => { listState.text = text.value; render(); });

    setView('list',
      h('div.toolbar',
        h('h1', 'Sandboxes'), count,
        h('div.grow'), text, stateSel, provSel,
        h('button#new-sandbox', { type: 'button', on: { click: () => showCreate(load) } },
          'New sandbox')),
      h('div.card.flush', h('table.list.no-usage#sandboxes',
        h('thead', h('tr', ['Sandbox', 'State', 'Provider', 'Image', 'Age', 'Expires']
          .map((t) => h('th', t)), h('th.usage', 'Usage'), h('th'))),
        body)));
    api('GET', '/v1/admin/server').then((s) => {
      for (const p of s.providers.supported) providers.add(p);
      syncProviders();
    }).catch(() => {});
    load();
    loadMetrics();
    every(REFRESH_MS, load);
    every(15000, loadMetrics);
  }

  // ---- create ----

  // "K=V" lines into an object (blank lines skipped); throws on a line without '='.
  function pairs(text, what) {
    const o = {};
    for (const line of text.split('\n')) {
      if (!line.trim()) continue;
      const i = line.indexOf('=');
      if (i <= 0) throw new Error(what + ': `' + line + '` is not KEY=VALUE');
      o[line.slice(0, i).trim()] = line.slice(i + 1);
    }
    return o;
  }
  // An entrypoint: a JSON array, or words split on blanks.
  function words(text) {
    const t = text.trim();
    if (t.startsWith('[')) return JSON.parse(t);
    return t ? t.split(/\s+/) : [];
  }

  async function showCreate(after) {
    let server = null;
    try { server = await api('GET', '/v1/admin/server'); } catch (e) { /* fields stay open */ }
    const field = (label, input, hint) =>
      h('label.field', h('span', label), input, hint ? h('small.dim', hint) : null);
    const f = {
      image: h('input#c-image', { value: 'host', required: true }),
      entrypoint: h('input#c-entrypoint', { value: 'sleep infinity' }),
      provider: h('select#c-provider', h('option', { value: '' }, 'the default' +
        (server && server.providers.default ? ' (' + server.providers.default + ')' : '')),
        (server ? server.providers.supported : []).map((p) => h('option', { value: p }, p))),
      timeout: h('input#c-timeout', { type: 'number', min: 60, value: 3600 }),
      cpu: h('input#c-cpu', { value: '1' }),
      memory: h('input#c-memory', { value: '1Gi' }),
      env: h('textarea#c-env', { rows: 3, placeholder: 'KEY=VALUE, one a line' }),
      metadata: h('textarea#c-metadata', { rows: 3, placeholder: 'key=value, one a line' }),
      desktop: h('input#c-desktop', { type: 'checkbox' }),
    };
    const err = h('p.error#c-error');
    const done = () => back.remove();
    const form = h('form.modal.wide#create', {
      on: {
        submit: async (e) => {
          e.preventDefault();
          err.textContent = '';
          let body;
          try {
            body = { image: { uri: f.image.value.trim() }, entrypoint: words(f.entrypoint.value),
                     resourceLimits: { cpu: f.cpu.value.trim(), memory: f.memory.value.trim() },
                     env: pairs(f.env.value, 'env'), metadata: pairs(f.metadata.value,
                                                                     'metadata') };
            const t = f.timeout.value.trim();
            body.timeout = t ? Number(t) : null;
            if (f.provider.value) body.provider = f.provider.value;
            if (f.desktop.checked) body.extensions = { 'sbx.desktop': 'true' };
          } catch (x) {
            err.textContent = x.message;
            return;
          }
          const go = form.querySelector('button[type=submit]');
          go.disabled = true;
          go.textContent = 'Creating…';
          try {
            const sb = await api('POST', '/v1/sandboxes', body);
            done();
            toast('Created ' + sb.id);
            if (after) after();
          } catch (x) {
            err.textContent = x.message;
            go.disabled = false;
            go.textContent = 'Create';
          }
        },
      },
    },
    h('h2', 'New sandbox'),
    h('div.grid2',
      field('Image', f.image, 'host (built in), or an image the provider knows'),
      field('Provider', f.provider),
      field('Entrypoint', f.entrypoint, 'words, or a JSON array'),
      field('Timeout (seconds)', f.timeout, 'empty: no expiry' + (server ? ', at most ' +
        server.limits.maxTimeoutSeconds : '')),
      field('CPU', f.cpu), field('Memory', f.memory),
      field('Environment', f.env), field('Metadata', f.metadata, 'label rules: ' +
        '[A-Za-z0-9._-], up to 63 characters'),
      h('label.check', f.desktop, ' with a desktop (extensions["sbx.desktop"])')),
    err,
    h('div.row.end', h('button.ghost', { type: 'button', on: { click: done } }, 'Cancel'),
      h('button', { type: 'submit' }, 'Create')));
    const back = h('div.modal-back', form);
    document.body.appendChild(back);
    f.image.focus();
  }

  // ---- one sandbox ----

  const TABS = [['overview', 'Overview'], ['events', 'Events & logs'], ['files', 'Files'],
                ['terminal', 'Terminal'], ['desktop', 'Desktop']];

  function showSandbox(id, tab) {
    const head = h('div.toolbar#sb-head', h('h1', h('a.dim', { href: '#/sandboxes' },
      'Sandboxes'), ' / ', h('span.mono#sb-id', id)));
    const panel = h('div#panel');
    const tabs = h('nav.tabs', TABS.map(([t, label]) => h('a', {
      href: '#/sandbox/' + encodeURIComponent(id) + '/' + t, class: t === tab ? 'on' : null,
      dataset: { tab: t } }, label)));
    setView('sandbox', head, tabs, panel);
    let sb = null;
    const actions = h('div.actions#sb-actions');
    const state = h('span#sb-state');
    head.append(state, h('div.grow'), actions);

    async function load() {
      try {
        sb = await api('GET', sbxPath(id));
      } catch (e) {
        clear(state).appendChild(h('span.error', e.status === 404 ? 'gone' : e.message));
        clear(actions);
        return null;
      }
      clear(state).appendChild(stateBadge(sb.status && sb.status.state));
      clear(actions);
      append(actions, actionsFor(sb.status && sb.status.state).map(([label, verb, cls]) =>
        h('button.small' + (cls ? '.' + cls : '.ghost'), {
          type: 'button', dataset: { verb },
          on: { click: () => act(sb, verb, () => (verb === 'delete' ? (location.hash =
            '#/sandboxes') : load().then(refreshTab))) },
        }, label)));
      return sb;
    }
    let refreshTab = () => {};
    load().then((s) => {
      const fn = { overview: tabOverview, events: tabEvents, files: tabFiles,
                   terminal: tabTerminal, desktop: tabDesktop }[tab] || tabOverview;
      refreshTab = fn(id, s, panel) || (() => {});
    });
    every(REFRESH_MS, () => load().then(() => refreshTab()));
  }

  function kv(rows) {
    return h('table.kv', h('tbody', rows.filter(Boolean).map(([k, v]) =>
      h('tr', h('th', k), h('td', v)))));
  }

  function tabOverview(id, sb, panel) {
    const box = h('div');
    const render = () => {
      if (!sb) return;
      clear(box);
      append(box, h('div.cols',
        h('section.card', h('h2', 'Sandbox'), kv([
          ['Id', h('span.mono', sb.id)],
          nameOf(sb) ? ['Name', nameOf(sb)] : null,
          ['State', [stateBadge(sb.status.state), ' ', sb.status.reason || '']],
          sb.status.message ? ['Message', h('span.msg', sb.status.message)] : null,
          ['Provider', sb.provider || '—'],
          ['Image', imageOf(sb)],
          ['Entrypoint', h('span.mono', JSON.stringify(sb.entrypoint || []))],
          ['Created', (sb.createdAt || '—') + ' (' + since(sb.createdAt) + ' ago)'],
          ['Expires', sb.expiresAt ? sb.expiresAt + ' (' + until(sb.expiresAt) + ')' : 'never'],
          ['Metadata', Object.keys(sb.metadata || {}).length ? h('div.chips#sb-metadata',
            chips(sb.metadata)) : '—'],
          ['Extensions', Object.keys(sb.extensions || {}).length ? h('div.chips',
            chips(sb.extensions)) : '—'],
        ])),
        h('section.card', h('h2', 'Inspect'), h('pre.json#inspect',
          JSON.stringify(sb, null, 2)))));
    };
    render();
    panel.appendChild(box);
    return async () => {
      try { sb = await api('GET', sbxPath(id)); render(); } catch (e) { /* head says */ }
    };
  }

  function tabEvents(id, sb, panel) {
    const events = h('pre.log#events');
    const logs = h('pre.log#logs');
    const scopeSel = h('select#log-scope', ['all', 'container', 'lifecycle']
      .map((s) => h('option', { value: s }, s)));
    const note = h('span.dim.small');
    async function load() {
      try {
        const e = await api('GET', sbxPath(id) + '/diagnostics/events?scope=all');
        events.textContent = e.content || '(none)';
      } catch (x) { events.textContent = 'cannot read: ' + x.message; }
      try {
        const stick = logs.scrollTop + logs.clientHeight >= logs.scrollHeight - 4;
        const l = await api('GET', sbxPath(id) + '/diagnostics/logs?scope=' + scopeSel.value);
        logs.textContent = l.content || '(empty)';
        note.textContent = l.truncated ? 'older lines were dropped' : '';
        if (stick) logs.scrollTop = logs.scrollHeight;
      } catch (x) { logs.textContent = 'cannot read: ' + x.message; }
    }
    scopeSel.addEventListener('change', load);
    append(panel,
      h('section.card', h('h2', 'Events'), events),
      h('section.card', h('div.row', h('h2', 'Logs'), h('div.grow'), note, scopeSel), logs));
    load();
    return load;
  }

  // ---- files (execd's files API through the router) ----

  function tabFiles(id, sb, panel) {
    const pathIn = h('input#files-path', { value: '/tmp', 'aria-label': 'directory' });
    const rows = h('tbody#files');
    const status = h('p.dim.small#files-status');
    const upIn = h('input#upload', { type: 'file', multiple: true });
    let cwd = '/tmp';
    const join = (dir, name) => (dir.endsWith('/') ? dir : dir + '/') + name;
    const base = (p) => p.replace(/\/+$/, '').split('/').pop() || '/';
    const parent = (p) => p.replace(/\/+$/, '').replace(/\/[^/]*$/, '') || '/';

    async function list(dir) {
      status.textContent = 'loading…';
      try {
        const r = await api('GET', execd(id, '/directories/list?' +
          new URLSearchParams({ path: dir, depth: '1' })));
        cwd = dir;
        pathIn.value = dir;
        clear(rows);
        if (dir !== '/')
          rows.appendChild(h('tr', h('td', h('a', { href: '#', on: { click: (e) => {
            e.preventDefault(); list(parent(dir)); } } }, '..')), h('td'), h('td'), h('td'),
          h('td')));
        const items = (r || []).slice().sort((a, b) =>
          (a.type !== 'directory') - (b.type !== 'directory') || (a.path < b.path ? -1 : 1));
        for (const f of items) {
          const name = base(f.path);
          const isDir = f.type === 'directory';
          rows.appendChild(h('tr.file', { dataset: { path: f.path } },
            h('td.fname', isDir ? h('a.dir', { href: '#', on: { click: (e) => {
              e.preventDefault(); list(f.path); } } }, name + '/') : h('span', name)),
            h('td.num', isDir ? '' : bytes(f.size)),
            h('td.mono.small', f.mode !== undefined ? String(f.mode) : ''),
            h('td.small', f.modified_at || ''),
            h('td.actions', isDir ? null : h('button.small.ghost', { type: 'button',
              on: { click: () => download(f.path) } }, 'Download'))));
        }
        status.textContent = items.length + ' entries';
      } catch (e) {
        status.textContent = 'cannot list ' + dir + ': ' + e.message;
      }
    }

    async function download(path) {
      try {
        const r = await raw('GET', execd(id, '/files/download?' + new URLSearchParams({ path })));
        const url = URL.createObjectURL(await r.blob());
        const a = h('a', { href: url, download: base(path) });
        document.body.appendChild(a);
        a.click();
        a.remove();
        setTimeout(() => URL.revokeObjectURL(url), 10000);
      } catch (e) {
        toast('download failed: ' + e.message, true);
      }
    }

    async function upload() {
      const files = Array.from(upIn.files || []);
      if (!files.length) return;
      const fd = new FormData();
      for (const file of files) {
        fd.append('metadata', new Blob([JSON.stringify({ path: join(cwd, file.name),
                                                         mode: 644 })],
                                       { type: 'application/json' }), 'metadata');
        fd.append('file', file, file.name);
      }
      status.textContent = 'uploading ' + files.length + ' file(s)…';
      try {
        await raw('POST', execd(id, '/files/upload'), fd);
        toast('Uploaded ' + files.map((f) => f.name).join(', '));
        upIn.value = '';
      } catch (e) {
        toast('upload failed: ' + e.message, true);
      }
      list(cwd);
    }

    append(panel, h('section.card',
      h('form.row', { on: { submit: (e) => { e.preventDefault(); list(pathIn.value || '/'); } } },
        pathIn, h('button.ghost', { type: 'submit' }, 'Go'), h('div.grow'),
        h('label.button', 'Upload…', upIn)),
      status,
      h('table.list.files', h('thead', h('tr', ['Name', 'Size', 'Mode', 'Modified', '']
        .map((t) => h('th', t)))), rows)));
    upIn.addEventListener('change', upload);
    list(cwd);
    return null;
  }

  // ---- terminal: execd's PTY over the router's WebSocket, and a command runner ----

  // A small terminal: enough of the VT100/xterm output a shell and readline produce (text,
  // CR, LF, BS, tab, erase in line/display, cursor moves on the line, insert/delete
  // characters); colours, titles and modes are dropped. Everything is drawn as text.
  class Screen {
    constructor(el, maxLines) {
      this.el = el;
      this.max = maxLines || 2000;
      this.lines = [''];
      this.row = 0;
      this.col = 0;
      this.esc = '';
      this.dec = new TextDecoder();
      this.pending = false;
    }
    put(ch) {
      let l = this.lines[this.row];
      if (l.length < this.col) l += ' '.repeat(this.col - l.length);
      this.lines[this.row] = l.slice(0, this.col) + ch + l.slice(this.col + 1);
      this.col++;
    }
    newline() {
      this.row++;
      if (this.row >= this.lines.length) this.lines.push('');
      if (this.lines.length > this.max) {
        this.lines.splice(0, this.lines.length - this.max);
        this.row = this.lines.length - 1;
      }
    }
    csi(params, final) {
      const n = parseInt(params.replace(/^\?/, ''), 10);
      const l = this.lines[this.row];
      switch (final) {
        case 'K':
          if (!n) this.lines[this.row] = l.slice(0, this.col);
          else if (n === 1) this.lines[this.row] = ' '.repeat(this.col) + l.slice(this.col);
          else this.lines[this.row] = '';
          break;
        case 'J':
          if (n === 2 || n === 3) {
            this.lines = [''];
            this.row = 0;
            this.col = 0;
          } else if (!n) {
            this.lines.length = this.row + 1;
            this.lines[this.row] = l.slice(0, this.col);
          }
          break;
        case 'C': this.col += n || 1; break;
        case 'D': this.col = Math.max(0, this.col - (n || 1)); break;
        case 'G': this.col = Math.max(0, (n || 1) - 1); break;
        case 'P':
          this.lines[this.row] = l.slice(0, this.col) + l.slice(this.col + (n || 1));
          break;
        case '@':
          this.lines[this.row] = l.slice(0, this.col) + ' '.repeat(n || 1) + l.slice(this.col);
          break;
        case 'H': // home: the top of what is shown is the last line here (no screen model)
          if (!params) {
            this.row = Math.max(0, this.lines.length - 1);
            this.col = 0;
          }
          break;
        default: break; // colours (m), modes (h, l) and the rest: ignored
      }
    }
    feed(bytes) {
      const text = this.dec.decode(bytes, { stream: true });
      for (const ch of text) {
        if (this.esc) {
          this.esc += ch;
          const e = this.esc;
          if (e.length === 2 && e[1] !== '[' && e[1] !== ']' && e[1] !== '(' && e[1] !== ')') {
            this.esc = ''; // a two-character escape (ESC =, ESC >, ESC M...)
          } else if (e[1] === '[' && e.length > 2 && /[@-~]/.test(ch)) {
            this.csi(e.slice(2, -1), ch);
            this.esc = '';
          } else if (e[1] === ']' && (ch === '\x07' || e.endsWith('\x1b\\'))) {
            this.esc = ''; // OSC: a title
          } else if ((e[1] === '(' || e[1] === ')') && e.length === 3) {
            this.esc = '';
          } else if (e.length > 256) {
            this.esc = '';
          }
          continue;
        }
        if (ch === '\x1b') this.esc = ch;
        else if (ch === '\r') this.col = 0;
        else if (ch === '\n') this.newline();
        else if (ch === '\b') this.col = Math.max(0, this.col - 1);
        else if (ch === '\t') this.col = (Math.floor(this.col / 8) + 1) * 8;
        else if (ch === '\x07' || ch < ' ') continue;
        else this.put(ch);
      }
      this.draw();
    }
    draw() {
      if (this.pending) return;
      this.pending = true;
      requestAnimationFrame(() => {
        this.pending = false;
        const stick = this.el.scrollTop + this.el.clientHeight >= this.el.scrollHeight - 4;
        const before = this.lines.slice(0, this.row).join('\n');
        const cur = this.lines[this.row];
        const at = cur.padEnd(this.col + 1, ' ');
        clear(this.el);
        append(this.el, (before ? before + '\n' : '') + at.slice(0, this.col),
               h('span.cursor', at[this.col]), at.slice(this.col + 1),
               this.lines.length > this.row + 1 ? '\n' + this.lines.slice(this.row + 1)
                 .join('\n') : '');
        if (stick) this.el.scrollTop = this.el.scrollHeight;
      });
    }
    text() { return this.lines.join('\n'); }
  }

  const KEYS = { Enter: '\r', Backspace: '\x7f', Tab: '\t', Escape: '\x1b', ArrowUp: '\x1b[A',
                 ArrowDown: '\x1b[B', ArrowRight: '\x1b[C', ArrowLeft: '\x1b[D',
                 Home: '\x1b[H', End: '\x1b[F', Delete: '\x1b[3~', PageUp: '\x1b[5~',
                 PageDown: '\x1b[6~' };
  function keyBytes(e) {
    if (e.ctrlKey && !e.altKey && e.key.length === 1) {
      const c = e.key.toUpperCase().charCodeAt(0);
      if (c >= 64 && c <= 95) return String.fromCharCode(c - 64);
      return null;
    }
    if (KEYS[e.key]) return KEYS[e.key];
    if (e.key.length === 1 && !e.metaKey) return (e.altKey ? '\x1b' : '') + e.key;
    return null;
  }

  function tabTerminal(id, sb, panel) {
    const screen = h('pre.term#term', { tabindex: 0, 'aria-label': 'terminal' });
    const status = h('span.dim.small#term-status', 'not connected');
    const connectBtn = h('button#term-connect', { type: 'button' }, 'Open a shell');
    const endBtn = h('button.ghost#term-end', { type: 'button', disabled: true }, 'End');
    const term = new Screen(screen);
    let ws = null;
    let session = '';

    function size() {
      const probe = h('span', 'x'.repeat(10));
      screen.appendChild(probe);
      const cw = probe.getBoundingClientRect().width / 10 || 8;
      const lh = parseFloat(getComputedStyle(screen).lineHeight) || 16;
      probe.remove();
      return { cols: Math.max(20, Math.floor((screen.clientWidth - 16) / cw)),
               rows: Math.max(5, Math.floor((screen.clientHeight - 16) / lh)) };
    }
    function send(obj) {
      if (ws && ws.readyState === WebSocket.OPEN) ws.send(JSON.stringify(obj));
    }
    async function connect() {
      connectBtn.disabled = true;
      status.textContent = 'starting…';
      try {
        const r = await api('POST', execd(id, '/pty'), {});
        session = r.session_id;
      } catch (e) {
        status.textContent = 'cannot start a shell: ' + e.message;
        connectBtn.disabled = false;
        return;
      }
      const { cols, rows } = size();
      const scheme = location.protocol === 'https:' ? 'wss:' : 'ws:';
      const url = scheme + '//' + location.host + execd(id, '/pty/' + encodeURIComponent(session) +
        '/ws?' + new URLSearchParams({ cols: String(cols), rows: String(rows) }));
      ws = new WebSocket(url, ['sbx-console', 'sbx-api-key.' + hex(key())]);
      ws.binaryType = 'arraybuffer';
      ws.onopen = () => {
        status.textContent = 'connected (' + cols + '×' + rows + ')';
        endBtn.disabled = false;
        screen.focus();
      };
      ws.onmessage = (ev) => {
        if (typeof ev.data === 'string') {
          let m = {};
          try { m = JSON.parse(ev.data); } catch (e) { return; }
          if (m.type === 'exit') status.textContent = 'exited with ' + m.exit_code;
          if (m.type === 'error') status.textContent = 'error: ' + (m.error || m.code);
          return;
        }
        const b = new Uint8Array(ev.data);
        if (b[0] === 1 || b[0] === 2) term.feed(b.subarray(1));
        else if (b[0] === 3 && b.length >= 9) term.feed(b.subarray(9));
      };
      ws.onclose = (ev) => {
        if (!/exited/.test(status.textContent))
          status.textContent = 'closed' + (ev.code !== 1000 ? ' (' + ev.code + ')' : '');
        connectBtn.disabled = false;
        endBtn.disabled = true;
        ws = null;
      };
      ws.onerror = () => { status.textContent = 'the connection failed'; };
    }
    async function end() {
      if (session) await api('DELETE', execd(id, '/pty/' + encodeURIComponent(session)))
        .catch(() => {});
      session = '';
    }
    screen.addEventListener('keydown', (e) => {
      const s = keyBytes(e);
      if (s === null || !ws) return;
      e.preventDefault();
      send({ type: 'stdin', data: s });
    });
    screen.addEventListener('paste', (e) => {
      e.preventDefault();
      send({ type: 'stdin', data: e.clipboardData.getData('text') });
    });
    const onResize = () => { if (ws) send(Object.assign({ type: 'resize' }, size())); };
    window.addEventListener('resize', onResize);
    connectBtn.addEventListener('click', connect);
    endBtn.addEventListener('click', end);
    cleanups.push(() => {
      window.removeEventListener('resize', onResize);
      if (ws) ws.close();
      end();
    });

    // the runner: POST /command, its events streamed as they come
    const cmdIn = h('input#run-command', { placeholder: 'a command, e.g. uname -a',
                                            'aria-label': 'command' });
    const out = h('pre.log#run-output');
    const runStatus = h('span.dim.small#run-status');
    async function run(e) {
      e.preventDefault();
      const command = cmdIn.value;
      if (!command.trim()) return;
      out.textContent = '';
      runStatus.textContent = 'running…';
      try {
        const r = await raw('POST', execd(id, '/command'), { command });
        const reader = r.body.getReader();
        const dec = new TextDecoder();
        let buf = '';
        for (;;) {
          const { value, done } = await reader.read();
          if (done) break;
          buf += dec.decode(value, { stream: true });
          let i;
          while ((i = buf.indexOf('\n\n')) >= 0) {
            const chunk = buf.slice(0, i).replace(/^data: ?/, '');
            buf = buf.slice(i + 2);
            let ev;
            try { ev = JSON.parse(chunk); } catch (x) { continue; }
            if (ev.type === 'stdout' || ev.type === 'stderr') {
              out.appendChild(ev.type === 'stderr' ? h('span.stderr', ev.text + '\n')
                                                   : document.createTextNode(ev.text + '\n'));
              out.scrollTop = out.scrollHeight;
            } else if (ev.type === 'execution_complete') {
              runStatus.textContent = 'exit 0 · ' + ev.execution_time + ' ms';
            } else if (ev.type === 'error') {
              runStatus.textContent = 'exit ' + ((ev.error && ev.error.evalue) || '?');
            }
          }
        }
        if (runStatus.textContent === 'running…') runStatus.textContent = 'ended';
      } catch (x) {
        runStatus.textContent = 'failed: ' + x.message;
      }
    }

    append(panel,
      h('section.card', h('div.row', h('h2', 'Terminal'), status, h('div.grow'), endBtn,
                          connectBtn), screen),
      h('section.card', h('div.row', h('h2', 'Run a command'), runStatus),
        h('form.row#run', { on: { submit: run } }, cmdIn, h('button', { type: 'submit' },
                                                             'Run')), out));
    return null;
  }

  // ---- desktop: the live viewer (/desktop/view/<id>#token=...) with a view token ----

  function tabDesktop(id, sb, panel) {
    const out = h('div#desktop-view');
    const link = h('span');
    const has = sb && sb.extensions && sb.extensions['sbx.desktop'];
    async function show() {
      clear(out);
      clear(link);
      try {
        const r = await api('POST', sbxPath(id) + '/desktop/view', { ttlSeconds: 3600 });
        // the viewer page, framed (it allows this origin only) and in a tab of its own; the
        // view token stays in the fragment
        link.appendChild(h('a.button.ghost#desktop-open', { href: r.path, target: '_blank',
                                                             rel: 'noopener noreferrer' },
          'Open in a new tab ↗'));
        append(out,
          h('p.dim.small', 'A view token for this sandbox only, valid until ' + r.expiresAt +
            '.'),
          h('iframe.desktop#desktop-frame', { src: r.path, title: 'live desktop',
                                              referrerpolicy: 'no-referrer' }));
      } catch (e) {
        out.appendChild(h('p.error', e.message));
      }
    }
    append(panel, h('section.card', h('div.row', h('h2', 'Live desktop'), h('div.grow'), link,
      h('button#desktop-mint', { type: 'button', on: { click: show } },
        has ? 'Reconnect' : 'Show the desktop')),
      has ? null : h('p.dim', 'This sandbox was not created with a desktop; one started ' +
        'inside it later (POST /desktop/start through the router, or `sbx desktop start`) ' +
        'shows here.'),
      out));
    if (has) show();
    return null;
  }

  // ---- the server page ----

  function showServer() {
    const box = h('div#server');
    setView('server', h('div.toolbar', h('h1', 'Server')), box);
    async function load() {
      let info = null, health = null, secrets = null;
      const errs = [];
      await Promise.all([
        api('GET', '/v1/admin/server').then((x) => { info = x; }, (e) => errs.push(e.message)),
        api('GET', '/v1/health').then((x) => { health = x; }, (e) => errs.push(e.message)),
        api('GET', '/v1/admin/secrets').then((x) => { secrets = x; },
                                             (e) => errs.push(e.message)),
      ]);
      clear(box);
      if (errs.length) box.appendChild(h('p.error', errs.join('; ')));
      if (!info) return;
      const prov = (health && health.providers) || info.providers.status || [];
      const L = info.limits;
      const about = h('section.card', h('h2', 'sbx ' + info.version), kv([
        ['Health', health ? h('span.badge', { dataset: { state: health.status === 'healthy'
          ? 'Running' : 'Failed' } }, health.status) : '—'],
        ['Store', health && health.store ? (health.store.writable ? 'writable'
          : 'not writable: ' + (health.store.reason || '')) : '—'],
        ['Listen', info.listen],
        ['Public address', info.publicAddr || "(the request's Host)"],
        ['State dir', h('span.mono', info.stateDir)],
        ['Metrics', info.metricsAuth ? '/metrics (with the API key)' : '/metrics (public)'],
      ]));
      const limits = h('section.card', h('h2', 'Limits'), kv([
        ['Sandboxes', String(L.maxSandboxes)],
        ['Longest timeout', ago(L.maxTimeoutSeconds * 1000)],
        ['Request body', bytes(L.maxBodyBytes)],
        ['Create workers', String(L.createWorkers)],
        ['Connections', L.maxConnections + ' (' + L.maxConnectionsPerClient + ' per client)'],
        ['Default memory', L.sandboxMemory || 'none'],
        ['Reuse wait', L.waitUsableSeconds + ' s'],
      ]));
      const provState = (st) => (st === 'ready' ? 'Running' : st === 'failed' ? 'Failed'
                                                                          : 'Pending');
      const provRows = prov.map((p) => h('tr',
        h('td', p.name),
        h('td', h('span.badge', { dataset: { state: provState(p.state) } }, p.state)),
        h('td.msg', p.reason || ''),
        h('td', p.name === info.providers.default ? h('span.chip', 'default') : '')));
      const providers = h('section.card', h('h2', 'Providers'), h('table.list#providers',
        h('thead', h('tr', ['Provider', 'State', 'Reason', ''].map((t) => h('th', t)))),
        h('tbody', provRows)));
      const imageRows = info.images.map((i) => h('tr',
        h('td', i.name),
        h('td.mono.small', { title: i.digest }, i.digest.replace(/^sha256:/, '').slice(0, 12)),
        h('td.num', bytes(i.size)),
        h('td.small', i.created || '—')));
      const images = h('section.card', h('h2', 'Images'), imageRows.length
        ? h('table.list#images', h('thead', h('tr', ['Image', 'Digest', 'Size', 'Created']
          .map((t) => h('th', t)))), h('tbody', imageRows))
        : h('p.dim', 'No images in the local store (the ', h('code', 'host'), ' image is ' +
            'built in; pull with ', h('code', 'sbx image pull'), ').'));
      append(box, h('div.cols', about, limits), providers, images, secretsCard(secrets, load));
    }
    load();
  }

  function secretsCard(secrets, reload) {
    const name = h('input#secret-name', { placeholder: 'NAME', 'aria-label': 'secret name' });
    const value = h('input#secret-value', { type: 'password', placeholder: 'value',
                                             autocomplete: 'off', 'aria-label': 'secret value' });
    const items = (secrets && secrets.items) || [];
    return h('section.card', h('h2', 'Secrets'),
      h('p.dim.small', 'Names and dates only: a value is never shown again once set.'),
      h('table.list#secrets', h('thead', h('tr', ['Name', 'Updated', ''].map((t) => h('th', t)))),
        h('tbody', items.length ? items.map((s) => h('tr', h('td.mono', s.name),
          h('td.small', s.updatedAt || s.createdAt || ''),
          h('td.actions', h('button.small.danger', { type: 'button', on: { click: async () => {
            if (!await ask('Remove the secret ' + s.name + '?', 'Remove')) return;
            try {
              await api('DELETE', '/v1/admin/secrets/' + encodeURIComponent(s.name));
              toast('Removed ' + s.name);
            } catch (e) { toast(e.message, true); }
            reload();
          } } }, 'Remove'))))
          : h('tr.empty', h('td', { colspan: 3 }, 'No secrets.')))),
      h('form.row#secret-set', { on: { submit: async (e) => {
        e.preventDefault();
        try {
          await api('PUT', '/v1/admin/secrets/' + encodeURIComponent(name.value.trim()),
                    { value: value.value });
          toast('Set ' + name.value.trim());
          value.value = '';
          reload();
        } catch (x) { toast(x.message, true); }
      } } }, name, value, h('button', { type: 'submit' }, 'Set')));
  }

  // ---- start ----

  $('signout').addEventListener('click', () => signOut(''));
  window.addEventListener('hashchange', route);
  route();
})();
