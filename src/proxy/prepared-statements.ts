/** What the relay knows of a prepared statement the guard allowed, and of every portal bound to it. */
export interface PreparedStatement {
  /** Its text: the ledger's breakdown and the running statement's shape come from it. */
  readonly sql: string;
  /** It writes: its Execute waits until the write is paid for, or undone. */
  readonly writes: boolean;
  /** It is `SHOW pgtoll.<name>`: the proxy answers it (the name, without the prefix's case changed). */
  readonly setting?: string;
}

/**
 * The extended protocol's names, as the client gives them: prepared statements by Parse and Close, portals by
 * Bind and Close, a portal standing for the statement it was bound to. One map each, so that a name re-used
 * for another statement, refused or closed can never keep what its earlier statement was.
 */
export class PreparedStatements {
  readonly #statements = new Map<string, PreparedStatement>();
  readonly #portals = new Map<string, PreparedStatement>();

  /** A Parse of `name`: the statement the guard allowed, or `undefined` when it was refused (nothing is kept). */
  parsed(name: string, statement: PreparedStatement | undefined): void {
    if (statement) this.#statements.set(name, statement);
    else this.#statements.delete(name);
  }

  /** A Bind of `portal` to `statementName`; a statement the relay does not know gives a portal it does not know. */
  bound(portal: string, statementName: string): void {
    const statement = this.#statements.get(statementName);
    if (statement) this.#portals.set(portal, statement);
    else this.#portals.delete(portal);
  }

  /** A Close of a statement (`S`) or a portal (`P`). */
  closed(kind: "S" | "P", name: string): void {
    if (kind === "S") this.#statements.delete(name);
    else this.#portals.delete(name);
  }

  /** The statement a portal runs, when the relay knows it. */
  portal(name: string): PreparedStatement | undefined {
    return this.#portals.get(name);
  }
}
