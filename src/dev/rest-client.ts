/** A non-2xx answer from pgtoll's own REST API. */
export class RestCallError extends Error {
  override name = "RestCallError";
  constructor(
    readonly status: number,
    message: string,
  ) {
    super(message);
  }
}

/**
 * Sends `body` as JSON to `url` with real HTTP (as a client of pgtoll would) and returns the JSON answer.
 * Throws {@link RestCallError} with the status and the API's `error` text on anything but 2xx.
 */
export async function postJson<T>(
  url: string,
  body: unknown,
  headers: Record<string, string> = {},
): Promise<T> {
  const response = await fetch(url, {
    method: "POST",
    headers: { "content-type": "application/json", ...headers },
    body: JSON.stringify(body),
  });
  return jsonAnswer<T>("POST", url, response);
}

/** PUT `body` as JSON to `url`; as {@link postJson}. */
export async function putJson<T>(
  url: string,
  body: unknown,
  headers: Record<string, string> = {},
): Promise<T> {
  const response = await fetch(url, {
    method: "PUT",
    headers: { "content-type": "application/json", ...headers },
    body: JSON.stringify(body),
  });
  return jsonAnswer<T>("PUT", url, response);
}

/** GET `url` and return the JSON answer; as {@link postJson}. */
export async function getJson<T>(url: string, headers: Record<string, string> = {}): Promise<T> {
  return jsonAnswer<T>("GET", url, await fetch(url, { headers }));
}

async function jsonAnswer<T>(method: string, url: string, response: Response): Promise<T> {
  const text = await response.text();
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch {
    parsed = undefined;
  }
  if (!response.ok) {
    const error = (parsed as { error?: unknown } | undefined)?.error;
    const path = new URL(url).pathname;
    throw new RestCallError(
      response.status,
      `${method} ${path} answered ${response.status}: ${typeof error === "string" ? error : text}`,
    );
  }
  return parsed as T;
}
