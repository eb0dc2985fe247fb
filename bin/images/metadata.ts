/**
 * metadata.yaml of an image, in the layout real images use: the architecture, the creation date,
 * the properties `lxc image list` shows, and the templates the daemon renders into the rootfs.
 */
import { arch } from 'node:os';

/** A template file of the image and when the daemon renders it. */
export interface ImageTemplate {
  /** Path inside the container. */
  path: string;
  /** File name under templates/. */
  template: string;
  when: Array<'create' | 'copy' | 'rename' | 'start'>;
}

/** This machine's architecture as the kernel (and the API) names it. */
export function hostArchitecture(): string {
  const names: Record<string, string> = { x64: 'x86_64', arm64: 'aarch64', arm: 'armv7l', ia32: 'i686', ppc64: 'ppc64le', s390x: 's390x', riscv64: 'riscv64' };
  return names[arch()] ?? arch();
}

/** A serial in the reference image servers' style (20261126_0332). */
export function imageSerial(now = new Date()): string {
  return now.toISOString().slice(0, 16).replace(/[-:]/g, '').replace('T', '_');
}

/**
 * `properties` in the order they are written (architecture comes first); `extraYaml`: more
 * template entries, indented two spaces, appended under `templates:`.
 */
export function metadataYaml(properties: Record<string, string>, templates: ImageTemplate[], extraYaml = ''): string {
  const architecture = hostArchitecture();
  return [
    `architecture: ${architecture}`,
    `creation_date: ${Math.floor(Date.now() / 1000)}`,
    'properties:',
    `  architecture: ${architecture}`,
    ...Object.entries(properties).map(([key, value]) => `  ${key}: ${JSON.stringify(value)}`),
    'templates:',
    ...templates.flatMap((t) => [`  ${t.path}:`, '    when:', ...t.when.map((w) => `      - ${w}`), `    template: ${t.template}`]),
    ...(extraYaml ? [extraYaml.replace(/\n$/, '')] : []),
    '',
  ].join('\n');
}
