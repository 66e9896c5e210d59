import { startTestProxy, type TestProxy } from "../support/proxy.js";
import { selfSignedContext } from "../support/tls-certificate.js";
import { clusterUrl, type ManagementHarness } from "./support.js";

/**
 * The wire proxy in process for the harness's endpoints, with TLS (a `*.localhost` certificate, so endpoint
 * host names route by SNI); connection URIs then name its real port, as `pgtoll start` arranges.
 */
export async function startEndpointProxy(h: ManagementHarness): Promise<TestProxy> {
  const proxy = await startTestProxy(
    { ctx: h.ctx },
    {
      endpoints: { clusterUrl: clusterUrl(), proxyHost: "localhost" },
      tls: await selfSignedContext("/CN=*.localhost"),
    },
  );
  h.settings.proxyPort = proxy.port;
  return proxy;
}
