/** Value checks for the identity and RBAC service keys (each throws an Error naming the problem). */

export function serviceUrl(value: string): void {
  let url: URL;
  try {
    url = new URL(value);
  } catch {
    throw new Error(`"${value}" is not a URL`);
  }
  if (url.protocol !== 'https:' && url.protocol !== 'http:') throw new Error(`"${value}" must be an http or https URL`);
  if (!url.hostname) throw new Error(`"${value}" names no host`);
}

/** A public or private key of the macaroon agents: 32 bytes in standard base64. */
export function base64Key(value: string): void {
  if (!/^[A-Za-z0-9+/]+={0,2}$/.test(value) || value.replace(/=+$/, '').length % 4 === 1) throw new Error('The key must be base64');
  const bytes = Buffer.from(value, 'base64').length;
  if (bytes !== 32) throw new Error(`The key must be 32 bytes long, not ${bytes}`);
}

export function positiveSeconds(value: string): void {
  if (!/^\d+$/.test(value) || Number(value) === 0) throw new Error(`Invalid expiry "${value}" (a positive number of seconds)`);
}

const LABEL = /^[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?$/i;

export function domainList(value: string): void {
  for (const domain of value.split(',').map((d) => d.trim())) {
    if (!domain || domain.length > 253 || !domain.split('.').every((l) => LABEL.test(l))) throw new Error(`Invalid domain "${domain}"`);
  }
}

export function agentUsername(value: string): void {
  if (/[\s\x00-\x1f]/.test(value)) throw new Error('The agent username may not contain spaces or control characters');
}
