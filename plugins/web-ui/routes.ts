/**
 * GET /ui → /ui/, the page at /ui/ and its files under it. Trusted clients only, as the API: an
 * untrusted browser gets the 403 envelope, never the page.
 */
import { notFound, raw, redirect, type RouteDescriptor } from '../../sdk/index.js';
import type { Assets } from './assets.js';
import { contentSecurityPolicy } from './content-security-policy.js';

/** Any trusted certificate, restricted ones too: the page holds no project's data (its API calls are checked as usual). */
const PAGE_ACCESS = 'filtered';

export function uiRoutes(assets: Assets): RouteDescriptor[] {
  const headers = {
    'Content-Security-Policy': contentSecurityPolicy(assets.get('index.html')!.body.toString('utf8')),
    'X-Content-Type-Options': 'nosniff',
    'Referrer-Policy': 'no-referrer',
    // Small files, and the page must follow an upgrade of the daemon at once.
    'Cache-Control': 'no-cache',
  };
  const serve = (name: string) => {
    const asset = assets.get(name);
    if (!asset) throw notFound(`No file "${name.slice(0, 100)}" in the web UI`);
    return raw(asset.body, asset.contentType, headers);
  };
  return [
    {
      path: '/ui',
      get: {
        access: PAGE_ACCESS,
        description: 'The web UI (`/ui` redirects to `/ui/`)',
        answers: ['raw'],
        // The router drops a trailing slash: only the path as sent tells /ui/ (the page) from /ui.
        handler: (req) => (req.sentPath.endsWith('/') ? serve('index.html') : redirect('/ui/')),
      },
    },
    {
      path: '/ui/{file*}',
      get: {
        access: PAGE_ACCESS,
        description: 'The web UI\'s scripts and styles',
        answers: ['raw'],
        errors: [404],
        handler: (req) => serve(req.params.file || 'index.html'),
      },
    },
  ];
}
