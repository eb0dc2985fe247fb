"""pylxd (Debian python3-pylxd) on two members of a corral cluster: one thread sets a profile's config
through the first member, over and over, while reader threads read it through the second; a read must
never show less than what was acknowledged before it began. Prints JSON on the last line with every
read that did."""
import json
import sys
import threading
import urllib.parse

import pylxd

first, second, rounds = sys.argv[1], sys.argv[2], int(sys.argv[3])
client = lambda socket: pylxd.Client(endpoint='http+unix://' + urllib.parse.quote(socket, safe=''))
writer = client(first)
writer.profiles.create('fresh', config={'user.n': '-1'})
acked = -1
done = False
missed = []
reads = [0]


def read_loop():
    reader = client(second)
    while not done:
        floor = acked
        seen = int(reader.profiles.get('fresh').config.get('user.n'))
        reads[0] += 1
        if seen < floor:
            missed.append({'acknowledged': floor, 'read': seen})


readers = [threading.Thread(target=read_loop) for _ in range(3)]
for r in readers:
    r.start()
try:
    profile = writer.profiles.get('fresh')
    for n in range(rounds):
        profile.config['user.n'] = str(n)
        profile.save()
        acked = n
finally:
    done = True
    for r in readers:
        r.join()
writer.profiles.get('fresh').delete()
print(json.dumps({'rounds': rounds, 'reads': reads[0], 'missed': missed[:10]}))
