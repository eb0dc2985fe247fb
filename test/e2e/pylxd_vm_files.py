"""Files of a running VM through pylxd: put (with mode and owner), get, delete, and a directory.
Prints what it saw as JSON for the ava test to check."""
import json
import sys
import urllib.parse

import pylxd

socket, name = sys.argv[1], sys.argv[2]
client = pylxd.Client(endpoint='http+unix://' + urllib.parse.quote(socket, safe=''))
instances = getattr(client, 'instances', client.containers)
inst = instances.get(name)
seen = {}

inst.files.put('/root/py.txt', b'written by pylxd', mode='0600', uid=1000, gid=1000)
seen['file'] = inst.files.get('/root/py.txt').decode()
seen['stat'] = inst.execute(['stat', '-c', '%a %u %g', '/root/py.txt']).stdout.strip()
inst.files.delete('/root/py.txt')
seen['after_delete'] = inst.execute(['ls', '/root']).stdout
try:
    inst.files.get('/root/py.txt')
    seen['get_deleted'] = 'found'
except pylxd.exceptions.NotFound:
    seen['get_deleted'] = 'not found'
except pylxd.exceptions.LXDAPIException as e:
    seen['get_deleted'] = 'error: %s' % e
print(json.dumps(seen))
