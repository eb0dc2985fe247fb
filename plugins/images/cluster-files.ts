/**
 * Image files in a cluster: the records are shared, the files are not. A member that needs an image's
 * files it does not hold (to unpack it for an instance, to export it) fetches them from a member that
 * does, checks them against the fingerprint, and keeps them; a deleted image's files go from every member.
 * A new image's files are also copied at once to as many members as `cluster.images_minimal_replica`
 * asks (the member that installed it counts; -1: every member), so losing one member loses no image;
 * the replica pass (replica-pass.ts) restores that count when holders go.
 */
import { createReadStream } from 'node:fs';
import { access, rm } from 'node:fs/promises';
import { createHash } from 'node:crypto';
import path from 'node:path';
import {
  isApiError, notFound, raw, sync, unavailable,
  type PluginContext, type RouteDescriptor,
} from '../../sdk/index.js';
import type { ImageCatalog } from './catalog.js';
import type { ImageFiles } from './files.js';
import type { StoredImage } from './image.js';

const FILES_PATH = '/internal/cluster/image-files';
/** The clustering plugin's key; read here by name (images does not depend on that plugin). */
const MINIMAL_REPLICA_KEY = 'cluster.images_minimal_replica';
const DEFAULT_MINIMAL_REPLICA = 3;
const PARTS = ['metadata', 'rootfs'] as const;
type Part = (typeof PARTS)[number];

const exists = (file: string) => access(file).then(() => true, () => false);

export class ClusterImageFiles {
  private readonly fetching = new Map<string, Promise<void>>();

  constructor(private readonly ctx: PluginContext, private readonly catalog: ImageCatalog, private readonly files: ImageFiles) {
    // Another member deleted the last record of an image: its files here go too.
    ctx.store.onChange((change) => {
      if (!ctx.cluster.enabled || change.kind !== 'delete' || change.collection !== 'images') return;
      void this.dropIfUnrecorded(change.name);
    });
  }

  /** The routes other members use: list or fetch files, or ask this member to hold an image's files (trusted cluster peers only: `admin`). */
  routes(): RouteDescriptor[] {
    return [{
      path: FILES_PATH,
      get: {
        access: 'admin',
        description: 'Fingerprints of the images whose files this member holds (the replica pass counts copies with it)',
        handler: async () => sync([...(await this.files.present())].sort()),
      },
    }, this.fileRoute(), {
      path: `${FILES_PATH}/{fingerprint}`,
      post: {
        access: 'admin',
        description: 'Hold the files of an image here (another cluster member asks, to keep images_minimal_replica copies)',
        errors: [404],
        handler: async (req) => {
          const fp = req.params.fingerprint!;
          const record = (await this.catalog.images.list()).find((r) => r.name === fp);
          if (!record) throw notFound('Image not found');
          await this.ensureLocal(record.doc);
          return sync({});
        },
      },
    }];
  }

  /** How many members should hold each image's files (-1: every member). */
  minimalReplica(): number {
    const value = Number(this.ctx.serverConfig.get(MINIMAL_REPLICA_KEY) || DEFAULT_MINIMAL_REPLICA);
    return Number.isInteger(value) ? value : DEFAULT_MINIMAL_REPLICA;
  }

  /** The fingerprints whose files another member holds (bounded by the cluster request's bound). */
  async heldBy(member: string): Promise<Set<string>> {
    const answer = await this.ctx.cluster.request(member, 'GET', FILES_PATH);
    if (answer.status !== 200 || !Array.isArray(answer.body?.metadata)) throw unavailable(`Cluster member "${member}" did not list its image files (status ${answer.status})`);
    return new Set((answer.body.metadata as unknown[]).filter((fp): fp is string => typeof fp === 'string'));
  }

  /** Ask another member to hold an image's files; answers whether it took them (a refusal is logged). */
  async askToHold(member: string, fingerprint: string): Promise<boolean> {
    try {
      const answer = await this.ctx.cluster.request(member, 'POST', `${FILES_PATH}/${fingerprint}`);
      if (answer.status === 200) return true;
      this.ctx.log.warn({ fingerprint, member, status: answer.status }, 'a cluster member did not take a copy of an image');
    } catch (err) {
      this.ctx.log.warn({ err, fingerprint, member }, 'a cluster member could not be asked to copy an image');
    }
    return false;
  }

  /**
   * After this member installed a new image: copy its files to other online members until
   * `cluster.images_minimal_replica` members hold them. In the background: the upload is answered
   * without waiting; what is missed here the replica pass (replica-pass.ts) makes up later.
   */
  replicate(image: StoredImage): void {
    if (!this.ctx.cluster.enabled) return;
    const wanted = this.minimalReplica();
    const self = this.ctx.cluster.serverName;
    const others = this.ctx.cluster.members().filter((m) => m.name !== self && m.online);
    const chosen = wanted < 0 ? others : others.slice(0, Math.max(0, wanted - 1));
    for (const member of chosen) void this.askToHold(member.name, image.fingerprint);
  }

  private fileRoute(): RouteDescriptor {
    return {
      path: `${FILES_PATH}/{fingerprint}/{part}`,
      get: {
        access: 'admin',
        description: 'One file of an image, for another cluster member that needs it',
        answers: ['raw'],
        errors: [404],
        handler: async (req) => {
          const part = req.params.part as Part;
          const fp = req.params.fingerprint!;
          if (!PARTS.includes(part) || !/^[0-9a-f]{64}$/.test(fp)) throw notFound('Image file not found');
          const file = part === 'metadata' ? this.files.metadataFile(fp) : this.files.rootfsFile(fp);
          if (!(await exists(file))) throw notFound('Image file not found');
          return raw(createReadStream(file), 'application/octet-stream');
        },
      },
    };
  }

  /** Make sure this member holds the image's files (a no-op standalone or when they are here). */
  ensureLocal(image: StoredImage): Promise<void> {
    if (!this.ctx.cluster.enabled) return Promise.resolve();
    const fp = image.fingerprint;
    const running = this.fetching.get(fp);
    if (running) return running;
    const work = this.fetch(image).finally(() => this.fetching.delete(fp));
    this.fetching.set(fp, work);
    return work;
  }

  private async fetch(image: StoredImage): Promise<void> {
    const fp = image.fingerprint;
    const wanted: Part[] = image.files.rootfs ? ['metadata', 'rootfs'] : ['metadata'];
    const local = (part: Part) => (part === 'metadata' ? this.files.metadataFile(fp) : this.files.rootfsFile(fp));
    if ((await Promise.all(wanted.map((part) => exists(local(part))))).every(Boolean)) return;
    const self = this.ctx.cluster.serverName;
    const others = this.ctx.cluster.members().filter((m) => m.name !== self && m.online);
    const problems: string[] = [];
    for (const member of others) {
      const area = await this.files.stagingArea();
      try {
        const staged = (part: Part) => path.join(area, part);
        for (const part of wanted) await this.ctx.cluster.download(member.name, `${FILES_PATH}/${fp}/${part}`, staged(part));
        const digest = await sha256Of(wanted.map(staged));
        if (digest !== fp) {
          problems.push(`${member.name}: the files it sent do not match the fingerprint`);
          continue;
        }
        await this.files.install(fp, staged('metadata'), image.files.rootfs ? staged('rootfs') : undefined);
        this.ctx.log.info({ fingerprint: fp, from: member.name }, 'image files fetched from another cluster member');
        return;
      } catch (err) {
        if (!(isApiError(err) && err.status === 404)) problems.push(`${member.name}: ${(err as Error).message}`);
      } finally {
        await rm(area, { recursive: true, force: true });
      }
    }
    throw unavailable(`The files of image ${fp} are on no reachable cluster member${problems.length ? ` (${problems.join('; ')})` : ''}`);
  }

  private async dropIfUnrecorded(fingerprint: string): Promise<void> {
    const still = (await this.catalog.images.list()).some((r) => r.name === fingerprint);
    if (!still) await this.files.remove(fingerprint).catch((err) => this.ctx.log.warn({ err, fingerprint }, 'removing a deleted image\'s files failed'));
  }
}

/** The fingerprint of an image: SHA-256 over its files in order (metadata, then rootfs). */
async function sha256Of(files: string[]): Promise<string> {
  const hash = createHash('sha256');
  for (const file of files) for await (const chunk of createReadStream(file)) hash.update(chunk as Buffer);
  return hash.digest('hex');
}
