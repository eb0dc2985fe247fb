/**
 * What an image tarball must be to be imported (a daemon with `--plugins images`, the real lxc
 * client and direct uploads): links and files where directories belong, templates that could
 * never be applied, and metadata.yaml fields of the wrong shape are refused at import with a 400
 * naming the problem, as the reference refuses most of them, and nothing is stored.
 */
import test from 'ava';
import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { startDaemon, stopDaemons, type Daemon } from '../helpers/daemon.js';
import { lxc } from '../helpers/clients.js';
import { multipartBody } from './images_fixtures.js';
import { ImagesServiceRef } from '../../sdk/index.js';
import { startTestKernel } from '../../sdk/testing/index.js';

let d: Daemon;
let scratch: string;
let serial = 0;

const HOSTNAME_TEMPLATE = 'templates:\n  /etc/hostname:\n    when:\n      - create\n    template: hostname.tpl\n';
// The comment makes every image's bytes, so its fingerprint, new.
const metadata = (templates = HOSTNAME_TEMPLATE, properties = 'properties:\n  os: Shape\n') =>
  `# ${serial++}\narchitecture: x86_64\ncreation_date: 1700000000\n${properties}${templates}`;

/**
 * A tree holding metadata.yaml, rootfs/ and templates/hostname.tpl; `change` bends it before
 * it is packed (relative to the tree). Answers the gzip tarball.
 */
function image(name: string, change: (tree: string) => void = () => {}, meta = metadata()): string {
  const tree = path.join(scratch, `${name}-${serial++}-tree`);
  mkdirSync(path.join(tree, 'rootfs', 'etc'), { recursive: true });
  writeFileSync(path.join(tree, 'rootfs', 'etc', 'motd'), 'shape\n');
  mkdirSync(path.join(tree, 'templates'));
  writeFileSync(path.join(tree, 'templates', 'hostname.tpl'), '{{ container.name }}\n');
  writeFileSync(path.join(tree, 'metadata.yaml'), meta);
  change(tree);
  const out = `${tree}.tar.gz`;
  execFileSync('tar', ['-C', tree, '-czf', out, '.']);
  return out;
}

const replaceWith = (tree: string, member: string, make: (at: string) => void) => {
  rmSync(path.join(tree, member), { recursive: true, force: true });
  make(path.join(tree, member));
};

async function upload(body: Buffer, headers: Record<string, string> = { 'content-type': 'application/octet-stream' }) {
  return d.request('POST', '/1.0/images', body, headers);
}

const storedImages = () => readdirSync(path.join(d.dir, 'images')).filter((n) => n !== '.staging');

test.before(async () => {
  scratch = mkdtempSync(path.join(tmpdir(), 'corral-image-shape-'));
  d = await startDaemon({ plugins: 'images' });
});

test.after.always(async () => {
  await stopDaemons();
  rmSync(scratch, { recursive: true, force: true });
});

test.serial('a well-formed image still imports', async (t) => {
  const r = await upload(readFileSync(image('good')));
  t.is(r.status, 202, r.body);
  const op = (await d.request('GET', `${r.json.operation}/wait?timeout=60`)).json.metadata;
  t.is(op.status, 'Success', op.err);
});

test.serial('members of the wrong kind are refused at import, naming the member', async (t) => {
  const cases: [string, string, RegExp][] = [
    ['rootfs a relative symlink', image('rootfs-link', (tree) => {
      execFileSync('mv', [path.join(tree, 'rootfs'), path.join(tree, 'realroot')]);
      symlinkSync('realroot', path.join(tree, 'rootfs'));
    }), /"rootfs" must be a directory, not a symbolic link/],
    ['rootfs a symlink to /', image('rootfs-root', (tree) => replaceWith(tree, 'rootfs', (at) => symlinkSync('/', at))), /"rootfs" must be a directory, not a symbolic link/],
    ['rootfs a file', image('rootfs-file', (tree) => replaceWith(tree, 'rootfs', (at) => writeFileSync(at, 'not a tree'))), /"rootfs" must be a directory, not a regular file/],
    ['metadata.yaml a symlink', image('meta-link', (tree) => {
      execFileSync('mv', [path.join(tree, 'metadata.yaml'), path.join(tree, 'real.yaml')]);
      symlinkSync('real.yaml', path.join(tree, 'metadata.yaml'));
    }), /metadata\.yaml must be a regular file, not a symbolic link/],
    ['templates a symlink', image('templates-link', (tree) => {
      execFileSync('mv', [path.join(tree, 'templates'), path.join(tree, 'tpl')]);
      symlinkSync('tpl', path.join(tree, 'templates'));
    }), /"templates" must be a directory, not a symbolic link/],
    ['a template that is a symlink', image('template-link', (tree) => replaceWith(tree, 'templates/hostname.tpl', (at) => symlinkSync('/etc/shadow', at))),
      /the template "hostname.tpl" for "\/etc\/hostname" must be a regular file, not a symbolic link/],
  ];
  for (const [what, file, message] of cases) {
    const before = storedImages();
    const r = await upload(readFileSync(file));
    t.is(r.status, 400, `${what}: ${r.body}`);
    t.is(r.json?.type, 'error', what);
    t.regex(r.json?.error ?? '', /^Invalid image tarball: /, what);
    t.regex(r.json?.error ?? '', message, what);
    t.deepEqual(storedImages(), before, `${what}: nothing stored`);
  }
  // The real client shows the reason.
  const run = await lxc(d.socket, 'image', 'import', image('rootfs-root-lxc', (tree) => replaceWith(tree, 'rootfs', (at) => symlinkSync('/', at))), '--alias', 'nope');
  t.not(run.status, 0);
  t.regex(run.stderr, /"rootfs" must be a directory, not a symbolic link/);
  t.is((await d.request('GET', '/1.0/images/aliases/nope')).status, 404);
});

test.serial('metadata.yaml twice is refused: what was checked is what would be unpacked', async (t) => {
  const file = image('twice');
  const second = path.join(scratch, 'twice-second');
  mkdirSync(second);
  writeFileSync(path.join(second, 'metadata.yaml'), metadata('templates:\n  /etc/hostname:\n    when: create\n    template: ../../etc/shadow\n'));
  const plain = path.join(scratch, 'twice.tar');
  execFileSync('sh', ['-c', 'gunzip -c "$1" > "$2"', 'sh', file, plain]);
  execFileSync('tar', ['-C', second, '-rf', plain, './metadata.yaml']);
  const r = await upload(readFileSync(plain));
  t.is(r.status, 400, r.body);
  t.regex(r.json.error, /metadata\.yaml appears more than once/);
});

test.serial('template fields of the wrong shape are refused at import', async (t) => {
  const tpl = (spec: string) => metadata(`templates:\n  /etc/hostname:\n${spec}`);
  const cases: [string, string, RegExp][] = [
    ['when a string', tpl('    when: create\n    template: hostname.tpl\n'), /"templates.\/etc\/hostname.when" must be a list of triggers/],
    ['when a map', tpl('    when:\n      create: true\n    template: hostname.tpl\n'), /"templates.\/etc\/hostname.when" must be a list of triggers/],
    ['when a nested list', tpl('    when:\n      - [create]\n    template: hostname.tpl\n'), /"templates.\/etc\/hostname.when" must be a list of triggers/],
    ['template escaping templates/', tpl('    when: [create]\n    template: ../metadata.yaml\n'), /must name a file in templates\/, not "\.\.\/metadata\.yaml"/],
    ['template an absolute path', tpl('    when: [create]\n    template: /etc/shadow\n'), /must name a file in templates\/, not "\/etc\/shadow"/],
    ['template a list', tpl('    when: [create]\n    template: [hostname.tpl]\n'), /needs a "template" file name/],
    ['create_only a number', tpl('    when: [create]\n    template: hostname.tpl\n    create_only: 1\n'), /"templates.\/etc\/hostname.create_only" must be true or false/],
    ['template properties a list', tpl('    when: [create]\n    template: hostname.tpl\n    properties: [a]\n'), /"templates.\/etc\/hostname.properties" must be a map/],
    ['properties a list', metadata(HOSTNAME_TEMPLATE, 'properties:\n  - a\n'), /"properties" must be a map/],
  ];
  for (const [what, meta, message] of cases) {
    const r = await upload(readFileSync(image('meta', () => {}, meta)));
    t.is(r.status, 400, `${what}: ${r.body}`);
    t.regex(r.json?.error ?? '', /^Invalid image metadata: /, what);
    t.regex(r.json?.error ?? '', message, what);
  }
  // YAML 1.1 words for booleans, as the reference reads them, still work; so do unknown triggers (ignored there too).
  for (const spec of ['    when: [create]\n    template: hostname.tpl\n    create_only: yes\n', '    when: [create, bogus]\n    template: hostname.tpl\n']) {
    const r = await upload(readFileSync(image('meta-ok', () => {}, tpl(spec))));
    t.is(r.status, 202, `${spec}: ${r.body}`);
    t.is((await d.request('GET', `${r.json.operation}/wait?timeout=60`)).json.metadata.status, 'Success');
  }
});

test.serial('a split image whose metadata tarball carries a rootfs symlink is refused (it would unpack the rootfs through it)', async (t) => {
  const escape = path.join(scratch, 'escape-target');
  mkdirSync(escape);
  const meta = image('split-meta', (tree) => {
    replaceWith(tree, 'rootfs', (at) => symlinkSync(escape, at));
  });
  const rootfsTree = path.join(scratch, 'split-rootfs');
  mkdirSync(path.join(rootfsTree, 'etc'), { recursive: true });
  writeFileSync(path.join(rootfsTree, 'etc', 'planted'), 'outside the image\n');
  const rootfs = path.join(scratch, 'split-rootfs.tar.gz');
  execFileSync('tar', ['-C', rootfsTree, '-czf', rootfs, '.']);
  const { body, contentType } = multipartBody([{ name: 'metadata', filename: 'meta.tar.gz', file: meta }, { name: 'rootfs', filename: 'rootfs.tar.gz', file: rootfs }]);
  const r = await upload(body, { 'content-type': contentType });
  t.is(r.status, 400, r.body);
  t.regex(r.json.error, /"rootfs" must be a directory, not a symbolic link/);
  t.false(existsSync(path.join(escape, 'etc', 'planted')));
});

test.serial('an image stored before these checks still never unpacks its rootfs through a link', async (t) => {
  const k = await startTestKernel({ plugins: ['images'] });
  try {
    const meta = image('stored-meta');
    const rootfsTree = path.join(scratch, 'stored-rootfs');
    mkdirSync(path.join(rootfsTree, 'etc'), { recursive: true });
    writeFileSync(path.join(rootfsTree, 'etc', 'planted'), 'outside the image\n');
    const rootfs = path.join(scratch, 'stored-rootfs.tar.gz');
    execFileSync('tar', ['-C', rootfsTree, '-czf', rootfs, '.']);
    const { body, contentType } = multipartBody([{ name: 'metadata', filename: 'm', file: meta }, { name: 'rootfs', filename: 'r', file: rootfs }]);
    const res = await k.kernel.inject({ method: 'POST', url: '/1.0/images', payload: body, headers: { 'content-type': contentType } });
    t.is(res.statusCode, 202, res.payload);
    const op = JSON.parse((await k.kernel.inject({ url: `${JSON.parse(res.payload).operation}/wait?timeout=60` })).payload).metadata;
    t.is(op.status, 'Success', op.err);
    // What an older corral accepted: the stored metadata tarball swapped for one with a rootfs link.
    const escape = path.join(scratch, 'stored-escape');
    mkdirSync(escape);
    const linked = image('stored-linked', (tree) => replaceWith(tree, 'rootfs', (at) => symlinkSync(escape, at)));
    execFileSync('cp', [linked, path.join(k.dataDir, 'images', op.metadata.fingerprint)]);
    const unpackTo = path.join(scratch, 'stored-volume');
    await t.throwsAsync(k.kernel.services.get(ImagesServiceRef)!.unpack(op.metadata.fingerprint, unpackTo), { message: /"rootfs" is not a directory/ });
    t.deepEqual(readdirSync(escape), []);
  } finally {
    await k.stop();
  }
});
