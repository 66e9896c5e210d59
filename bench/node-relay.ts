/**
 * A bare TCP relay in Node.js between pgbench and PostgreSQL: no parsing, no policy, no metering. It is what
 * any proxy written in Node pays for its socket path before it does anything, so the benchmark can tell
 * Node's share of pgtoll's cost from pgtoll's own. Usage: `node node-relay.ts <upstream host> <upstream port>`;
 * prints `relay listening on <port>` once it accepts connections on 127.0.0.1.
 */
import net from "node:net";

const [host = "127.0.0.1", port = "5432"] = process.argv.slice(2);

/** Copies `from` into `to`, pausing `from` while `to` cannot take more. */
function pipe(from: net.Socket, to: net.Socket): void {
  from.on("data", (chunk: Buffer) => {
    if (!to.write(chunk)) from.pause();
  });
  to.on("drain", () => from.resume());
}

const server = net.createServer({ noDelay: true }, (client) => {
  const upstream = net.connect({ host, port: Number(port), noDelay: true });
  pipe(client, upstream);
  pipe(upstream, client);
  for (const [socket, other] of [
    [client, upstream],
    [upstream, client],
  ] as const) {
    socket.on("error", () => other.destroy());
    socket.on("close", () => other.destroy());
  }
});

server.listen(0, "127.0.0.1", () => {
  const address = server.address() as net.AddressInfo;
  process.stdout.write(`relay listening on ${address.port}\n`);
});
process.on("SIGTERM", () => server.close(() => process.exit(0)));
