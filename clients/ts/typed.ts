// Every success answer that has a body is typed by the document: none is `unknown` (or `any`).
// tsc --noEmit over this file fails, naming the operations, while one is not.
import type { paths } from "turnstile-api";

type Method = "get" | "post" | "put" | "patch" | "delete";
type Json<T> = T extends { content: { "application/json": infer B } } ? B : never;
type Success = 200 | 201 | 202;
type Untyped<T> = unknown extends T ? true : false;
/** "METHOD path" of every operation whose success body is unknown. */
type UntypedAnswers = {
  [P in keyof paths]: {
    [M in Method]: NonNullable<paths[P][M]> extends { responses: infer R }
      ? {
          [S in keyof R & Success]: Untyped<Json<R[S]>> extends true ? `${Uppercase<M>} ${P & string} ${S}` : never;
        }[keyof R & Success]
      : never;
  }[Method];
}[keyof paths];

declare const untyped: UntypedAnswers;
// An error here lists them: Type '"POST /products 201" | ...' is not assignable to type 'never'.
export const everyAnswerTyped: never = untyped;
