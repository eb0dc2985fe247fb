/** Hand-made image files for the images tests: odd metadata, extended attributes, multipart bodies. */
import { execFileSync } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import { chmodSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';

export const sha256 = (...files: string[]): string => {
  const hash = createHash('sha256');
  for (const file of files) hash.update(readFileSync(file));
  return hash.digest('hex');
};

export interface TreeSpec {
  /** metadata.yaml text; omitted: no metadata.yaml in the tarball. */
  metadata?: string;
  /** Whether to add a rootfs/ (default true). */
  rootfs?: boolean;
}

export const goodMetadata = (extra = '') =>
  `architecture: x86_64\ncreation_date: ${Math.floor(Date.now() / 1000)}\nproperties:\n  os: Handmade\n  serial: "${randomBytes(4).toString('hex')}"\n${extra}`;

/**
 * A small unified tarball (gzip). Its rootfs has a file with a `user.corral` extended attribute,
 * a file owned by 1234:5678, a setuid file and a symlink, to check that unpacking keeps them.
 */
export function buildUnified(dir: string, name: string, spec: TreeSpec): string {
  const tree = mkdtempSync(path.join(tmpdir(), 'corral-img-tree-'));
  try {
    const members: string[] = [];
    if (spec.metadata !== undefined) {
      writeFileSync(path.join(tree, 'metadata.yaml'), spec.metadata);
      members.push('metadata.yaml');
    }
    if (spec.rootfs !== false) {
      const root = path.join(tree, 'rootfs');
      mkdirSync(path.join(root, 'etc'), { recursive: true });
      writeFileSync(path.join(root, 'etc/tagged'), 'has an xattr\n');
      execFileSync('setfattr', ['-n', 'user.corral', '-v', 'kept', path.join(root, 'etc/tagged')]);
      writeFileSync(path.join(root, 'etc/owned'), 'owned by 1234\n');
      execFileSync('chown', ['1234:5678', path.join(root, 'etc/owned')]);
      writeFileSync(path.join(root, 'etc/suid'), '#!/bin/sh\n');
      chmodSync(path.join(root, 'etc/suid'), 0o4755);
      execFileSync('ln', ['-s', '/etc/tagged', path.join(root, 'etc/link')]);
      members.push('rootfs');
    }
    mkdirSync(path.join(tree, 'templates'));
    writeFileSync(path.join(tree, 'templates/hello.tpl'), 'hello {{ container.name }}\n');
    members.push('templates');
    const out = path.join(dir, name);
    execFileSync('tar', ['-czf', out, '--numeric-owner', '--xattrs', '--xattrs-include=*', '-C', tree, ...members]);
    return out;
  } finally {
    rmSync(tree, { recursive: true, force: true });
  }
}

/** A multipart/form-data body as `lxc image import meta rootfs` sends it. */
export function multipartBody(parts: { name: string; filename: string; file: string }[]): { body: Buffer; contentType: string } {
  const boundary = randomBytes(16).toString('hex');
  const chunks: Buffer[] = [];
  for (const part of parts) {
    chunks.push(Buffer.from(`--${boundary}\r\nContent-Disposition: form-data; name="${part.name}"; filename="${part.filename}"\r\nContent-Type: application/octet-stream\r\n\r\n`));
    chunks.push(readFileSync(part.file));
    chunks.push(Buffer.from('\r\n'));
  }
  chunks.push(Buffer.from(`--${boundary}--\r\n`));
  return { body: Buffer.concat(chunks), contentType: `multipart/form-data; boundary=${boundary}` };
}
