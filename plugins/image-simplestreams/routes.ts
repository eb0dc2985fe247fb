/**
 * The simplestreams paths, open to anyone (`untrusted`): `/streams/v1/index.json`, the products file
 * it names, and `/images/<fingerprint>/<file>` for the files the products point at. Only public images
 * of the served project answer; anything else is 404, whether it exists or not.
 */
import { open } from 'node:fs/promises';
import { notFound, raw, type ImagesService, type RouteDescriptor } from '../../sdk/index.js';
import { indexDocument, productsDocument, PRODUCTS_PATH, servedNames } from './catalog.js';
import { FileHashes } from './file-hashes.js';
import { servedImage, servedImages } from './served-images.js';

const FINGERPRINT = /^[0-9a-f]{64}$/;
const ACCESS = 'untrusted';
// The index follows every change at once (a cached copy would keep listing a deleted image); files under a fingerprint never change.
const INDEX_HEADERS = { 'Cache-Control': 'no-cache' };

const json = (doc: unknown) => raw(`${JSON.stringify(doc, null, 1)}\n`, 'application/json', INDEX_HEADERS);

export function simplestreamsRoutes(images: () => ImagesService): RouteDescriptor[] {
  const hashes = new FileHashes();
  return [
    {
      path: '/streams/v1/index.json',
      get: {
        access: ACCESS,
        description: 'The simplestreams index of the public images (anyone may read it)',
        answers: ['raw'],
        handler: async () => json(indexDocument(await servedImages(images(), hashes), new Date())),
      },
    },
    {
      path: `/${PRODUCTS_PATH}`,
      get: {
        access: ACCESS,
        description: 'The simplestreams products of the public images: one product per image, its files as items',
        answers: ['raw'],
        handler: async () => json(productsDocument(await servedImages(images(), hashes), new Date())),
      },
    },
    {
      path: '/images/{fingerprint}/{file}',
      get: {
        access: ACCESS,
        description: 'A file of a public image, as the simplestreams products name it',
        answers: ['raw'],
        errors: [404],
        handler: async (req) => {
          const { fingerprint, file } = req.params as { fingerprint: string; file: string };
          const missing = () => notFound(`No image file "${file.slice(0, 100)}" is published for "${fingerprint.slice(0, 64)}"`);
          if (!FINGERPRINT.test(fingerprint)) throw missing();
          const image = await servedImage(images(), fingerprint);
          if (!image) throw missing();
          const names = servedNames(image.files);
          const index = names.indexOf(file);
          const stored = index === 0 ? image.files.metadata : index === 1 ? image.files.rootfs : undefined;
          if (!stored) throw missing();
          // Opened before answering: a delete from now on does not cut the transfer short.
          const handle = await open(stored.path).catch(() => { throw missing(); });
          const { size } = await handle.stat();
          return raw(handle.createReadStream(), 'application/octet-stream', {
            'Content-Length': String(size),
            'Content-Disposition': `inline;filename=${file}`,
            'Cache-Control': 'public, max-age=86400, immutable',
          });
        },
      },
    },
  ];
}
