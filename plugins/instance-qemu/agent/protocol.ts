/**
 * The guest agent's wire protocol, host side (the agent's half is guest/protocol.h; the reasons are
 * in docs/decisions/0048-vm-guest-agent.md). Every frame: u32 payload length (big endian), u32
 * channel, u8 type, then the payload.
 */
export const PROTOCOL_VERSION = 1;
export const HELLO_MAGIC = Buffer.from('CORRALAG', 'latin1');
/** magic + u16 version + u32 nonce */
export const HELLO_PAYLOAD_LEN = HELLO_MAGIC.length + 2 + 4;
export const FRAME_HEADER_LEN = 9;
export const MAX_PAYLOAD = 65_536;
/** Data per DATA frame (after its stream byte). */
export const MAX_CHUNK = 32_768;
/** Bytes either side may have in flight per stream before the receiver grants more. */
export const STREAM_WINDOW = 256 * 1024;

export const enum FrameType {
  Hello = 1,
  Open = 2,
  Data = 3,
  Eof = 4,
  Credit = 5,
  Reply = 6,
  Exit = 7,
  Signal = 8,
  Resize = 9,
  Close = 10,
  Reset = 11,
}

export const enum StreamId {
  In = 0,
  Out = 1,
  Err = 2,
}
