"""pylxd against corral: storage pools and custom volumes. Prints what it saw as JSON."""
import json
import sys
import urllib.parse

import pylxd

client = pylxd.Client(endpoint='http+unix://' + urllib.parse.quote(sys.argv[1], safe=''))
pool = client.storage_pools.get('default')
vol = pool.volumes.create('custom', {'name': 'pyvol', 'config': {'user.x': '1'}})
vol.config['user.y'] = '2'
vol.save()
got = pool.volumes.get('custom', 'pyvol')
names = sorted(v.name for v in pool.volumes.all() if v.type == 'custom')
got.delete()
print(json.dumps({
    'pools': [p.name for p in client.storage_pools.all()],
    'config': got.config,
    'description': got.description,
    'names': names,
    'after_delete': sorted(v.name for v in pool.volumes.all() if v.type == 'custom'),
}))
