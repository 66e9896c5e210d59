import type { Socket } from "node:net";
import { TLSSocket } from "node:tls";
import { SqlState } from "../db/sql-state.js";
import { AuthMessageReader, type ExpectedMessage } from "./auth-message-reader.js";
import type { Frame } from "./frame-reader.js";
import { StartupRefusal, UnansweredClose } from "./proxy-errors.js";
import { type StartupPacket, StartupReader } from "./startup-parser.js";

/**
 * Reads startup-phase packets and then authentication messages from a socket. After the StartupMessage it reads
 * only while a message is awaited, and only that message: one of the wrong type or over its cap ends the startup
 * from its header.
 */
export class StartupStream {
  #startup = new StartupReader();
  #messages = new AuthMessageReader();
  /** The message being awaited, until it is complete. */
  #expected: ExpectedMessage | null = null;
  #message: Frame | undefined;
  #waiter: (() => void) | null = null;
  #closed = false;
  #mode: "startup" | "messages" = "startup";
  #packets: StartupPacket[] = [];
  /** A bad message header ends the startup; thrown by the next `nextMessage`. */
  #failure: Error | undefined;

  constructor(public socket: Socket) {
    this.#attach(socket);
  }

  readonly #onData = (chunk: Buffer): void => {
    if (this.#mode === "startup") {
      const packet = this.#startup.feed(chunk);
      if (packet.kind !== "incomplete") this.#packets.push(packet);
    } else {
      this.#messages.feed(chunk);
      this.#check();
    }
    this.#wake();
  };

  readonly #onClose = (): void => {
    this.#closed = true;
    this.#wake();
  };

  #attach(socket: Socket): void {
    socket.on("data", this.#onData);
    socket.on("close", this.#onClose);
  }

  /** Removes only our listeners: others (the server's bookkeeping of open sockets) stay. */
  #release(socket: Socket): void {
    socket.removeListener("data", this.#onData);
    socket.removeListener("close", this.#onClose);
  }

  /** Takes the awaited message once it is complete; pauses the socket then, or on a bad header. */
  #check(): void {
    if (!this.#expected) return;
    try {
      this.#message = this.#messages.take(this.#expected);
      if (!this.#message) return;
    } catch (error) {
      this.#failure ??= error as Error;
    }
    this.#expected = null;
    // Nothing more is read until the next message is asked for: a client cannot make us buffer meanwhile.
    this.socket.pause();
  }

  #wake(): void {
    const waiter = this.#waiter;
    this.#waiter = null;
    waiter?.();
  }

  async #until<T>(take: () => T | undefined): Promise<T> {
    for (;;) {
      const value = take();
      if (value !== undefined) return value;
      if (this.#failure) {
        throw new StartupRefusal(SqlState.protocolViolation, this.#failure.message, "protocol");
      }
      if (this.#closed)
        throw new UnansweredClose("the client closed the connection during startup", "client_gone");
      await new Promise<void>((resolve) => (this.#waiter = resolve));
    }
  }

  nextPacket(): Promise<StartupPacket> {
    return this.#until(() => this.#packets.shift());
  }

  /** Switches to authentication messages (after the StartupMessage), keeping bytes that came with it. */
  startMessages(rest: Buffer): void {
    this.#mode = "messages";
    this.socket.pause();
    if (rest.length > 0) this.#messages.feed(rest);
  }

  /** Reads the next message, which must be `expected`; the socket is read only until it is complete. */
  nextMessage(expected: ExpectedMessage): Promise<Frame> {
    this.#expected = expected;
    this.#check();
    if (this.#expected) this.socket.resume();
    return this.#until(() => {
      const message = this.#message;
      this.#message = undefined;
      return message;
    });
  }

  /** Whether the client's socket closed (a paused socket notices only once it is read again). */
  get closed(): boolean {
    return this.#closed || this.socket.destroyed;
  }

  /** The server name (SNI) the client asked for in its TLS handshake, if any. */
  get serverName(): string | null {
    return this.socket instanceof TLSSocket && typeof this.socket.servername === "string"
      ? this.socket.servername
      : null;
  }

  /** Continues on a TLS socket wrapped around the same TCP connection. */
  upgrade(secure: TLSSocket): void {
    this.#release(this.socket);
    this.socket = secure;
    this.#startup = new StartupReader();
    this.#attach(secure);
  }

  /**
   * Stops reading for good and forgets what was read: the connection will not be served (see `closeRefused`).
   * Nothing the client sends from now on reaches this stream.
   */
  abandon(): void {
    this.#release(this.socket);
    this.#packets = [];
    this.#messages = new AuthMessageReader();
  }

  /**
   * Hands the socket over, paused, with what the client sent past its authentication put back in front of its
   * next reads (a pipelined query, say): the relay reads it first.
   */
  detach(): void {
    this.#release(this.socket);
    this.socket.pause();
    const rest = this.#messages.rest();
    if (rest.length > 0 && !this.socket.readableEnded) this.socket.unshift(rest);
  }
}
