"""pylxd against corral: snapshot, restore, copy. Prints what it saw as JSON."""
import json
import sys
import urllib.parse

import pylxd

client = pylxd.Client(endpoint='http+unix://' + urllib.parse.quote(sys.argv[1], safe=''))
inst = client.containers.create({'name': 'py1', 'source': {'type': 'image', 'alias': 'bb'}}, wait=True)
inst.files.put('/root/f', b'before')
inst.snapshots.create('p1', wait=True)
inst.files.put('/root/f', b'after')
inst.snapshots.get('p1').restore(wait=True)
after_restore = inst.files.get('/root/f').decode()
copy = client.containers.create({'name': 'py2', 'source': {'type': 'copy', 'source': 'py1'}}, wait=True)
print(json.dumps({
    'snapshots': [s.name for s in inst.snapshots.all()],
    'after_restore': after_restore,
    'copy_content': copy.files.get('/root/f').decode(),
    'copy_snapshots': [s.name for s in copy.snapshots.all()],
}))
