import type pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { TestProxy } from "../support/proxy.js";
import { endpointClient, newEndpointProject, startEndpointProxy } from "./endpoint-proxy-support.js";
import { type ManagementHarness, startManagement } from "./support.js";

/*
 * What an endpoint session is: the branch's database as its role, whatever the client's startup asks for, and
 * its upstream backend's pid, told to the client so that BackendKeyData, `pg_backend_pid()` and the pid of the
 * notifications it sends itself agree (an application that skips its own notifications by pid can).
 */

let h: ManagementHarness;
let proxy: TestProxy;
let key: string;

beforeAll(async () => {
  h = await startManagement();
  key = (await h.bootstrap()).key;
  proxy = await startEndpointProxy(h);
});
afterAll(async () => {
  await proxy?.close();
  await h?.close();
});

/** node-postgres keeps the server's BackendKeyData here; @types/pg leaves it out. */
const pidOf = (client: pg.Client) => (client as pg.Client & { processID: number }).processID;

describe("the backend pid a client is told", () => {
  it("is its upstream backend's, in BackendKeyData, pg_backend_pid() and NotificationResponse", async () => {
    const project = await newEndpointProject(h, key);
    const listener = endpointClient(proxy, project.endpointId, project.password);
    const notifier = endpointClient(proxy, project.endpointId, project.password);
    await Promise.all([listener.connect(), notifier.connect()]);
    try {
      const notifications: pg.Notification[] = [];
      listener.on("notification", (notification) => notifications.push(notification));
      await listener.query("LISTEN jobs");
      await listener.query("NOTIFY jobs, 'mine'");
      await notifier.query("NOTIFY jobs, 'theirs'");
      const own = (await listener.query("SELECT pg_backend_pid() AS pid")).rows[0].pid;
      const other = (await notifier.query("SELECT pg_backend_pid() AS pid")).rows[0].pid;
      await new Promise((resolve) => setTimeout(resolve, 100));

      expect(pidOf(listener)).toBe(own);
      expect(pidOf(notifier)).toBe(other);
      expect(own).not.toBe(other);
      expect(notifications.map(({ processId, payload }) => ({ processId, payload }))).toEqual([
        { processId: pidOf(listener), payload: "mine" },
        { processId: pidOf(notifier), payload: "theirs" },
      ]);
    } finally {
      await Promise.all([listener.end(), notifier.end()]);
    }
  });
});

describe("an endpoint session's connection fields", () => {
  it("are the branch's: a client's -c database=, -c user= or -c replication= reaches no other database", async () => {
    const project = await newEndpointProject(h, key);
    const own = endpointClient(proxy, project.endpointId, project.password);
    await own.connect();
    const branchDatabase = (await own.query("SELECT current_database() AS db")).rows[0].db;
    await own.end();
    expect(branchDatabase).not.toBe("postgres");

    const asking = endpointClient(proxy, project.endpointId, project.password, {
      options: `endpoint=${project.endpointId} -c database=postgres -c user=postgres -c replication=database`,
    });
    await asking.connect();
    try {
      const { rows } = await asking.query("SELECT current_database() AS db, current_user AS role");
      expect(rows[0].db).toBe(branchDatabase);
      expect(rows[0].role).not.toBe("postgres");
    } finally {
      await asking.end();
    }
  });
});
