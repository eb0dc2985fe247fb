"""pylxd over TLS with a client certificate: argv = endpoint, cert file, key file, instance name, server certificate (verified against)."""
import json
import os
import sys

import pylxd

# requests lets these variables override a session's `verify`; the server certificate given here must win.
for variable in ('REQUESTS_CA_BUNDLE', 'CURL_CA_BUNDLE'):
    os.environ.pop(variable, None)

endpoint, cert, key, name, server_cert = sys.argv[1:6]
client = pylxd.Client(endpoint=endpoint, cert=(cert, key), verify=server_cert)
seen = {'trusted': client.trusted, 'auth': client.host_info.get('auth')}
seen['containers'] = sorted(c.name for c in client.containers.all())
container = client.containers.get(name)
seen['status'] = container.status
result = container.execute(['sh', '-c', 'echo over-tls; exit 3'])
seen['exit_code'] = result.exit_code
seen['stdout'] = result.stdout
container.files.put('/root/tls.txt', b'pushed over tls')
seen['file'] = container.files.get('/root/tls.txt').decode()
print(json.dumps(seen))
