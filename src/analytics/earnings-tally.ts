/** Which surface charged: a wire-proxy charge window, or a REST request. */
export type ChargeSurface = "proxy" | "rest";

interface Sums {
  statements: number;
  rows: number;
  costMicro: bigint;
}

/**
 * What each provider earned in this process since the last scrape, by surface, added where a charge is made (a
 * closed charge window, a charged REST request: a few additions, no labelled counter per statement) and
 * drained into the per-provider Prometheus counters on each scrape.
 */
export class EarningsTally {
  readonly #sums = new Map<string, Sums>();

  /** Adds one charge of `providerId`'s agents: its statements, rows and cost. */
  add(providerId: string, surface: ChargeSurface, statements: number, rows: number, costMicro: bigint): void {
    const key = `${providerId}\t${surface}`;
    const sums = this.#sums.get(key);
    if (sums) {
      sums.statements += statements;
      sums.rows += rows;
      sums.costMicro += costMicro;
    } else this.#sums.set(key, { statements, rows, costMicro });
  }

  /** The sums since the last call, by provider and surface. */
  drain(): ({ providerId: string; surface: ChargeSurface } & Sums)[] {
    const drained = [...this.#sums].map(([key, sums]) => {
      const [providerId, surface] = key.split("\t") as [string, ChargeSurface];
      return { providerId, surface, ...sums };
    });
    this.#sums.clear();
    return drained;
  }
}
