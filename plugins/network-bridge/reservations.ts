/**
 * Static DHCP reservations of a bridge, one per attached NIC that has a MAC: kept as JSON beside
 * dnsmasq's files (the NIC hooks write them) and rendered into dnsmasq's hosts file.
 */
import { readFileSync, writeFileSync, renameSync } from 'node:fs';
import path from 'node:path';

export interface Reservation {
  hwaddr: string;
  hostname: string;
  ipv4?: string;
  ipv6?: string;
}

export type Reservations = Record<string, Reservation>;

export const reservationKey = (project: string, instance: string, device: string) => `${project}/${instance}/${device}`;

export function readReservations(dir: string): Reservations {
  try {
    return JSON.parse(readFileSync(path.join(dir, 'reservations.json'), 'utf8')) as Reservations;
  } catch {
    return {};
  }
}

/** Write the reservations and the hosts file dnsmasq reads from them (each file replaced whole). */
export function writeReservations(dir: string, hostsFile: string, all: Reservations): void {
  const json = path.join(dir, 'reservations.json');
  writeFileSync(`${json}.tmp`, JSON.stringify(all));
  renameSync(`${json}.tmp`, json);
  const lines = Object.values(all).map((r) => [r.hwaddr, r.ipv4, r.ipv6 && `[${r.ipv6}]`, r.hostname].filter(Boolean).join(','));
  writeFileSync(`${hostsFile}.tmp`, lines.map((l) => `${l}\n`).join(''));
  renameSync(`${hostsFile}.tmp`, hostsFile);
}
