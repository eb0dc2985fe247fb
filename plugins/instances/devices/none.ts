/** `none`: hides a device of the same name inherited from a profile. */
import type { DeviceType } from '../../../sdk/index.js';
import { checkOptions } from './device-types.js';

export const noneDevice: DeviceType = {
  type: 'none',
  hotplug: true,
  validate(config) {
    checkOptions(config, []);
  },
  async start() {
    return {};
  },
};
