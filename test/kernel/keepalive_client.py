"""
One keep-alive connection used the way Ansible's lxd modules use Python's http.client: a JSON `null`
body on every GET, requests back to back and after idle gaps longer than node's default keep-alive
timeout. Prints one JSON line per transport: the answers' statuses, the failures, and how many
sockets the connection needed.
usage: keepalive_client.py <unix socket> <tls host> <tls port> <idle seconds>
"""
import http.client
import json
import socket
import ssl
import sys
import threading
import time


class UnixHTTPConnection(http.client.HTTPConnection):
    def __init__(self, path):
        super().__init__('localhost')
        self.unix_path = path

    def connect(self):
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.connect(self.unix_path)
        self.sock = sock


def session(name, conn, idle, results):
    statuses, failures, sockets = [], [], set()
    steps = [
        ('GET', '/1.0', 'null', 0),
        ('GET', '/1.0', None, 0),
        ('GET', '/1.0/operations/00000000-0000-0000-0000-000000000000/wait?timeout=1', 'null', 0),
        ('GET', '/1.0', 'null', idle),
        ('GET', '/1.0', None, 0),
        ('GET', '/1.0', 'null', idle),
    ]
    for method, url, body, gap in steps:
        time.sleep(gap)
        try:
            conn.request(method, url, body=body)
            sockets.add(id(conn.sock))
            resp = conn.getresponse()
            json.loads(resp.read())
            statuses.append(resp.status)
        except (socket.error, http.client.HTTPException) as err:
            failures.append('%s %s after %ss: %s: %s' % (method, url, gap, type(err).__name__, err))
            conn.close()
    results[name] = {'statuses': statuses, 'failures': failures, 'sockets': len(sockets)}


def main():
    path, host, port, idle = sys.argv[1], sys.argv[2], int(sys.argv[3]), float(sys.argv[4])
    tls = http.client.HTTPSConnection(host, port, context=ssl._create_unverified_context())
    results = {}
    threads = [threading.Thread(target=session, args=('unix', UnixHTTPConnection(path), idle, results)),
               threading.Thread(target=session, args=('tls', tls, idle, results))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    print(json.dumps(results))


main()
