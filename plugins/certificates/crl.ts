/**
 * Serial numbers listed in an X.509 CRL (RFC 5280 5.1), read with a minimal DER walker: node has
 * no CRL parser. The CRL's signature is not checked: it lives in the daemon's own data dir and can
 * only ever refuse certificates, never admit one.
 */

interface Tlv {
  tag: number;
  /** Offset of the value. */
  start: number;
  end: number;
}

function readTlv(buf: Buffer, offset: number, limit = buf.length): Tlv {
  if (offset + 2 > limit) throw new Error('truncated DER');
  const tag = buf[offset]!;
  let length = buf[offset + 1]!;
  let start = offset + 2;
  if (length & 0x80) {
    const bytes = length & 0x7f;
    if (bytes === 0 || bytes > 4 || start + bytes > limit) throw new Error('unsupported DER length');
    length = 0;
    for (let i = 0; i < bytes; i++) length = length * 256 + buf[start + i]!;
    start += bytes;
  }
  const end = start + length;
  if (end > limit) throw new Error('truncated DER');
  return { tag, start, end };
}

function children(buf: Buffer, parent: Tlv): Tlv[] {
  const out: Tlv[] = [];
  for (let at = parent.start; at < parent.end;) {
    const child = readTlv(buf, at, parent.end);
    out.push(child);
    at = child.end;
  }
  return out;
}

const SEQUENCE = 0x30;
const INTEGER = 0x02;
const UTC_TIME = 0x17;
const GENERALIZED_TIME = 0x18;

/** Uppercase hex without leading zeros: how serials are compared. */
export function normaliseSerial(hex: string): string {
  return hex.toUpperCase().replace(/^0+(?=.)/, '');
}

/** DER or PEM (`X509 CRL`) in, the revoked serial numbers out. */
export function revokedSerials(input: Buffer): Set<string> {
  const text = input.toString('latin1');
  const pem = /-----BEGIN X509 CRL-----([A-Za-z0-9+/=\s]+)-----END X509 CRL-----/.exec(text);
  const der = pem ? Buffer.from(pem[1]!.replace(/\s+/g, ''), 'base64') : input;
  const outer = readTlv(der, 0);
  if (outer.tag !== SEQUENCE) throw new Error('not a CRL');
  const tbs = children(der, outer)[0];
  if (!tbs || tbs.tag !== SEQUENCE) throw new Error('not a CRL');
  const fields = children(der, tbs);
  let i = 0;
  if (fields[i]?.tag === INTEGER) i++; // version
  i += 3; // signature algorithm, issuer, thisUpdate
  if (fields[i]?.tag === UTC_TIME || fields[i]?.tag === GENERALIZED_TIME) i++; // nextUpdate
  const serials = new Set<string>();
  const revoked = fields[i];
  if (!revoked || revoked.tag !== SEQUENCE) return serials; // no revoked certificates
  for (const entry of children(der, revoked)) {
    const serial = children(der, entry)[0];
    if (!serial || serial.tag !== INTEGER) throw new Error('malformed CRL entry');
    serials.add(normaliseSerial(der.subarray(serial.start, serial.end).toString('hex')));
  }
  return serials;
}
