"""pylxd against corral: an instance volume's config changed with save(). Prints what it saw as JSON."""
import json
import sys
import urllib.parse

import pylxd

client = pylxd.Client(endpoint='http+unix://' + urllib.parse.quote(sys.argv[1], safe=''))
pool = client.storage_pools.get('default')
vol = pool.volumes.get('container', sys.argv[2])
before = dict(vol.config)
vol.config['user.py'] = 'yes'
vol.save()
got = pool.volumes.get('container', sys.argv[2])
print(json.dumps({'type': got.type, 'before': before, 'config': got.config, 'description': got.description}))
