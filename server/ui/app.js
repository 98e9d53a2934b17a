// The opcache dashboard (served by `opcache serve` at /ui/): reads the JSON
// endpoints of docs/protocol.md (/v1/status, /v1/stats/summary, /timeseries,
// /misses and, for admin tokens, /tokens) and renders them in place. No
// framework, no build step, nothing from another origin; the page's
// Content-Security-Policy forbids inline script and style, so everything is
// built with DOM calls and SVG geometry is set through attributes.
//
// Every displayed figure carries data-figure="<name>" and data-value="<the
// JSON value>" so tests (tests/ui/dashboard.mjs) can compare exact values.
'use strict';

(() => {
  const TOKEN_KEY = 'opcache.token';
  const WINDOW_KEY = 'opcache.window';
  const REFRESH_MS = 30000;
  const SVG_NS = 'http://www.w3.org/2000/svg';
  const WINDOW_NAMES = { hour: 'in the last hour', day: 'in the last day', '30d': 'in the last 30 days' };

  const state = {
    token: sessionStorage.getItem(TOKEN_KEY) || '',
    tokensAllowed: null,  // null: not asked yet for this token; false after a 401/403
    inFlight: false,
    lastOk: 0,
    shown: false,
  };

  const $ = (id) => document.getElementById(id);

  // ---------------------------------------------------------------- formatting

  const numberFormat = new Intl.NumberFormat('en');
  const fmtInt = (n) => (n === null || n === undefined ? '–' : numberFormat.format(n));

  function fmtBytes(n) {
    if (n === null || n === undefined) return '–';
    if (n < 1024) return `${n} B`;
    const units = ['KiB', 'MiB', 'GiB', 'TiB', 'PiB'];
    let value = n / 1024;
    let unit = 0;
    while (value >= 1024 && unit < units.length - 1) {
      value /= 1024;
      unit += 1;
    }
    return `${value < 10 ? value.toFixed(2) : value < 100 ? value.toFixed(1) : value.toFixed(0)} ${units[unit]}`;
  }

  const fmtPercent = (r) => (r === null || r === undefined ? '–' : `${(r * 100).toFixed(1)} %`);

  // Milliseconds as "850 ms", "12.3 s", "4 min 5 s", "3 h 20 min".
  function fmtDuration(ms) {
    if (ms === null || ms === undefined) return '–';
    if (ms < 1000) return `${Math.round(ms)} ms`;
    const seconds = ms / 1000;
    if (seconds < 60) return `${seconds.toFixed(1)} s`;
    const whole = Math.round(seconds);
    const h = Math.floor(whole / 3600);
    const m = Math.floor((whole % 3600) / 60);
    const s = whole % 60;
    return h > 0 ? `${numberFormat.format(h)} h ${m} min` : `${m} min ${s} s`;
  }

  function fmtUptime(seconds) {
    if (seconds === null || seconds === undefined) return '–';
    const d = Math.floor(seconds / 86400);
    const h = Math.floor((seconds % 86400) / 3600);
    const m = Math.floor((seconds % 3600) / 60);
    if (d > 0) return `${d} d ${h} h`;
    if (h > 0) return `${h} h ${m} min`;
    return m > 0 ? `${m} min` : `${Math.floor(seconds)} s`;
  }

  const clock = new Intl.DateTimeFormat('en-GB', { hour: '2-digit', minute: '2-digit', hourCycle: 'h23' });
  const dayClock = new Intl.DateTimeFormat('en-GB', { day: 'numeric', month: 'short', hour: '2-digit',
                                                      minute: '2-digit', hourCycle: 'h23' });
  const date = new Intl.DateTimeFormat('en-GB', { day: 'numeric', month: 'short' });
  const fmtTime = (ms, win) => (win === '30d' ? dayClock : clock).format(new Date(ms));
  const fmtAxisTime = (ms, win) => (win === '30d' ? date : clock).format(new Date(ms));

  function fmtAgo(ms) {
    if (!ms) return 'never';
    const seconds = Math.max(0, Math.round((Date.now() - ms) / 1000));
    if (seconds < 60) return `${seconds} s ago`;
    if (seconds < 3600) return `${Math.floor(seconds / 60)} min ago`;
    if (seconds < 86400) return `${Math.floor(seconds / 3600)} h ago`;
    return `${Math.floor(seconds / 86400)} d ago`;
  }

  // A scenario object as "single · train · 8.0 · Ascend910B1 · +extra".
  function fmtScenario(scenario) {
    if (!scenario || typeof scenario !== 'object') return '(unknown)';
    const parts = ['device_mode', 'phase', 'toolchain', 'soc'].filter((f) => scenario[f] !== undefined)
      .map((f) => String(scenario[f]));
    if (scenario.extra !== undefined) parts.push('+extra');
    return parts.join(' · ') || '(empty)';
  }

  const abbreviateKey = (key) => (key.length > 20 ? `${key.slice(0, 10)}…${key.slice(-6)}` : key);

  // ------------------------------------------------------------------ DOM helpers

  // el('td', {class: 'num', title: 'x'}, 'text' | Node, ...)
  function el(tag, attributes, ...children) {
    const node = document.createElement(tag);
    for (const [name, value] of Object.entries(attributes || {})) {
      if (value !== null && value !== undefined) node.setAttribute(name, value);
    }
    node.append(...children.filter((c) => c !== null && c !== undefined));
    return node;
  }

  function svg(tag, attributes, text) {
    const node = document.createElementNS(SVG_NS, tag);
    for (const [name, value] of Object.entries(attributes || {})) node.setAttribute(name, String(value));
    if (text !== undefined) node.textContent = text;
    return node;
  }

  function setText(node, text) {
    if (node.textContent !== text) node.textContent = text;
  }

  // Shows `text` in every element of figure `name`, with the raw value in data-value.
  function setFigure(name, value, text, title) {
    const raw = value === undefined ? null : value;
    for (const node of document.querySelectorAll(`[data-figure="${name}"]`)) {
      node.dataset.value = typeof raw === 'string' ? raw : JSON.stringify(raw);
      setText(node, text);
      if (title) node.title = title;
      else node.removeAttribute('title');
    }
  }

  const numCell = (n, text) => el('td', { class: 'num', 'data-value': JSON.stringify(n) }, text ?? fmtInt(n));

  // ------------------------------------------------------------------ messages

  function showMessage(text, kind) {
    const box = $('message');
    setText(box, text);
    box.className = `message ${kind || 'error'}`;
    box.hidden = false;
  }

  function clearMessage() {
    $('message').hidden = true;
  }

  // ------------------------------------------------------------------ API

  class ApiError extends Error {
    constructor(status, code, message) {
      super(message);
      this.status = status;  // 0: no answer
      this.code = code;
    }
  }

  // GET `path` (relative to the server root, so a reverse-proxy prefix works);
  // the parsed JSON or an ApiError.
  async function api(path) {
    const headers = { Accept: 'application/json' };
    if (state.token) headers.Authorization = `Bearer ${state.token}`;
    const url = new URL(`../${path}`, document.baseURI);
    let response;
    try {
      response = await fetch(url, { headers, cache: 'no-store', credentials: 'omit', redirect: 'error' });
    } catch (error) {
      throw new ApiError(0, 'unreachable', `Cannot reach the server at ${url.origin} (${error.message}).`);
    }
    let body = null;
    try {
      body = await response.json();
    } catch (error) {
      body = null;
    }
    if (!response.ok) {
      const message = body && typeof body.message === 'string' ? body.message : response.statusText;
      throw new ApiError(response.status, body && body.error, message);
    }
    if (body === null) throw new ApiError(response.status, 'bad_json', `${url.pathname} did not answer JSON.`);
    return body;
  }

  function describeError(error) {
    if (error.status === 0) return error.message;
    if (error.status === 401) return state.token ? `The server refused this token (401: ${error.message}).`
      : 'This server needs a token to show its figures.';
    if (error.status === 403) return `This token may not read the statistics (403: ${error.message}).`;
    if (error.status >= 500) return `The server failed (${error.status}): ${error.message}`;
    return `Unexpected answer ${error.status}: ${error.message}`;
  }

  // ------------------------------------------------------------------ rendering: figures

  function renderStatus(status) {
    setFigure('status_version', status.version, String(status.version ?? '–'));
    setFigure('status_entries', status.entries, fmtInt(status.entries));
    setFigure('status_bytes', status.bytes, fmtBytes(status.bytes), `${fmtInt(status.bytes)} bytes`);
    setText($('status-uptime'), fmtUptime(status.uptime_seconds));
    setText($('status-storage'), String(status.storage ?? '–'));
    $('server-line').hidden = false;
  }

  function renderSummary(summary, win) {
    setText($('window-name'), WINDOW_NAMES[win] || '');
    const noLookups = summary.hit_rate === null ? 'no lookups in this window' : null;
    setFigure('hit_rate', summary.hit_rate, fmtPercent(summary.hit_rate), noLookups);
    for (const name of ['requests', 'lookups', 'hits', 'misses', 'uploads']) {
      setFigure(name, summary[name], fmtInt(summary[name]));
    }
    for (const name of ['bytes_served', 'bytes_uploaded']) {
      setFigure(name, summary[name], fmtBytes(summary[name]), `${fmtInt(summary[name])} bytes`);
    }
    setFigure('compile_ms_saved', summary.compile_ms_saved, fmtDuration(summary.compile_ms_saved),
              `${fmtInt(summary.compile_ms_saved)} ms`);
    const allTime = summary.all_time || {};
    setFigure('all_time_compile_ms_saved', allTime.compile_ms_saved, fmtDuration(allTime.compile_ms_saved),
              `${fmtInt(allTime.compile_ms_saved)} ms since the history began`);
    setText($('all-time-since'), typeof allTime.since_ms === 'number' ? fmtTime(allTime.since_ms, '30d') : '–');
    const storage = summary.storage || {};
    setFigure('limit_bytes', storage.limit_bytes, storage.limit_bytes === null ? 'unknown' : fmtBytes(storage.limit_bytes),
              storage.limit_bytes === null ? null : `${fmtInt(storage.limit_bytes)} bytes`);
    setFigure('evictions', storage.evictions, storage.evictions === null ? 'unknown' : fmtInt(storage.evictions));
    $('replica-note').hidden = !(summary.replica && summary.replica.shared_storage === true &&
                                  summary.replica.history_persisted !== true);
    renderTop($('top-op-types'), summary.top_op_types, (item) => item.op_type ?? '(unknown)', null);
    renderTop($('top-scenarios'), summary.top_scenarios, (item) => fmtScenario(item.scenario),
              (item) => JSON.stringify(item.scenario));
  }

  function renderStorageBar(status, summary) {
    const limit = summary.storage ? summary.storage.limit_bytes : null;
    const bytes = status.bytes;
    const text = $('storage-bar-text');
    const fill = $('storage-bar-fill');
    if (typeof limit === 'number' && limit > 0 && typeof bytes === 'number') {
      const share = Math.min(1, bytes / limit);
      // a sliver stays visible for a store that is not empty
      fill.setAttribute('width', String(bytes > 0 ? Math.max(4, Math.round(share * 1000)) : 0));
      fill.setAttribute('class', `bar-fill${share > 0.9 ? ' full' : ''}`);
      setText(text, bytes > 0 && share < 0.001 ? 'less than 0.1 % of the limit used'
        : `${(share * 100).toFixed(1)} % of the limit used`);
      $('storage-bar').removeAttribute('hidden');  // an SVG element has no .hidden property
    } else {
      $('storage-bar').setAttribute('hidden', '');
      setText(text, 'This storage reports no limit.');
    }
  }

  function renderTop(table, items, label, title) {
    const rows = (items || []).map((item) => el('tr', null, el('td', { title: title ? title(item) : null }, label(item)),
                                                 numCell(item.hits)));
    if (rows.length === 0) rows.push(el('tr', null, el('td', { colspan: '2', class: 'empty' }, 'No hits in this window.')));
    table.tBodies[0].replaceChildren(...rows);
  }

  // ------------------------------------------------------------------ rendering: charts

  const CHART = { width: 640, height: 240, left: 60, right: 16, top: 14, bottom: 34 };

  // An SVG chart frame: title, desc, horizontal grid lines with labels and time labels.
  function chartFrame(id, title, desc, points, win, yTicks) {
    const root = svg('svg', { viewBox: `0 0 ${CHART.width} ${CHART.height}`, role: 'img',
                              'aria-labelledby': `${id}-title ${id}-desc`, class: 'plot' });
    root.append(svg('title', { id: `${id}-title` }, title), svg('desc', { id: `${id}-desc` }, desc));
    const plotHeight = CHART.height - CHART.top - CHART.bottom;
    for (const tick of yTicks) {
      const y = CHART.top + (1 - tick.at) * plotHeight;
      root.append(svg('line', { x1: CHART.left, x2: CHART.width - CHART.right, y1: y, y2: y, class: 'grid' }),
                  svg('text', { x: CHART.left - 6, y: y + 4, class: 'axis', 'text-anchor': 'end' }, tick.label));
    }
    const n = points.length;
    if (n > 0) {
      const marks = [...new Set([0, Math.round((n - 1) / 4), Math.round((n - 1) / 2), Math.round((3 * (n - 1)) / 4), n - 1])];
      for (const index of marks) {
        const x = xOf(index, n);
        const anchor = index === 0 ? 'start' : index === n - 1 ? 'end' : 'middle';
        const labelX = index === 0 ? CHART.left : index === n - 1 ? CHART.width - CHART.right : x;
        root.append(svg('line', { x1: x, x2: x, y1: CHART.height - CHART.bottom, y2: CHART.height - CHART.bottom + 4,
                                  class: 'tick' }),
                    svg('text', { x: labelX, y: CHART.height - CHART.bottom + 18, class: 'axis', 'text-anchor': anchor },
                        fmtAxisTime(points[index].t_ms, win)));
      }
    }
    root.append(svg('line', { x1: CHART.left, x2: CHART.width - CHART.right, y1: CHART.height - CHART.bottom,
                              y2: CHART.height - CHART.bottom, class: 'baseline' }));
    return root;
  }

  function xOf(index, n) {
    const plotWidth = CHART.width - CHART.left - CHART.right;
    return CHART.left + ((index + 0.5) * plotWidth) / Math.max(n, 1);
  }

  const yOf = (share) => CHART.top + (1 - share) * (CHART.height - CHART.top - CHART.bottom);

  function emptyNote(root, text) {
    root.append(svg('text', { x: (CHART.left + CHART.width - CHART.right) / 2, y: CHART.height / 2,
                              'text-anchor': 'middle', class: 'empty-note' }, text));
  }

  function stepLabel(seconds) {
    return seconds % 3600 === 0 ? `${seconds / 3600} h` : `${seconds / 60} min`;
  }

  function hitRateChart(series, win) {
    const points = series.points || [];
    const rates = points.map((p) => p.hit_rate).filter((r) => r !== null && r !== undefined);
    const desc = rates.length === 0 ? `No lookups ${WINDOW_NAMES[win]}.`
      : `Hit rate per ${stepLabel(series.step_seconds)} ${WINDOW_NAMES[win]}: lowest ${fmtPercent(Math.min(...rates))}, `
        + `highest ${fmtPercent(Math.max(...rates))}, ${rates.length} of ${points.length} steps had lookups.`;
    const ticks = [0, 0.25, 0.5, 0.75, 1].map((at) => ({ at, label: `${at * 100} %` }));
    const root = chartFrame('hit-rate', `Hit rate ${WINDOW_NAMES[win]}`, desc, points, win, ticks);
    let path = '';
    let open = false;
    points.forEach((p, index) => {
      if (p.hit_rate === null || p.hit_rate === undefined) {
        open = false;
        return;
      }
      path += `${open ? 'L' : 'M'}${xOf(index, points.length).toFixed(1)} ${yOf(p.hit_rate).toFixed(1)} `;
      open = true;
    });
    if (path) root.append(svg('path', { d: path.trim(), class: 'line' }));
    points.forEach((p, index) => {
      if (p.hit_rate === null || p.hit_rate === undefined) return;
      const dot = svg('circle', { cx: xOf(index, points.length).toFixed(1), cy: yOf(p.hit_rate).toFixed(1),
                                  r: rates.length <= 3 ? 5 : 3,
                                  class: 'dot' });
      dot.append(svg('title', {}, `${fmtTime(p.t_ms, win)}: ${fmtPercent(p.hit_rate)} (${p.hits} of ${p.lookups} lookups)`));
      root.append(dot);
    });
    if (rates.length === 0) emptyNote(root, 'No lookups in this window');
    return root;
  }

  // A round upper bound for the axis: 1, 2 or 5 times a power of ten.
  function niceCeiling(value) {
    if (value <= 0) return 1;
    const power = 10 ** Math.floor(Math.log10(value));
    for (const factor of [1, 2, 5, 10]) {
      if (factor * power >= value) return factor * power;
    }
    return 10 * power;
  }

  // The unit of a time axis whose largest value is `ms`, so labels stay short ("40 s", "1.5 h").
  function durationUnit(ms) {
    if (ms < 1000) return { ms: 1, name: 'ms' };
    if (ms < 120000) return { ms: 1000, name: 's' };
    if (ms < 7200000) return { ms: 60000, name: 'min' };
    return { ms: 3600000, name: 'h' };
  }

  function savedChart(series, win) {
    const points = series.points || [];
    const values = points.map((p) => p.compile_ms_saved || 0);
    const total = values.reduce((a, b) => a + b, 0);
    const unit = durationUnit(Math.max(0, ...values));
    const top = niceCeiling(Math.max(0, ...values) / unit.ms) * unit.ms;
    const ticks = [0, 0.5, 1].map((at) => ({
      at, label: total === 0 && at > 0 ? '' : `${+((at * top) / unit.ms).toFixed(2)} ${unit.name}` }));
    const desc = total === 0 ? `No compile time saved ${WINDOW_NAMES[win]}.`
      : `Compile time saved per ${stepLabel(series.step_seconds)} ${WINDOW_NAMES[win]}: ${fmtDuration(total)} in total, `
        + `at most ${fmtDuration(Math.max(...values))} in one step.`;
    const root = chartFrame('saved', `Compile time saved ${WINDOW_NAMES[win]}`, desc, points, win, ticks);
    const plotWidth = CHART.width - CHART.left - CHART.right;
    const barWidth = Math.max(1, (plotWidth / Math.max(points.length, 1)) * 0.75);
    points.forEach((p, index) => {
      const value = p.compile_ms_saved || 0;
      if (value <= 0) return;
      const height = Math.max(1, (value / top) * (CHART.height - CHART.top - CHART.bottom));
      const bar = svg('rect', { x: (xOf(index, points.length) - barWidth / 2).toFixed(1),
                                y: (CHART.height - CHART.bottom - height).toFixed(1), width: barWidth.toFixed(1),
                                height: height.toFixed(1), class: 'bar-saved' });
      bar.append(svg('title', {}, `${fmtTime(p.t_ms, win)}: ${fmtDuration(value)} saved (${p.hits} hits)`));
      root.append(bar);
    });
    if (total === 0) emptyNote(root, 'Nothing served in this window');
    return root;
  }

  function renderCharts(series, win) {
    const hit = $('chart-hit-rate');
    hit.querySelector('.chart-box').replaceChildren(hitRateChart(series, win));
    hit.querySelector('tbody').replaceChildren(...(series.points || []).map((p) => el('tr', null,
      el('td', null, fmtTime(p.t_ms, win)), el('td', { class: 'num' }, fmtPercent(p.hit_rate)),
      numCell(p.lookups), numCell(p.hits), numCell(p.misses))));
    const saved = $('chart-saved');
    saved.querySelector('.chart-box').replaceChildren(savedChart(series, win));
    saved.querySelector('tbody').replaceChildren(...(series.points || []).map((p) => el('tr', null,
      el('td', null, fmtTime(p.t_ms, win)), el('td', { class: 'num' }, fmtDuration(p.compile_ms_saved)),
      numCell(p.compile_ms_saved), numCell(p.hits), numCell(p.bytes_served, fmtBytes(p.bytes_served)))));
  }

  // ------------------------------------------------------------------ rendering: misses and tokens

  function keyItem(entry) {
    return el('li', null,
      el('code', { title: entry.key }, abbreviateKey(entry.key)), ' ',
      el('span', { class: 'small' }, `${fmtInt(entry.requests)}× · ${fmtInt(entry.clients)} client${entry.clients === 1 ? '' : 's'}`),
      ' ',
      el('button', { type: 'button', class: 'copy', 'data-key': entry.key, 'aria-label': `Copy key ${entry.key}` }, 'copy'));
  }

  function keyList(keys) {
    const first = el('ul', { class: 'keys' }, ...keys.slice(0, 3).map(keyItem));
    if (keys.length <= 3) return first;
    return el('div', null, first, el('details', null, el('summary', null, `${keys.length - 3} more`),
                                     el('ul', { class: 'keys' }, ...keys.slice(3).map(keyItem))));
  }

  // "the team has 12 kernels for toolchain 8.0.RC2": the stored scenario of
  // the op type nearest to a missed group (an upgrade reads as one line).
  function nearestNote(nearest) {
    if (!nearest) return null;
    const kernels = `${fmtInt(nearest.entries)} kernel${nearest.entries === 1 ? '' : 's'}`;
    const fields = (nearest.differences || []).map((d) =>
      `${d.path.replace(/^scenario\./, '')} ${d.stored === undefined ? '(unset)' : (typeof d.stored === 'string' ? d.stored : JSON.stringify(d.stored))}`);
    const text = fields.length === 0 ? `the team has ${kernels} of this op type here (other shapes)`
      : `the team has ${kernels} for ${fields.join(', ')}`;
    return el('div', { class: 'small nearest', 'data-nearest-entries': String(nearest.entries) }, text);
  }

  function renderMisses(misses) {
    setText($('misses-tracked'), fmtInt(misses.tracked_keys));
    const rows = (misses.groups || []).map((group) => el('tr', { 'data-op-type': group.op_type ?? '' },
      el('th', { scope: 'row' }, group.op_type ?? '(unknown)'),
      el('td', { title: JSON.stringify(group.scenario) }, fmtScenario(group.scenario), nearestNote(group.nearest)),
      numCell(group.keys), numCell(group.requests), numCell(group.clients),
      el('td', null, keyList(group.top_keys || []))));
    if (rows.length === 0) {
      rows.push(el('tr', null, el('td', { colspan: '6', class: 'empty' }, 'No misses are waiting: every key looked up is stored.')));
    }
    $('misses').tBodies[0].replaceChildren(...rows);
  }

  function renderTokens(tokens) {
    let section = $('tokens');
    if (tokens === null) {
      if (section) section.remove();
      return;
    }
    if (!section) {
      section = $('tokens-template').content.firstElementChild.cloneNode(true);
      $('dashboard').append(section);
    }
    const rows = (tokens.tokens || []).map((t) => el('tr', { 'data-token-name': t.name },
      el('th', { scope: 'row' }, t.name), numCell(t.requests), numCell(t.lookups), numCell(t.hits), numCell(t.misses),
      numCell(t.uploads), numCell(t.bytes_in, fmtBytes(t.bytes_in)), numCell(t.bytes_out, fmtBytes(t.bytes_out)),
      el('td', { title: t.last_seen_ms ? new Date(t.last_seen_ms).toISOString() : null }, fmtAgo(t.last_seen_ms))));
    section.querySelector('tbody').replaceChildren(...rows);
  }

  // ------------------------------------------------------------------ refresh cycle

  // The per-token table for admins; null (section removed) for any other token.
  async function fetchTokens() {
    if (state.tokensAllowed === false) return null;
    try {
      const tokens = await api('v1/stats/tokens');
      state.tokensAllowed = true;
      return tokens;
    } catch (error) {
      if (error.status === 401 || error.status === 403 || error.status === 404) {
        state.tokensAllowed = false;
        return null;
      }
      throw error;
    }
  }

  async function refresh() {
    if (state.inFlight) return;
    state.inFlight = true;
    const win = $('window').value;
    try {
      const [status, summary, series, misses] = await Promise.all([
        api('v1/status'), api(`v1/stats/summary?window=${encodeURIComponent(win)}`),
        api(`v1/stats/timeseries?window=${encodeURIComponent(win)}`), api('v1/stats/misses?limit=20')]);
      const tokens = await fetchTokens();
      renderStatus(status);
      renderSummary(summary, win);
      renderStorageBar(status, summary);
      renderCharts(series, win);
      renderMisses(misses);
      renderTokens(tokens);
      showDashboard();
      state.lastOk = Date.now();
      setText($('updated'), `updated ${clock.format(new Date(state.lastOk))}`);
      document.body.dataset.loaded = win;
    } catch (error) {
      handleError(error);
    } finally {
      state.inFlight = false;
    }
  }

  function handleError(error) {
    if (!(error instanceof ApiError)) {
      showMessage(`The page failed: ${error.message}`);
      return;
    }
    if (error.status === 401) {
      hideDashboard();
      showLogin(describeError(error));
      return;
    }
    const stale = state.lastOk ? ` Showing the figures from ${clock.format(new Date(state.lastOk))}.` : '';
    showMessage(describeError(error).replace(/[^.!?)]$/, '$&.') + stale);
  }

  function showDashboard() {
    clearMessage();
    $('login').hidden = true;
    $('dashboard').hidden = false;
    $('foot').hidden = false;
    $('window-control').hidden = false;
    $('token-forget').hidden = !state.token;
    $('token-show').hidden = Boolean(state.token);
    state.shown = true;
  }

  function hideDashboard() {
    $('dashboard').hidden = true;
    $('server-line').hidden = true;
    $('window-control').hidden = true;
    renderTokens(null);
    delete document.body.dataset.loaded;
    state.shown = false;
    state.lastOk = 0;
  }

  function showLogin(reason) {
    clearMessage();
    setText($('login-reason'), reason);
    $('login').hidden = false;
    $('token-show').hidden = true;
    $('token-forget').hidden = !state.token;
    const input = $('token-input');
    input.value = '';
    input.focus();
  }

  // ------------------------------------------------------------------ events

  function useToken(token) {
    state.token = token;
    state.tokensAllowed = null;
    if (token) sessionStorage.setItem(TOKEN_KEY, token);
    else sessionStorage.removeItem(TOKEN_KEY);
  }

  async function copyKey(button) {
    const key = button.dataset.key;
    try {
      if (navigator.clipboard && window.isSecureContext) {
        await navigator.clipboard.writeText(key);
      } else {
        const area = el('textarea', { readonly: '', class: 'offscreen' });
        area.value = key;
        document.body.append(area);
        area.select();
        document.execCommand('copy');
        area.remove();
      }
      button.textContent = 'copied';
    } catch (error) {
      button.textContent = 'copy failed';
    }
    setTimeout(() => { button.textContent = 'copy'; }, 1500);
  }

  function start() {
    const select = $('window');
    const saved = sessionStorage.getItem(WINDOW_KEY);
    if (saved && WINDOW_NAMES[saved]) select.value = saved;
    $('controls').hidden = false;

    select.addEventListener('change', () => {
      sessionStorage.setItem(WINDOW_KEY, select.value);
      refresh();
    });
    $('login-form').addEventListener('submit', (event) => {
      event.preventDefault();
      const token = $('token-input').value.trim();
      if (!token) return;
      useToken(token);
      $('login').hidden = true;
      refresh();
    });
    $('token-forget').addEventListener('click', () => {
      useToken('');
      hideDashboard();
      refresh();
    });
    $('token-show').addEventListener('click', () => showLogin('Enter a token, e.g. an admin token to see the activity per token.'));
    document.addEventListener('click', (event) => {
      const button = event.target.closest('button.copy');
      if (button) copyKey(button);
    });
    setInterval(() => {
      if (!document.hidden && (state.shown || state.lastOk === 0) && $('login').hidden) refresh();
    }, REFRESH_MS);
    document.addEventListener('visibilitychange', () => {
      if (!document.hidden && state.shown && Date.now() - state.lastOk > REFRESH_MS) refresh();
    });
    refresh();
  }

  if (document.readyState === 'loading') document.addEventListener('DOMContentLoaded', start);
  else start();
})();
