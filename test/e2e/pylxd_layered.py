"""A privileged container from an image through pylxd (decision 0075: a layered volume), left stopped; prints what it saw as JSON."""
import json
import sys
import urllib.parse

import pylxd

socket, name = sys.argv[1], sys.argv[2]
client = pylxd.Client(endpoint='http+unix://' + urllib.parse.quote(socket, safe=''))
c = client.containers.create({
    'name': name, 'source': {'type': 'image', 'alias': 'bb'}, 'config': {'security.privileged': 'true'},
}, wait=True)
c.files.put('/root/py-note', b'from pylxd\n')
out = {'stopped_get': c.files.get('/root/py-note').decode()}
c.start(wait=True)
res = c.execute(['sh', '-c', 'cat /root/py-note; cat /etc/hostname'])
out['exec'] = res.stdout
c.files.put('/root/py-running', b'while running\n')
out['running_exec'] = c.execute(['cat', '/root/py-running']).stdout
c.stop(force=True, wait=True)
print(json.dumps(out))
