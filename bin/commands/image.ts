/**
 * `corrald image busybox|debian|vm [--dir <dir>] [--alias <alias>] …` (`npm run image:busybox`,
 * `npm run image:debian`, `npm run image:vm`): builds an image on this host and imports it into the daemon running on
 * <dir>, showing progress. An alias that exists is moved to the new image, as `lxc image import
 * --alias` moves it; the image it named before stays.
 */
import { lstatSync, mkdirSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { defaultDataDir } from '../../kernel/args.js';
import { packGzip } from '../images/pack.js';
import { busyboxProblem, busyboxRelease, writeBusyboxTree, BUSYBOX } from '../images/busybox.js';
import { DebianBuildError, hasDebootstrap, writeDebianTree } from '../images/debian.js';
import { hostDebianMirror } from '../images/apt-source.js';
import { checkDaemon, importImage, ImportError, type SplitImage } from '../images/import.js';
import { KernelFetchError, vmKernel } from '../images/vm-kernel.js';
import { vmMetadata, writeVmDisk, writeVmRootfs } from '../images/vm.js';
import { Progress } from '../images/progress.js';
import { removeWorkDir } from '../images/work-dir.js';
import type { Subcommand } from './index.js';

const USAGE = `Usage: corrald image busybox [--dir <dir>] [--alias <alias>]
       corrald image debian [--dir <dir>] [--alias <alias>] [--release <release>] [--mirror <url>]
       corrald image vm [--dir <dir>] [--alias <alias>]
  busybox      a small image from this host's busybox-static (busybox init, DHCP on eth0)
  debian       a Debian minbase image made by debootstrap (systemd, systemd-networkd DHCP on eth0)
  vm           a small virtual-machine image: busybox and Debian's kernel on an ext4 disk, booted
               directly by the kernel (the kernel package is fetched once into $CORRAL_CACHE_DIR,
               default /var/cache/corral)
  --dir        data dir of the running daemon (default: $CORRAL_DIR or /var/lib/corral)
  --alias      alias of the new image (default: busybox, debian or busybox-vm); an existing one is moved to it
  --release    Debian release (default: bookworm)
  --mirror     Debian mirror (default: the one this host's apt sources name)`;

interface ImageArgs {
  kind: 'busybox' | 'debian' | 'vm';
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
  if (kind !== 'busybox' && kind !== 'debian' && kind !== 'vm') throw new UsageError(kind ? `unknown image "${kind}" (busybox, debian or vm)` : 'which image? busybox, debian or vm');
  const args: ImageArgs = { kind, dir: defaultDataDir(process.env), alias: kind === 'vm' ? 'busybox-vm' : kind, release: 'bookworm' };
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

/** Where fetched kernels are kept: shared by every data dir, since tests make many. */
const vmCacheDir = () => process.env.CORRAL_CACHE_DIR || '/var/cache/corral';

/** The split VM image in `work`: metadata tarball and qcow2 disk. */
async function buildVm(work: string, progress: Progress): Promise<SplitImage> {
  const kernel = vmKernel(vmCacheDir(), (text) => progress.step(text));
  progress.step(`building the VM disk: busybox and the kernel ${kernel.release}`);
  const root = path.join(work, 'rootfs');
  writeVmRootfs(root, kernel, work);
  const rootfs = path.join(work, 'rootfs.img');
  writeVmDisk(root, work, rootfs);
  rmSync(root, { recursive: true, force: true });
  const meta = path.join(work, 'meta');
  mkdirSync(meta);
  writeFileSync(path.join(meta, 'metadata.yaml'), vmMetadata(kernel, busyboxRelease()));
  const metadata = path.join(work, 'metadata.tar.gz');
  await packGzip(meta, ['metadata.yaml'], metadata);
  return { metadata, rootfs, rootfsPart: 'rootfs.img' };
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
  const busybox = args.kind !== 'debian' ? busyboxProblem() : undefined;
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
    let image: string | SplitImage;
    if (args.kind === 'vm') {
      image = await buildVm(work, progress);
    } else {
      const tree = path.join(work, 'tree');
      await buildTree(args, tree, progress, stop.signal);
      stop.signal.throwIfAborted();
      image = path.join(work, `${args.kind}.tar.gz`);
      const size = treeSize(tree);
      await packGzip(tree, ['metadata.yaml', 'templates', 'rootfs'], image, (done) => progress.percent('compressing', done, size));
      rmSync(tree, { recursive: true, force: true });
    }
    stop.signal.throwIfAborted();
    const result = await importImage(socket, image, args.alias, {
      upload: (sent, total) => progress.percent('uploading', sent, total),
      unpacking: () => progress.step('unpacking on the daemon'),
    });
    if (result.previous && result.previous !== result.fingerprint) {
      progress.step(`the alias ${args.alias} moved from ${result.previous.slice(0, 12)} to the new image; the old one stays (lxc image delete ${result.previous.slice(0, 12)})`);
    }
    const launch = args.kind === 'vm' ? `lxc launch ${args.alias} v1 --vm` : `lxc launch ${args.alias} c1`;
    progress.end(`done: ${args.alias} is ${result.fingerprint} (${progress.elapsed()}); try: ${launch}`);
    return 0;
  } catch (err) {
    if (stop.signal.aborted) {
      console.error(`corrald image: interrupted (${(stop.signal.reason as Interrupted).signal}); nothing was imported`);
      return 130;
    }
    const known = err instanceof ImportError || err instanceof DebianBuildError || err instanceof KernelFetchError;
    console.error(`corrald image: ${known ? (err as Error).message : (err as Error).stack ?? String(err)}`);
    return 1;
  } finally {
    if (!removeWorkDir(work)) console.error(`corrald image: ${work} still has mounts; remove it once they are gone`);
  }
}

export const image: Subcommand = {
  summary: 'build an image (busybox, debian or vm) and import it into the running daemon',
  run,
};
