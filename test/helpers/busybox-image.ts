/**
 * The tiny busybox image the tests and the bench use, built by bin/images/busybox.ts without the
 * DHCP boot (tests bring addresses up themselves, when they want one).
 */
export { buildBusyboxImage, buildSquashfsRootfs, type BusyboxImage, type Compression, type ExtraTemplates } from '../../bin/images/busybox.js';
