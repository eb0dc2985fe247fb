"""pylxd's execute with stdin_payload: the payload, then its end, reach the command.
Prints what it saw as JSON for the ava test to check."""
import hashlib
import json
import sys
import urllib.parse

import pylxd

socket, alias = sys.argv[1], sys.argv[2]
client = pylxd.Client(endpoint='http+unix://' + urllib.parse.quote(socket, safe=''))
seen = {}

instances = getattr(client, 'instances', client.containers)
inst = instances.create({'name': 'py-stdin', 'source': {'type': 'image', 'alias': alias}}, wait=True)
inst.start(wait=True)
try:
    result = inst.execute(['cat'], stdin_payload=b'x')
    seen['bytes'] = [result.exit_code, result.stdout, result.stderr]
    result = inst.execute(['sh', '-c', 'cat; echo err >&2; exit 3'], stdin_payload='hello\nworld\n')
    seen['text'] = [result.exit_code, result.stdout, result.stderr]
    payload = b''.join(b'line %06d\n' % i for i in range(20000))
    result = inst.execute(['md5sum'], stdin_payload=payload)
    seen['large'] = [result.exit_code, result.stdout.split()[0], hashlib.md5(payload).hexdigest()]
finally:
    inst.stop(force=True, wait=True)
    inst.delete(wait=True)
print(json.dumps(seen))
