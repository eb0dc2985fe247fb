"""NIC and proxy devices through pylxd: devices added to a running container and saved, its state
read back, a bad device refused. Prints what it saw as JSON for the ava test to check."""
import json
import sys
import urllib.parse

import pylxd

socket, port = sys.argv[1], sys.argv[2]
client = pylxd.Client(endpoint='http+unix://' + urllib.parse.quote(socket, safe=''))
seen = {}

c = client.containers.get('c')
c.devices['pyproxy'] = {'type': 'proxy', 'listen': 'tcp:127.0.0.1:' + port, 'connect': 'tcp:127.0.0.1:8089'}
c.devices['pynic'] = {'type': 'nic', 'nictype': 'p2p', 'name': 'eth4'}
c.save(wait=True)
c.sync()
seen['volatile_hwaddr'] = c.config.get('volatile.pynic.hwaddr')
seen['host_name'] = c.config.get('volatile.pynic.host_name')
state = c.state()
seen['eth4'] = state.network.get('eth4')

c.devices['bad'] = {'type': 'nic', 'nictype': 'p2p', 'hwaddr': 'zz'}
try:
    c.save(wait=True)
    seen['bad'] = 'accepted'
except Exception as e:  # pylxd raises LXDAPIException with the daemon's message
    seen['bad'] = str(e)
print(json.dumps(seen))
