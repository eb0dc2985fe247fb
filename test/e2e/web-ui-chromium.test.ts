/**
 * The web UI in a real headless Chromium (Debian's `chromium`, driven by playwright-core) over the
 * HTTPS listener with a trusted client certificate: the page lists the containers with their state,
 * starts one, runs `echo hello` in it, shows its console log, stops it; an untrusted certificate sees no
 * instance data. Screenshots are decoded and checked: the page is not blank and the state badge changes
 * colour between Stopped and Running.
 */
import test from 'ava';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import { PNG } from 'pngjs';
import type { BrowserContext, Page } from 'playwright-core';
import { waitFor, type Daemon } from '../helpers/daemon.js';
import { startWithImage, stopImageDaemons } from '../helpers/image-daemon.js';
import { lxc, lxcOk } from '../helpers/clients.js';
import { serialUnless } from '../helpers/needs.js';
import { selfSigned, type ClientCert } from '../helpers/pki.js';
import { freePort } from '../helpers/tls-client.js';

const CHROMIUM = '/usr/bin/chromium';
const serial = serialUnless(existsSync(CHROMIUM) ? undefined : `Chromium is not installed (${CHROMIUM}; Debian package "chromium")`);

/** What the brief asks of the browser: headless, nothing sent anywhere but the page's origin. */
const CHROMIUM_ARGS = ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
  '--disable-background-networking', '--disable-component-update', '--disable-sync'];

let d: Daemon;
let origin = '';
let work = '';
let browser: ClientCert;
let stranger: ClientCert;
let context: BrowserContext | undefined;
let page: Page;
const shots: Record<string, PNG> = {};

async function openBrowser(cert: ClientCert, profile: string): Promise<BrowserContext> {
  const { chromium } = await import('playwright-core');
  return chromium.launchPersistentContext(path.join(work, profile), {
    executablePath: CHROMIUM,
    headless: true,
    args: CHROMIUM_ARGS,
    // The daemon's certificate is its own self-signed one, as `lxc remote add --accept-certificate` takes it.
    ignoreHTTPSErrors: true,
    clientCertificates: [{ origin, certPath: cert.certFile, keyPath: cert.keyFile }],
    viewport: { width: 1100, height: 800 },
  });
}

/** Saves the screenshot under the test's temp dir and returns it decoded. */
async function shot(name: string, take: () => Promise<Buffer>): Promise<PNG> {
  const png = await take();
  writeFileSync(path.join(work, `${name}.png`), png);
  shots[name] = PNG.sync.read(png);
  return shots[name]!;
}

/** Mean colour of an image. */
function meanColour(png: PNG): [number, number, number] {
  let r = 0;
  let g = 0;
  let b = 0;
  const n = png.width * png.height;
  for (let i = 0; i < png.data.length; i += 4) {
    r += png.data[i]!;
    g += png.data[i + 1]!;
    b += png.data[i + 2]!;
  }
  return [r / n, g / n, b / n];
}

/** How many distinct colours, and what share of pixels differ from the top-left one (the background). */
function variety(png: PNG): { colours: number; share: number } {
  const colours = new Set<number>();
  const bg = png.data.readUInt32BE(0);
  let differ = 0;
  for (let i = 0; i < png.data.length; i += 4) {
    const px = png.data.readUInt32BE(i);
    colours.add(px);
    if (px !== bg) differ++;
  }
  return { colours: colours.size, share: differ / (png.width * png.height) };
}

const row = (name: string) => page.locator(`tr[data-instance="${name}"]`);
const badge = (name: string) => row(name).locator('.status');

async function stateIs(name: string, status: string): Promise<void> {
  await badge(name).filter({ hasText: new RegExp(`^${status}$`) }).waitFor({ timeout: 60_000 });
}

test.before(async () => {
  if (!existsSync(CHROMIUM)) return;
  work = mkdtempSync(path.join(tmpdir(), 'corral-web-ui-chromium-'));
  browser = selfSigned(work, 'ui-browser');
  stranger = selfSigned(work, 'ui-stranger');
  d = await startWithImage({ plugins: 'full' });
  const host = '127.0.16.2';
  const port = await freePort();
  origin = `https://${host}:${port}`;
  const set = await lxc(d.socket, 'config', 'set', 'core.https_address', `${host}:${port}`);
  if (set.status !== 0) throw new Error(`lxc config set core.https_address: ${set.stderr}`);
  const trust = await lxc(d.socket, 'config', 'trust', 'add', browser.certFile, '--name', 'ui-browser');
  if (trust.status !== 0) throw new Error(`lxc config trust add: ${trust.stderr}`);
  for (const name of ['ui-alpha', 'ui-beta']) {
    const made = await lxc(d.socket, 'init', 'bb', name);
    if (made.status !== 0) throw new Error(`lxc init ${name}: ${made.stderr}`);
  }
});

let failed = false;
test.afterEach.always((t) => {
  if (!t.passed) failed = true;
});

test.after.always(async () => {
  await context?.close().catch(() => undefined);
  await stopImageDaemons();
  if (!work) return;
  // The screenshots stay for a look when a test failed (the profiles and keys go); all of it goes otherwise.
  if (failed) {
    console.warn(`web UI screenshots kept in ${work}`);
    for (const entry of ['profile-trusted', 'profile-stranger', 'ui-browser.key', 'ui-stranger.key']) rmSync(path.join(work, entry), { recursive: true, force: true });
  } else rmSync(work, { recursive: true, force: true });
});

serial('the page lists the containers with their state, in a real Chromium with a trusted certificate', async (t) => {
  context = await openBrowser(browser, 'profile-trusted');
  page = context.pages()[0] ?? (await context.newPage());
  const errors: string[] = [];
  page.on('pageerror', (err) => errors.push(err.message));
  page.on('console', (msg) => msg.type() === 'error' && errors.push(msg.text()));
  page.on('response', (r) => r.status() >= 400 && errors.push(`${r.status()} ${r.url()}`));
  const res = await page.goto(`${origin}/ui`);
  t.is(res?.status(), 200);
  t.is(new URL(page.url()).pathname, '/ui/', '/ui redirects to /ui/');
  await stateIs('ui-alpha', 'Stopped');
  await stateIs('ui-beta', 'Stopped');
  t.is(await page.locator('tr[data-instance]').count(), 2);
  t.deepEqual(errors, [], 'no script error and no policy violation');
  const full = await shot('page-stopped', () => page.screenshot({ fullPage: true }));
  const { colours, share } = variety(full);
  t.true(colours > 20, `the page is drawn (${colours} colours)`);
  t.true(share > 0.05, `not a blank page (${(share * 100).toFixed(1)}% of pixels differ from the background)`);
  await shot('badge-stopped', () => badge('ui-alpha').screenshot());
});

serial('Start makes the container Running, in the page and on the daemon', async (t) => {
  await row('ui-alpha').locator('button[data-action="start"]').click();
  await stateIs('ui-alpha', 'Running');
  t.regex(await lxcOk(t, d.socket, 'list', 'ui-alpha', '--format', 'csv', '-c', 's'), /^RUNNING/);
  t.is(await badge('ui-beta').textContent(), 'Stopped', 'the other container is left alone');
  const running = await shot('badge-running', () => badge('ui-alpha').screenshot());
  const stopped = shots['badge-stopped']!;
  const [rs, gs, bs] = meanColour(stopped);
  const [rr, gr, br] = meanColour(running);
  t.true(gr > rr + 30 && gr > br + 10, `the Running badge is green (mean ${rr.toFixed(0)},${gr.toFixed(0)},${br.toFixed(0)})`);
  t.true(Math.abs(gs - rs) < 30 && Math.abs(gs - bs) < 30, `the Stopped badge is grey (mean ${rs.toFixed(0)},${gs.toFixed(0)},${bs.toFixed(0)})`);
  const page2 = await shot('page-running', () => page.screenshot({ fullPage: true }));
  t.true(variety(page2).share > 0.05);
});

serial('exec `echo hello` shows hello and exit code 0; the recorded output is read and removed', async (t) => {
  await row('ui-alpha').locator('button[data-action="select"]').click();
  const input = page.locator('#exec input[name="command"]');
  await input.fill('echo hello');
  await page.locator('button[data-action="exec"]').click();
  await page.locator('#exec-output', { hasText: 'hello' }).waitFor({ timeout: 60_000 });
  t.is((await page.locator('#exec-output').textContent())?.trim(), 'hello');
  t.is(await page.locator('#exec-exit').textContent(), 'exit code 0');
  // Its stderr and exit code too.
  await input.fill('echo oops >&2; exit 3');
  await page.locator('button[data-action="exec"]').click();
  await page.locator('#exec-exit', { hasText: 'exit code 3' }).waitFor({ timeout: 60_000 });
  t.is((await page.locator('#exec-output .stderr').textContent())?.trim(), 'oops');
  await waitFor(async () => !(await d.request('GET', '/1.0/instances/ui-alpha/logs')).json.metadata.some((p: string) => /exec_/.test(p)), 10000, 'the recorded output removed');
  t.pass();
});

serial('the console log shows what the container wrote to its console', async (t) => {
  const input = page.locator('#exec input[name="command"]');
  await input.fill('echo ui-console-marker > /dev/console');
  await page.locator('button[data-action="exec"]').click();
  await page.locator('#exec-exit', { hasText: 'exit code 0' }).waitFor({ timeout: 60_000 });
  await waitFor(async () => {
    await page.locator('button[data-action="console-refresh"]').click();
    return ((await page.locator('#console-log').textContent()) ?? '').includes('ui-console-marker');
  }, 20000, 'the marker in the console log');
  const shown = (await page.locator('#console-log').textContent()) ?? '';
  const served = (await d.request('GET', '/1.0/instances/ui-alpha/console')).body;
  t.true(served.includes('ui-console-marker'));
  t.true(shown.includes('ui-console-marker'));
  t.false(shown.includes('\x1b'), 'terminal control sequences are not shown as text');
  await shot('console', () => page.locator('#console').screenshot());
});

serial('Stop makes the container Stopped again, in the page and on the daemon', async (t) => {
  await row('ui-alpha').locator('button[data-action="stop"]').click();
  await stateIs('ui-alpha', 'Stopped');
  t.regex(await lxcOk(t, d.socket, 'list', 'ui-alpha', '--format', 'csv', '-c', 's'), /^STOPPED/);
  const again = await shot('badge-stopped-again', () => badge('ui-alpha').screenshot());
  const [r, g, b] = meanColour(again);
  t.true(Math.abs(g - r) < 30 && Math.abs(g - b) < 30, 'grey again');
  t.true(await page.locator('button[data-action="exec"]').isDisabled(), 'no exec in a stopped container');
});

serial('a state change made elsewhere shows up without a reload', async (t) => {
  t.is(await page.locator('header .live').textContent(), 'live', 'the events websocket is connected');
  await lxcOk(t, d.socket, 'start', 'ui-beta');
  await stateIs('ui-beta', 'Running');
  await lxcOk(t, d.socket, 'stop', 'ui-beta', '--force');
  await stateIs('ui-beta', 'Stopped');
  t.pass();
});

serial('a page of another site cannot use the browser\'s certificate: no instance made, no events read', async (t) => {
  // Form-like calls need no CORS preflight: without the Origin check this POST would create an instance.
  const evil = `<!doctype html><title>waiting</title><script>
    const api = ${JSON.stringify(origin)};
    (async () => {
      const body = JSON.stringify({ name: 'ui-evil', source: { type: 'image', alias: 'bb' } });
      const post = await fetch(api + '/1.0/instances', { method: 'POST', mode: 'no-cors', headers: { 'Content-Type': 'text/plain' }, body })
        .then(() => 'sent', () => 'failed');
      const ws = await new Promise((resolve) => {
        const socket = new WebSocket(api.replace('https:', 'wss:') + '/1.0/events');
        socket.onopen = () => resolve('open');
        socket.onerror = () => resolve('refused');
      });
      document.title = JSON.stringify({ post, ws });
    })();
  </script>`;
  const server = createServer((_req, res) => res.writeHead(200, { 'Content-Type': 'text/html' }).end(evil));
  await new Promise<void>((resolve) => server.listen(0, '127.0.16.3', resolve));
  const visit = async () => {
    const p = await context!.newPage();
    await p.goto(`http://127.0.16.3:${(server.address() as AddressInfo).port}/`);
    await p.waitForFunction('document.title !== "waiting"', undefined, { timeout: 30_000 });
    const outcome = JSON.parse(await p.title());
    await p.close();
    // Given time to land, had it been let in.
    await new Promise((r) => setTimeout(r, 1000));
    return { ...outcome, created: (await d.request('GET', '/1.0/instances/ui-evil')).status === 200 };
  };
  try {
    t.deepEqual(await visit(), { post: 'sent', ws: 'refused', created: false });
    // The same page once the operator allows every origin: the attack is real, and the check is what stops it.
    await lxcOk(t, d.socket, 'config', 'set', 'core.https_allowed_origin', '*');
    try {
      t.deepEqual(await visit(), { post: 'sent', ws: 'open', created: true });
    } finally {
      await lxcOk(t, d.socket, 'config', 'unset', 'core.https_allowed_origin');
      // Its creation may still be under way: deleted once it can be.
      await waitFor(async () => {
        const gone = await lxc(d.socket, 'delete', '--force', 'ui-evil');
        return gone.status === 0 || /not found/i.test(gone.stderr);
      }, 60000, 'the forged instance deleted');
    }
  } finally {
    server.close();
  }
});

serial('an untrusted certificate sees no instance data', async (t) => {
  await context?.close();
  context = await openBrowser(stranger, 'profile-stranger');
  const p = context.pages()[0] ?? (await context.newPage());
  const res = await p.goto(`${origin}/ui/`);
  t.is(res?.status(), 403);
  const text = await p.content();
  t.notRegex(text, /ui-alpha|ui-beta/);
  t.regex(text, /"error_code":403/);
  // Nor through the API from that origin.
  const listed = await p.evaluate(async () => (await fetch('/1.0/instances')).status);
  t.is(listed, 403);
  const shotPath = path.join(work, 'stranger.png');
  writeFileSync(shotPath, await p.screenshot());
  t.false(readFileSync(shotPath).length === 0);
});
