"""pylxd against a btrfs pool: create with a loop size, get, resources, save (PUT) and patch, delete. Prints JSON."""
import json
import sys
import urllib.parse

import pylxd

socket = sys.argv[1]
client = pylxd.Client(endpoint='http+unix://' + urllib.parse.quote(socket, safe=''))
out = {}
pool = client.storage_pools.create({'name': 'pyb', 'driver': 'btrfs', 'config': {'size': '1GiB'}})
out['exists'] = client.storage_pools.exists('pyb')
pool = client.storage_pools.get('pyb')
out['driver'] = pool.driver
out['config'] = pool.config
out['status'] = pool.status
resources = pool.resources.get()
out['total'] = resources.space['total']
pool.description = 'from pylxd'
pool.save(wait=True)
pool.patch({'config': {'btrfs.mount_options': 'user_subvol_rm_allowed,noatime'}}, wait=True)
again = client.storage_pools.get('pyb')
out['description'] = again.description
out['mount_options'] = again.config.get('btrfs.mount_options')
try:
    client.storage_pools.create({'name': 'pybad', 'driver': 'btrfs', 'config': {'size': 'huge'}})
    out['bad'] = 'created'
except pylxd.exceptions.LXDAPIException as err:
    out['bad'] = str(err)
again.delete()
out['exists_after'] = client.storage_pools.exists('pyb')
print(json.dumps(out))
