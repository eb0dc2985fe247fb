/**
 * `create_instance_from_image_unpack_progress`: an instance created from an image that the pool
 * does not hold yet waits for the image to be unpacked; its operation shows how far that is, in the
 * reference's keys and words (lxc prints the line after its "Retrieving image: ").
 */
import type { OperationControl, VolumeSource } from '../../sdk/index.js';
import { percentReporter } from '../../sdk/lib/operations/index.js';

export const UNPACK_STAGE = 'create_instance_from_image_unpack';
const UNPACK_LABEL = 'Unpack';

/** The same source, its unpack progress shown on `op` (other sources unchanged). */
export function withUnpackProgress(op: OperationControl, source: VolumeSource): VolumeSource {
  if (source.kind !== 'image') return source;
  return { ...source, onProgress: percentReporter(op, UNPACK_STAGE, UNPACK_LABEL) };
}
