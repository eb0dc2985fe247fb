/** /1.0/certificates and /1.0/certificates/<fingerprint>. */
import Joi from 'joi';
import {
  async, badRequest, collection, conflict, empty, forbidden, notFound, sync,
  type ApiRequest, type EventsService, type RouteDescriptor, type ServerConfig,
} from '../../sdk/index.js';
import {
  CERTIFICATE_TYPES, certificateUrl, commonName, editable, parseCertificate,
  type CertificateType, type ParsedCertificate, type TrustedCertificate,
} from './certificate.js';
import { verifyPassword } from './password.js';
import type { CertificateTokens } from './tokens.js';
import type { TrustStore } from './trust.js';

const PROJECT_NAME = Joi.string().min(1).max(63);

const addBody = Joi.object({
  name: Joi.string().allow('').default(''),
  type: Joi.string().allow('').default(''),
  certificate: Joi.string().allow('').default(''),
  password: Joi.string().allow('').default(''),
  trust_token: Joi.string().allow('').default(''),
  restricted: Joi.boolean().default(false),
  projects: Joi.array().items(PROJECT_NAME).allow(null).default([]),
  token: Joi.boolean().default(false),
}).unknown(true).required();

const putBody = Joi.object({
  name: Joi.string().allow('').default(''),
  type: Joi.string().allow('').default(''),
  restricted: Joi.boolean().default(false),
  projects: Joi.array().items(PROJECT_NAME).allow(null).default([]),
  certificate: Joi.string().allow('').default(''),
}).unknown(true).required();

function checkType(type: string): CertificateType {
  if (!(CERTIFICATE_TYPES as readonly string[]).includes(type)) throw badRequest(`Invalid certificate type "${type}" (expected ${CERTIFICATE_TYPES.join(' or ')})`);
  return type as CertificateType;
}

/** Unrestricted trusted callers (and the unix socket) administer the trust store; restricted ones only renew their own entry. */
const isAdmin = (req: ApiRequest) => req.trusted && req.restrictedTo === undefined;

export function certificateRoutes(trust: TrustStore, tokens: CertificateTokens, config: ServerConfig, events: EventsService): RouteDescriptor[] {
  const find = (req: ApiRequest): TrustedCertificate => {
    const found = trust.matching(req.params.fingerprint!);
    if (found.length === 0) throw notFound('Certificate not found');
    if (found.length > 1) throw badRequest('More than one certificate matches this fingerprint');
    return found[0]!;
  };

  /** What an untrusted client proved: a token (its request wins) or the trust password. Anything else is 403. */
  const untrustedGrant = async (req: ApiRequest): Promise<{ name?: string; type?: string; restricted?: boolean; projects?: string[] }> => {
    if (!req.clientCertificate) throw forbidden();
    const offered: string = req.body.trust_token || req.body.password;
    if (!offered) throw forbidden();
    const token = await tokens.redeem(offered);
    if (token) return token;
    const stored = config.get('core.trust_password');
    if (!stored || !(await verifyPassword(offered, stored))) throw forbidden();
    return {};
  };

  return [
    {
      path: '/1.0/certificates',
      extension: 'certificate_update',
      // Every trusted caller, restricted or not, may read the trust store, as with the reference.
      get: {
        access: 'filtered',
        conventions: ['recursion', 'filter'],
        handler: () => collection(trust.list(), (c) => certificateUrl(c.fingerprint), (c) => c),
      },
      post: {
        access: 'untrusted',
        body: addBody,
        // A token request is an operation; adding a certificate is answered at once.
        answers: ['sync', 'operation'],
        // 403: a wrong trust password or token, or a restricted caller.
        errors: [403, 409],
        handler: async (req) => {
          const body = req.body as { name: string; type: string; certificate: string; restricted: boolean; projects: string[] | null; token: boolean };
          if (req.trusted && !isAdmin(req)) throw forbidden('Restricted certificates cannot add certificates');
          const grant = req.trusted ? {} : await untrustedGrant(req);
          const type = checkType(grant.type || body.type || (req.trusted ? '' : 'client'));
          const restricted = grant.restricted ?? body.restricted;
          const projects = [...new Set(grant.projects ?? body.projects ?? [])];

          if (req.trusted && body.token) {
            const op = await tokens.issue({ name: body.name, type, restricted, projects }, req.requestor);
            return async(op);
          }

          let parsed: ParsedCertificate;
          if (body.certificate) parsed = parseCertificate(body.certificate);
          else if (req.clientCertificate) parsed = parseCertificate(req.clientCertificate);
          else throw badRequest('No certificate given (and the request came without a client certificate)');
          if (trust.get(parsed.fingerprint)) {
            if (!body.certificate) throw badRequest('This client is already trusted');
            throw conflict('Certificate already in the trust store');
          }
          const now = Date.now();
          if (Date.parse(parsed.x509.validTo) < now) throw badRequest('The certificate has expired');

          const doc: TrustedCertificate = {
            name: grant.name || body.name || commonName(parsed.x509),
            type,
            restricted,
            // Kept as sent even when unrestricted (they only apply once `restricted` is set), as the reference keeps them.
            projects,
            certificate: parsed.pem,
            fingerprint: parsed.fingerprint,
          };
          await trust.put(doc, 0);
          events.lifecycle('certificate-created', certificateUrl(doc.fingerprint), { requestor: req.requestor });
          return sync({}, { location: certificateUrl(doc.fingerprint) });
        },
      },
    },
    {
      path: '/1.0/certificates/{fingerprint}',
      extension: 'certificate_update',
      current: (req) => editable(find(req)),
      get: {
        access: 'filtered',
        handler: (req) => {
          const cert = find(req);
          return sync(cert, { etag: editable(cert) });
        },
      },
      put: {
        body: putBody,
        handler: async (req) => {
          const current = find(req);
          const rev = trust.get(current.fingerprint)!.rev;
          const body = req.body as { name: string; type: string; restricted: boolean; projects: string[] | null; certificate: string };
          const parsed = body.certificate ? parseCertificate(body.certificate) : undefined;
          const projects = [...new Set(body.projects ?? [])];
          const next: TrustedCertificate = {
            name: body.name,
            type: checkType(body.type),
            restricted: body.restricted,
            projects,
            certificate: parsed?.pem ?? current.certificate,
            fingerprint: parsed?.fingerprint ?? current.fingerprint,
          };
          if (!isAdmin(req)) {
            // certificate_self_renewal: a restricted client may swap in a new certificate for its own entry, nothing else.
            if (req.requestor.username !== current.fingerprint) throw forbidden();
            const same = next.name === current.name && next.type === current.type && next.restricted === current.restricted &&
              next.projects.join('\n') === current.projects.join('\n');
            if (!same) throw forbidden('Only the certificate can be changed');
          }
          if (next.fingerprint !== current.fingerprint && trust.get(next.fingerprint)) throw conflict('Certificate already in the trust store');
          await trust.put(next, rev, current.fingerprint);
          events.lifecycle('certificate-updated', certificateUrl(next.fingerprint), { requestor: req.requestor });
          return empty();
        },
      },
      delete: {
        handler: async (req) => {
          const current = find(req);
          if (!isAdmin(req) && req.requestor.username !== current.fingerprint) throw forbidden();
          await trust.remove(current.fingerprint);
          events.lifecycle('certificate-deleted', certificateUrl(current.fingerprint), { requestor: req.requestor });
          return empty();
        },
      },
    },
  ];
}
