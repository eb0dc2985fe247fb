"""Reads a corral cluster with pylxd (Debian python3-pylxd); prints what it saw as JSON on the last line."""
import json
import sys
import urllib.parse

import pylxd

socket = sys.argv[1]
client = pylxd.Client(endpoint='http+unix://' + urllib.parse.quote(socket, safe=''))
# pylxd's Cluster.get prints its arguments and the answer: only the last line is ours.
cluster = client.cluster.get()
members = client.cluster.members.all()
first = client.cluster.members.get(members[0].server_name)
print(json.dumps({
    'enabled': cluster.enabled,
    'server_name': cluster.server_name,
    'members': sorted(m.server_name for m in members),
    'first': {'server_name': first.server_name, 'url': first.url, 'database': first.database, 'status': first.status, 'message': first.message},
    'has_clustering': client.has_api_extension('clustering'),
}))
