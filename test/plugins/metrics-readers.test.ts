/**
 * The metrics readers on the cgroup file formats this host cannot produce on demand (block I/O
 * accounting stays empty on its virtual disk; v2-only files on a v1 host), and the number format.
 */
import test from 'ava';
import { readdirSync, readFileSync } from 'node:fs';
import { BlockDeviceNames, parseBlkio, parseIoStat, parseKeyValues, parseUsageAll } from '../../plugins/instance-lxc/metrics.js';
import { formatValue, renderExposition } from '../../plugins/metrics/exposition.js';
import { parseExposition } from '../helpers/exposition.js';

/** A block device of this host, its name read independently from its uevent file. */
const [hostDev, hostName] = (() => {
  const dev = readdirSync('/sys/dev/block').sort()[0]!;
  return [dev, /^DEVNAME=(.+)$/m.exec(readFileSync(`/sys/dev/block/${dev}/uevent`, 'utf8'))![1]!];
})();

test('v2 io.stat: bytes and completed I/Os per device, named from sysfs when the device exists', (t) => {
  const names = new BlockDeviceNames();
  const io = parseIoStat(`${hostDev} rbytes=1024 wbytes=0 rios=2 wios=0 dbytes=0 dios=0\n259:99999 rbytes=0 wbytes=8192 rios=0 wios=3 dbytes=0 dios=0\n`, names);
  t.is(io.length, 2);
  t.is(io[0]!.device, hostName);
  t.like(io[0], { readBytes: 1024, readsCompleted: 2, writtenBytes: 0, writesCompleted: 0 });
  // No such device: the major:minor pair stands in for the name.
  t.like(io[1], { device: '259:99999', writtenBytes: 8192, writesCompleted: 3 });
});

test('v1 blkio.throttle files: Read and Write lines per device, totals ignored', (t) => {
  const bytes = `${hostDev} Read 4096\n${hostDev} Write 512\n${hostDev} Sync 4608\n${hostDev} Async 0\n${hostDev} Total 4608\nTotal 4608\n`;
  const ios = `${hostDev} Read 1\n${hostDev} Write 1\n${hostDev} Total 2\nTotal 2\n`;
  t.deepEqual(parseBlkio(bytes, ios, new BlockDeviceNames()), [{ device: hostName, readBytes: 4096, readsCompleted: 1, writtenBytes: 512, writesCompleted: 1 }]);
  t.deepEqual(parseBlkio('Total 0\n', 'Total 0\n', new BlockDeviceNames()), []);
});

test('per-CPU usage and key-value stat files', (t) => {
  t.deepEqual(parseUsageAll('cpu user system\n0 1500000000 250000000\n1 0 4000000\n'), [
    { cpu: '0', user: 1.5, system: 0.25 }, { cpu: '1', user: 0, system: 0.004 },
  ]);
  t.deepEqual([...parseKeyValues('usage_usec 10\nuser_usec 7\nsystem_usec 3\nnr_periods 0\n')], [['usage_usec', 10], ['user_usec', 7], ['system_usec', 3], ['nr_periods', 0]]);
});

test('numbers are written as the reference writes them', (t) => {
  t.is(formatValue(0), '0');
  t.is(formatValue(0.004), '0.004');
  t.is(formatValue(106496), '106496');
  t.is(formatValue(268435456), '2.68435456e+08');
  t.is(formatValue(85241733120), '8.524173312e+10');
  t.is(formatValue(0.00001), '1e-05');
  t.is(formatValue(Infinity), '+Inf');
});

test('label values are escaped and empty families left out', (t) => {
  const text = renderExposition([
    { name: 'lxd_x', help: 'x', type: 'gauge', samples: [{ labels: { name: 'a"b\\c\nd', project: 'p' }, value: 1 }] },
    { name: 'lxd_empty', help: 'none', type: 'gauge', samples: [] },
  ]);
  const families = parseExposition(text);
  t.deepEqual([...families.keys()], ['lxd_x']);
  t.deepEqual(families.get('lxd_x')!.samples[0]!.labels, { name: 'a"b\\c\nd', project: 'p' });
});
