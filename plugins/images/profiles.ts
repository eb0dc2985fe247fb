/**
 * The profiles an image gives the instances made from it (image_profiles), as the reference keeps
 * them: naming none (absent or null) means `default`; an empty list is kept, and instances made
 * from the image without naming profiles then get none; the list is answered in name order. Every
 * profile must exist, and naming one twice is refused (the reference fails on its database there).
 */
import { badRequest, ProfilesServiceRef, type ServiceRegistry } from '../../sdk/index.js';

export async function imageProfiles(services: ServiceRegistry, project: string, names: string[] | null | undefined): Promise<string[]> {
  if (names === undefined || names === null) return ['default'];
  const twice = names.find((name, i) => names.indexOf(name) !== i);
  if (twice !== undefined) throw badRequest(`Profile "${twice}" is named twice`);
  if (names.length) await services.get(ProfilesServiceRef)?.load(project, names);
  return [...names].sort();
}
