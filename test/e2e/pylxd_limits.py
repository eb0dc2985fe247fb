"""pylxd (Debian python3-pylxd): a bad limits.kernel value on `name` is refused and nothing of the
edit is stored; prints what the client saw and the stored config as JSON on the last line."""
import json
import sys
import urllib.parse

import pylxd

socket, name = sys.argv[1:3]
client = pylxd.Client(endpoint='http+unix://' + urllib.parse.quote(socket, safe=''))
inst = client.containers.get(name)
inst.config['limits.kernel.nproc'] = '50'
inst.config['limits.kernel.nofile'] = '300:100'
error = None
try:
    inst.save(wait=True)
except pylxd.exceptions.LXDAPIException as e:
    error = {'status': e.response.status_code, 'message': str(e)}
stored = client.containers.get(name).config
print(json.dumps({'error': error, 'nproc': stored.get('limits.kernel.nproc'), 'nofile': stored.get('limits.kernel.nofile')}))
