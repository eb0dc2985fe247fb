"""Drives corral with pylxd (Debian python3-pylxd) and prints what it saw as JSON."""
import json
import sys
import urllib.parse

import pylxd
from pylxd.models.operation import Operation

socket = sys.argv[1]
client = pylxd.Client(endpoint='http+unix://' + urllib.parse.quote(socket, safe=''))
out = {
    'trusted': client.trusted,
    'api_version': client.host_info['api_version'],
    'server_name': client.host_info['environment']['server_name'],
    'has_etag': client.has_api_extension('etag'),
    'has_nonsense': client.has_api_extension('no_such_thing'),
}
client.api.probes.post(json={'name': 'py'})
response = client.api.probes['py'].jobs.post(json={'ms': 200})
op = Operation.wait_for_operation(client, response.json()['operation'])
out['operation_status'] = op.status
out['operation_metadata'] = op.metadata
out['warnings'] = client.api.warnings.get().json()['metadata']
out['operations'] = client.api.operations.get().json()['metadata']
print(json.dumps(out))
