/**
 * The container's console through `lxc-console` under a pty. lxc-console reads Ctrl+a as its
 * escape key: a client's own Ctrl+a is sent doubled (lxc-console's way to type it), and the
 * banner it prints on attach is dropped so the client sees only the console.
 */
import { Transform, Writable } from 'node:stream';
import type { ConsoleSession, HostTools } from '../../sdk/index.js';

const CTRL_A = 0x01;
/** What lxc-console prints first: "Connected to tty 0" and a line on its escape keys. */
const BANNER = /^\s*Connected to tty \d+\r?\n[^\n]*Ctrl\+a itself\r?\n/;
const BANNER_START = 'Connected to tty';

function escapeCtrlA(chunk: Buffer): Buffer {
  if (!chunk.includes(CTRL_A)) return chunk;
  const out: number[] = [];
  for (const byte of chunk) {
    out.push(byte);
    if (byte === CTRL_A) out.push(CTRL_A);
  }
  return Buffer.from(out);
}

function withoutBanner(): Transform {
  let pending: Buffer | undefined = Buffer.alloc(0);
  return new Transform({
    transform(chunk: Buffer, _enc, done) {
      if (!pending) return done(null, chunk);
      pending = Buffer.concat([pending, chunk]);
      const text = pending.toString('latin1');
      const m = BANNER.exec(text);
      const head = text.trimStart();
      if (m) {
        const rest = pending.subarray(m[0].length);
        pending = undefined;
        return done(null, rest.length ? rest : undefined);
      }
      // Still possibly the banner: wait for more (it is short).
      if (pending.length < 512 && (BANNER_START.startsWith(head) || head.startsWith(BANNER_START))) return done();
      const all = pending;
      pending = undefined;
      done(null, all);
    },
    flush(done) {
      done(null, pending?.length ? pending : undefined);
    },
  });
}

export function startConsole(hostTools: HostTools, lxcpath: string, name: string, size: { width: number; height: number }): ConsoleSession {
  const proc = hostTools.spawn('lxc-console', ['-n', name, '-P', lxcpath, '-t', '0'], {
    cwd: '/',
    pty: { cols: size.width || 80, rows: size.height || 25 },
    endWithDaemon: true,
  });
  const output = proc.stdout.pipe(withoutBanner());
  let closed = false;
  let gone = false;
  const input = new Writable({
    write(chunk: Buffer, _enc, done) {
      if (!closed) proc.stdin.write(escapeCtrlA(Buffer.isBuffer(chunk) ? chunk : Buffer.from(chunk)));
      done();
    },
  });
  void proc.exited.then(() => {
    closed = true;
    gone = true;
  });
  return {
    input,
    output,
    resize: (cols, rows) => proc.resize(cols, rows),
    close() {
      if (closed) return;
      closed = true;
      proc.kill('SIGTERM');
      // Only while it is still ours: an exited pid may already belong to someone else.
      setTimeout(() => !gone && proc.kill('SIGKILL'), 1000).unref();
    },
  };
}
