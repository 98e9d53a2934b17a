#!/usr/bin/env node
// End-to-end check of the dashboard (server/ui/) served by a running
// `opcache serve`: drives Debian's /usr/bin/chromium through playwright-core,
// logs in with a read token and then an admin token, and compares every
// figure the page shows (data-figure / data-value) with what the server's
// own JSON answers (/v1/stats/summary, /v1/status) say. tests/e2e/test_dashboard.cpp
// fills a real server through the CLI and runs this script.
//
//   node tests/ui/dashboard.mjs --url http://127.0.0.1:PORT --read-token-file F
//        --admin-token-file F --expect-op-type OP --token-names NAME,NAME --out DIR
//
// Each option can also come from the environment: OPCACHE_UI_URL,
// OPCACHE_UI_READ_TOKEN, OPCACHE_UI_ADMIN_TOKEN, OPCACHE_UI_EXPECT_OP_TYPE,
// OPCACHE_UI_TOKEN_NAMES, OPCACHE_UI_OUT (tokens are better passed in files or
// the environment than on a command line that `ps` shows).
//
// Exit status: 0 every check passed; 1 a check failed (the message says which);
// 2 bad arguments; 77 skipped ("OPCACHE_SKIP: <reason>" on stdout) when
// playwright-core cannot be imported or Chromium is missing or cannot start.
import { existsSync, accessSync, constants, mkdirSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

const CHROMIUM = '/usr/bin/chromium';
const CHROMIUM_ARGS = ['--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
  '--disable-background-networking', '--disable-component-update', '--disable-sync'];
const LAPTOP = { viewport: { width: 1366, height: 768 }, deviceScaleFactor: 1 };
// 200 % zoom on the same screen: half the CSS pixels, each drawn twice as large.
const ZOOM_200 = { viewport: { width: 683, height: 384 }, deviceScaleFactor: 2 };
const WAIT_MS = 20000;

// Figure name → where its value is in the JSON answers.
const SUMMARY_FIGURES = ['requests', 'lookups', 'hits', 'misses', 'hit_rate', 'bytes_served', 'uploads',
  'bytes_uploaded', 'compile_ms_saved'];
const STORAGE_FIGURES = ['limit_bytes', 'evictions'];
const ALL_TIME_FIGURES = { all_time_compile_ms_saved: 'compile_ms_saved' };
const STATUS_FIGURES = { status_entries: 'entries', status_bytes: 'bytes', status_version: 'version' };

class CheckFailed extends Error {}

function skip(reason) {
  console.log(`OPCACHE_SKIP: ${reason}`);
  process.exit(77);
}

function check(condition, message) {
  if (!condition) throw new CheckFailed(message);
}

function parseArgs(argv) {
  const env = process.env;
  const options = {
    url: env.OPCACHE_UI_URL, readToken: env.OPCACHE_UI_READ_TOKEN, adminToken: env.OPCACHE_UI_ADMIN_TOKEN,
    expectOpType: env.OPCACHE_UI_EXPECT_OP_TYPE, tokenNames: env.OPCACHE_UI_TOKEN_NAMES, out: env.OPCACHE_UI_OUT,
  };
  const flags = {
    '--url': 'url', '--read-token': 'readToken', '--admin-token': 'adminToken', '--expect-op-type': 'expectOpType',
    '--token-names': 'tokenNames', '--out': 'out',
  };
  for (let i = 0; i < argv.length; i += 2) {
    const [flag, value] = [argv[i], argv[i + 1]];
    if (value === undefined) usage(`${flag} needs a value`);
    if (flag === '--read-token-file' || flag === '--admin-token-file') {
      options[flag === '--read-token-file' ? 'readToken' : 'adminToken'] = readFileSync(value, 'utf8').trim();
    } else if (flags[flag]) {
      options[flags[flag]] = value;
    } else {
      usage(`unknown option ${flag}`);
    }
  }
  for (const [name, flag] of [['url', '--url'], ['readToken', '--read-token(-file)'], ['adminToken', '--admin-token(-file)'],
    ['expectOpType', '--expect-op-type'], ['tokenNames', '--token-names'], ['out', '--out']]) {
    if (!options[name]) usage(`${flag} is missing`);
  }
  options.url = options.url.replace(/\/+$/, '');
  options.tokenNames = options.tokenNames.split(',').filter(Boolean);
  return options;
}

function usage(problem) {
  console.error(`dashboard.mjs: ${problem}\nusage: node tests/ui/dashboard.mjs --url URL --read-token-file FILE `
    + '--admin-token-file FILE --expect-op-type OP --token-names NAME,NAME --out DIR');
  process.exit(2);
}

async function loadChromium() {
  let playwright;
  try {
    playwright = await import('playwright-core');
  } catch (error) {
    skip(`playwright-core cannot be imported (${error.code || error.message}); install it with `
      + '`npm ci --prefix tests/ui --no-audit --no-fund` (scripts/install-deps.sh does)');
  }
  try {
    accessSync(CHROMIUM, constants.X_OK);
  } catch (error) {
    skip(`${CHROMIUM} is missing (Debian package chromium; scripts/install-deps.sh installs it)`);
  }
  return playwright.chromium;
}

// The JSON the server answers to `path` for `token`, fetched by Node itself.
async function serverJson(options, path, token) {
  const response = await fetch(`${options.url}${path}`, { headers: { Authorization: `Bearer ${token}` } });
  const text = await response.text();
  check(response.ok, `GET ${path} answered ${response.status}: ${text}`);
  return JSON.parse(text);
}

// What the page shows for a figure, read back as a number (or string), to
// check that the text a person sees says the same as data-value: counts with
// thousands separators, "78.2 %", "6.54 KiB", "2 h 3 min", "9.0 s".
const UNIT_BYTES = { B: 1, KiB: 1024, MiB: 1024 ** 2, GiB: 1024 ** 3, TiB: 1024 ** 4, PiB: 1024 ** 5 };
const UNIT_MS = { ms: 1, s: 1000, min: 60000, h: 3600000 };

function shownAgrees(name, value, text) {
  if (value === null) return text === '–' || text === 'unknown';
  if (typeof value === 'string') return text === value;
  if (name === 'hit_rate') return text === `${(value * 100).toFixed(1)} %`;
  const parts = [...text.replace(/,/g, '').matchAll(/([\d.]+) ?([A-Za-z]*)/g)];
  if (parts.length === 0) return false;
  if (/bytes/.test(name)) {
    const [, number, unit] = parts[0];
    return unit in UNIT_BYTES && Math.abs(Number(number) * UNIT_BYTES[unit] - value) <= value * 0.01 + 0.5;
  }
  if (name.endsWith('compile_ms_saved')) {
    const ms = parts.reduce((sum, [, number, unit]) => sum + Number(number) * (UNIT_MS[unit] ?? NaN), 0);
    return Math.abs(ms - value) <= Math.max(value * 0.01, 500);
  }
  return parts.length === 1 && parts[0][2] === '' && Number(parts[0][1]) === value;
}

const asDataValue = (value) => (typeof value === 'string' ? value : JSON.stringify(value === undefined ? null : value));

// One browser tab in a fresh context (light or dark colour scheme), with every request and console error recorded.
async function openPage(browser, options, size, log, colorScheme = 'light') {
  const context = await browser.newContext({ ...size, colorScheme });
  const page = await context.newPage();
  page.setDefaultTimeout(WAIT_MS);
  const origin = new URL(options.url).origin;
  page.on('request', (request) => {
    const url = request.url();
    log.requests.push(url);
    if (!url.startsWith('data:') && new URL(url).origin !== origin) log.foreign.push(url);
  });
  page.on('console', (message) => {
    if (message.type() === 'error' && /Content Security Policy|Refused to/i.test(message.text())) {
      log.problems.push(`console: ${message.text()}`);
    }
  });
  page.on('pageerror', (error) => log.problems.push(`page error: ${error.message}`));
  return { context, page };
}

// Opens /ui/ and its token form (asked for at once, or under "Use a token"
// when the server shows its figures without one: --anonymous-read).
async function openLogin(page, options) {
  await page.goto(`${options.url}/ui/`);
  await page.waitForFunction(() => !document.getElementById('login').hidden || document.body.dataset.loaded);
  if (await page.locator('#login').isHidden()) await page.click('#token-show');
  await page.locator('#login').waitFor({ state: 'visible' });
}

// Answers the token form with `token` and waits for the figures; returns the window shown.
async function login(page, options, token) {
  await openLogin(page, options);
  await page.fill('#token-input', token);
  await page.click('#token-submit');
  await page.waitForFunction(() => document.body.dataset.loaded && !document.getElementById('dashboard').hidden);
  return page.evaluate(() => document.body.dataset.loaded);
}

// Every data-figure of the page equals the server's JSON; returns how many were compared.
async function checkFigures(page, options, token, window) {
  const shown = await page.$$eval('[data-figure]', (nodes) => nodes.map((node) => ({
    name: node.dataset.figure, value: node.dataset.value, text: node.textContent.trim(),
    visible: node.getClientRects().length > 0,
  })));
  const summary = await serverJson(options, `/v1/stats/summary?window=${window}`, token);
  const status = await serverJson(options, '/v1/status', token);
  const expected = {};
  for (const name of SUMMARY_FIGURES) expected[name] = summary[name];
  for (const name of STORAGE_FIGURES) expected[name] = summary.storage[name];
  for (const [name, field] of Object.entries(ALL_TIME_FIGURES)) expected[name] = summary.all_time[field];
  for (const [name, field] of Object.entries(STATUS_FIGURES)) expected[name] = status[field];
  for (const [name, value] of Object.entries(expected)) {
    const nodes = shown.filter((figure) => figure.name === name);
    check(nodes.length > 0, `the page shows no data-figure="${name}"`);
    for (const node of nodes) {
      check(node.visible, `data-figure="${name}" is not visible`);
      check(node.value === asDataValue(value),
        `data-figure="${name}" has data-value=${JSON.stringify(node.value)} (shown "${node.text}") but the server's `
        + `JSON says ${asDataValue(value)}`);
      check(shownAgrees(name, value, node.text), `data-figure="${name}" shows "${node.text}", which does not say ${asDataValue(value)}`);
      console.log(`  ok  ${name} = ${asDataValue(value)} (shown "${node.text}")`);
    }
  }
  const unknown = shown.filter((figure) => !(figure.name in expected));
  check(unknown.length === 0, `unexpected data-figure names: ${unknown.map((f) => f.name).join(', ')}`);
  return shown.length;
}

// The page fits its width (no horizontal scrolling of the whole page).
async function checkFits(page, label) {
  const sizes = await page.evaluate(() => ({ scroll: document.documentElement.scrollWidth, inner: window.innerWidth }));
  check(sizes.scroll <= sizes.inner, `${label}: the page is ${sizes.scroll} CSS px wide in a ${sizes.inner} px viewport`);
  console.log(`  ok  ${label}: fits its width (${sizes.scroll} <= ${sizes.inner} CSS px)`);
}

async function screenshots(page, options, name) {
  for (const full of [false, true]) {
    const file = join(options.out, `${name}${full ? '-full' : ''}.png`);
    await page.screenshot({ path: file, fullPage: full });
    console.log(`  saved ${file}`);
  }
}

// The read token's views: laptop and 200 % zoom, a wrong token refused first.
async function readViews(browser, options, log) {
  const { context, page } = await openPage(browser, options, LAPTOP, log);
  await openLogin(page, options);
  await page.fill('#token-input', 'not-a-token-of-this-server');
  await page.click('#token-submit');
  await page.waitForFunction(() => /refused/.test(document.getElementById('login-reason').textContent)
    && !document.getElementById('login').hidden);
  console.log('  ok  a wrong token is refused and the form asks again');

  const window = await login(page, options, options.readToken);
  console.log(`read token, window ${window}, 1366x768:`);
  const count = await checkFigures(page, options, options.readToken, window);
  const first = await page.locator('#misses tbody tr[data-op-type]').first().getAttribute('data-op-type');
  check(first === options.expectOpType, `the first misses row is op type "${first}", expected "${options.expectOpType}"`);
  console.log(`  ok  the misses table starts with ${first}`);
  // Each missed group the team has a variant of says so, as the JSON does.
  const misses = await serverJson(options, '/v1/stats/misses?limit=20', options.readToken);
  for (const group of misses.groups.filter((g) => g.nearest)) {
    const note = page.locator(`#misses tbody tr[data-op-type="${group.op_type}"] .nearest`).first();
    check(await note.count() === 1, `the ${group.op_type} row does not show the nearest variant the team has`);
    check(await note.getAttribute('data-nearest-entries') === String(group.nearest.entries),
      `the ${group.op_type} row's nearest variant does not show ${group.nearest.entries} entries`);
    const text = await note.textContent();
    for (const difference of group.nearest.differences) {
      check(text.includes(String(difference.stored)), `"${text}" does not name the team's ${difference.path} ${difference.stored}`);
    }
    console.log(`  ok  ${group.op_type}: "${text}"`);
  }
  check(await page.locator('#tokens').count() === 0, 'a read token sees the #tokens section');
  console.log('  ok  no #tokens section for a read token');
  check(await page.evaluate(() => sessionStorage.getItem('opcache.token')) === options.readToken,
    'the token is not kept in sessionStorage opcache.token');
  await checkFits(page, 'read 1366x768');
  await screenshots(page, options, 'read-1366x768');

  await page.selectOption('#window', 'hour');
  await page.waitForFunction(() => document.body.dataset.loaded === 'hour');
  console.log('read token, window hour (chosen in the selector):');
  await checkFigures(page, options, options.readToken, 'hour');
  await context.close();

  const zoomed = await openPage(browser, options, ZOOM_200, log);
  await login(zoomed.page, options, options.readToken);
  await checkFits(zoomed.page, 'read 200 %');
  await screenshots(zoomed.page, options, 'read-zoom200');
  await zoomed.context.close();
  return count;
}

// The admin token's views (dark colour scheme, so both schemes get a screenshot).
async function adminViews(browser, options, log) {
  for (const [size, name] of [[LAPTOP, 'admin-1366x768'], [ZOOM_200, 'admin-zoom200']]) {
    const { context, page } = await openPage(browser, options, size, log, 'dark');
    const window = await login(page, options, options.adminToken);
    console.log(`admin token, window ${window}, ${name}:`);
    await checkFigures(page, options, options.adminToken, window);
    await page.locator('#tokens').waitFor({ state: 'visible' });
    const names = await page.$$eval('#tokens tr[data-token-name]', (rows) => rows.map((row) => row.dataset.tokenName));
    for (const token of options.tokenNames) {
      check(names.includes(token), `#tokens lists ${JSON.stringify(names)}, not "${token}"`);
    }
    console.log(`  ok  #tokens is visible and lists ${names.join(', ')}`);
    await checkFits(page, name);
    await page.locator('#tokens').scrollIntoViewIfNeeded();
    await screenshots(page, options, name);
    await context.close();
  }
}

async function main() {
  const options = parseArgs(process.argv.slice(2));
  const chromium = await loadChromium();
  mkdirSync(options.out, { recursive: true });
  // playwright-core makes the browser's fresh user-data dir under os.tmpdir(): under a directory of our own.
  const profiles = mkdtempSync(join(tmpdir(), 'opcache-ui-'));
  process.env.TMPDIR = profiles;
  let browser;
  try {
    browser = await chromium.launch({ executablePath: CHROMIUM, headless: true, args: CHROMIUM_ARGS });
  } catch (error) {
    rmSync(profiles, { recursive: true, force: true });
    skip(`${CHROMIUM} cannot start: ${error.message.split('\n')[0]}`);
  }
  console.log(`chromium ${browser.version()}, server ${options.url}, screenshots in ${options.out}`);
  const log = { requests: [], foreign: [], problems: [] };
  try {
    const figures = await readViews(browser, options, log);
    await adminViews(browser, options, log);
    check(log.foreign.length === 0, `the page made requests outside ${options.url}: ${log.foreign.join(', ')}`);
    check(log.problems.length === 0, log.problems.join('\n'));
    console.log(`ok: ${figures} figures equal the server's JSON, misses led by ${options.expectOpType}, `
      + `#tokens only for the admin token, ${log.requests.length} requests all to ${new URL(options.url).origin}, `
      + 'no CSP violation or page error');
    return 0;
  } catch (error) {
    console.log(`FAILED: ${error instanceof CheckFailed ? '' : 'error: '}${error.message}`);
    return 1;
  } finally {
    await browser.close();
    rmSync(profiles, { recursive: true, force: true });
  }
}

process.exit(await main());
