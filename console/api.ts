/** A provider's id and API key: what every call of the console sends (the key as X-API-Key). */
export interface Credentials {
  providerId: string;
  apiKey: string;
}

/** A non-2xx answer of the gateway: its status and its `error` message. */
export class ApiError extends Error {
  constructor(
    readonly status: number,
    message: string,
  ) {
    super(message);
  }
}

/** Calls `/api/providers/:id/<path>` with the provider's key; throws {@link ApiError} on an error answer. */
export async function providerApi<T>(
  credentials: Credentials,
  path: string,
  init: { method?: "GET" | "POST" | "PUT"; body?: unknown } = {},
): Promise<T> {
  const response = await fetch(`/api/providers/${encodeURIComponent(credentials.providerId)}/${path}`, {
    method: init.method ?? "GET",
    headers: {
      "X-API-Key": credentials.apiKey,
      ...(init.body === undefined ? {} : { "Content-Type": "application/json" }),
    },
    ...(init.body === undefined ? {} : { body: JSON.stringify(init.body) }),
  });
  const body = (await response.json().catch(() => ({}))) as { error?: string };
  if (!response.ok) throw new ApiError(response.status, body.error ?? response.statusText);
  return body as T;
}
