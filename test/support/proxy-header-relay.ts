import { type AddressInfo, connect, createServer, isIP, type Socket } from "node:net";

/** A PROXY v1 line claiming `source` as the client (TCP4 or TCP6 by its family). */
export function proxyV1(source: string, sourcePort = 40000, destination = "127.0.0.1"): Buffer {
  const family = isIP(source) === 6 ? "TCP6" : "TCP4";
  const target = family === "TCP6" && isIP(destination) === 4 ? "::1" : destination;
  return Buffer.from(`PROXY ${family} ${source} ${target} ${sourcePort} 6543\r\n`);
}

/** A PROXY v2 PROXY-command header claiming the IPv4 `source`, with one TLV after the addresses. */
export function proxyV2(source: string, sourcePort = 40000): Buffer {
  const body = Buffer.alloc(12 + 5);
  Buffer.from(source.split(".").map(Number)).copy(body, 0);
  Buffer.from([127, 0, 0, 1]).copy(body, 4);
  body.writeUInt16BE(sourcePort, 8);
  body.writeUInt16BE(6543, 10);
  Buffer.from([0x01, 0x00, 0x02, 0x70, 0x67]).copy(body, 12); // ALPN "pg", skipped by the reader
  const fixed = Buffer.from([0x21, 0x11, 0, 0]);
  fixed.writeUInt16BE(body.length, 2);
  return Buffer.concat([Buffer.from("0d0a0d0a000d0a515549540a", "hex"), fixed, body]);
}

/**
 * A one-rule TCP balancer on loopback: each connection to it is relayed to `targetPort`, with `header` (a
 * PROXY header, or nothing) written first, split in two writes as a slow network might deliver it.
 */
export async function startHeaderRelay(targetPort: number, header: Buffer) {
  const sockets = new Set<Socket>();
  const server = createServer((client) => {
    client.pause();
    const upstream = connect(targetPort, "127.0.0.1", () => {
      const half = Math.floor(header.length / 2);
      upstream.write(header.subarray(0, half));
      setImmediate(() => {
        upstream.write(header.subarray(half));
        client.pipe(upstream);
        upstream.pipe(client);
        client.resume();
      });
    });
    for (const socket of [client, upstream]) {
      sockets.add(socket);
      socket.on("error", () => {});
      socket.once("close", () => {
        sockets.delete(socket);
        client.destroy();
        upstream.destroy();
      });
    }
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  return {
    port: (server.address() as AddressInfo).port,
    async close() {
      for (const socket of sockets) socket.destroy();
      await new Promise((resolve) => server.close(resolve));
    },
  };
}
