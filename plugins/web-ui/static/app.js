// The corral web UI: instances and their state, start and stop, exec with recorded output, the console log.
// Every call goes to this page's own origin, with the browser's client certificate, as any API client.
import { h, render } from 'preact';
import { useCallback, useEffect, useRef, useState } from 'preact/hooks';
import htm from 'htm';

const html = htm.bind(h);

/** An API call; the error envelope becomes an Error carrying the server's message. */
async function api(method, path, body) {
  const init = { method, headers: {} };
  if (body !== undefined) {
    init.headers['Content-Type'] = 'application/json';
    init.body = JSON.stringify(body);
  }
  const res = await fetch(path, init);
  const text = await res.text();
  let answer;
  try {
    answer = JSON.parse(text);
  } catch {
    throw new Error(`${method} ${path}: HTTP ${res.status}`);
  }
  if (answer.type === 'error' || !res.ok) throw new Error(answer.error || `${method} ${path}: HTTP ${res.status}`);
  return answer;
}

/** A call answered with an operation, followed to its end; the finished operation is returned. */
async function operation(method, path, body) {
  const answer = await api(method, path, body);
  if (answer.type !== 'async') return answer.metadata;
  const done = (await api('GET', `${answer.operation}/wait?timeout=120`)).metadata;
  if (done.status !== 'Success') throw new Error(done.err || `The operation ended as ${done.status}`);
  return done;
}

/** A file the API serves as is (recorded output, the console log). */
async function fetchText(path) {
  const res = await fetch(path);
  const text = await res.text();
  if (!res.ok) {
    let message = `GET ${path}: HTTP ${res.status}`;
    try {
      message = JSON.parse(text).error || message;
    } catch { /* not an envelope */ }
    throw new Error(message);
  }
  return text;
}

/** Terminal control sequences (colours, cursor queries) mean nothing in a <pre>: dropped, text kept. */
const TERMINAL_CONTROLS = /\x1b(\[[0-?]*[ -\/]*[@-~]|\][^\x07\x1b]*(\x07|\x1b\\)|[@-Z\\-_])|[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]/g;
const plainText = (text) => text.replace(/\r\n?/g, '\n').replace(TERMINAL_CONTROLS, '');

const instancePath = (name) => `/1.0/instances/${encodeURIComponent(name)}`;

/** Instance changes arrive as lifecycle events; polling covers a lost websocket and what events do not say. */
function useInstances() {
  const [instances, setInstances] = useState(undefined);
  const [error, setError] = useState('');
  const [live, setLive] = useState(false);
  const load = useCallback(async () => {
    try {
      const list = (await api('GET', '/1.0/instances?recursion=1')).metadata;
      list.sort((a, b) => a.name.localeCompare(b.name));
      setInstances(list);
      setError('');
    } catch (err) {
      setError(err.message);
    }
  }, []);
  useEffect(() => {
    load();
    const poll = setInterval(load, 5000);
    let socket;
    let retry;
    let pending;
    let closed = false;
    const connect = () => {
      const scheme = location.protocol === 'https:' ? 'wss:' : 'ws:';
      socket = new WebSocket(`${scheme}//${location.host}/1.0/events?type=lifecycle`);
      socket.onopen = () => setLive(true);
      socket.onmessage = () => {
        // A start or stop sends several events at once: one reload after them.
        clearTimeout(pending);
        pending = setTimeout(load, 150);
      };
      socket.onclose = () => {
        setLive(false);
        if (!closed) retry = setTimeout(connect, 3000);
      };
    };
    connect();
    return () => {
      closed = true;
      clearInterval(poll);
      clearTimeout(retry);
      clearTimeout(pending);
      socket?.close();
    };
  }, [load]);
  return { instances, error, live, load };
}

function StatusBadge({ status }) {
  return html`<span class="status" data-status=${status}>${status}</span>`;
}

function InstanceRow({ inst, selected, onSelect, onChanged, onError }) {
  const [busy, setBusy] = useState('');
  const running = inst.status === 'Running';
  const change = async (action, extra = {}) => {
    setBusy(action);
    try {
      await operation('PUT', `${instancePath(inst.name)}/state`, { action, timeout: 30, ...extra });
    } catch (err) {
      onError(`${action} ${inst.name}: ${err.message}`);
    } finally {
      setBusy('');
      onChanged();
    }
  };
  return html`
    <tr data-instance=${inst.name} class=${selected ? 'selected' : ''}>
      <td><button class="link" data-action="select" onClick=${() => onSelect(inst.name)}>${inst.name}</button></td>
      <td>${inst.type}</td>
      <td><${StatusBadge} status=${busy ? `${busy}…` : inst.status} /></td>
      <td>${inst.config?.['image.description'] ?? ''}</td>
      <td class="actions">
        <button data-action="start" disabled=${running || busy} onClick=${() => change('start')}>Start</button>
        <button data-action="stop" disabled=${!running || busy} onClick=${() => change('stop')}>Stop</button>
        <button data-action="force-stop" disabled=${!running || busy} onClick=${() => change('stop', { force: true })}>Force stop</button>
      </td>
    </tr>`;
}

function InstanceList({ instances, selected, onSelect, onChanged, onError }) {
  if (instances === undefined) return html`<p class="empty">Loading…</p>`;
  if (instances.length === 0) return html`<p class="empty">No instances in this project.</p>`;
  return html`
    <table id="instances">
      <thead><tr><th>Name</th><th>Type</th><th>State</th><th>Image</th><th></th></tr></thead>
      <tbody>
        ${instances.map((inst) => html`<${InstanceRow} key=${inst.name} inst=${inst} selected=${inst.name === selected}
          onSelect=${onSelect} onChanged=${onChanged} onError=${onError} />`)}
      </tbody>
    </table>`;
}

/** Runs a command through sh with its output recorded, then reads the recorded logs (and removes them). */
function ExecPanel({ name, running }) {
  const [command, setCommand] = useState('echo hello');
  const [result, setResult] = useState(undefined);
  const [busy, setBusy] = useState(false);
  const run = async (event) => {
    event.preventDefault();
    setBusy(true);
    try {
      const op = await operation('POST', `${instancePath(name)}/exec`, {
        command: ['sh', '-c', command],
        'record-output': true,
        'wait-for-websocket': false,
        interactive: false,
      });
      const output = op.metadata?.output ?? {};
      const [stdout, stderr] = await Promise.all([output['1'], output['2']].map((p) => (p ? fetchText(p) : '')));
      setResult({ stdout: plainText(stdout), stderr: plainText(stderr), code: op.metadata?.return });
      for (const p of [output['1'], output['2']]) if (p) fetch(p, { method: 'DELETE' }).catch(() => undefined);
    } catch (err) {
      setResult({ stdout: '', stderr: err.message, code: undefined });
    } finally {
      setBusy(false);
    }
  };
  return html`
    <section id="exec">
      <h2>Run a command in ${name}</h2>
      <form onSubmit=${run}>
        <input type="text" name="command" aria-label="Command" value=${command} onInput=${(e) => setCommand(e.currentTarget.value)} />
        <button type="submit" data-action="exec" disabled=${busy || !running || !command.trim()}>Run</button>
      </form>
      ${!running && html`<p class="empty">Start the instance to run commands in it.</p>`}
      ${result && html`
        <pre id="exec-output">${result.stdout}<span class="stderr">${result.stderr}</span></pre>
        ${result.code !== undefined && html`<div class="exit" id="exec-exit">exit code ${result.code}</div>`}`}
    </section>`;
}

function ConsolePanel({ name, status }) {
  const [log, setLog] = useState(undefined);
  const [error, setError] = useState('');
  const load = useCallback(async () => {
    try {
      setLog(plainText(await fetchText(`${instancePath(name)}/console`)));
      setError('');
    } catch (err) {
      setError(err.message);
    }
  }, [name]);
  useEffect(() => {
    load();
  }, [load, status]);
  return html`
    <section id="console">
      <div class="row"><h2>Console log of ${name}</h2><button data-action="console-refresh" onClick=${load}>Refresh</button></div>
      ${error && html`<div class="error">${error}</div>`}
      <pre id="console-log">${log === undefined ? '' : log || '(the console log is empty)'}</pre>
    </section>`;
}

function App() {
  const { instances, error, live, load } = useInstances();
  const [server, setServer] = useState('');
  const [selected, setSelected] = useState('');
  const [actionError, setActionError] = useState('');
  const errorTimer = useRef();
  useEffect(() => {
    api('GET', '/1.0').then((a) => setServer(a.metadata?.environment?.server_name ?? ''), () => undefined);
  }, []);
  const showError = (message) => {
    setActionError(message);
    clearTimeout(errorTimer.current);
    errorTimer.current = setTimeout(() => setActionError(''), 10000);
  };
  const current = instances?.find((i) => i.name === selected);
  return html`
    <header>
      <h1>corral</h1><span class="server">${server}</span>
      <span class=${`live ${live ? 'on' : 'off'}`} title="Updates from the events websocket">${live ? 'live' : 'polling'}</span>
    </header>
    <main>
      ${(error || actionError) && html`<div class="error" id="error">${actionError || error}</div>`}
      <section>
        <h2>Instances</h2>
        <${InstanceList} instances=${instances} selected=${selected} onSelect=${setSelected} onChanged=${load} onError=${showError} />
      </section>
      ${current && html`
        <${ExecPanel} key=${`exec-${current.name}`} name=${current.name} running=${current.status === 'Running'} />
        <${ConsolePanel} key=${`console-${current.name}`} name=${current.name} status=${current.status} />`}
    </main>`;
}

render(html`<${App} />`, document.getElementById('app'));
