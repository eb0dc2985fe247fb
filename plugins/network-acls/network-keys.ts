/** The keys ACLs add to bridge networks. */
import { isBool, oneOf, type ConfigKeyDescriptor } from '../../sdk/index.js';

const aclList = (value: string): void => {
  for (const name of value.split(',').map((s) => s.trim())) if (name === '') throw new Error('empty ACL name in the list');
};

export const ACL_NETWORK_KEYS: ConfigKeyDescriptor[] = [
  { key: 'security.acls', scope: 'network', type: 'list', validate: aclList, extension: 'network_bridge_acl', doc: 'Comma-separated network ACLs applied to the traffic of the network\'s instances.' },
  { key: 'security.acls.default.ingress.action', scope: 'network', type: 'string', default: 'reject', validate: oneOf('allow', 'reject', 'drop'), extension: 'network_bridge_acl', doc: 'What happens to traffic towards the instances that no ACL rule matched (allow, reject, drop).' },
  { key: 'security.acls.default.egress.action', scope: 'network', type: 'string', default: 'reject', validate: oneOf('allow', 'reject', 'drop'), extension: 'network_bridge_acl', doc: 'What happens to traffic from the instances that no ACL rule matched (allow, reject, drop).' },
  { key: 'security.acls.default.ingress.logged', scope: 'network', type: 'bool', default: 'false', validate: isBool, extension: 'network_bridge_acl', doc: 'Log traffic towards the instances that falls to the default action.' },
  { key: 'security.acls.default.egress.logged', scope: 'network', type: 'bool', default: 'false', validate: isBool, extension: 'network_bridge_acl', doc: 'Log traffic from the instances that falls to the default action.' },
];
