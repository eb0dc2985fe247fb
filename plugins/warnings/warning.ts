/** The warning record as the API shows it. */
export type WarningStatus = 'new' | 'acknowledged' | 'resolved';

export interface Warning {
  status: WarningStatus;
  uuid: string;
  location: string;
  project: string;
  type: string;
  count: number;
  first_seen_at: string;
  last_seen_at: string;
  last_message: string;
  severity: 'low' | 'moderate' | 'high';
  entity_url: string;
}

export const warningUrl = (w: Pick<Warning, 'uuid'>): string => `/1.0/warnings/${w.uuid}`;
