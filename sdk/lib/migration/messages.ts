/**
 * The migration protocol's protobuf messages (proto2), as the reference's peers encode them on the
 * control websocket: the header each side sends once, and the control message that ends a transfer.
 * The schema is built at load from a JSON descriptor (protobufjs), so no generated code is kept.
 * Field names and numbers follow the reference's wire format; the ones we do not use yet are kept so
 * a peer's header decodes whole.
 */
import { createRequire } from 'node:module';
import type protobuf from 'protobufjs';

/** Filesystem transfer types of a header's `fs`. */
export const FsType = { RSYNC: 0, BTRFS: 1, ZFS: 2, RBD: 3, BLOCK_AND_RSYNC: 4 } as const;
/** How (and whether) running state is carried. */
export const CriuType = { CRIU_RSYNC: 0, PHAUL: 1, NONE: 2, VM_QEMU: 3 } as const;

const required = 'required';
const schema = {
  nested: {
    migration: {
      nested: {
        MigrationFSType: { values: FsType },
        CRIUType: { values: CriuType },
        IDMapType: {
          fields: {
            isuid: { rule: required, type: 'bool', id: 1 },
            isgid: { rule: required, type: 'bool', id: 2 },
            hostid: { rule: required, type: 'int32', id: 3 },
            nsid: { rule: required, type: 'int32', id: 4 },
            maprange: { rule: required, type: 'int32', id: 5 },
          },
        },
        Config: { fields: { key: { rule: required, type: 'string', id: 1 }, value: { rule: required, type: 'string', id: 2 } } },
        Device: { fields: { name: { rule: required, type: 'string', id: 1 }, config: { rule: 'repeated', type: 'Config', id: 2 } } },
        Snapshot: {
          fields: {
            name: { rule: required, type: 'string', id: 1 },
            localConfig: { rule: 'repeated', type: 'Config', id: 2 },
            profiles: { rule: 'repeated', type: 'string', id: 3 },
            ephemeral: { rule: required, type: 'bool', id: 4 },
            localDevices: { rule: 'repeated', type: 'Device', id: 5 },
            architecture: { rule: required, type: 'int32', id: 6 },
            stateful: { rule: required, type: 'bool', id: 7 },
            creation_date: { type: 'int64', id: 8 },
            last_used_date: { type: 'int64', id: 9 },
            expiry_date: { type: 'int64', id: 10 },
          },
        },
        rsyncFeatures: {
          fields: {
            xattrs: { type: 'bool', id: 1 },
            delete: { type: 'bool', id: 2 },
            compress: { type: 'bool', id: 3 },
            bidirectional: { type: 'bool', id: 4 },
          },
        },
        zfsFeatures: {
          fields: { compress: { type: 'bool', id: 1 }, migration_header: { type: 'bool', id: 2 }, header_zvols: { type: 'bool', id: 3 } },
        },
        btrfsFeatures: {
          fields: {
            migration_header: { type: 'bool', id: 1 },
            header_subvolumes: { type: 'bool', id: 2 },
            header_subvolume_uuids: { type: 'bool', id: 3 },
          },
        },
        MigrationHeader: {
          fields: {
            fs: { rule: required, type: 'MigrationFSType', id: 1 },
            criu: { type: 'CRIUType', id: 2 },
            idmap: { rule: 'repeated', type: 'IDMapType', id: 3 },
            snapshotNames: { rule: 'repeated', type: 'string', id: 4 },
            snapshots: { rule: 'repeated', type: 'Snapshot', id: 5 },
            predump: { type: 'bool', id: 7 },
            rsyncFeatures: { type: 'rsyncFeatures', id: 8 },
            refresh: { type: 'bool', id: 9 },
            zfsFeatures: { type: 'zfsFeatures', id: 10 },
            volumeSize: { type: 'int64', id: 11 },
            btrfsFeatures: { type: 'btrfsFeatures', id: 12 },
            indexHeaderVersion: { type: 'uint32', id: 13 },
            fsRefresh: { type: 'MigrationFSType', id: 14 },
          },
        },
        MigrationControl: { fields: { success: { rule: required, type: 'bool', id: 1 }, message: { type: 'string', id: 2 } } },
      },
    },
  },
};

/** Built on the first message: protobufjs and the schema cost every daemon ~1 MiB at start, and most never migrate. */
let types: { header: protobuf.Type; control: protobuf.Type } | undefined;
function messageTypes(): { header: protobuf.Type; control: protobuf.Type } {
  if (!types) {
    const { Root } = createRequire(import.meta.url)('protobufjs') as typeof protobuf;
    const root = Root.fromJSON(schema);
    types = { header: root.lookupType('migration.MigrationHeader'), control: root.lookupType('migration.MigrationControl') };
  }
  return types;
}

export interface KeyValue { key: string; value: string }
export interface SnapshotMessage {
  name: string;
  localConfig?: KeyValue[];
  profiles?: string[];
  ephemeral: boolean;
  localDevices?: { name: string; config?: KeyValue[] }[];
  architecture: number;
  stateful: boolean;
  /** Unix seconds. */
  creation_date?: number;
  last_used_date?: number;
  expiry_date?: number;
}
export interface RsyncFeatures { xattrs?: boolean; delete?: boolean; compress?: boolean; bidirectional?: boolean }
export interface MigrationHeader {
  fs: number;
  criu?: number;
  idmap?: { isuid: boolean; isgid: boolean; hostid: number; nsid: number; maprange: number }[];
  snapshotNames?: string[];
  snapshots?: SnapshotMessage[];
  predump?: boolean;
  rsyncFeatures?: RsyncFeatures;
  refresh?: boolean;
  volumeSize?: number;
  btrfsFeatures?: { migration_header?: boolean; header_subvolumes?: boolean; header_subvolume_uuids?: boolean };
  indexHeaderVersion?: number;
  fsRefresh?: number;
}
export interface MigrationControl { success: boolean; message?: string }

const toObject = { longs: Number, enums: Number, defaults: false, arrays: true } as const;

export function encodeHeader(header: MigrationHeader): Buffer {
  const { header: HeaderType } = messageTypes();
  return Buffer.from(HeaderType.encode(HeaderType.fromObject(header)).finish());
}

/** Throws on bytes that are not a header (missing required fields included). */
export function decodeHeader(bytes: Uint8Array): MigrationHeader {
  const { header: HeaderType } = messageTypes();
  return HeaderType.toObject(HeaderType.decode(bytes), toObject) as MigrationHeader;
}

export function encodeControl(control: MigrationControl): Buffer {
  const { control: ControlType } = messageTypes();
  return Buffer.from(ControlType.encode(ControlType.fromObject(control)).finish());
}

export function decodeControl(bytes: Uint8Array): MigrationControl {
  const { control: ControlType } = messageTypes();
  return ControlType.toObject(ControlType.decode(bytes), toObject) as MigrationControl;
}
