import type { Socket } from "node:net";
import { TLSSocket } from "node:tls";
import { FRONTEND_MAX_FRAME_LENGTH, type Frame, FrameReader } from "./frame-reader.js";
import { SqlState, StartupRefusal } from "./proxy-errors.js";
import { type StartupPacket, StartupReader } from "./startup-parser.js";

/** Reads startup-phase packets and then typed frames from a socket, with a deadline for the whole phase. */
export class StartupStream {
  #startup = new StartupReader();
  #frames = new FrameReader({ maxFrameLength: FRONTEND_MAX_FRAME_LENGTH });
  #pendingFrames: Frame[] = [];
  #waiter: (() => void) | null = null;
  #closed = false;
  #mode: "startup" | "frames" = "startup";
  #packets: StartupPacket[] = [];
  /** A malformed frame (bad length word) ends the startup; thrown by the next `nextFrame`. */
  #failure: Error | undefined;

  constructor(public socket: Socket) {
    this.#attach(socket);
  }

  readonly #onData = (chunk: Buffer): void => {
    if (this.#mode === "startup") {
      const packet = this.#startup.feed(chunk);
      if (packet.kind !== "incomplete") this.#packets.push(packet);
    } else {
      this.#feedFrames(chunk);
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

  #feedFrames(chunk: Buffer): void {
    try {
      // Copies: the frames outlive this chunk.
      this.#frames.feed(chunk, ({ code, payload, frame }) =>
        this.#pendingFrames.push({ code, payload: Buffer.from(payload), frame: Buffer.from(frame) }),
      );
    } catch (error) {
      this.#failure ??= error as Error;
    }
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
        throw new StartupRefusal(
          SqlState.protocolViolation,
          "the client closed the connection during startup",
          "client_gone",
        );
      await new Promise<void>((resolve) => (this.#waiter = resolve));
    }
  }

  nextPacket(): Promise<StartupPacket> {
    return this.#until(() => this.#packets.shift());
  }

  /** Switches to typed messages (after the StartupMessage), keeping bytes that came with it. */
  startFrames(rest: Buffer): void {
    this.#mode = "frames";
    if (rest.length > 0) this.#feedFrames(rest);
  }

  nextFrame(): Promise<Frame> {
    return this.#until(() => this.#pendingFrames.shift());
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
    this.#pendingFrames = [];
    this.#frames = new FrameReader({ maxFrameLength: FRONTEND_MAX_FRAME_LENGTH });
  }

  /** Frames already read past the password message, for the relay. */
  detach(): Frame[] {
    this.#release(this.socket);
    this.socket.pause();
    return this.#pendingFrames.splice(0);
  }
}
