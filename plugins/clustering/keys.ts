/**
 * The cluster's server keys. They live in the server configuration, which is in the cluster store once
 * clustered, so every member reads the same values.
 */
import { isListenAddress, type ConfigKeyRegistry, type ServerConfig } from '../../sdk/index.js';
import { parseExpiry } from './expiry.js';

export const Keys = {
  httpsAddress: 'cluster.https_address',
  offlineThreshold: 'cluster.offline_threshold',
  maxVoters: 'cluster.max_voters',
  maxStandby: 'cluster.max_standby',
  imagesMinimalReplica: 'cluster.images_minimal_replica',
  joinTokenExpiry: 'cluster.join_token_expiry',
} as const;

const integer = (value: string, what: string): number => {
  if (!/^-?\d+$/.test(value)) throw new Error(`${what} must be an integer`);
  return Number(value);
};

export function registerClusterKeys(keys: ConfigKeyRegistry, opts: { clustered: () => boolean; currentAddress: () => string }): void {
  keys.register({
    key: Keys.httpsAddress,
    scope: 'server',
    member: true,
    type: 'address',
    live: true,
    extension: 'clustering_server_address',
    doc: 'Address other cluster members reach this one at (host:port); unset: core.https_address',
    validate: isListenAddress,
    apply: (value, previous) => {
      // Members, tokens and the etcd peer URLs all carry the address: moving it is not supported, as in the
      // reference. At boot (`previous` empty) the stored value is applied as is: the server configuration is
      // one document for all members until the kernel keeps member-local keys apart.
      if (opts.clustered() && previous !== '' && value !== opts.currentAddress()) throw new Error('Changing cluster.https_address is currently not supported');
    },
  });
  keys.register({
    key: Keys.offlineThreshold,
    scope: 'server',
    type: 'integer',
    live: true,
    default: '20',
    extension: 'clustering',
    doc: 'Seconds without a heartbeat after which a member is OFFLINE (its etcd lease lapses within this bound)',
    validate: (v) => {
      if (integer(v, 'The offline threshold') < 1) throw new Error('The offline threshold must be at least 1 second');
    },
  });
  keys.register({
    key: Keys.maxVoters,
    scope: 'server',
    type: 'integer',
    live: true,
    default: '3',
    extension: 'clustering_sizing',
    doc: 'How many members are etcd voters (role "database"): an odd number, 3 or more',
    validate: (v) => {
      const n = integer(v, 'cluster.max_voters');
      if (n < 3 || n % 2 === 0) throw new Error('Value must be an odd number equal to or higher than 3');
    },
  });
  keys.register({
    key: Keys.maxStandby,
    scope: 'server',
    type: 'integer',
    live: true,
    default: '2',
    extension: 'clustering_sizing',
    doc: 'How many members are etcd learners kept ready to vote (role "database-standby"): 0 to 5',
    validate: (v) => {
      const n = integer(v, 'cluster.max_standby');
      if (n < 0 || n > 5) throw new Error('Value must be between 0 and 5');
    },
  });
  keys.register({
    key: Keys.imagesMinimalReplica,
    scope: 'server',
    type: 'integer',
    live: true,
    default: '3',
    doc: 'On how many members images are kept (-1: all); stored for the images family',
    validate: (v) => {
      const n = integer(v, 'cluster.images_minimal_replica');
      if (n < -1 || n === 0) throw new Error('Value must be -1 or a positive number');
    },
  });
  keys.register({
    key: Keys.joinTokenExpiry,
    scope: 'server',
    type: 'string',
    live: true,
    default: '3H',
    extension: 'cluster_join_token_expiry',
    doc: 'How long a join token stays valid (a number and a unit: S, M, H, d, w, m, y; e.g. 3H)',
    validate: (v) => void parseExpiry(v),
  });
}

/** The numbers the plugin acts on, read live. */
export function clusterSizing(config: ServerConfig): { offlineThreshold: number; maxVoters: number; maxStandby: number } {
  return {
    offlineThreshold: Number(config.get(Keys.offlineThreshold)) || 20,
    maxVoters: Number(config.get(Keys.maxVoters)) || 3,
    maxStandby: Number(config.get(Keys.maxStandby) || '2'),
  };
}
