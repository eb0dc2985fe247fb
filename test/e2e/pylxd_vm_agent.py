"""Exec and files of a running VM through pylxd. Debian's pylxd (2.2.10) predates virtual machines: its
models speak /1.0/containers only, which lists containers only, so the script goes through
pylxd's API object on /1.0/instances, with the headers its file manager sends.
`exec`: a command with its output recorded; `put-get`: put /root/py.txt with mode and owner, read
it back; `delete`: delete it, then read it.
Prints what it saw as JSON for the ava test to check."""
import json
import sys
import urllib.parse

import pylxd

socket, name, action = sys.argv[1], sys.argv[2], sys.argv[3]
client = pylxd.Client(endpoint='http+unix://' + urllib.parse.quote(socket, safe=''))
files = client.api.instances[name].files
seen = {}

if action == 'exec':
    # What pylxd's execute does, on /1.0/instances: the command recorded, its operation awaited.
    response = client.api.instances[name].exec.post(json={
        'command': ['sh', '-c', 'echo from pylxd; exit 3'], 'environment': {},
        'wait-for-websocket': False, 'interactive': False, 'record-output': True})
    operation = client.operations.wait_for_operation(response.json()['operation'])
    seen['exit_code'] = operation.metadata['return']
    stdout_path = operation.metadata['output']['1']
    seen['stdout'] = client.api.instances[name].logs[stdout_path.rsplit('/', 1)[1]].get().text
elif action == 'put-get':
    files.post(params={'path': '/root/py.txt'}, data=b'written by pylxd',
               headers={'X-LXD-type': 'file', 'X-LXD-mode': '0600', 'X-LXD-uid': '1000', 'X-LXD-gid': '1000'})
    got = files.get(params={'path': '/root/py.txt'}, is_api=False)
    seen['file'] = got.content.decode()
    seen['mode'] = got.headers.get('X-LXD-mode')
    seen['uid'] = got.headers.get('X-LXD-uid')
else:
    files.delete(params={'path': '/root/py.txt'})
    try:
        files.get(params={'path': '/root/py.txt'}, is_api=False)
        seen['get_deleted'] = 'found'
    except pylxd.exceptions.NotFound:
        seen['get_deleted'] = 'not found'
    except pylxd.exceptions.LXDAPIException as e:
        seen['get_deleted'] = 'error: %s' % e
print(json.dumps(seen))
