/**
 * `corrald image busybox|debian [--dir <dir>] [--alias <alias>] …` (`npm run image:busybox`,
 * `npm run image:debian`): builds an image on this host and imports it into the daemon running on
 * <dir>, showing progress. An alias that exists is moved to the new image, as `lxc image import
 * --alias` moves it; the image it named before stays.
 */
import { lstatSync, mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { defaultDataDir } from '../../kernel/args.js';
import { packGzip } from '../images/pack.js';
import { busyboxProblem, writeBusyboxTree, BUSYBOX } from '../images/busybox.js';
import { DebianBuildError, hasDebootstrap, writeDebianTree } from '../images/debian.js';
import { hostDebianMirror } from '../images/apt-source.js';
import { checkDaemon, importImage, ImportError } from '../images/import.js';
import { Progress } from '../images/progress.js';
import { removeWorkDir } from '../images/work-dir.js';
import type { Subcommand } from './index.js';

const USAGE = `Usage: corrald image busybox [--dir <dir>] [--alias <alias>]
       corrald image debian [--dir <dir>] [--alias <alias>] [--release <release>] [--mirror <url>]
  busybox      a small image from this host's busybox-static (busybox init, DHCP on eth0)
  debian       a Debian minbase image made by debootstrap (systemd, systemd-networkd DHCP on eth0)
  --dir        data dir of the running daemon (default: $CORRAL_DIR or /var/lib/corral)
  --alias      alias of the new image (default: busybox or debian); an existing one is moved to it
  --release    Debian release (default: bookworm)
  --mirror     Debian mirror (default: the one this host's apt sources name)`;

interface ImageArgs {
  kind: 'busybox' | 'debian';
  dir: string;
  alias: string;
  release: string;
  mirror?: string;
}

class UsageError extends Error {}

class Interrupted extends Error {
  constructor(readonly signal: NodeJS.Signals) {
    super(`interrupted by ${signal}`);
  }
}

function parse(argv: string[]): ImageArgs | 'help' {
  const [kind, ...rest] = argv;
  if (kind === '--help' || kind === '-h') return 'help';
  if (kind !== 'busybox' && kind !== 'debian') throw new UsageError(kind ? `unknown image "${kind}" (busybox or debian)` : 'which image? busybox or debian');
  const args: ImageArgs = { kind, dir: defaultDataDir(process.env), alias: kind, release: 'bookworm' };
  const flags = kind === 'debian' ? ['--dir', '--alias', '--release', '--mirror'] : ['--dir', '--alias'];
  for (let i = 0; i < rest.length; i++) {
    const arg = rest[i]!;
    if (arg === '--help' || arg === '-h') return 'help';
    const eq = arg.indexOf('=');
    const flag = arg.startsWith('--') && eq > 0 ? arg.slice(0, eq) : arg;
    if (!flags.includes(flag)) throw new UsageError(`unknown argument "${arg}" for the ${kind} image`);
    const value = eq > 0 && arg.startsWith('--') ? arg.slice(eq + 1) : rest[++i];
    if (value === undefined || value === '') throw new UsageError(`${flag} needs a value`);
    if (flag === '--dir') args.dir = value;
    else if (flag === '--alias') args.alias = value;
    else if (flag === '--release') args.release = value;
    else args.mirror = value.replace(/\/+$/, '');
  }
  if (args.mirror !== undefined && !/^(https?|file):\/\/./.test(args.mirror)) throw new UsageError(`--mirror must be an http://, https:// or file:// URL, not "${args.mirror}"`);
  if (!/^[a-z][a-z0-9-]*$/.test(args.release)) throw new UsageError(`"${args.release}" is not a Debian release name`);
  args.dir = path.resolve(args.dir);
  return args;
}

/** Builds the tree in `work` for `args.kind`. */
async function buildTree(args: ImageArgs, work: string, progress: Progress, signal: AbortSignal): Promise<void> {
  if (args.kind === 'busybox') {
    progress.step(`building the busybox rootfs from ${BUSYBOX}`);
    writeBusyboxTree(work, { dhcp: true });
    return;
  }
  const mirror = args.mirror ?? hostDebianMirror();
  progress.step(`building Debian ${args.release} with debootstrap from ${mirror}`);
  await writeDebianTree({ release: args.release, mirror, cacheDir: path.join(args.dir, 'image-cache'), workDir: work, signal }, {
    stage: (text) => progress.step(text),
    packages: (verb, n) => progress.count(`  ${verb} packages`, n),
  });
}

function treeSize(dir: string): number {
  let total = 0;
  const walk = (p: string) => {
    const s = lstatSync(p, { throwIfNoEntry: false });
    if (!s) return;
    if (s.isDirectory()) {
      for (const name of readdirSync(p)) walk(path.join(p, name));
    } else if (s.isFile()) total += s.size;
  };
  walk(dir);
  return total;
}

async function run(argv: string[]): Promise<number> {
  let args: ImageArgs | 'help';
  try {
    args = parse(argv);
  } catch (err) {
    console.error(`corrald image: ${(err as Error).message}\n${USAGE}`);
    return 2;
  }
  if (args === 'help') {
    console.log(USAGE);
    return 0;
  }
  const progress = new Progress();
  const socket = path.join(args.dir, 'unix.socket');
  // The build takes a while for Debian: find out first that there is a daemon to take the image.
  try {
    await checkDaemon(socket);
  } catch (err) {
    console.error(`corrald image: ${(err as Error).message}`);
    return 1;
  }
  const busybox = args.kind === 'busybox' ? busyboxProblem() : undefined;
  if (busybox) {
    console.error(`corrald image: ${busybox}`);
    return 1;
  }
  if (args.kind === 'debian' && !hasDebootstrap()) {
    console.error('corrald image: debootstrap is not installed (apt-get install debootstrap, or run scripts/install.sh)');
    return 1;
  }
  // Debian trees are large: make them beside the daemon's data rather than in a /tmp that may be memory.
  const work = mkdtempSync(path.join(args.kind === 'debian' ? args.dir : tmpdir(), `corral-image-${args.kind}-`));
  // Ctrl-C or SIGTERM: stop the build (debootstrap gets the signal from here too), clean up, import nothing.
  const stop = new AbortController();
  const interrupted = (signal: NodeJS.Signals) => stop.abort(new Interrupted(signal));
  process.once('SIGINT', interrupted);
  process.once('SIGTERM', interrupted);
  try {
    const tree = path.join(work, 'tree');
    await buildTree(args, tree, progress, stop.signal);
    stop.signal.throwIfAborted();
    const tarball = path.join(work, `${args.kind}.tar.gz`);
    const size = treeSize(tree);
    await packGzip(tree, ['metadata.yaml', 'templates', 'rootfs'], tarball, (done) => progress.percent('compressing', done, size));
    rmSync(tree, { recursive: true, force: true });
    stop.signal.throwIfAborted();
    const result = await importImage(socket, tarball, args.alias, {
      upload: (sent, total) => progress.percent('uploading', sent, total),
      unpacking: () => progress.step('unpacking on the daemon'),
    });
    if (result.previous && result.previous !== result.fingerprint) {
      progress.step(`the alias ${args.alias} moved from ${result.previous.slice(0, 12)} to the new image; the old one stays (lxc image delete ${result.previous.slice(0, 12)})`);
    }
    progress.end(`done: ${args.alias} is ${result.fingerprint} (${progress.elapsed()}); try: lxc launch ${args.alias} c1`);
    return 0;
  } catch (err) {
    if (stop.signal.aborted) {
      console.error(`corrald image: interrupted (${(stop.signal.reason as Interrupted).signal}); nothing was imported`);
      return 130;
    }
    const known = err instanceof ImportError || err instanceof DebianBuildError;
    console.error(`corrald image: ${known ? (err as Error).message : (err as Error).stack ?? String(err)}`);
    return 1;
  } finally {
    if (!removeWorkDir(work)) console.error(`corrald image: ${work} still has mounts; remove it once they are gone`);
  }
}

export const image: Subcommand = {
  summary: 'build an image (busybox or debian) and import it into the running daemon',
  run,
};
