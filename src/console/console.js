// Sema Edge operator console. Plain script (the build only minifies it), served from this origin only.
//
// The bearer token lives in one variable of this closure: never in storage, a cookie or a URL.
// Every API call sends it in the Authorization header with `cache: 'no-store'`; logging out drops
// it, closes the stream and clears every panel, so nothing one principal saw stays for the next.
// A run's live events come through the browser's own EventSource, opened with a short-lived stream
// ticket (POST /v1/runs/{id}/stream-ticket) because EventSource cannot send a header.
'use strict';
(() => {
  const POLL_MS = 1500;
  let token = null;
  let pollTimer = null;
  let generation = 0; // bumped at every login and logout: answers of an older login are dropped
  const follow = { taskId: null, source: null, lastSeq: 0, done: false, retryTimer: null };

  const $ = (id) => document.getElementById(id);
  const el = (tag, text, cls) => {
    const e = document.createElement(tag);
    if (text !== undefined && text !== null) e.textContent = String(text);
    if (cls) e.className = cls;
    return e;
  };
  const time = (ms) => (typeof ms === 'number' ? new Date(ms).toISOString().replace('T', ' ').slice(0, 19) : '');
  const short = (id) => (id && id.length > 14 ? id.slice(0, 8) + '…' + id.slice(-4) : id || '');

  function notice(text, isError) {
    const n = $('notice');
    n.textContent = text || '';
    n.className = isError ? 'notice error' : 'notice';
  }

  function panelStatus(id, text, isError) {
    const p = $(id);
    p.textContent = text || '';
    p.className = isError ? 'panel-status error' : 'panel-status';
  }

  // One API call: the token in the header, nothing cached, nothing sent by the browser on its own.
  async function api(method, path, body) {
    const mine = generation;
    const headers = { Authorization: 'Bearer ' + token, Accept: 'application/json' };
    const init = { method, headers, cache: 'no-store', credentials: 'omit', redirect: 'error' };
    if (body !== undefined) {
      headers['Content-Type'] = 'application/json';
      init.body = JSON.stringify(body);
    }
    const resp = await fetch(path, init);
    let json = null;
    try { json = await resp.json(); } catch (_) { json = null; }
    if (mine !== generation) throw new Error('stale');
    return { status: resp.status, json };
  }

  const refusal = (r) => (r.json && r.json.error ? r.json.error + ' (' + r.json.errorCode + ')' : 'HTTP ' + r.status);

  function replaceRows(tbody, rows) {
    while (tbody.firstChild) tbody.removeChild(tbody.firstChild);
    for (const r of rows) tbody.appendChild(r);
  }

  function row(cells, cls) {
    const tr = el('tr', null, cls);
    for (const c of cells) {
      const td = c instanceof Node ? c : el('td', c);
      tr.appendChild(td.tagName === 'TD' ? td : wrapTd(td));
    }
    return tr;
  }
  function wrapTd(node) { const td = el('td'); td.appendChild(node); return td; }
  function statusCell(status) { return el('td', status, 'status status-' + String(status || '').replace(/[^a-z_]/g, '')); }

  // ---- panels ------------------------------------------------------------------------------------
  async function loadRuns() {
    const r = await api('GET', '/v1/runs?limit=50');
    if (r.status !== 200) { panelStatus('runs-status', refusal(r), true); return; }
    panelStatus('runs-status', r.json.runs.length + ' runs, newest first');
    const rows = r.json.runs.map((run) => {
      const tr = row([
        el('td', short(run.taskId), 'mono'),
        el('td', run.sessionId, 'mono'),
        statusCell(run.status),
        el('td', run.queue),
        el('td', (run.objectivePreview || '').split('\n')[0]),
        el('td', time(run.updatedAt)),
      ], 'run-row' + (run.taskId === follow.taskId ? ' selected' : ''));
      tr.dataset.taskId = run.taskId;
      tr.dataset.status = run.status;
      tr.title = run.taskId;
      tr.addEventListener('click', () => select(run.taskId, run.status));
      if (run.taskId === follow.taskId) showStatus(run.status);
      return tr;
    });
    replaceRows($('runs-rows'), rows);
  }

  async function loadSessions() {
    const r = await api('GET', '/v1/sessions?limit=50');
    if (r.status === 404) {
      panelStatus('sessions-status', 'not available: this server has no GET /v1/sessions');
      replaceRows($('sessions-rows'), []);
      return;
    }
    if (r.status !== 200) { panelStatus('sessions-status', refusal(r), true); return; }
    const list = r.json.sessions || [];
    panelStatus('sessions-status', list.length + ' sessions');
    replaceRows($('sessions-rows'), list.map((s) => {
      const active = s.activeRun || null;
      const activeId = (active && active.taskId) || s.activeTaskId || '';
      const activeStatus = (active && active.status) || s.activeTaskStatus || '';
      const gate = s.pendingGate || null;
      const tr = row([
        el('td', s.sessionId, 'mono'),
        el('td', activeId ? short(activeId) : '—', 'mono'),
        activeStatus ? statusCell(activeStatus) : el('td', ''),
        el('td', gate ? gate.kind || 'pending' : ''),
      ]);
      tr.dataset.sessionId = s.sessionId;
      return tr;
    }));
  }

  async function loadApprovals() {
    const r = await api('GET', '/v1/approvals?limit=100');
    if (r.status !== 200) { panelStatus('approvals-status', refusal(r), true); return; }
    const cards = r.json.approvals || [];
    panelStatus('approvals-status', cards.length ? cards.length + ' pending' : 'nothing pending');
    const list = $('approvals-list');
    const keep = new Map();
    for (const li of Array.from(list.children)) keep.set(li.dataset.key, li);
    const shown = new Set();
    for (const c of cards) {
      const key = c.sessionId + '/' + c.taskId + '/' + c.createdAt;
      shown.add(key);
      if (keep.has(key)) continue; // keep its outcome line and buttons as they are
      list.appendChild(card(c, key));
    }
    for (const [key, li] of keep) if (!shown.has(key)) list.removeChild(li);
  }

  // The decisions each decide path takes (wake needs an objective: left to the API and CLI).
  function decisionsFor(path) {
    if (/\/decide$/.test(path)) return ['approve', 'deny'];
    if (/\/plan_review$/.test(path)) return ['approve', 'revise'];
    if (/\/resume$/.test(path)) return ['continue', 'stop'];
    return [];
  }

  function card(c, key) {
    const li = el('li');
    li.dataset.key = key;
    li.dataset.sessionId = c.sessionId;
    li.dataset.taskId = c.taskId;
    li.appendChild(el('div', c.kind + ' · session ' + c.sessionId + ' · run ' + short(c.taskId)));
    const text = c.card && typeof c.card.text === 'string' ? c.card.text : JSON.stringify(c.card);
    li.appendChild(el('div', text, 'card-body'));
    const actions = el('div', null, 'actions');
    const outcome = el('span', c.expiresAt ? 'expires ' + time(c.expiresAt) : '', 'outcome');
    for (const d of decisionsFor(c.decidePath || '')) {
      const b = el('button', d, d === 'approve' || d === 'continue' ? 'approve' : 'deny');
      b.type = 'button';
      b.dataset.decision = d;
      b.addEventListener('click', async () => {
        outcome.textContent = d + '…';
        outcome.className = 'outcome';
        try {
          const r = await api('POST', c.decidePath, { decision: d });
          if (r.status === 200) {
            const done = { approve: 'approved', deny: 'denied', revise: 'sent back', continue: 'continued', stop: 'stopped' };
            outcome.textContent = (done[d] || d) + ': run ' + (r.json.status || '');
            for (const x of actions.querySelectorAll('button')) x.disabled = true;
          } else {
            outcome.textContent = refusal(r);
            outcome.className = 'outcome error';
          }
        } catch (e) {
          if (e.message !== 'stale') { outcome.textContent = String(e); outcome.className = 'outcome error'; }
        }
      });
      actions.appendChild(b);
    }
    actions.appendChild(outcome);
    li.appendChild(actions);
    return li;
  }

  async function loadLeaders() {
    const r = await api('GET', '/v1/leader/runs?limit=20');
    if (r.status !== 200) { panelStatus('leaders-status', refusal(r), true); replaceRows($('leaders-rows'), []); return; }
    const list = r.json.leaderRuns || [];
    panelStatus('leaders-status', list.length + ' leader runs');
    replaceRows($('leaders-rows'), list.map((l) => {
      const tr = row([
        el('td', short(l.id), 'mono'), statusCell(l.status), el('td', l.objectivePreview), el('td', time(l.startedAtMs)),
      ]);
      tr.dataset.id = l.id;
      tr.title = l.id;
      return tr;
    }));
  }

  async function loadReapers() {
    const r = await api('GET', '/v1/admin/reapers');
    if (r.status === 403) { panelStatus('reapers-status', 'needs an operator token'); replaceRows($('reapers-rows'), []); return; }
    if (r.status !== 200) { panelStatus('reapers-status', refusal(r), true); return; }
    const ticks = r.json.ticks || [];
    panelStatus('reapers-status', ticks.length ? 'last ' + ticks.length + ' ticks' : 'no tick yet');
    replaceRows($('reapers-rows'), ticks.map((t) => row([
      el('td', time(t.startedAt)), el('td', t.durationMs), el('td', t.reaped), el('td', t.requeued),
      el('td', t.parkedExpired), el('td', (t.terminalClaimsReleased || 0) + (t.orphanClaimsReleased || 0)),
      el('td', t.d1RoundTrips),
    ])));
  }

  async function refresh() {
    const mine = generation;
    const tasks = [loadRuns, loadApprovals, loadSessions, loadLeaders, loadReapers].map((f) => f().catch((e) => {
      if (e.message !== 'stale') notice('could not reach the API: ' + e, true);
    }));
    await Promise.all(tasks);
    if (mine === generation && token) pollTimer = setTimeout(refresh, POLL_MS);
  }

  // ---- one run's live events ---------------------------------------------------------------------
  function showStatus(status) {
    const s = $('run-status');
    s.textContent = status || '';
    s.className = 'status status-' + String(status || '').replace(/[^a-z_]/g, '');
    $('run-panel').dataset.status = status || '';
  }

  function streamState(text) { $('stream-state').textContent = text; }

  function stopFollowing() {
    if (follow.source) follow.source.close();
    if (follow.retryTimer) clearTimeout(follow.retryTimer);
    follow.source = null;
    follow.retryTimer = null;
  }

  function select(taskId, status) {
    if (follow.taskId === taskId) return;
    stopFollowing();
    follow.taskId = taskId;
    follow.lastSeq = 0;
    follow.done = false;
    $('run-id').textContent = taskId;
    $('run-hint').textContent = '';
    $('run-text').textContent = '';
    replaceRows($('run-events'), []);
    for (const tr of $('runs-rows').children) tr.classList.toggle('selected', tr.dataset.taskId === taskId);
    showStatus(status);
    openStream();
  }

  // A fresh ticket, then the stream after the last seq shown. EventSource reconnects by itself
  // (with Last-Event-ID) while the ticket lives; once it gives up (the ticket expired, the server
  // went away) we ask for a fresh ticket and reopen after the last seq seen: nothing lost, nothing twice.
  async function openStream() {
    const taskId = follow.taskId;
    const mine = generation;
    streamState('(connecting)');
    let r;
    try {
      r = await api('POST', '/v1/runs/' + encodeURIComponent(taskId) + '/stream-ticket');
    } catch (e) {
      if (e.message !== 'stale') retryStream(taskId);
      return;
    }
    if (mine !== generation || follow.taskId !== taskId) return;
    if (r.status !== 200) { streamState('(no stream: ' + refusal(r) + ')'); return; }
    const url = '/v1/runs/' + encodeURIComponent(taskId) + '/events?ticket=' + encodeURIComponent(r.json.ticket) +
      (follow.lastSeq ? '&after=' + follow.lastSeq : '');
    const source = new EventSource(url);
    follow.source = source;
    source.onopen = () => streamState('(live)');
    source.onmessage = (m) => {
      if (follow.source !== source) return;
      let ev;
      try { ev = JSON.parse(m.data); } catch (_) { return; }
      const seq = Number(m.lastEventId || ev.seq || 0);
      if (seq && seq <= follow.lastSeq) return;
      if (seq) follow.lastSeq = seq;
      showEvent(ev, seq);
      if (ev.type === 'done') {
        follow.done = true;
        source.close();
        streamState('(ended)');
      }
    };
    source.onerror = () => {
      if (follow.source !== source || follow.done) return;
      if (source.readyState === EventSource.CLOSED) retryStream(taskId);
      else streamState('(reconnecting)');
    };
  }

  function retryStream(taskId) {
    stopFollowing();
    streamState('(reconnecting)');
    follow.retryTimer = setTimeout(() => { if (follow.taskId === taskId && token) openStream(); }, 1000);
  }

  function showEvent(ev, seq) {
    const line = el('li');
    line.value = seq || 0;
    line.dataset.type = ev.type;
    let text = ev.type;
    if (ev.type === 'text_delta') {
      $('run-text').textContent += ev.delta || '';
      text += ' ' + JSON.stringify(ev.delta || '');
    } else if (ev.type === 'resumed') {
      text += ' ' + (ev.gate ? ev.gate.kind + ' ' : '') + (ev.decision || '');
      showStatus('running');
    } else if (ev.gate) {
      text += ' ' + ev.gate.kind + ': ' + JSON.stringify(ev.gate.card);
      showStatus(ev.type);
    } else if (ev.type === 'done') {
      const status = ev.result && ev.result.status;
      text += ' ' + (status || '');
      if (status) showStatus(status);
    }
    line.textContent = text;
    $('run-events').appendChild(line);
  }

  // ---- login and logout --------------------------------------------------------------------------
  function clearPanels() {
    for (const id of ['runs-rows', 'sessions-rows', 'leaders-rows', 'reapers-rows', 'approvals-list', 'run-events']) replaceRows($(id), []);
    for (const id of ['runs-status', 'sessions-status', 'leaders-status', 'reapers-status', 'approvals-status']) panelStatus(id, '');
    $('run-text').textContent = '';
    $('run-id').textContent = '';
    $('run-hint').textContent = 'Select a run to follow its events live.';
    streamState('');
    showStatus('');
  }

  async function login() {
    const input = $('token');
    const pasted = input.value.trim();
    input.value = '';
    if (!pasted) { notice('paste a bearer token first', true); return; }
    generation += 1;
    token = pasted;
    notice('checking the token…');
    let r;
    try { r = await api('GET', '/v1/runs?limit=1'); } catch (e) { if (e.message !== 'stale') { token = null; notice('could not reach the API: ' + e, true); } return; }
    if (r.status !== 200) { token = null; notice('login refused: ' + refusal(r), true); return; }
    const probe = await api('GET', '/v1/admin/reapers').catch(() => ({ status: 0 }));
    $('whoami').textContent = probe.status === 200 ? 'logged in with an operator token' : 'logged in with a client token';
    $('login').classList.add('hidden');
    $('session-bar').classList.remove('hidden');
    $('panels').classList.remove('hidden');
    notice('');
    refresh();
  }

  function logout() {
    generation += 1;
    token = null;
    if (pollTimer) clearTimeout(pollTimer);
    pollTimer = null;
    stopFollowing();
    follow.taskId = null;
    clearPanels();
    $('panels').classList.add('hidden');
    $('session-bar').classList.add('hidden');
    $('login').classList.remove('hidden');
    notice('logged out');
  }

  document.addEventListener('DOMContentLoaded', () => {
    $('login-button').addEventListener('click', login);
    $('token').addEventListener('keydown', (e) => { if (e.key === 'Enter') login(); });
    $('logout-button').addEventListener('click', logout);
  });
})();
