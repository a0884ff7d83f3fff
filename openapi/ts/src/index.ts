// The TypeScript client of the ax HTTP API: openapi-fetch typed by
// schema.ts, which openapi-typescript generates from openapi-3.0.yaml
// (`make generate`). Every path, parameter and body is checked by tsc
// against the spec the server serves.
import createClient, { type Client, type ClientOptions } from "openapi-fetch";

import type { components, paths, Readable } from "./schema.js";

export type { components, operations, paths, Writable } from "./schema.js";

/** AxClient calls the ax API: `client.GET("/v1/jobs/{id}", …)`. */
export type AxClient = Client<paths>;

/**
 * Schema is a component of the spec as the server sends it (read-only
 * fields included), e.g. `Schema<"Job">`, `Schema<"Execution">`.
 */
export type Schema<Name extends keyof components["schemas"]> = Readable<components["schemas"][Name]>;

/** CallbackBody is what ax POSTs to a job's callback URL when a run ends. */
export type CallbackBody = Schema<"CallbackBody">;

/** AxClientOptions are openapi-fetch's options plus the API key. */
export interface AxClientOptions extends Omit<ClientOptions, "baseUrl"> {
  /** apiKey is sent as `Authorization: Bearer <apiKey>` on every call. */
  apiKey?: string;
}

/**
 * createAxClient returns a client of the ax server at baseUrl
 * (e.g. "http://127.0.0.1:8080"). Each method answers `{ data, error,
 * response }`: data on a 2xx, else error (the problem+json body).
 */
export function createAxClient(baseUrl: string, options: AxClientOptions = {}): AxClient {
  const { apiKey, ...rest } = options;
  const client = createClient<paths>({ ...rest, baseUrl: baseUrl.replace(/\/+$/, "") });
  if (apiKey) {
    client.use({
      onRequest({ request }) {
        request.headers.set("Authorization", `Bearer ${apiKey}`);
        return request;
      },
    });
  }
  return client;
}
