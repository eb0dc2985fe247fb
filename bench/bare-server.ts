/**
 * The read path's floor (bench/read-path.ts): a bare node http server, in a process of its own so
 * that its CPU time can be read apart, answering each URL with the bytes corral answered for it.
 * Usage: node bare-server.js <socket> <answers.json> where the file maps URL to base64 body.
 */
import http from 'node:http';
import { readFileSync, rmSync } from 'node:fs';

const [socket, answersFile] = process.argv.slice(2);
if (!socket || !answersFile) {
  process.stderr.write('usage: bare-server <socket> <answers.json>\n');
  process.exit(2);
}
const answers = new Map<string, Buffer>(Object.entries(JSON.parse(readFileSync(answersFile, 'utf8')) as Record<string, string>).map(([url, body]) => [url, Buffer.from(body, 'base64')]));
const server = http.createServer((req, res) => {
  const body = answers.get(req.url ?? '');
  if (!body) {
    res.writeHead(404).end();
    return;
  }
  res.writeHead(200, { 'content-type': 'application/json', 'content-length': body.length });
  res.end(body);
});
rmSync(socket, { force: true });
server.listen(socket, () => process.stdout.write('ready\n'));
process.on('SIGTERM', () => server.close(() => process.exit(0)));
