/**
 * `limits.hugepages.<size>`: how much of the host's huge pages of one size the container may use,
 * through the hugetlb cgroup controller (v1 `hugetlb.<size>.limit_in_bytes`, v2 `hugetlb.<size>.max`).
 * Page sizes the host does not have, or a host without the controller, are refused when the key is
 * set: the limit could never apply.
 */
import { existsSync } from 'node:fs';
import type { CgroupHost } from './cgroups.js';
import { parseByteSize, type CgroupLimit } from './limits.js';

export const HUGEPAGE_PREFIX = 'limits.hugepages.';

/** Key suffix (and cgroup file infix) -> page size in kB, as /sys/kernel/mm/hugepages names them. */
export const HUGEPAGE_SIZES: Record<string, number> = { '64KB': 64, '1MB': 1024, '2MB': 2048, '1GB': 1048576 };

export const HUGEPAGE_KEYS = Object.keys(HUGEPAGE_SIZES).map((size) => `${HUGEPAGE_PREFIX}${size}`);

/** The hugepage keys the config sets, with their values. */
export function setHugepages(config: Record<string, string>): Record<string, string> {
  return Object.fromEntries(HUGEPAGE_KEYS.filter((k) => config[k]).map((k) => [k, config[k]!]));
}

export function checkHugepages(value: string): void {
  parseByteSize(value);
}

/** Why a hugepage limit cannot apply on this host, or undefined when it can. */
export function hugepagesUnsupported(key: string, cgroups: CgroupHost, sysfs = '/sys/kernel/mm/hugepages'): string | undefined {
  const size = key.slice(HUGEPAGE_PREFIX.length);
  if (!cgroups.versionOf('hugetlb')) return 'the host has no hugetlb cgroup controller';
  if (!existsSync(`${sysfs}/hugepages-${HUGEPAGE_SIZES[size]}kB`)) return `the host has no ${size} huge pages`;
  return undefined;
}

/** The cgroup file and value of one key; an empty value lifts the limit. */
export function hugepageLimit(key: string, value: string | undefined): CgroupLimit {
  const size = key.slice(HUGEPAGE_PREFIX.length);
  return {
    key,
    controller: 'hugetlb',
    v1: `hugetlb.${size}.limit_in_bytes`,
    v2: `hugetlb.${size}.max`,
    value: value ? String(parseByteSize(value)) : '',
  };
}
