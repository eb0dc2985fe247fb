"""pylxd (Debian python3-pylxd) on a corral cluster: a copy of `source` (an instance or "instance/snapshot")
made as `name` on member `target`; prints what the copy looks like as JSON on the last line."""
import json
import sys
import urllib.parse

import pylxd

socket, source, name, target = sys.argv[1:5]
client = pylxd.Client(endpoint='http+unix://' + urllib.parse.quote(socket, safe=''))
made = client.containers.create({'name': name, 'source': {'type': 'copy', 'source': source}}, wait=True, target=target)
made.sync()
print(json.dumps({
    'location': made.location,
    'mark': made.config.get('user.mark'),
    'snapshots': [s.name for s in made.snapshots.all()],
}))
