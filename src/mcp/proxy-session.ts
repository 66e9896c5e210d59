import type { Duplex } from "node:stream";
import pg from "pg";
import { type Price, parsePrice } from "../billing/cost.js";
import { formatMicro, parseMicro } from "../billing/money.js";
import { jsonSafeTypes } from "../providers/json-safe-types.js";
import { readFundsRefusal } from "../proxy/funds-refusal.js";

import { type AgentAccount, FundsRequiredError } from "./funds-required.js";
import { readCapped, type StatementResult, showSetting } from "./statement-read.js";

/** Where the wire proxy listens and who the session is for. */
export interface ProxySessionOptions {
  /** The proxy's host and port, unless `stream` is given. */
  host?: string;
  port?: number;
  /** TLS to the proxy; required by the proxy unless it is reached over loopback. */
  ssl?: pg.ClientConfig["ssl"];
  /** A new connection to a proxy in this process (its `connectInProcess`), in place of `host` and `port`. */
  stream?: () => Duplex;
  wallet: string;
  providerId: string;
  /**
   * A valid agent token for `providerId`, asked for at each connection: a fresh one (the stdio server signs
   * one) or the latest the agent sent (the remote endpoint).
   */
  token(): Promise<string>;
  /**
   * Gives the connection (and so the provider's upstream session) back once no call has run for this long; the
   * next call opens a new one. Unset: kept until closed. Warning: an open transaction block is rolled back.
   */
  idleMs?: number;
}

/** A statement that failed, with what it was charged all the same (rows delivered before a cut-off). */
export class StatementFailure extends Error {
  readonly code: string | undefined;
  constructor(
    readonly error: unknown,
    readonly costMicro: bigint,
  ) {
    super(error instanceof Error ? error.message : String(error), { cause: error });
    this.code = (error as { code?: string }).code;
  }
}

/**
 * The wire-proxy session of an MCP server, so that an agent's tool calls are metered like psql and not counted
 * against the REST gateway's per-IP limits. It connects at the first call that needs it (a tool that needs the
 * provider's database), and gives the connection back after `idleMs` without calls. Calls run one at a time,
 * in order (a session runs one statement at a time anyway); a session found closed is reopened at the next
 * call, with a new token.
 *
 * Warning: a statement whose connection drops while it runs is not retried (a write may have happened); the
 * caller gets the error and the next call reconnects.
 */
export class ProxySession {
  #client: pg.Client | null = null;
  #connecting: Promise<pg.Client> | null = null;
  #queue: Promise<unknown> = Promise.resolve();
  /** What `SHOW pgtoll.session_cost` said after the last call on the current connection. */
  #sessionCostMicro = 0n;
  #price: Price | null = null;
  #depositAddress: string | null = null;
  #closed = false;
  /** Calls queued or running. */
  #pending = 0;
  #idleTimer: NodeJS.Timeout | null = null;
  /** Connections made, the first one included. */
  connections = 0;

  constructor(private readonly options: ProxySessionOptions) {}

  /** Whether a connection to the proxy is open now. */
  get connected(): boolean {
    return this.#client !== null;
  }

  /** Runs `work` alone on the session (connecting first if need be). */
  exclusive<T>(work: (client: pg.Client) => Promise<T>): Promise<T> {
    this.#pending++;
    if (this.#idleTimer) clearTimeout(this.#idleTimer);
    const run = this.#queue.then(async () => work(await this.#connected()));
    this.#queue = run
      .catch(() => {})
      .finally(() => {
        if (--this.#pending === 0) this.#armIdle();
      });
    return run;
  }

  #armIdle(): void {
    const { idleMs } = this.options;
    if (idleMs === undefined || !this.#client || this.#closed) return;
    this.#idleTimer = setTimeout(() => {
      const client = this.#client;
      if (!client || this.#pending > 0) return;
      this.#client = null;
      void client.end().catch(() => {});
    }, idleMs);
    this.#idleTimer.unref();
  }

  /**
   * Runs one statement, reading at most `maxRows` rows (a portal with a row limit, so rows past the cap are
   * never sent, and never charged), and what it cost: the session's cost after it less the cost before. With
   * `budgetMicro` it runs under a session budget of that much more than the session has cost so far (see
   * {@link readCapped}: a result cut off at it is returned with `budgetReached`).
   */
  async statement(
    sql: string,
    params: unknown[],
    maxRows: number,
    budgetMicro?: bigint,
  ): Promise<{ result: StatementResult; costMicro: bigint; balanceMicro: bigint }> {
    return this.exclusive(async (client) => {
      const before = this.#sessionCostMicro;
      let result: StatementResult;
      try {
        result =
          budgetMicro === undefined
            ? await readCapped(client, sql, params, maxRows)
            : await this.#withinBudget(client, before + budgetMicro, () =>
                readCapped(client, sql, params, maxRows, true),
              );
      } catch (error) {
        // A statement cut off part way was charged for the rows it delivered: say how much.
        const after = await this.#settingMicro(client, "session_cost").catch(() => before);
        this.#sessionCostMicro = after;
        throw new StatementFailure(error, after - before);
      }
      this.#sessionCostMicro = await this.#settingMicro(client, "session_cost");
      return {
        result,
        costMicro: this.#sessionCostMicro - before,
        balanceMicro: await this.#settingMicro(client, "balance"),
      };
    });
  }

  /**
   * Runs `read` with the session's budget (`pgtoll.max_session_cost`) at `limitMicro` of session cost, or at the
   * agent's own budget when that is lower, and puts the agent's own back after.
   */
  async #withinBudget<T>(client: pg.Client, limitMicro: bigint, read: () => Promise<T>): Promise<T> {
    const own = await showSetting(client, "pgtoll.max_session_cost");
    const ownMicro = parseMicro(own);
    const limit = ownMicro !== null && ownMicro < limitMicro ? ownMicro : limitMicro;
    await client.query(`SET pgtoll.max_session_cost = '${formatMicro(limit)}'`);
    try {
      return await read();
    } finally {
      await client.query(
        ownMicro === null ? "RESET pgtoll.max_session_cost" : `SET pgtoll.max_session_cost = '${own}'`,
      );
    }
  }

  /** The cost parts of the session's last statement, as `SHOW pgtoll.last_statement_cost` gives them. */
  lastStatementCost(): Promise<Record<string, unknown>> {
    return this.exclusive(async (client) =>
      JSON.parse(await showSetting(client, "pgtoll.last_statement_cost")),
    );
  }

  /** The agent's balance with the provider, this session's charges included (free: answered by the proxy). */
  balanceMicro(): Promise<bigint> {
    return this.exclusive((client) => this.#settingMicro(client, "balance"));
  }

  /** The provider's price, every dimension with its markup, as the cost rule takes it. */
  price(): Promise<Price> {
    if (this.#price) return Promise.resolve(this.#price);
    return this.exclusive(async (client) => {
      const value = await showSetting(client, "pgtoll.price");
      const price = parsePrice(value);
      if (!price) throw new Error(`the proxy answered an unexpected price: ${value}`);
      this.#price = price;
      return price;
    });
  }

  /**
   * The agent's balance, the price and the provider's wallet, from the proxy. An agent the proxy refuses for
   * want of funds gets them from the refusal (its available balance as the balance), so that the free tools
   * answer it and it can find where to deposit, without a session.
   */
  async account(): Promise<AgentAccount> {
    try {
      const balanceMicro = await this.balanceMicro();
      const price = await this.price();
      this.#depositAddress ??= await this.exclusive((client) =>
        showSetting(client, "pgtoll.deposit_address"),
      );
      return { balanceMicro, price, depositAddress: this.#depositAddress };
    } catch (error) {
      if (error instanceof FundsRequiredError) return error.account;
      throw error;
    }
  }

  /** Ends the session; its charges are written by the proxy as the connection closes. */
  async close(): Promise<void> {
    this.#closed = true;
    if (this.#idleTimer) clearTimeout(this.#idleTimer);
    await this.#queue;
    const client = this.#client;
    this.#client = null;
    await client?.end().catch(() => {});
  }

  async #settingMicro(client: pg.Client, name: "balance" | "session_cost"): Promise<bigint> {
    const value = await showSetting(client, `pgtoll.${name}`);
    const micro = parseMicro(value);
    if (micro === null) throw new Error(`the proxy answered an unexpected ${name}: ${value}`);
    return micro;
  }

  #connected(): Promise<pg.Client> {
    if (this.#closed) return Promise.reject(new Error("the pgtoll session is closed"));
    if (this.#client) return Promise.resolve(this.#client);
    this.#connecting ??= this.#connect().finally(() => {
      this.#connecting = null;
    });
    return this.#connecting;
  }

  async #connect(): Promise<pg.Client> {
    const { host, port, ssl, stream, wallet, providerId } = this.options;
    const client = new pg.Client({
      ...(stream ? { stream } : { host, port, ssl }),
      user: wallet,
      database: providerId,
      password: await this.options.token(),
      application_name: "pgtoll-mcp",
      types: jsonSafeTypes,
    });
    // A session the proxy or the network ends is forgotten, so that the next call opens a new one.
    const forget = () => {
      if (this.#client === client) this.#client = null;
    };
    client.on("error", forget);
    client.on("end", forget);
    await client.connect().catch((error: unknown) => {
      const refused = readFundsRefusal(error);
      if (!refused) throw error;
      const { message, hint } = error as { message: string; hint: string };
      throw new FundsRequiredError(`${message}. To fund it: ${hint}`, {
        balanceMicro: refused.availableMicro,
        price: refused.price,
        depositAddress: refused.depositAddress,
      });
    });
    this.connections++;
    this.#client = client;
    this.#sessionCostMicro = 0n;
    return client;
  }
}
