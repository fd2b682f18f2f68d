// The store's types, by aggregate: lib/store/repository.ts.
export type * from "./repository";
