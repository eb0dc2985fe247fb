"""pylxd (Debian python3-pylxd) on a corral cluster: a container created with target, and the list with each one's member; prints JSON on the last line."""
import json
import sys
import urllib.parse

import pylxd

socket, target = sys.argv[1], sys.argv[2]
client = pylxd.Client(endpoint='http+unix://' + urllib.parse.quote(socket, safe=''))
made = client.containers.create({'name': 'py1', 'source': {'type': 'image', 'alias': 'bb'}}, wait=True, target=target)
made.sync()
listed = {c.name: c.location for c in client.containers.all()}
made.delete(wait=True)
print(json.dumps({'location': made.location, 'listed': listed}))
