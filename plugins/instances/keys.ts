/** Instance config keys the family itself honours; drivers add theirs (limits.*, security.*, raw.*). */
import { isBool, isInt, isUint, oneOf, type ConfigKeyDescriptor } from '../../sdk/index.js';

export const INSTANCE_KEYS: ConfigKeyDescriptor[] = [
  { key: 'boot.autostart', scope: 'instance', type: 'bool', validate: isBool, live: true, doc: 'Start the instance when the daemon starts (default: if it was running at shutdown)' },
  { key: 'boot.autostart.delay', scope: 'instance', type: 'integer', default: '0', validate: isUint, live: true, doc: 'Seconds to wait after starting this instance before starting the next' },
  { key: 'boot.autostart.priority', scope: 'instance', type: 'integer', default: '0', validate: isInt, live: true, doc: 'Start order: higher starts first' },
  { key: 'boot.stop.priority', scope: 'instance', type: 'integer', default: '0', validate: isInt, live: true, extension: 'container_stop_priority', doc: 'Stop order on daemon shutdown: higher stops first' },
  { key: 'boot.host_shutdown_timeout', scope: 'instance', type: 'integer', default: '30', validate: isUint, live: true, extension: 'container_host_shutdown_timeout', doc: 'Seconds to wait for a clean shutdown when the daemon stops before killing' },
  { key: 'security.protection.delete', scope: 'instance', type: 'bool', default: 'false', validate: isBool, live: true, extension: 'container_protection_delete', doc: 'Refuse to delete the instance' },
  { key: 'security.protection.shift', scope: 'instance', type: 'bool', default: 'false', validate: isBool, live: true, extension: 'container_protection_shift', doc: 'Refuse to start the container under another id map than at its last start (what its files\' owners would shift to)' },
  { key: 'cluster.evacuate', scope: 'instance', type: 'string', default: 'auto', validate: oneOf('auto', 'migrate', 'stop'), live: true, doc: 'What evacuating its cluster member does with the instance: stop it there, or migrate it to another member (auto: migrate)' },
  { key: 'linux.kernel_modules', scope: 'instance', type: 'list', doc: 'Kernel modules to load before starting' },
  { prefix: 'environment.', scope: 'instance', type: 'string', live: true, doc: 'Environment variables for exec sessions' },
  { prefix: 'image.', scope: 'instance', type: 'string', live: true, extension: 'container_image_properties', doc: 'Properties of the image the instance was created from' },
  { prefix: 'volatile.', scope: 'instance', type: 'string', live: true, doc: 'Internal state kept by the daemon' },
  { key: 'volatile.apply_template', scope: 'instance', type: 'string', live: true, doc: 'Image templates owed at the next start: the trigger (create, copy, rename) of the change that made them due; cleared once rendered' },
];
