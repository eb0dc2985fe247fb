/**
 * The test kit for plugin authors (test code only: nothing outside test/ loads it). `startTestKernel`
 * is the real kernel with an in-memory store and no listeners, driven through hapi's inject as a
 * trusted local client; a test may hand it stand-ins for services (`serviceOverride`) and for the
 * host-tools service (`createFakeHostTools`, which records what a plugin would run). The driver
 * conformance suites are beside this file, one per kind (they register ava tests when imported).
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { Kernel, type ServiceOverride } from '../../kernel/kernel.js';
import type { HostTools, ServiceRef } from '../index.js';

export { createFakeHostTools, type FakeHostTools, type FakeHostToolsOptions, type FakeAnswer, type RecordedCall } from './fake-host-tools.js';
export type { ServiceOverride };

const compiledRoot = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..');
const projectRoot = path.resolve(compiledRoot, '..');

export interface TestKernelOptions {
  /** Plugin ids (or a set name) from the registry. */
  plugins: string[] | string;
  /** Registry file; default: the project's plugin-registry.json. */
  registry?: string;
  /** Stand-ins for services: consumers get these, whatever plugin provides the ref. */
  services?: ServiceOverride[];
  /** The host-tools service the plugins get (e.g. a `createFakeHostTools()`); default: the real one. */
  hostTools?: HostTools;
}

/** A stand-in for the service under `ref`, typed by it. */
export function serviceOverride<T>(ref: ServiceRef<T>, impl: T): ServiceOverride {
  return { ref, impl };
}

export interface InjectRequest {
  method?: string;
  url: string;
  payload?: unknown;
  headers?: Record<string, string>;
}

export interface InjectResult {
  statusCode: number;
  headers: Record<string, unknown>;
  body: string;
  /** The parsed envelope (undefined when the body is not JSON). */
  json: any;
}

export interface TestKernel {
  kernel: Kernel;
  dataDir: string;
  inject(request: InjectRequest): Promise<InjectResult>;
  stop(): Promise<void>;
}

export async function startTestKernel(opts: TestKernelOptions): Promise<TestKernel> {
  const dataDir = mkdtempSync(path.join(tmpdir(), 'corral-test-'));
  const kernel = await Kernel.start({
    dataDir,
    storeFile: ':memory:',
    registryFile: opts.registry ?? path.join(projectRoot, 'plugin-registry.json'),
    plugins: Array.isArray(opts.plugins) ? opts.plugins.join(',') : opts.plugins,
    compiledRoot,
    logLevel: 'fatal',
    serverCertificate: false,
    hostTools: opts.hostTools,
    serviceOverrides: opts.services,
  }).catch((err) => {
    rmSync(dataDir, { recursive: true, force: true });
    throw err;
  });
  return {
    kernel,
    dataDir,
    async inject(request) {
      const res = await kernel.inject({
        method: request.method ?? 'GET',
        url: request.url,
        payload: request.payload === undefined ? undefined : typeof request.payload === 'string' ? request.payload : JSON.stringify(request.payload),
        headers: request.headers,
      });
      let json: unknown;
      try {
        json = JSON.parse(res.payload);
      } catch { /* not JSON */ }
      return { statusCode: res.statusCode, headers: res.headers, body: res.payload, json };
    },
    async stop() {
      await kernel.stop();
      rmSync(dataDir, { recursive: true, force: true });
    },
  };
}
