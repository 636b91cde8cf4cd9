// A TypeScript caller of the API, typed by openapi-typescript's output (make clients writes it to
// build/clients/ts/turnstile.d.ts, imported here as "turnstile-api"). Only type-checked
// (tsc --noEmit): every request below must match the document, and each @ts-expect-error line must
// still be an error, so a document that stopped typing request bodies fails the check.
import type { paths } from "turnstile-api";

type Method = "get" | "post" | "put" | "patch" | "delete";
type Operation<P extends keyof paths, M extends Method> = NonNullable<paths[P][M]>;
type Json<T> = T extends { content: { "application/json": infer B } } ? B : never;
export type RequestBody<P extends keyof paths, M extends Method> = Json<Operation<P, M>["requestBody"]>;
type Responses<P extends keyof paths, M extends Method> = Operation<P, M>["responses"];
export type Answer<P extends keyof paths, M extends Method, S extends keyof Responses<P, M>> = Json<
  Responses<P, M>[S]
>;
type PathParameters<P extends keyof paths, M extends Method> = Operation<P, M>["parameters"]["path"];

/** The path with its parameters filled in, each named as the document names it. */
function fill<P extends keyof paths, M extends Method>(path: P, parameters: PathParameters<P, M>): string {
  const values: Record<string, string> = parameters ?? {};
  return path.replace(/\{(\w+)\}/g, (_, name: string) => encodeURIComponent(values[name] ?? ""));
}

/** One call: the body typed by the operation, the answer's JSON as the document types it. */
async function call<P extends keyof paths, M extends Method, S extends keyof Responses<P, M> & number>(
  base: string,
  token: string,
  method: M,
  path: P,
  parameters: PathParameters<P, M>,
  expected: S,
  body?: RequestBody<P, M>,
): Promise<{ answer: Answer<P, M, S>; headers: Headers }> {
  const init: RequestInit = {
    method: method.toUpperCase(),
    headers: { Authorization: `Bearer ${token}`, "Content-Type": "application/json" },
  };
  if (body !== undefined) init.body = JSON.stringify(body);
  const response = await fetch(base + fill<P, M>(path, parameters), init);
  if (response.status !== expected) throw new Error(`${method} ${path}: ${response.status}`);
  const text = await response.text();
  return { answer: (text ? JSON.parse(text) : undefined) as Answer<P, M, S>, headers: response.headers };
}

// --8<-- [start:walk]
export async function walk(base: string, admin: string, user: string): Promise<void> {
  await call(base, admin, "post", "/products", undefined, 201, {
    productId: "lamp",
    name: "Desk lamp",
    stock: 10,
  });
  const read = await call(base, user, "get", "/products/{productId}", { productId: "lamp" }, 200);
  await call(base, admin, "patch", "/products/{productId}", { productId: "lamp" }, 200, { name: "Brass desk lamp" });
  await call(base, user, "post", "/products/{productId}/purchases", { productId: "lamp" }, 201, { quantity: 2 });
  await call(base, user, "post", "/locks/{resource}", { resource: "report-42" }, 201, { ttlSeconds: 30 });
  await call(base, user, "post", "/inventory/{sku}/reservations", { sku: "chair" }, 201, { quantity: 1 });
  await call(base, user, "post", "/wallets/{walletId}/top-ups", { walletId: "w" }, 201, { amount: 500 });
  console.log(read.headers.get("ETag"));
  // --8<-- [end:walk]

  // What the document forbids, tsc refuses:
  // @ts-expect-error stock is an integer, not a string
  await call(base, admin, "post", "/products", undefined, 201, { productId: "x", name: "x", stock: "ten" });
  // @ts-expect-error quantity is required
  await call(base, user, "post", "/products/{productId}/purchases", { productId: "lamp" }, 201, {});
  // @ts-expect-error a path parameter is named as the document names it
  await call(base, user, "get", "/products/{productId}", { id: "lamp" }, 200);
  // @ts-expect-error no such route
  await call(base, user, "get", "/basket", undefined, 200);
  // @ts-expect-error a status the operation does not declare
  await call(base, user, "get", "/products/{productId}", { productId: "lamp" }, 418);
}
