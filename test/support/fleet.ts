import { type ChildProcess, spawn } from "node:child_process";
import { mkdtemp, writeFile } from "node:fs/promises";
import { request } from "node:http";
import { type AddressInfo, connect, createServer, Socket } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { waitFor } from "./real-clients.js";

/** A port nothing listens on right now (the OS's pick, released at once). */
export async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;
  await new Promise((resolve) => server.close(resolve));
  return port;
}

async function listening(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = connect(port, "127.0.0.1", () => {
      socket.destroy();
      resolve(true);
    });
    socket.on("error", () => resolve(false));
  });
}

interface Daemon {
  child: ChildProcess;
  stop(): Promise<void>;
}

function daemon(command: string, args: string[]): Daemon {
  const child = spawn(command, args, { stdio: ["ignore", "pipe", "pipe"] });
  let output = "";
  child.stdout?.on("data", (chunk) => (output += chunk));
  child.stderr?.on("data", (chunk) => (output += chunk));
  const exited = new Promise<void>((resolve) => child.once("exit", () => resolve()));
  child.once("exit", (code) => {
    if (code) process.stderr.write(`${command} exited with ${code}: ${output}\n`);
  });
  return {
    child,
    async stop() {
      if (child.exitCode === null) child.kill("SIGTERM");
      await exited;
    },
  };
}

/** A Redis of the test's own, on a free port, keeping nothing on disk. */
export async function startRedis(): Promise<Daemon & { url: string }> {
  const port = await freePort();
  const redis = daemon("redis-server", [
    "--port",
    String(port),
    "--bind",
    "127.0.0.1",
    "--save",
    "",
    "--appendonly",
    "no",
  ]);
  await waitFor(() => listening(port), 10_000, "redis-server to listen");
  return { ...redis, url: `redis://127.0.0.1:${port}` };
}

export interface FleetMember {
  httpPort: number;
  proxyPort: number;
}

/**
 * HAProxy in front of `members`, as deploy/haproxy.cfg has it: the wire port in TCP mode with a PROXY v2
 * header to each server, the API in HTTP mode with X-Forwarded-For; both check `GET /ready` every 250 ms (two
 * failed checks take a server out: a slow answer on a busy machine is not a stop).
 */
export async function startHaproxy(members: FleetMember[]): Promise<Daemon & FleetMember> {
  const [wirePort, apiPort] = [await freePort(), await freePort()];
  const servers = (port: (member: FleetMember) => number, extra: string) =>
    members.map((member, i) => `    server p${i + 1} 127.0.0.1:${port(member)} ${extra}`).join("\n");
  const config = `
defaults
    timeout connect 2s
    timeout client 60s
    timeout server 60s
    timeout check 2s
    retries 3
    option redispatch 1
    default-server inter 250ms fall 2 rise 2

frontend wire
    bind 127.0.0.1:${wirePort}
    mode tcp
    default_backend wire
backend wire
    mode tcp
    balance leastconn
    option httpchk GET /ready
    http-check expect status 200
${members.map((member, i) => `    server p${i + 1} 127.0.0.1:${member.proxyPort} send-proxy-v2 check port ${member.httpPort}`).join("\n")}

frontend api
    bind 127.0.0.1:${apiPort}
    mode http
    option forwardfor
    default_backend api
backend api
    mode http
    balance roundrobin
    option httpchk GET /ready
    http-check expect status 200
    retry-on conn-failure empty-response
${servers((member) => member.httpPort, "check")}
`;
  const dir = await mkdtemp(join(tmpdir(), "pgtoll-haproxy-"));
  const file = join(dir, "haproxy.cfg");
  await writeFile(file, config);
  const haproxy = daemon("/usr/sbin/haproxy", ["-db", "-f", file]);
  await waitFor(
    async () => (await listening(wirePort)) && (await listening(apiPort)),
    10_000,
    "haproxy to listen",
  );
  return { ...haproxy, proxyPort: wirePort, httpPort: apiPort };
}

/** A socket that connects from `localAddress` (a loopback address of its own: 127.0.0.2, ...). */
export function socketFrom(localAddress: string): Socket {
  const socket = new Socket();
  const original = socket.connect.bind(socket);
  socket.connect = ((port: number, host: string) =>
    original({ port, host, localAddress })) as unknown as typeof socket.connect;
  return socket;
}

/** POSTs JSON from `localAddress`; resolves with the status and parsed body. */
export function postFrom(
  localAddress: string,
  port: number,
  path: string,
  body: unknown,
  headers: Record<string, string> = {},
): Promise<{ status: number; json: Record<string, unknown> }> {
  const payload = JSON.stringify(body);
  return new Promise((resolve, reject) => {
    const req = request(
      {
        host: "127.0.0.1",
        port,
        path,
        method: "POST",
        localAddress,
        agent: false,
        headers: {
          "content-type": "application/json",
          "content-length": Buffer.byteLength(payload),
          ...headers,
        },
      },
      (res) => {
        let text = "";
        res.on("data", (chunk) => (text += chunk));
        res.on("end", () => resolve({ status: res.statusCode ?? 0, json: JSON.parse(text || "{}") }));
      },
    );
    req.on("error", reject);
    req.end(payload);
  });
}

/**
 * HAProxy listening dual-stack (`bind :::port v4v6`: IPv4 clients arrive as IPv4-mapped IPv6 addresses) in TCP
 * mode, sending a PROXY v2 header to the wire proxy on `proxyPort`, as a balancer on a dual-stack host does.
 */
export async function startDualStackHaproxy(proxyPort: number): Promise<Daemon & { port: number }> {
  const port = await freePort();
  const config = `
defaults
    timeout connect 2s
    timeout client 60s
    timeout server 60s

frontend wire
    bind :::${port} v4v6
    mode tcp
    default_backend wire
backend wire
    mode tcp
    server p1 127.0.0.1:${proxyPort} send-proxy-v2
`;
  const dir = await mkdtemp(join(tmpdir(), "pgtoll-haproxy-"));
  const file = join(dir, "haproxy.cfg");
  await writeFile(file, config);
  const haproxy = daemon("/usr/sbin/haproxy", ["-db", "-f", file]);
  await waitFor(() => listening(port), 10_000, "haproxy to listen");
  return { ...haproxy, port };
}
