"""pylxd's network calls against corral: create, exists, get, all, save, delete. Prints what it saw as JSON."""
import json
import sys
import urllib.parse

import pylxd

socket, name, renamed = sys.argv[1], sys.argv[2], sys.argv[3]
client = pylxd.Client(endpoint='http+unix://' + urllib.parse.quote(socket, safe=''))
seen = {}
net = client.networks.create(name, description='from pylxd', type='bridge',
                             config={'ipv4.address': 'auto', 'ipv6.address': 'none'})
seen['exists'] = client.networks.exists(name)
got = client.networks.get(name)
seen['managed'] = got.managed
seen['type'] = got.type
seen['description'] = got.description
seen['ipv4'] = got.config['ipv4.address']
seen['nat'] = got.config.get('ipv4.nat')
seen['all_names'] = [n.name for n in client.networks.all()]
got.config['ipv4.dhcp.expiry'] = '3h'
got.description = 'saved'
got.save(wait=True)
again = client.networks.get(name)
seen['expiry_after_save'] = again.config.get('ipv4.dhcp.expiry')
seen['description_after_save'] = again.description
# pylxd 2.2.10's Network.rename posts to /1.0/networks (a create), against any server: not used here.
seen['exists_other'] = client.networks.exists(renamed)
again.delete(wait=True)
seen['exists_after_delete'] = client.networks.exists(name)
print(json.dumps(seen))
