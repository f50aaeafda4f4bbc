// Koru's web dashboard: loads /api/v1 (sessions, drives, chats, doctor), keeps it live from the SSE stream, and runs the recovery actions; DOM built with createElement/textContent only (strict CSP, no HTML from the server).

const API = '/api/v1';
const TERMINAL = new Set(['done', 'failed', 'cancelled', 'timed_out']);
const RETRYABLE = new Set(['failed', 'cancelled', 'timed_out']);
const ROUTES = ['native_send', 'plugin_drive', 'os_injection'];
const STATUS_TEXT = { ok: '✓ ok', degraded: '◐ degraded', unavailable: '✕ unavailable', not_applicable: '– not applicable' };
const MAX_DRIVES = 100;
/** Drives one "Load older" page brings from the journal. */
const DRIVE_PAGE = 50;

const state = {
  status: null,
  sessions: new Map(), // session_id → SessionInfo
  agents: new Map(), // agent_id → TerminalAgentInfo (terminal agents found in tmux panes)
  drives: new Map(), // drive_id → DriveInfo
  drivesMore: false, // the journal has drives older than the oldest loaded
  olderAllLoaded: false, // an older page said there is nothing older: a reload of the newest page does not bring the button back
  driveLimit: MAX_DRIVES, // cards kept on the page (grows as older pages are loaded)
  chats: [],
  chatView: null, // {store, chat_id, read?: ChatReadResult, error?: string, loading}: the chat whose turns are shown
  doctor: null,
  results: new Map(), // drive_id → {text, ok} of the last action on it
  stream: 'connecting',
};

const $ = (id) => document.getElementById(id);

/** Replaces an element's children, skipping null/false (replaceChildren would write "null"). */
function fill(el, ...kids) {
  el.replaceChildren(...kids.flat(Infinity).filter((k) => k != null && k !== false));
  return el;
}

/** Runs a re-render, then gives focus back to the element with the same data-key (a person tabbing through the page keeps their place). */
function keepFocus(render) {
  const key = document.activeElement?.dataset?.key;
  render();
  if (key && document.activeElement?.dataset?.key !== key) document.querySelector(`[data-key="${CSS.escape(key)}"]`)?.focus();
}

/** Makes an element: props are attributes (class, text, on<event>, dataset); children are nodes or strings (as text). */
function h(tag, props = {}, ...kids) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(props)) {
    if (v == null || v === false) continue;
    if (k === 'class') el.className = v;
    else if (k === 'text') el.textContent = String(v);
    else if (k === 'dataset') Object.assign(el.dataset, v);
    else if (k.startsWith('on')) el.addEventListener(k.slice(2), v);
    else el.setAttribute(k, v === true ? '' : String(v));
  }
  for (const kid of kids.flat(Infinity)) {
    if (kid == null || kid === false) continue;
    el.append(kid instanceof Node ? kid : String(kid));
  }
  return el;
}

// ---- time ---------------------------------------------------------------------------

function ago(ms) {
  const s = Math.max(0, Math.round((Date.now() - ms) / 1000));
  if (s < 5) return 'just now';
  if (s < 60) return `${s} s ago`;
  if (s < 3600) return `${Math.floor(s / 60)} min ago`;
  if (s < 86400) return `${Math.floor(s / 3600)} h ${Math.floor((s % 3600) / 60)} min ago`;
  return `${Math.floor(s / 86400)} d ago`;
}

/** A <time> that says "3 min ago" and keeps saying it (see the ticker), with the exact time as its title. */
function when(ms) {
  if (!ms) return h('span', { class: 'muted', text: '—' });
  const d = new Date(ms);
  return h('time', { datetime: d.toISOString(), title: d.toLocaleString(), dataset: { ts: ms }, text: ago(ms) });
}

function delta(ms) {
  if (ms < 1000) return `+${ms} ms`;
  return `+${(ms / 1000).toFixed(ms < 10000 ? 2 : 1)} s`;
}

function tickTimes() {
  for (const el of document.querySelectorAll('time[data-ts]')) el.textContent = ago(Number(el.dataset.ts));
}

// ---- API ----------------------------------------------------------------------------

class ApiError extends Error {
  constructor(status, body) {
    super(body?.message || `HTTP ${status}`);
    this.status = status;
    this.code = body?.code || `http_${status}`;
  }
}

async function api(method, path, body) {
  const init = { method, credentials: 'same-origin', headers: { Accept: 'application/json' } };
  if (body !== undefined) {
    init.headers['Content-Type'] = 'application/json';
    init.body = JSON.stringify(body);
  }
  let res;
  try {
    res = await fetch(API + path, init);
  } catch (e) {
    throw new ApiError(0, { code: 'network', message: `the daemon does not answer (${e.message})` });
  }
  const text = await res.text();
  let json = null;
  try {
    json = text ? JSON.parse(text) : null;
  } catch {
    /* not JSON */
  }
  if (!res.ok) {
    if (res.status === 401) signedOut();
    throw new ApiError(res.status, json);
  }
  return json;
}

function signedOut() {
  const banner = $('banner');
  fill(banner, 'Not signed in (or the session expired): run ', h('code', { text: 'koru dashboard' }), ' again and open the address it prints.');
  banner.hidden = false;
}

// ---- toasts and action buttons ------------------------------------------------------

function toast(text, kind = 'info') {
  const box = $('toasts');
  const item = h('div', { class: `toast toast-${kind}`, role: kind === 'error' ? 'alert' : null, text });
  box.append(item);
  while (box.children.length > 4) box.firstElementChild.remove();
  setTimeout(() => item.remove(), kind === 'error' ? 12_000 : 6_000);
}

function errorText(e) {
  return e instanceof ApiError ? `${e.code}: ${e.message}` : String(e?.message || e);
}

/** Runs `work` with `button` showing progress; returns work's value, or undefined after reporting its error. */
async function withProgress(button, work) {
  const label = button.textContent;
  button.disabled = true;
  button.setAttribute('aria-busy', 'true');
  button.classList.add('busy');
  button.textContent = `${label}…`;
  try {
    return await work();
  } finally {
    if (button.isConnected) {
      button.disabled = false;
      button.removeAttribute('aria-busy');
      button.classList.remove('busy');
      button.textContent = label;
    }
  }
}

// Actions this page asked for, by name: their recovery_performed events need no second toast.
const mine = new Map();

/** POST /recovery {action, params}; reports the RecoveryResult summary (or the refusal) and returns the result or null. */
async function recover(button, action, params = {}, driveId = null) {
  mine.set(action, (mine.get(action) || 0) + 1);
  return withProgress(button, async () => {
    try {
      const result = await api('POST', '/recovery', { action, params });
      const text = result.ok
        ? result.summary
        : `${result.summary}${result.blocker ? ` (${result.blocker.code}${result.blocker.detail ? `: ${result.blocker.detail}` : ''})` : ''}`;
      toast(`${action}: ${text}`, result.ok ? 'ok' : 'error');
      if (driveId) noteResult(driveId, text, result.ok);
      if (result.drive) upsertDrive(result.drive);
      return result;
    } catch (e) {
      toast(`${action}: ${errorText(e)}`, 'error');
      if (driveId) noteResult(driveId, errorText(e), false);
      return null;
    }
  });
}

function noteResult(driveId, text, ok) {
  state.results.set(driveId, { text, ok });
  const drive = state.drives.get(driveId);
  if (drive) renderDrive(drive);
}

// ---- header -------------------------------------------------------------------------

function renderHeader() {
  if (state.status) $('version').textContent = `daemon ${state.status.version}`;
  const stream = $('stream');
  const label = { live: '● live', reconnecting: '◌ reconnecting…', connecting: '◌ connecting…', closed: '✕ stream closed' }[state.stream];
  stream.textContent = label;
  stream.className = `stream stream-${state.stream}`;
  const drives = [...state.drives.values()];
  const active = drives.filter((d) => !TERMINAL.has(d.state)).length;
  const failed = drives.filter((d) => RETRYABLE.has(d.state)).length;
  fill($('counts'), 
    h('li', {}, h('strong', { text: state.sessions.size }), ' sessions'),
    state.agents.size ? h('li', {}, h('strong', { text: state.agents.size }), ' terminal agents') : null,
    h('li', {}, h('strong', { text: active }), ' active drives'),
    h('li', {}, h('strong', { text: drives.length }), ' drives'),
    failed ? h('li', { class: 'count-bad' }, h('strong', { text: failed }), ' not delivered') : null,
    h('li', {}, h('strong', { text: state.chats.length }), ' chats'),
  );
}

// ---- sessions -----------------------------------------------------------------------

const basename = (p) => p.replace(/[/\\]+$/, '').split(/[/\\]/).pop() || p;
const folders = (s) => s.window?.workspace_folders || [];
const product = (s) => s.ide?.product || s.client?.name || 'unknown';

function sessionLabel(s) {
  const f = folders(s);
  return `${product(s)} — ${f.length ? f.map(basename).join(', ') : 'no folder'} (${s.session_id})`;
}

function renderSessions() {
  keepFocus(renderSessionsNow);
}

function renderSessionsNow() {
  const body = $('sessions-body');
  const sessions = [...state.sessions.values()].sort((a, b) => a.connected_at_ms - b.connected_at_ms);
  if (!sessions.length) {
    fill(body, h('p', { class: 'muted', text: 'No IDE is connected. Start an IDE with the Koru plugin (or `koru dev fake-plugin`).' }));
  } else {
    fill(body, ...sessions.map(sessionCard));
  }
  const agents = [...state.agents.values()].sort((a, b) => (a.workspace < b.workspace ? -1 : a.workspace > b.workspace ? 1 : 0));
  fill(
    $('agents-body'),
    agents.length
      ? agents.map(agentCard)
      : h('p', { class: 'muted', text: 'No terminal agent (Claude Code, Codex CLI, Gemini CLI, opencode) runs in a tmux pane.' }),
  );
  renderSendTargets();
  renderHeader();
}

const AGENT_STATE_TEXT = { idle: '● idle', replying: '◐ replying', needs_input: '⚠ needs input', unknown: '? unknown' };

function agentCard(a) {
  const t = a.terminal || {};
  const place = t.kind === 'tmux' ? h('span', { title: t.socket, text: `tmux ${t.place} (pane ${t.pane_id})` }) : t.kind || 'unknown';
  return h(
    'article',
    { class: 'card session agent', id: `agent-${a.agent_id}`, dataset: { agentId: a.agent_id }, 'aria-label': `Terminal agent ${a.product} in ${basename(a.workspace)}` },
    h('div', { class: 'card-head' }, h('h3', { class: 'folder', text: basename(a.workspace) }), h('code', { class: 'small', text: a.agent_id }), h('span', { class: `badge agent-${a.state}`, text: AGENT_STATE_TEXT[a.state] || a.state })),
    h(
      'dl',
      { class: 'facts' },
      fact('Agent', a.product),
      fact('Runs in', place, h('span', { class: 'muted', text: ` · pid ${a.pid}` })),
      fact('Chat', a.chat ? h('code', { class: 'small', text: a.chat.chat_id }) : h('span', { class: 'muted', text: 'not known yet' })),
      h('div', { class: 'wide' }, h('dt', { text: 'Folder' }), h('dd', {}, h('code', { text: a.workspace }))),
    ),
  );
}

const agentLabel = (a) => `${a.product} — ${basename(a.workspace)} (${a.agent_id}, terminal)`;

const fact = (label, ...value) => h('div', {}, h('dt', { text: label }), h('dd', {}, value));

function sessionCard(s) {
  const f = folders(s);
  const title = f.length ? f.map(basename).join(', ') : '(no folder)';
  const active = s.active_drive ? h('a', { href: `#drive-${s.active_drive}`, text: s.active_drive }) : h('span', { class: 'muted', text: 'none' });
  const reconnect = h('button', { type: 'button', class: 'small', text: 'Reconnect plugin', dataset: { key: `reconnect:${s.session_id}` } });
  reconnect.addEventListener('click', () => recover(reconnect, 'reconnect_plugin', { session_id: s.session_id }));
  const focus = h('button', { type: 'button', class: 'small', text: 'Focus window', dataset: { key: `focus:${s.session_id}` } });
  focus.addEventListener('click', () => recover(focus, 'focus_window', { session_id: s.session_id }));
  return h(
    'article',
    { class: 'card session', id: `session-${s.session_id}`, dataset: { sessionId: s.session_id }, 'aria-label': `Session ${title}` },
    h('div', { class: 'card-head' }, h('h3', { class: 'folder', text: title }), h('code', { class: 'small', text: s.session_id }), h('span', { class: `badge health-${s.health}`, text: s.health === 'active' ? '● active' : '◌ stale' })),
    h(
      'dl',
      { class: 'facts' },
      fact('Product', h('span', { title: s.ide?.app_name || '', text: product(s) }), ` ${s.ide?.version || ''}`),
      fact('Protocol', `v${s.protocol}`, h('span', { class: 'muted', text: ` · ${s.client?.name || ''} ${s.client?.version || ''}` })),
      fact('Connected', when(s.connected_at_ms)),
      fact(
        'Chat',
        h('span', { class: `badge chat-${s.chat}`, text: s.chat }),
        s.chat_readiness
          ? s.chat_readiness.ready
            ? h('span', { class: 'chat-ready', text: ' · ready' })
            : h('span', { class: 'chat-not-ready', text: ` · not ready: ${s.chat_readiness.reason || 'the plugin gave no reason'}` })
          : '',
      ),
      fact('Active drive', active, s.queued_drives ? ` · ${s.queued_drives} queued` : ''),
      h('div', { class: 'wide' }, h('dt', { text: 'Workspace folders' }), h('dd', {}, f.length ? h('ul', { class: 'paths' }, f.map((p) => h('li', {}, h('code', { text: p })))) : '—')),
    ),
    h('div', { class: 'actions' }, reconnect, focus),
  );
}

// ---- send box -----------------------------------------------------------------------

function renderSendTargets() {
  const select = $('send-session');
  const previous = select.value;
  const sessions = [...state.sessions.values()].sort((a, b) => a.connected_at_ms - b.connected_at_ms);
  const agents = [...state.agents.values()];
  if (!sessions.length && !agents.length) {
    fill(select, h('option', { value: '', text: 'no session connected' }));
    select.disabled = true;
    $('send-button').disabled = true;
    return;
  }
  select.disabled = false;
  $('send-button').disabled = false;
  fill(
    select,
    sessions.map((s) => h('option', { value: s.session_id, text: sessionLabel(s) })),
    agents.map((a) => h('option', { value: a.agent_id, text: agentLabel(a) })),
  );
  if (sessions.some((s) => s.session_id === previous) || state.agents.has(previous)) select.value = previous;
}

async function onSend(event) {
  event.preventDefault();
  const error = $('send-error');
  error.hidden = true;
  const session = $('send-session').value;
  const prompt = $('send-prompt').value;
  if (!session || !prompt.trim()) {
    error.textContent = !session ? 'Choose a session first.' : 'Write a prompt first.';
    error.hidden = false;
    return;
  }
  await withProgress($('send-button'), async () => {
    try {
      const answer = await api('POST', '/drives', { target: { session }, prompt, options: { submit: $('send-submit').checked } });
      // The answer is the drive as created; an event about it may already have come with
      // more (e.g. why it waits), and the answer must not undo it.
      if (!state.drives.has(answer.drive.drive_id)) upsertDrive(answer.drive);
      toast(`Drive ${answer.drive.drive_id} ${answer.drive.state}`, 'ok');
      $('send-prompt').value = '';
    } catch (e) {
      error.textContent = errorText(e);
      error.hidden = false;
    }
  });
}

// ---- drives -------------------------------------------------------------------------

/** Whether `next` is at least as recent as `prev` (answers and events about one drive can cross). */
function isNewer(next, prev) {
  if (!prev) return true;
  const a = next.history?.length || 0;
  const b = prev.history?.length || 0;
  return a > b || (a === b && (next.finished_at_ms || 0) >= (prev.finished_at_ms || 0));
}

function upsertDrive(drive) {
  if (!isNewer(drive, state.drives.get(drive.drive_id))) return;
  state.drives.set(drive.drive_id, drive);
  renderDrive(drive);
  // The retried drive's card links to its retries.
  if (drive.retry_of && state.drives.has(drive.retry_of)) renderDrive(state.drives.get(drive.retry_of));
  renderHeader();
}

function renderDrives() {
  const body = $('drives-body');
  const drives = [...state.drives.values()].sort((a, b) => b.created_at_ms - a.created_at_ms || (b.drive_id > a.drive_id ? 1 : -1));
  if (!drives.length) {
    fill(body, h('p', { class: 'muted empty', text: 'No drives yet: send a prompt above.' }));
  } else {
    fill(body, ...drives.slice(0, state.driveLimit).map(driveCard));
  }
  renderJournal();
  renderHeader();
}

/** Under the drive list: where the record of every drive is kept, how to prove it, and the way back through older drives. */
function renderJournal() {
  const older = $('drives-older');
  older.hidden = !state.drivesMore;
  const journal = state.status?.journal;
  const note = $('journal-note');
  if (!journal) {
    fill(note, 'No journal: this daemon runs with --no-journal, so drives are forgotten when it stops.');
    $('journal-verify').hidden = true;
    return;
  }
  $('journal-verify').hidden = false;
  fill(note,
    'Every drive is on record in ', h('code', { text: journal.dir }),
    ` (${journal.last_seq} entries, prompts ${journal.prompts}${journal.keyed ? ', HMAC-keyed' : ''}). Head `,
    h('code', { class: 'hash', text: journal.head, title: 'Write it down elsewhere: koru verify proves nothing before it changed' }),
    '. Prove it intact with ', h('code', { text: 'koru verify' }), ' or the button.',
    journal.error ? h('span', { class: 'error', text: ` Journal problem: ${journal.error}` }) : null,
  );
}

async function loadOlderDrives(button) {
  const oldest = [...state.drives.values()].sort((a, b) => a.created_at_ms - b.created_at_ms)[0];
  if (!oldest) return;
  button.disabled = true;
  try {
    const page = await api('GET', `/drives?limit=${DRIVE_PAGE}&before=${encodeURIComponent(oldest.drive_id)}`);
    for (const d of page.drives) if (!state.drives.has(d.drive_id)) state.drives.set(d.drive_id, d);
    state.drivesMore = !!page.more;
    state.olderAllLoaded = !page.more;
    state.driveLimit = Math.max(state.driveLimit, state.drives.size);
    renderDrives();
  } catch (e) {
    toast(`Older drives: ${errorText(e)}`, 'error');
  } finally {
    button.disabled = false;
  }
}

async function verifyJournal(button) {
  button.disabled = true;
  const out = $('journal-result');
  try {
    const report = await api('GET', '/journal/verify');
    const p = report.problem;
    if (report.verdict === 'intact') {
      fill(out, `✓ journal intact — ${report.entries} entries, head ${report.head}`);
      out.className = 'ok';
    } else {
      fill(out, `✕ ${report.verdict === 'tampered' ? 'journal NOT intact' : 'cannot verify'}${p?.seq ? ` — first bad entry: seq ${p.seq}` : ''}${p ? `: ${p.kind} — ${p.message}` : ''}`);
      out.className = 'error';
    }
  } catch (e) {
    fill(out, `✕ ${errorText(e)}`);
    out.className = 'error';
  } finally {
    button.disabled = false;
  }
}

/** Replaces one drive's card in place (or inserts it at its place, newest first). */
function renderDrive(drive) {
  keepFocus(() => renderDriveNow(drive));
}

function renderDriveNow(drive) {
  const body = $('drives-body');
  const card = driveCard(drive);
  const old = document.getElementById(`drive-${drive.drive_id}`);
  if (old) {
    old.replaceWith(card);
    return;
  }
  body.querySelector('.empty')?.remove();
  const next = [...body.children].find((el) => Number(el.dataset.created) < drive.created_at_ms);
  body.insertBefore(card, next || null);
  while (body.children.length > state.driveLimit) body.lastElementChild.remove();
}

const targetText = (t) => {
  if (typeof t === 'string') return t;
  const [k, v] = Object.entries(t || {})[0] || ['?', ''];
  return `${k} ${typeof v === 'object' ? JSON.stringify(v) : v}`;
};

// What each submit evidence proves (docs/protocol.md), shown on hover.
const EVIDENCE = {
  chat_responded: "the chat's own response to the prompt ended or asked the user",
  chat_running: 'the chat was answering, with no refusal, when the acceptance window ran out',
  command_returned: 'only the IDE command returned; nothing from the chat confirmed it took the prompt',
  key_pressed: 'the submit key went once to the verified window; nothing from the chat confirmed it',
};

function driveCard(d) {
  const session = state.sessions.get(d.session_id);
  const start = d.history?.[0]?.at_ms ?? d.created_at_ms;
  const timeline = h(
    'ol',
    { class: 'timeline', 'aria-label': 'Stages' },
    (d.history || []).map((stage) =>
      h('li', { class: `stage state-${stage.state}`, dataset: { stage: stage.state, at: stage.at_ms } }, h('span', { class: 'stage-name', text: stage.state.replace('_', ' ') }), h('span', { class: 'stage-time', title: new Date(stage.at_ms).toLocaleString(), text: delta(stage.at_ms - start) })),
    ),
  );
  const attemptItem = (a) =>
    h(
      'li',
      { class: `attempt attempt-${a.outcome}`, dataset: { route: a.route, outcome: a.outcome } },
      h('div', {}, h('strong', { text: a.route }), h('span', { class: 'muted', text: ` via ${a.interface}` }), ' ', h('span', { class: `badge outcome-${a.outcome}`, text: a.outcome.replace('_', ' ') }), a.reached ? h('span', { class: 'muted', text: ` · reached ${a.reached}` }) : null),
      a.blocker ? h('div', { class: 'blocker' }, h('code', { text: a.blocker.code }), a.blocker.detail ? ` ${a.blocker.detail}` : '') : null,
      a.hint ? h('div', { class: 'hint' }, h('span', { class: 'hint-label', text: 'Fix: ' }), a.hint) : null,
      a.note ? h('div', { class: 'note' }, a.note) : null,
    );
  // Routes tried in full; the ones skipped (not usable now) folded, they are often several.
  const tried = (d.attempts || []).filter((a) => a.outcome !== 'skipped');
  const skipped = (d.attempts || []).filter((a) => a.outcome === 'skipped');
  const attempts =
    tried.length || skipped.length
      ? h(
          'div',
          { class: 'attempts-block' },
          tried.length ? h('ul', { class: 'attempts', 'aria-label': 'Routes tried' }, tried.map(attemptItem)) : null,
          skipped.length
            ? h(
                'details',
                { class: 'skipped' },
                h('summary', { text: `${skipped.length} route${skipped.length > 1 ? 's' : ''} not usable now (${[...new Set(skipped.map((a) => a.blocker?.code || 'skipped'))].join(', ')})` }),
                h('ul', { class: 'attempts' }, skipped.map(attemptItem)),
              )
            : null,
        )
      : null;
  const actions = [];
  if (!TERMINAL.has(d.state)) {
    const cancel = h('button', { type: 'button', class: 'danger', text: 'Cancel', dataset: { key: `cancel:${d.drive_id}` } });
    cancel.addEventListener('click', () => recover(cancel, 'cancel_drive', { drive_id: d.drive_id }, d.drive_id));
    actions.push(cancel);
  } else if (RETRYABLE.has(d.state)) {
    const planner = h('button', { type: 'button', text: "Retry (planner's choice)", dataset: { key: `retry:${d.drive_id}` } });
    planner.addEventListener('click', () => recover(planner, 'retry_drive', { drive_id: d.drive_id }, d.drive_id));
    actions.push(planner);
    for (const route of ROUTES) {
      const b = h('button', { type: 'button', dataset: { route, key: `retry:${d.drive_id}:${route}` }, text: `Retry via ${route}` });
      b.addEventListener('click', () => recover(b, 'retry_drive', { drive_id: d.drive_id, route }, d.drive_id));
      actions.push(b);
    }
  }
  const result = state.results.get(d.drive_id);
  const retries = [...state.drives.values()].filter((x) => x.retry_of === d.drive_id);
  return h(
    'article',
    { class: `card drive drive-${d.state}`, id: `drive-${d.drive_id}`, dataset: { driveId: d.drive_id, state: d.state, created: d.created_at_ms } },
    h(
      'div',
      { class: 'card-head' },
      h('span', { class: `badge state-${d.state}`, text: d.state.replace('_', ' ') }),
      h('h3', { class: 'excerpt', title: `${d.prompt_chars} characters` }, d.prompt_excerpt || '(empty prompt)'),
      when(d.created_at_ms),
    ),
    h(
      'p',
      { class: 'meta' },
      h('code', { text: d.drive_id }),
      ` → ${session ? sessionLabel(session) : targetText(d.target)} · ${d.route}`,
      d.options?.submit === false ? ' · not submitted (left in the input)' : '',
      d.verification && d.verification !== 'none' ? ` · ${d.verification}` : '',
      d.submit_evidence ? h('span', { class: 'evidence', title: EVIDENCE[d.submit_evidence] || '', text: ` · proof: ${d.submit_evidence.replace('_', ' ')}` }) : null,
      d.retry_of ? h('span', { class: 'retry-of' }, ' · retry of ', h('a', { href: `#drive-${d.retry_of}`, text: d.retry_of })) : null,
      retries.length ? h('span', {}, ' · retried as ', retries.map((r, i) => [i ? ', ' : '', h('a', { href: `#drive-${r.drive_id}`, text: r.drive_id })])) : null,
    ),
    timeline,
    d.waiting ? h('p', { class: 'waiting' }, h('strong', { text: 'Waiting: ' }), h('code', { text: d.waiting.code }), ` ${d.waiting.detail}`) : null,
    d.blocker ? h('p', { class: 'blocker drive-blocker' }, h('strong', { text: 'Blocked: ' }), h('code', { text: d.blocker.code }), d.blocker.detail ? ` ${d.blocker.detail}` : '') : null,
    attempts,
    d.observation ? h('p', { class: 'observation' }, d.observation.store === 'plugin' ? `Chat (through the plugin): ${d.observation.stage}` : `Chat history: ${d.observation.stage} (${d.observation.basis}) in ${d.observation.store}`, d.observation.detail ? ` — ${d.observation.detail}` : '', d.observation.reply_excerpt ? h('q', { text: d.observation.reply_excerpt }) : null) : null,
    actions.length ? h('div', { class: 'actions' }, actions) : null,
    result ? h('p', { class: `action-result ${result.ok ? 'ok' : 'bad'}`, role: 'status', text: result.text }) : null,
  );
}

// ---- chats --------------------------------------------------------------------------

function renderChats() {
  const chats = [...state.chats].sort((a, b) => b.last_activity_ms - a.last_activity_ms);
  const body = $('chats-body');
  $('chats-empty').hidden = chats.length > 0;
  body.hidden = chats.length === 0;
  if (chats.length) {
    fill(body, 
      h(
        'table',
        { class: 'table chats-table' },
        h('thead', {}, h('tr', {}, ['Store', 'Workspace', 'State', 'Last activity', 'Last prompt', 'Turns'].map((t) => h('th', { scope: 'col', text: t })))),
        h(
          'tbody',
          {},
          chats.map((c) =>
            h(
              'tr',
              {},
              h('td', { 'data-label': 'Store' }, h('code', { text: c.store.replace(/^chat_history_/, '') })),
              h('td', { 'data-label': 'Workspace', title: c.workspace || '' }, c.workspace ? basename(c.workspace) : '—'),
              h('td', { 'data-label': 'State' }, h('span', { class: `badge chat-${c.state}`, text: c.state.replace('_', ' ') })),
              h('td', { 'data-label': 'Last activity' }, when(c.last_activity_ms)),
              h('td', { 'data-label': 'Last prompt', class: 'excerpt-cell' }, c.last_prompt || '—'),
              h(
                'td',
                { 'data-label': 'Turns' },
                h('button', {
                  type: 'button',
                  class: 'small',
                  dataset: { key: `turns:${c.store}:${c.chat_id}` },
                  'aria-controls': 'chat-view',
                  text: isShown(c) ? 'Hide turns' : 'Show turns',
                  onclick: () => (isShown(c) ? hideChat() : showChat(c)),
                }),
              ),
            ),
          ),
        ),
      ),
    );
  }
  renderChatView();
  renderHeader();
}

/** Turns a chat view reads at once (the newest). */
const CHAT_TURNS = 5;

function isShown(c) {
  return state.chatView && state.chatView.store === c.store && state.chatView.chat_id === c.chat_id;
}

async function showChat(c) {
  state.chatView = { store: c.store, chat_id: c.chat_id, loading: true };
  keepFocus(renderChats);
  await reloadChatView();
}

function hideChat() {
  state.chatView = null;
  keepFocus(renderChats);
}

/** Reads the shown chat's last turns again (after it changed, or when it was opened). */
async function reloadChatView() {
  const view = state.chatView;
  if (!view) return;
  const query = new URLSearchParams({ store: view.store, turns: String(CHAT_TURNS) });
  try {
    const read = await api('GET', `/chats/${encodeURIComponent(view.chat_id)}/turns?${query}`);
    if (state.chatView === view) Object.assign(view, { read, error: null, loading: false });
  } catch (e) {
    if (state.chatView === view) Object.assign(view, { error: e.message, loading: false });
  }
  if (state.chatView === view) renderChatView();
}

function stepText(s) {
  const outcome = s.exit_code != null ? ` → exit ${s.exit_code}` : s.outcome === 'unknown' ? '' : ` → ${s.outcome}`;
  return `${s.tool} ${s.summary}${outcome}${s.error ? `: ${s.error}` : ''}`;
}

function renderTurn(t) {
  return h(
    'article',
    { class: `turn turn-${t.state}` },
    h('h4', {}, `Turn ${t.index} · `, h('span', { class: `badge chat-${t.state}`, text: t.state.replace('_', ' ') }), t.started_ms ? [' · ', when(t.started_ms)] : null, t.model ? ` · ${t.model}` : ''),
    h('blockquote', { class: 'prompt', text: t.prompt ?? '(no prompt: the agent went on by itself)' }),
    t.steps && t.steps.length ? h('ol', { class: 'steps' }, t.steps.map((s) => h('li', { class: `step step-${s.outcome}`, text: stepText(s) }))) : null,
    t.error ? h('p', { class: 'bad', text: `Failed: ${t.error}` }) : null,
    t.reply != null ? h('pre', { class: 'reply', text: t.reply }) : h('p', { class: 'muted', text: 'No reply yet.' }),
    t.reply_next_offset != null ? h('p', { class: 'muted', text: `The reply goes on (${t.reply_chars} characters); koru chat show ${state.chatView?.chat_id ?? ''} prints it whole.` }) : null,
  );
}

function renderChatView() {
  const el = $('chat-view');
  if (!el) return;
  const view = state.chatView;
  el.hidden = !view;
  if (!view) return fill(el);
  const title = h('h3', {}, 'Chat ', h('code', { text: view.chat_id }), ` in ${view.store.replace(/^chat_history_/, '')}`);
  if (view.loading) return fill(el, title, h('p', { class: 'muted', role: 'status', text: 'Reading the chat from its store…' }));
  if (view.error) return fill(el, title, h('p', { class: 'bad', role: 'status', text: `Could not read it: ${view.error}` }));
  const read = view.read;
  return fill(
    el,
    title,
    h('p', { class: 'muted', text: `${read.turns_total} turn(s); the last ${read.turns.length} shown, newest last, read from ${read.source ?? 'its store'}.${read.not_recorded?.length ? ` This store does not record: ${read.not_recorded.join(', ')}.` : ''}` }),
    read.turns.map(renderTurn),
  );
}

// ---- doctor -------------------------------------------------------------------------

function statusBadge(status) {
  return h('span', { class: `badge st-${status}`, text: STATUS_TEXT[status] || status });
}

const ACTION_LABEL = { reprobe: 'Re-check', reload_registry: 'Reload registry', reconnect_plugin: 'Reconnect plugin', focus_window: 'Focus window' };
const SESSION_ACTIONS = new Set(['reconnect_plugin', 'focus_window']);

/** A hint's buttons: its `run` action (per session for session-bound actions), else "Re-check" after a person has acted. */
function hintButtons(hint, sessionId) {
  if (!hint.run) {
    const b = h('button', { type: 'button', class: 'small secondary', text: 'Re-check', title: 'Run the probes again once you have done this' });
    b.addEventListener('click', () => recheck(b));
    return [b];
  }
  const label = ACTION_LABEL[hint.run] || hint.run.replace(/_/g, ' ');
  if (!SESSION_ACTIONS.has(hint.run)) {
    const b = h('button', { type: 'button', class: 'small', text: label, title: hint.does });
    b.addEventListener('click', () => runHint(b, hint.run, {}));
    return [b];
  }
  const ids = sessionId ? [sessionId] : [...state.sessions.keys()];
  return ids.map((sid) => {
    const s = state.sessions.get(sid);
    const b = h('button', { type: 'button', class: 'small', text: ids.length > 1 && s ? `${label}: ${folders(s).map(basename).join(', ') || sid}` : label, title: hint.does });
    b.addEventListener('click', () => runHint(b, hint.run, { session_id: sid }));
    return b;
  });
}

function hintList(hints, sessionId = null) {
  if (!hints?.length) return null;
  return h('ul', { class: 'hints' }, hints.map((hint) => h('li', {}, h('strong', { text: hint.label }), ': ', hint.does, ' ', hintButtons(hint, sessionId))));
}

async function runHint(button, action, params) {
  const result = await recover(button, action, params);
  if (result && (action === 'reprobe' || action === 'reload_registry')) await loadDoctor();
}

async function recheck(button) {
  const result = await recover(button, 'reprobe');
  if (result) await withProgress(button, loadDoctor);
}

function renderDoctor() {
  const r = state.doctor;
  const body = $('doctor-body');
  if (!r) return;
  const showNA = $('doctor-na').checked;
  const s = r.summary;
  const verdictClass = s.exit_code === 0 ? 'st-ok' : s.exit_code === 1 ? 'st-degraded' : 'st-unavailable';
  const families = new Map();
  for (const i of r.interfaces) {
    if (!showNA && i.status === 'not_applicable') continue;
    if (!families.has(i.family)) families.set(i.family, []);
    families.get(i.family).push(i);
  }
  const table = h(
    'table',
    { class: 'table doctor-table' },
    h('thead', {}, h('tr', {}, ['Interface', 'Status', 'Blocker', 'Facts', 'What to do'].map((t) => h('th', { scope: 'col', text: t })))),
    [...families.entries()].map(([family, checks]) =>
      h(
        'tbody',
        { dataset: { family } },
        h('tr', { class: 'family' }, h('th', { colspan: 5, scope: 'colgroup', text: family.replace(/_/g, ' ') })),
        checks.map((c) =>
          h(
            'tr',
            { class: `iface st-row-${c.status}`, dataset: { interface: c.id } },
            h('td', { 'data-label': 'Interface' }, h('code', { text: c.id }), h('div', { class: 'muted small', text: c.description })),
            h('td', { 'data-label': 'Status' }, statusBadge(c.status)),
            h('td', { 'data-label': 'Blocker' }, c.blocker ? [h('code', { text: c.blocker.code }), h('div', { class: 'small', text: c.blocker.detail })] : '—'),
            h('td', { 'data-label': 'Facts' }, c.facts?.length ? h('ul', { class: 'facts-list small' }, c.facts.map((f) => h('li', { text: f }))) : '—'),
            h('td', { 'data-label': 'What to do' }, hintList(c.recovery) || '—'),
          ),
        ),
      ),
    ),
  );
  const hidden = r.interfaces.length - [...families.values()].reduce((n, l) => n + l.length, 0);
  const paths = r.sessions?.length
    ? h(
        'div',
        { class: 'paths-block' },
        h('h3', { text: 'Drive paths per session' }),
        r.sessions.map((sp) =>
          h(
            'div',
            { class: 'session-paths', dataset: { sessionId: sp.session_id } },
            h('p', {}, h('strong', { text: `${sp.product} ${sp.ide_version}` }), ` — ${sp.workspace_folders.map(basename).join(', ') || 'no folder'} `, h('code', { text: sp.session_id })),
            h(
              'ol',
              { class: 'routes' },
              sp.routes.map((rt) =>
                h(
                  'li',
                  { class: rt.usable ? 'usable' : 'unusable' },
                  h('span', { class: `badge ${rt.usable ? 'st-ok' : 'st-unavailable'}`, text: rt.usable ? '✓ usable' : '✕ blocked' }),
                  ' ', h('strong', { text: rt.route }), h('span', { class: 'muted', text: ` via ${rt.interface} · ${rt.verification}` }),
                  rt.blocker ? h('div', { class: 'blocker' }, h('code', { text: rt.blocker.code }), ` ${rt.blocker.detail}`) : null,
                  hintList(rt.recovery, sp.session_id),
                ),
              ),
            ),
          ),
        ),
      )
    : null;
  fill(body, 
    h(
      'div',
      { class: `verdict ${verdictClass}`, role: 'status' },
      h('strong', { text: s.verdict }),
      h('span', { class: 'small', text: ` — ${s.ok} ok, ${s.degraded} degraded, ${s.unavailable} unavailable, ${s.not_applicable} not applicable; ${s.sessions_with_a_drive_path} session(s) with a drive path` }),
    ),
    h(
      'p',
      { class: 'small muted' },
      `Probed ${new Date(r.generated_at_ms).toLocaleTimeString()} · ${r.environment.platform}, display ${r.environment.display_server}, D-Bus ${r.environment.dbus_session} · registry: ${r.registry.interfaces} interfaces from ${r.registry.layers.join(', ')}`,
    ),
    [...(r.registry.diagnostics || []), ...(r.daemon.registry_diagnostics || [])].length
      ? h('ul', { class: 'diagnostics' }, [...r.registry.diagnostics, ...(r.daemon.registry_diagnostics || [])].map((d) => h('li', {}, h('code', { text: d }))))
      : null,
    r.daemon.refused_handshakes?.length ? h('ul', { class: 'diagnostics' }, r.daemon.refused_handshakes.map((d) => h('li', { text: `refused plugin: ${d}` }))) : null,
    h('div', { class: 'scroll' }, table),
    hidden ? h('p', { class: 'small muted', text: `${hidden} not-applicable interface(s) hidden.` }) : null,
    paths,
  );
}

// ---- loading ------------------------------------------------------------------------

async function loadSessions() {
  const { sessions, agents = [] } = await api('GET', '/sessions');
  state.sessions = new Map(sessions.map((s) => [s.session_id, s]));
  state.agents = new Map(agents.map((a) => [a.agent_id, a]));
  renderSessions();
}

const reportError = (what) => (e) => {
  if (e?.status !== 401) toast(`${what}: ${errorText(e)}`, 'error');
};

/** Terminal agents are looked for on demand (no stream event names them): after chat
 * activity, and for a drive to one, the list is asked again, at most every 2 s. */
let agentsTimer = null;
function loadAgentsSoon() {
  if (agentsTimer) return;
  agentsTimer = setTimeout(() => {
    agentsTimer = null;
    loadSessions().catch(reportError('sessions'));
  }, 2000);
}

async function loadDrives() {
  const { drives, more } = await api('GET', `/drives?limit=${MAX_DRIVES}`);
  state.drivesMore = !!more && !state.olderAllLoaded;
  // Merged, not replaced: a drive sent (and announced by an event) while this page of the
  // list was on its way is not in it, and must not vanish from the page.
  const merged = new Map(state.drives);
  for (const d of drives) if (isNewer(d, merged.get(d.drive_id))) merged.set(d.drive_id, d);
  state.drives = merged;
  renderDrives();
}

async function loadChats() {
  const { chats } = await api('GET', '/chats');
  state.chats = chats;
  renderChats();
  // The chat shown may have a new turn or a finished reply.
  if (state.chatView && !state.chatView.loading) await reloadChatView();
}

async function loadStatus() {
  state.status = await api('GET', '/status');
  renderJournal();
  renderHeader();
}

let doctorLoading = null;
function loadDoctor() {
  doctorLoading ??= api('GET', '/doctor')
    .then((report) => {
      state.doctor = report;
      renderDoctor();
    })
    .catch((e) => {
      fill($('doctor-body'), h('p', { class: 'error', text: `Doctor: ${errorText(e)}` }));
    })
    .finally(() => {
      doctorLoading = null;
    });
  return doctorLoading;
}

/** Everything but doctor (which probes, so only on demand and at start). Sessions first: they are what a person looks for. */
async function loadLive() {
  const report = (what) => (e) => {
    if (e?.status !== 401) toast(`${what}: ${errorText(e)}`, 'error');
  };
  await Promise.all([
    loadSessions().catch(report('sessions')),
    loadDrives().catch(report('drives')),
    loadChats().catch(report('chats')),
    loadStatus().catch(report('status')),
  ]);
}

let chatsTimer = null;
function loadChatsSoon() {
  clearTimeout(chatsTimer);
  chatsTimer = setTimeout(() => loadChats().catch(() => {}), 250);
}

// ---- live events --------------------------------------------------------------------
//
// The EventSource lives in a dedicated worker (this same file, see the end) that relays each
// event to the page. Browsers treat the page the same; but headless tools that wait for the
// page's network to be idle (`chromium --dump-dom --virtual-time-budget`) would otherwise
// wait forever on the never-ending stream. Without Worker support the page opens it itself.

const KINDS = ['session_connected', 'session_updated', 'session_disconnected', 'drive_updated', 'registry_reloaded', 'observed', 'recovery_performed', 'reset'];

/** Opens `/events` and calls post({type: 'open'|'error'|'event', fresh, closed, kind, data}); gives up and starts over after 5 s when the browser closes it. */
function openStream(post) {
  let fresh = true;
  const open = () => {
    const es = new EventSource(`${API}/events`);
    es.addEventListener('open', () => {
      post({ type: 'open', fresh });
      fresh = false;
    });
    es.addEventListener('error', () => {
      const closed = es.readyState === EventSource.CLOSED;
      post({ type: 'error', closed });
      if (closed) {
        es.close();
        fresh = true;
        setTimeout(open, 5000);
      }
    });
    for (const kind of KINDS) es.addEventListener(kind, (m) => post({ type: 'event', kind, data: m.data }));
  };
  open();
}

const handlers = {
  session_connected({ session }) {
    state.sessions.set(session.session_id, session);
    renderSessions();
  },
  session_updated({ session }) {
    state.sessions.set(session.session_id, session);
    renderSessions();
  },
  session_disconnected({ session_id }) {
    state.sessions.delete(session_id);
    renderSessions();
  },
  drive_updated({ drive }) {
    upsertDrive(drive);
    if (state.agents.has(drive.session_id)) loadAgentsSoon();
  },
  observed(data) {
    loadChatsSoon(data);
    if (state.agents.size) loadAgentsSoon();
  },
  registry_reloaded({ applied, interfaces, diagnostics }) {
    toast(applied ? `Registry reloaded: ${interfaces} interfaces` : `Registry not reloaded: ${diagnostics.length} problem(s), the previous one is kept`, applied ? 'ok' : 'error');
    loadDoctor();
  },
  recovery_performed({ action, by, ok, summary }) {
    if (mine.get(action) > 0) mine.set(action, mine.get(action) - 1);
    else toast(`${by} ran ${action}: ${summary}`, ok ? 'info' : 'error');
    if (action === 'reprobe') loadDoctor();
  },
  reset() {
    loadLive();
    loadDoctor();
  },
};

function onStream(message) {
  if (message.type === 'open') {
    state.stream = 'live';
    // A fresh stream (not a browser reconnect, which resumes by Last-Event-ID): reload what
    // may have changed before it opened.
    if (message.fresh) loadLive();
  } else if (message.type === 'error') {
    state.stream = message.closed ? 'closed' : 'reconnecting';
  } else if (message.type === 'event') {
    let data;
    try {
      data = JSON.parse(message.data);
    } catch {
      return;
    }
    handlers[message.kind]?.(data);
    return;
  }
  renderHeader();
}

function connect() {
  try {
    const worker = new Worker(import.meta.url, { type: 'module', name: 'koru-events' });
    worker.addEventListener('message', (e) => onStream(e.data));
    worker.addEventListener('error', (e) => {
      e.preventDefault();
      worker.terminate();
      openStream(onStream);
    });
  } catch {
    openStream(onStream);
  }
}

// ---- start --------------------------------------------------------------------------

function start() {
  $('send-form').addEventListener('submit', onSend);
  $('agents-look').addEventListener('click', (e) => withProgress(e.currentTarget, () => loadSessions().catch(reportError('sessions'))));
  $('doctor-na').addEventListener('change', renderDoctor);
  $('doctor-recheck').addEventListener('click', (e) => recheck(e.currentTarget));
  $('drives-older').addEventListener('click', (e) => loadOlderDrives(e.currentTarget));
  $('journal-verify').addEventListener('click', (e) => verifyJournal(e.currentTarget));
  const reload = $('registry-reload');
  reload.addEventListener('click', () =>
    withProgress(reload, async () => {
      try {
        mine.set('reload_registry', (mine.get('reload_registry') || 0) + 1);
        const result = await api('POST', '/registry/reload');
        toast(`reload_registry: ${result.summary}`, result.ok ? 'ok' : 'error');
      } catch (e) {
        toast(`reload_registry: ${errorText(e)}`, 'error');
      }
    }).then(loadDoctor),
  );
  renderHeader();
  loadLive();
  connect();
  loadDoctor();
  setInterval(tickTimes, 10_000);
}

if (typeof document === 'undefined') openStream((message) => self.postMessage(message));
else start();
