"""pylxd (Debian python3-pylxd) adds a unix-char device to a running container through
container.devices and save(wait=True), then removes it the same way; prints JSON on the last line."""
import json
import sys
import urllib.parse

import pylxd

socket, name = sys.argv[1], sys.argv[2]
client = pylxd.Client(endpoint='http+unix://' + urllib.parse.quote(socket, safe=''))
c = client.containers.get(name)
c.devices['pyzero'] = {'type': 'unix-char', 'source': '/dev/zero', 'path': '/dev/u1pyzero', 'mode': '0640'}
c.save(wait=True)
added = c.execute(['stat', '-c', '%F %t:%T %a', '/dev/u1pyzero']).stdout.strip()
c = client.containers.get(name)
del c.devices['pyzero']
c.save(wait=True)
gone = c.execute(['ls', '/dev/u1pyzero']).exit_code
print(json.dumps({'added': added, 'gone_exit': gone, 'devices': sorted(client.containers.get(name).devices)}))
