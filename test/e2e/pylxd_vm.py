"""A virtual machine's life through pylxd: create, start, exec, state, stop, delete.
Debian's pylxd (2.2.10) has no virtual-machine model (its Container speaks /1.0/containers, which
lists containers only), so the script checks the daemon's api_extensions the way pylxd does
(client.has_api_extension) and then goes through pylxd's API object: /1.0/virtual-machines to
create and list, /1.0/instances (type virtual-machine) for the rest, operations awaited with
pylxd's Operation model.
Arguments: socket, VM name, image alias. Prints what it saw as JSON for the ava test to check."""
import json
import sys
import time
import urllib.parse

import pylxd
from pylxd.models.operation import Operation

socket, name, alias = sys.argv[1], sys.argv[2], sys.argv[3]
client = pylxd.Client(endpoint='http+unix://' + urllib.parse.quote(socket, safe=''))
seen = {'extensions': {e: client.has_api_extension(e) for e in ('virtual-machines', 'virtual_machines', 'instances')}}
vms = client.api['virtual-machines']
instance = client.api.instances[name]


def wait(response):
    return Operation.wait_for_operation(client, response.json()['operation'])


created = wait(vms.post(json={
    'name': name, 'type': 'virtual-machine', 'source': {'type': 'image', 'alias': alias},
    'config': {'limits.memory': '256MiB', 'limits.cpu': '1'}}))
seen['create'] = created.status
seen['listed_vms'] = '/1.0/virtual-machines/' + name in vms.get().json()['metadata']
seen['listed_containers'] = '/1.0/containers/' + name in client.api.containers.get().json()['metadata']
seen['type'] = instance.get().json()['metadata']['type']
seen['start'] = wait(instance.state.put(json={'action': 'start', 'timeout': 30})).status

# The agent comes up a few seconds after the guest's kernel: until then exec fails (its request or
# its operation) with "VM agent isn't currently running".
deadline = time.time() + 120
while True:
    try:
        ran = wait(instance.exec.post(json={
            'command': ['sh', '-c', 'echo vm-$((6*7)); exit 5'], 'environment': {},
            'wait-for-websocket': False, 'interactive': False, 'record-output': True}))
        break
    except pylxd.exceptions.LXDAPIException as e:
        if time.time() > deadline or 'agent' not in str(e):
            raise
        time.sleep(1)
seen['exit_code'] = ran.metadata['return']
seen['stdout'] = instance.logs[ran.metadata['output']['1'].rsplit('/', 1)[1]].get().text

state = instance.state.get().json()['metadata']
seen['state'] = {'status': state['status'], 'processes': state['processes'], 'memory_usage': state['memory']['usage'],
                 'cpu_usage': state['cpu']['usage'], 'pid': state['pid'], 'interfaces': sorted(state['network'] or {})}
seen['stop'] = wait(instance.state.put(json={'action': 'stop', 'force': True, 'timeout': 30})).status
seen['delete'] = wait(instance.delete()).status
try:
    instance.get()
    seen['after_delete'] = 'found'
except pylxd.exceptions.NotFound:
    seen['after_delete'] = 'not found'
print(json.dumps(seen))
