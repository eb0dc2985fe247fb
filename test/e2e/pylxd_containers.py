"""The core container flow through pylxd: image upload, create, start, execute, files, stop, delete.
Prints what it saw as JSON for the ava test to check."""
import json
import sys
import urllib.parse

import pylxd

socket, tarball = sys.argv[1], sys.argv[2]
client = pylxd.Client(endpoint='http+unix://' + urllib.parse.quote(socket, safe=''))
seen = {}

with open(tarball, 'rb') as f:
    image = client.images.create(f.read(), wait=True)
image.add_alias('py-bb', 'pylxd image')
seen['fingerprint'] = image.fingerprint

# Debian's pylxd (2.2.10) predates client.instances; its containers manager speaks the same API.
instances = getattr(client, 'instances', client.containers)
inst = instances.create({'name': 'py1', 'source': {'type': 'image', 'alias': 'py-bb'}}, wait=True)
inst.start(wait=True)
inst.sync()
seen['status_after_start'] = inst.status

result = inst.execute(['sh', '-c', 'echo out; echo err >&2; exit 4'])
seen['exit_code'] = result.exit_code
seen['stdout'] = result.stdout
seen['stderr'] = result.stderr

inst.files.put('/root/note.txt', b'written by pylxd')
seen['file'] = inst.files.get('/root/note.txt').decode()
seen['cat'] = inst.execute(['cat', '/root/note.txt']).stdout

inst.stop(force=True, wait=True)
inst.sync()
seen['status_after_stop'] = inst.status
inst.delete(wait=True)
seen['exists_after_delete'] = instances.exists('py1')
print(json.dumps(seen))
