/**
 * Image reads are open to untrusted clients (another daemon pulling an image), which see public
 * images only, unless they hold a secret. A trusted client restricted to other projects is no better
 * off than an untrusted one here: these routes skip the kernel's project check.
 */
import { requestedProjectOf, type ApiRequest } from '../../sdk/index.js';

/** Whether the caller may see the project's private images. */
export const seesPrivateImages = (req: ApiRequest): boolean =>
  req.trusted && (!req.restrictedTo || req.restrictedTo.includes(requestedProjectOf(req)));
