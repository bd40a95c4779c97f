// The operator console in a real browser: headless Chromium (Debian's /usr/bin/chromium) driven by
// playwright-core, against a live Worker with bearer tokens and a reference runner process.
//
// It loads the page (nothing fetched from elsewhere, no CSP violation), logs in with the operator
// token, follows a run that alice submitted through the API and sees its events arrive while the
// run is still going, sees it park on a tool_approval gate, is refused when deciding for alice as
// the operator (operators oversee, they do not decide for others), logs out and in as bob (alice's
// run is nowhere on the page), then as alice approves the gate in the page and sees the resumed run
// complete. Every API answer the page read is `no-store`; no token is ever in a URL or in storage.
// Screenshots go to $SEMA_ARTEFACTS (or a fresh temporary directory); their paths are printed.
//
//   SEMA_TOKEN_URL=http://127.0.0.1:PORT SEMA_RUNNER_BIN=target/debug/sema-runner node tests/console/console.test.mjs
import { chromium } from 'playwright-core';
import { spawn } from 'node:child_process';
import { mkdtempSync, mkdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import assert from 'node:assert/strict';

const base = process.env.SEMA_TOKEN_URL;
const runnerBin = process.env.SEMA_RUNNER_BIN;
if (!base || !runnerBin) {
  console.error('SEMA_TOKEN_URL and SEMA_RUNNER_BIN must be set (scripts/test sets both)');
  process.exit(2);
}
const ALICE = 'test-token-alice-client';
const BOB = 'test-token-bob-client';
const OPS = 'test-token-ops-operator';
const RUNNER = 'test-token-runner';
const QUEUE = 'console-ui';
const WAIT = 30_000; // how long any one expected change may take to show (a bound, not a measure)

const artefacts = process.env.SEMA_ARTEFACTS || mkdtempSync(join(tmpdir(), 'sema-console-'));
mkdirSync(artefacts, { recursive: true });
const profile = mkdtempSync(join(tmpdir(), 'sema-chromium-'));
const shots = [];

function step(text) { console.log(`[console] ${text}`); }

async function api(token, method, path, body) {
  const resp = await fetch(base + path, {
    method,
    headers: { Authorization: `Bearer ${token}`, 'Content-Type': 'application/json' },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  return { status: resp.status, json: await resp.json().catch(() => null) };
}

const runner = spawn(runnerBin, ['--url', base, '--token', RUNNER, '--queue', QUEUE, '--wait-ms', '1000'], {
  stdio: ['ignore', 'inherit', 'inherit'],
});
let browser;
try {
  browser = await chromium.launchPersistentContext(profile, {
    executablePath: '/usr/bin/chromium',
    headless: true,
    args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
      '--disable-background-networking', '--disable-component-update', '--disable-sync'],
    viewport: { width: 1400, height: 1000 },
  });
  const page = browser.pages()[0] || (await browser.newPage());
  const requests = [];
  const problems = [];
  const uncached = [];
  page.on('request', (r) => requests.push(r.url()));
  page.on('console', (m) => { if (m.type() === 'error' && !/status of 40[134]/.test(m.text())) problems.push(m.text()); });
  page.on('pageerror', (e) => problems.push(String(e)));
  page.on('response', (r) => {
    if (r.url().startsWith(base) && r.headers()['cache-control'] !== 'no-store') uncached.push(r.url());
  });
  const shot = async (name) => {
    const path = join(artefacts, `console-${name}.png`);
    await page.screenshot({ path, fullPage: true });
    shots.push(path);
  };
  const login = async (token) => {
    await page.fill('#token', token);
    await page.click('#login-button');
    await page.waitForSelector('#session-bar:not(.hidden)', { timeout: WAIT });
    await page.waitForFunction(() => document.getElementById('runs-status').textContent.includes('runs'), null, { timeout: WAIT });
  };
  const logout = async () => {
    await page.click('#logout-button');
    await page.waitForSelector('#login:not(.hidden)', { timeout: WAIT });
    const left = await page.evaluate(() => ({
      rows: document.querySelectorAll('#runs-rows tr, #approvals-list li, #run-events li, #sessions-rows tr').length,
      text: document.getElementById('run-text').textContent,
      panels: document.getElementById('panels').className,
    }));
    assert.deepEqual(left, { rows: 0, text: '', panels: 'hidden' }, 'logging out leaves nothing on the page');
  };

  step('the page loads without a token');
  const resp = await page.goto(base + '/console');
  assert.equal(resp.status(), 200);
  assert.equal(resp.headers()['cache-control'], 'no-store');
  assert.match(resp.headers()['content-security-policy'], /frame-ancestors 'none'/);
  await shot('1-login');

  step('a reaper tick runs and alice starts a leader run, through the API');
  const tick = await fetch(`${base}/__scheduled?cron=*+*+*+*+*`);
  assert.equal(tick.status, 200);
  const leader = await api(ALICE, 'POST', '/v1/leader/runs', {
    objective: 'console leader', subtasks: [{ objective: 'say from a child' }], maxConcurrency: 1,
  });
  assert.equal(leader.status, 201, JSON.stringify(leader.json));

  step('the operator logs in and sees the reaper ticks, the leader run and the sessions panel');
  await login(OPS);
  assert.match(await page.textContent('#whoami'), /operator/);
  await page.waitForSelector('#reapers-rows tr', { timeout: WAIT });
  await page.waitForSelector(`#leaders-rows tr[data-id="${leader.json.id}"]`, { timeout: WAIT });
  await page.waitForFunction(() => document.getElementById('sessions-status').textContent.length > 0, null, { timeout: WAIT });
  const sessionsStatus = await page.textContent('#sessions-status');
  step(`sessions panel: ${sessionsStatus}`);
  // Before GET /v1/sessions exists the panel says so; once it exists it lists sessions.
  const sessionsRoute = await api(OPS, 'GET', '/v1/sessions?limit=1');
  if (sessionsRoute.status === 404) assert.match(sessionsStatus, /not available/);
  else assert.match(sessionsStatus, /sessions/);

  step('alice submits a run through the API');
  const session = `console-${Date.now().toString(36)}`;
  const objective = ['say first words', 'sleep 2000', 'say second words', 'sleep 1500',
    'ask tool_approval deploy the console to production?', 'say after the approval'].join('\n');
  const submitted = await api(ALICE, 'POST', '/v1/runs', { sessionId: session, objective, queue: QUEUE });
  assert.equal(submitted.status, 202, JSON.stringify(submitted.json));
  const taskId = submitted.json.taskId;
  const rowSel = `#runs-rows tr[data-task-id="${taskId}"]`;

  step('it appears in the runs list; the operator follows it');
  await page.waitForSelector(rowSel, { timeout: WAIT });
  await page.click(rowSel);
  await page.waitForFunction(() => document.getElementById('run-text').textContent.includes('first words'), null, { timeout: WAIT });
  // Live: the first words are shown while the run is still going and before the runner said more.
  const early = await page.evaluate(() => ({
    text: document.getElementById('run-text').textContent,
    done: document.querySelectorAll('#run-events li[data-type="done"]').length,
  }));
  assert.ok(!early.text.includes('second words'), `events arrive one by one: ${early.text}`);
  assert.equal(early.done, 0);
  const fetched = await api(ALICE, 'GET', `/v1/runs/${taskId}`);
  assert.equal(fetched.json.status, 'running', 'the run was still going when its first words showed');
  await shot('2-live-events');
  await page.waitForFunction(() => document.getElementById('run-text').textContent.includes('second words'), null, { timeout: WAIT });

  step('it parks on a tool_approval gate; the card shows');
  await page.waitForSelector('#run-events li[data-type="suspended"]', { timeout: WAIT });
  const cardSel = `#approvals-list li[data-task-id="${taskId}"]`;
  await page.waitForSelector(`${cardSel} button[data-decision="approve"]`, { timeout: WAIT });
  assert.match(await page.textContent(cardSel), /deploy the console to production\?/);
  await shot('3-gate-pending');

  step('the operator may not decide for alice');
  await page.click(`${cardSel} button[data-decision="approve"]`);
  await page.waitForFunction((sel) => document.querySelector(`${sel} .outcome`).textContent.includes('forbidden'), cardSel, { timeout: WAIT });
  step(`refused: ${await page.textContent(`${cardSel} .outcome`)}`);

  step('bob logs in after a logout: nothing of alice shows');
  await logout();
  await login(BOB);
  await page.waitForFunction(() => document.getElementById('approvals-status').textContent.length > 0, null, { timeout: WAIT });
  assert.equal(await page.locator(rowSel).count(), 0, "bob's page lists no run of alice's");
  assert.equal(await page.locator(cardSel).count(), 0, "bob's page shows no gate of alice's");
  assert.match(await page.textContent('#whoami'), /client/);
  assert.match(await page.textContent('#reapers-status'), /operator/);
  await logout();

  step('alice logs in, follows her run and approves the gate');
  await login(ALICE);
  await page.waitForSelector(rowSel, { timeout: WAIT });
  await page.click(rowSel);
  await page.waitForFunction(() => document.getElementById('run-text').textContent.includes('second words'), null, { timeout: WAIT });
  await page.waitForSelector(`${cardSel} button[data-decision="approve"]`, { timeout: WAIT });
  await page.click(`${cardSel} button[data-decision="approve"]`);
  await page.waitForFunction((sel) => document.querySelector(`${sel} .outcome`).textContent.startsWith('approved'), cardSel, { timeout: WAIT });

  step('the resumed run completes, live on the same page');
  await page.waitForSelector('#run-events li[data-type="resumed"]', { timeout: WAIT });
  await page.waitForFunction(() => document.getElementById('run-status').textContent === 'completed', null, { timeout: WAIT });
  const text = await page.textContent('#run-text');
  assert.match(text, /decision: approve/);
  assert.match(text, /after the approval/);
  await page.waitForSelector(`${rowSel} td.status-completed`, { timeout: WAIT });
  await page.waitForFunction((sel) => !document.querySelector(sel), cardSel, { timeout: WAIT });
  if (sessionsRoute.status !== 404) {
    await page.waitForSelector(`#sessions-rows tr[data-session-id="${session}"]`, { timeout: WAIT });
  }
  await shot('4-completed');
  await api(ALICE, 'POST', `/v1/leader/runs/${leader.json.id}/cancel`);

  step('nothing leaked: no token in a URL or in storage, every answer no-store, no foreign request');
  const storage = await page.evaluate(() => ({ local: localStorage.length, session: sessionStorage.length, cookie: document.cookie }));
  assert.deepEqual(storage, { local: 0, session: 0, cookie: '' });
  for (const url of requests) {
    assert.ok(url.startsWith(base), `only this origin is contacted: ${url}`);
    for (const t of [ALICE, BOB, OPS]) assert.ok(!url.includes(t), `no token in a URL: ${url}`);
  }
  const streams = requests.filter((u) => u.includes('/events?ticket=st1_'));
  assert.ok(streams.length >= 2, `the streams were opened with tickets: ${streams.join(' ')}`);
  assert.deepEqual(uncached, [], 'every answer the page read is no-store');
  assert.deepEqual(problems, [], 'no script error or CSP violation');
  step(`${requests.length} requests, ${streams.length} ticketed streams`);
  console.log('[console] screenshots:');
  for (const s of shots) console.log(`  ${s}`);
  console.log('[console] ok');
} finally {
  if (browser) await browser.close().catch(() => {});
  runner.kill('SIGTERM');
  rmSync(profile, { recursive: true, force: true });
}
