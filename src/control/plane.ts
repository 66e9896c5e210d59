import type pg from "pg";
import type { SecretBox } from "../providers/secret-box.js";
import type { ProjectCluster } from "./cluster.js";
import type { ControlSettings } from "./settings.js";

/**
 * What the management API's changes need of the plane: its metadata database, the cluster that hosts projects,
 * the secret box, its settings, and a way to run a project's operations. `ControlPlane` implements it; the
 * modules depend on this and not on the class, since the class depends on some of them (its sweeps).
 */
export interface Plane {
  readonly db: pg.Pool;
  readonly cluster: ProjectCluster;
  readonly box: SecretBox;
  readonly settings: ControlSettings;
  /** This process's lease id: the owner of the operations it schedules. */
  readonly instanceId: number;
  /** Runs the project's operations and waits for them up to the configured time. */
  awaitOperations(projectId: string): Promise<void>;
  /** Starts the project's operations without waiting for them. */
  kick(projectId: string): Promise<void>;
}
