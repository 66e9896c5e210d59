import type { Socket } from "node:net";
import { sendCancelRequest } from "../providers/cancel-request.js";
import type { Frame } from "./frame-reader.js";
import {
  encodeAuthenticationOk,
  encodeBackendKeyData,
  encodeParameterStatus,
  encodeReadyForQuery,
} from "./serializer.js";
import type { SessionRegistry } from "./session-registry.js";
import type { UpstreamSession, UpstreamTarget } from "./upstream-connection.js";

/**
 * What a session's authentication decided: where to open its upstream session, and how to run the session
 * once that is open. The part in between (an upstream slot, the connect, the startup deadline) is common.
 */
export interface SessionPlan {
  /** Upstream sessions are limited per key: a provider, an endpoint. */
  slotKey: string;
  target: UpstreamTarget;
  /** Startup parameters of the upstream session. */
  parameters: Record<string, string>;
  /**
   * The upstream session must not be a superuser's (the server's `is_superuser` ParameterStatus): an agent
   * session runs as the provider's role, which may have been altered since the provider registered it.
   */
  refuseSuperuser: boolean;
  /**
   * Runs the ready session. `early` holds client frames that came with the password message; `releaseSlot`
   * must be called once the upstream session is gone.
   */
  start(client: Socket, upstream: UpstreamSession, early: Frame[], releaseSlot: () => void): void;
}

/**
 * AuthenticationOk, the upstream's ParameterStatus values, BackendKeyData (the upstream backend's process id,
 * the proxy's own secret), ReadyForQuery.
 */
export function welcomeMessage(
  upstream: UpstreamSession,
  key: { processId: number; secretKey: Buffer },
): Buffer {
  const hello: Buffer[] = [encodeAuthenticationOk()];
  for (const [name, value] of upstream.parameters) hello.push(encodeParameterStatus(name, value));
  hello.push(encodeBackendKeyData(key.processId, key.secretKey), encodeReadyForQuery(upstream.status));
  return Buffer.concat(hello);
}

/**
 * Gives the session its BackendKeyData: its upstream backend's process id, which the session keeps to its end
 * (the upstream is opened before the client hears of the session, and never replaced), and a secret of the
 * proxy's own. A CancelRequest with both cancels the upstream query.
 */
export function registerCancelKey(registry: SessionRegistry, upstream: UpstreamSession) {
  return registry.register(upstream.processId, () => cancelUpstreamQuery(upstream));
}

/**
 * Sends the upstream server a CancelRequest for the session's running query; resolves once the server has closed
 * the request's connection (it has signalled the backend by then), or it failed or timed out. Never rejects.
 */
export function cancelUpstreamQuery(upstream: UpstreamSession): Promise<void> {
  const { host, port } = upstream.target;
  return sendCancelRequest(host, port, upstream.processId, upstream.secretKey);
}
